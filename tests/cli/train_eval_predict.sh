#!/usr/bin/env bash
# End to end through the CLI on the synthetic task (no shared data): train, plan, eval with
# per-example predictions, predict, resume after Ctrl-C, SIGTERM, and bad input giving a
# message that names the problem with a non-zero exit, leaving the user's files alone (all
# inside a temporary directory).
# Usage: train_eval_predict.sh LEANBACK_BINARY CONFIG_DIR
source "$(dirname "$0")/common.sh" "$@"
small=(--set train.epochs=2 --set data.synthetic_train=640 --set data.synthetic_eval=200 --no-progress)

# train
"$lb" train "$configs/quickstart.json" "${small[@]}" --out "$tmp/run" > "$tmp/train.out" 2> "$tmp/train.err" \
  || { cat "$tmp/train.err"; fail "train exited $?"; }
grep -q '"eval_accuracy"' "$tmp/train.out" || fail "train printed no final metrics"
for f in config.json plan.txt metrics.jsonl eval_results.json train.log; do
  [ -f "$tmp/run/$f" ] || fail "run directory lacks $f"
done
# train.log: the console's log lines, the backward plan's table among them
grep -q "info run directory $tmp/run" "$tmp/run/train.log" && grep -q "info eval step 40: eval_accuracy" "$tmp/run/train.log" \
  && grep -qE "^classifier +Linear +vanilla" "$tmp/run/train.log" \
  || { cat "$tmp/run/train.log"; fail "train.log lacks the run's log lines or the plan table"; }
grep -q "layer .*kind .*strategy .*reason" "$tmp/train.err" || fail "train did not print the plan"

# an existing run directory is not overwritten
echo keep > "$tmp/run/mine.txt"
"$lb" train "$configs/quickstart.json" "${small[@]}" --out "$tmp/run" 2> "$tmp/again.err"
[ $? -eq 1 ] || fail "training into an existing run directory did not exit 1"
grep -q "already exists and is not empty; pass --overwrite" "$tmp/again.err" || fail "no message for existing run dir"
[ -f "$tmp/run/mine.txt" ] || fail "the user's file was removed"

# eval with per-example predictions; refuses to overwrite them
"$lb" eval "$configs/quickstart.json" --checkpoint "$tmp/run" --predictions "$tmp/pred.jsonl" \
  "${small[@]:0:6}" > "$tmp/eval.out" 2>/dev/null || fail "eval failed"
grep -q '"eval_accuracy"' "$tmp/eval.out" || fail "eval printed no metrics"
[ "$(wc -l < "$tmp/pred.jsonl")" -eq 200 ] || fail "predictions file does not have 200 lines"
head -1 "$tmp/pred.jsonl" | grep -q '"gold".*"index".*"logits".*"prediction"' || fail "prediction line lacks fields"
"$lb" eval "$configs/quickstart.json" --checkpoint "$tmp/run" --predictions "$tmp/pred.jsonl" \
  "${small[@]:0:6}" 2> "$tmp/eval2.err" && fail "eval overwrote a predictions file"
grep -q "already exists; pass --overwrite" "$tmp/eval2.err" || fail "no message for existing predictions"

# the run exported, then read back as model.pretrained: eval needs no checkpoint and gives the
# same predictions; a pretrained encoder whose head would start at random is refused
"$lb" export "$tmp/run" --out "$tmp/exported" 2> /dev/null || fail "export failed"
python3 - "$configs/quickstart.json" "$tmp/exported" "$tmp/from_export.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["model"] = {"type": "bert", "pretrained": sys.argv[2]}
c.pop("output", None)
json.dump(c, open(sys.argv[3], "w"))
PY
"$lb" eval "$tmp/from_export.json" --predictions "$tmp/pred_export.jsonl" "${small[@]:2:4}" \
  > "$tmp/eval_export.out" 2> "$tmp/eval_export.err" \
  || { cat "$tmp/eval_export.err"; fail "eval of the export failed"; }
cmp -s "$tmp/pred.jsonl" "$tmp/pred_export.jsonl" || fail "the export's predictions differ from the checkpoint's"
grep -q "\"checkpoint\":null" "$tmp/eval_export.out" || fail "eval of the export names a checkpoint"
python3 - "$tmp/exported/model.safetensors" <<'PY'
import json, struct, sys
# The encoder alone: the file rewritten without the head's tensors.
path = sys.argv[1]
raw = open(path, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
header, data = json.loads(raw[8:8 + n]), raw[8 + n:]
out, body = {}, b""
for k, v in header.items():
    if k == "__metadata__" or k.startswith("classifier."):
        continue
    a, b = v["data_offsets"]
    out[k] = dict(v, data_offsets=[len(body), len(body) + b - a])
    body += data[a:b]
h = json.dumps(out).encode()
h += b" " * ((8 - len(h) % 8) % 8)
open(path, "wb").write(struct.pack("<Q", len(h)) + h + body)
PY
"$lb" eval "$tmp/from_export.json" "${small[@]:2:4}" > /dev/null 2> "$tmp/bad.err"
[ $? -eq 1 ] || fail "eval of an encoder without its head did not exit 1"
grep -q -- "--checkpoint: required, as $tmp/exported has no trained classifier.* (and 1 more)" "$tmp/bad.err" \
  || { cat "$tmp/bad.err"; fail "no message for an untrained head"; }

# predict
"$lb" predict "$configs/quickstart.json" --checkpoint "$tmp/run" --out "$tmp/sub" "${small[@]:0:6}" \
  2>/dev/null || fail "predict failed"
[ "$(head -1 "$tmp/sub/dev_predictions.tsv")" = "$(printf 'index\tprediction')" ] || fail "predict header"
[ "$(wc -l < "$tmp/sub/dev_predictions.tsv")" -eq 201 ] || fail "predict rows"

# predict ignores data.max_eval_examples: a submission holds every row (here 200)
"$lb" predict "$configs/quickstart.json" --checkpoint "$tmp/run" --out "$tmp/sub_all" "${small[@]:0:6}" \
  --set data.max_eval_examples=32 2> "$tmp/sub_all.err" || { cat "$tmp/sub_all.err"; fail "predict failed"; }
[ "$(wc -l < "$tmp/sub_all/dev_predictions.tsv")" -eq 201 ] || fail "predict truncated the split to max_eval_examples"
grep -q "does not apply: a submission holds every row" "$tmp/sub_all.err" || fail "predict did not say it ignores max_eval_examples"
# predict --overwrite replaces files only in a directory leanback created for predictions
mkdir -p "$tmp/mine"
echo mine > "$tmp/mine/dev_predictions.tsv"
"$lb" predict "$configs/quickstart.json" --checkpoint "$tmp/run" --out "$tmp/mine" --overwrite "${small[@]:0:6}" \
  2> "$tmp/mine.err" && fail "predict --overwrite replaced a file in a directory it did not create"
grep -q "which leanback did not create for predictions" "$tmp/mine.err" || { cat "$tmp/mine.err"; fail "no message"; }
# ... and only a file its marker records: the user's file put in leanback's directory stays
mkdir -p "$tmp/sub2" && echo mine > "$tmp/sub2/dev_predictions.tsv"
echo '{"written_by": "leanback", "kind": "predict", "written": []}' > "$tmp/sub2/.leanback-output.json"
"$lb" predict "$configs/quickstart.json" --checkpoint "$tmp/run" --out "$tmp/sub2" --overwrite "${small[@]:0:6}" \
  2> "$tmp/mine2.err" && fail "predict --overwrite replaced a file its marker does not record"
grep -q "is not a file leanback wrote there" "$tmp/mine2.err" || { cat "$tmp/mine2.err"; fail "no message"; }
[ "$(cat "$tmp/sub2/dev_predictions.tsv")" = mine ] || fail "predict --overwrite replaced the user's file"
[ "$(cat "$tmp/mine/dev_predictions.tsv")" = mine ] || fail "predict replaced the user's file"
"$lb" predict "$configs/quickstart.json" --checkpoint "$tmp/run" --out "$tmp/sub" --overwrite "${small[@]:0:6}" \
  2>/dev/null || fail "predict --overwrite of its own directory failed"

# --overwrite on a directory leanback did not create: refused, nothing deleted
mkdir -p "$tmp/thesis/src"
echo t > "$tmp/thesis/thesis.tex"
echo s > "$tmp/thesis/src/main.c"
"$lb" train "$configs/quickstart.json" "${small[@]}" --out "$tmp/thesis" --overwrite 2> "$tmp/thesis.err"
[ $? -eq 1 ] || fail "--overwrite of a user's directory did not exit 1"
grep -q -- "--overwrite refused: $tmp/thesis is not empty and was not created by leanback" "$tmp/thesis.err" \
  || { cat "$tmp/thesis.err"; fail "no message for --overwrite of a user's directory"; }
[ -f "$tmp/thesis/thesis.tex" ] && [ -f "$tmp/thesis/src/main.c" ] || fail "--overwrite deleted the user's files"
# ... and on the run directory leanback made: replaced, the user's file in it kept
"$lb" train "$configs/quickstart.json" "${small[@]}" --out "$tmp/run" --overwrite > /dev/null 2> "$tmp/ow.err" \
  || { cat "$tmp/ow.err"; fail "--overwrite of a run directory failed"; }
[ -f "$tmp/run/mine.txt" ] || fail "--overwrite deleted a file leanback did not write"
grep -q "kept 1 entry of $tmp/run that leanback did not write: mine.txt" "$tmp/ow.err" || fail "no kept-files note"
# --overwrite deletes what the run directory's marker records, not what looks like leanback's:
# a plot of the user's under plots/ stays, and so does an export placed at a checkpoint's name
# (with it there the run is refused, as a checkpoint could replace it; nothing is deleted)
mkdir -p "$tmp/run/plots" && echo mine > "$tmp/run/plots/mine.png"
"$lb" export "$tmp/run" --out "$tmp/run/checkpoint-99" 2> /dev/null || fail "export into the run directory failed"
"$lb" train "$configs/quickstart.json" "${small[@]}" --out "$tmp/run" --overwrite > /dev/null 2> "$tmp/ow2.err" \
  && fail "--overwrite over an export at checkpoint-99 was not refused"
grep -q "holds checkpoint-99, which is a leanback export directory" "$tmp/ow2.err" \
  || { cat "$tmp/ow2.err"; fail "no message for an export at checkpoint-99"; }
[ -f "$tmp/run/checkpoint-99/model.safetensors" ] && [ -f "$tmp/run/config.json" ] \
  || fail "a refused --overwrite deleted files"
mv "$tmp/run/checkpoint-99" "$tmp/export99"
"$lb" train "$configs/quickstart.json" "${small[@]}" --out "$tmp/run" --overwrite > /dev/null 2> "$tmp/ow3.err" \
  || { cat "$tmp/ow3.err"; fail "--overwrite failed"; }
grep -q "that leanback did not write: mine.txt plots$" "$tmp/ow3.err" || { cat "$tmp/ow3.err"; fail "no kept plot"; }
[ "$(cat "$tmp/run/plots/mine.png")" = mine ] || fail "--overwrite deleted the user's plot"
# ... and export's --overwrite keeps what an export never writes
mkdir -p "$tmp/export99/plots" && echo mine > "$tmp/export99/plots/figure1.png"
"$lb" export "$tmp/run" --out "$tmp/export99" --overwrite > /dev/null 2> "$tmp/ow4.err" || fail "export --overwrite failed"
grep -q "kept 1 entry of $tmp/export99 that leanback did not write: plots" "$tmp/ow4.err" \
  || { cat "$tmp/ow4.err"; fail "export --overwrite printed no kept list"; }
[ "$(cat "$tmp/export99/plots/figure1.png")" = mine ] || fail "export --overwrite deleted the user's figure"

# plan
"$lb" plan "$configs/quickstart.json" --strategy instant | grep -q "bert.encoder.layer.0.intermediate.dense .*instant .*--strategy instant" \
  || fail "plan did not apply the override"

# Ctrl-C saves a resumable checkpoint and exits 130, SIGTERM (kill, schedulers) the same with
# 143; the printed resume command finishes the run as it began (under its memory plan too)
long=(--set train.epochs=8 --set data.synthetic_train=640 --set data.synthetic_eval=100 --no-progress)
for sig in INT:130 TERM:143; do
  name=${sig%%:*} want=${sig##*:}
  budget=()
  [ "$name" = INT ] && budget=(--activation-budget 2MB)
  "$lb" train "$configs/quickstart.json" "${long[@]}" "${budget[@]}" --out "$tmp/$name" > /dev/null 2> "$tmp/$name.err" &
  pid=$!
  # Signalled in training, not while planning: under sanitizers on a loaded machine the 2MB
  # plan alone can take over a minute.
  reached=0
  for _ in $(seq 1 6000); do grep -q "step 25/" "$tmp/$name.err" 2>/dev/null && { reached=1; break; }; sleep 0.1; done
  [ $reached = 1 ] || { kill "$pid"; cat "$tmp/$name.err"; fail "SIG$name run: no step 25 within 600 s"; }
  kill -"$name" "$pid"
  wait "$pid"
  rc=$?
  [ $rc -eq "$want" ] || { cat "$tmp/$name.err"; fail "SIG$name exit status $rc, expected $want"; }
  grep -q "interrupted at step" "$tmp/$name.err" || fail "no interruption message after SIG$name"
  ls -d "$tmp/$name"/checkpoint-* > /dev/null 2>&1 || fail "no checkpoint after SIG$name"
done
hint=$(sed -n 's/^  resume: leanback //p' "$tmp/INT.err")
[ "$hint" = "train $configs/quickstart.json ${long[*]:0:6} --resume $tmp/INT" ] \
  || { cat "$tmp/INT.err"; fail "the resume hint is not the run's command: $hint"; }
eval "\"\$lb\" $hint" > "$tmp/res.out" 2> "$tmp/res.err" || { cat "$tmp/res.err"; fail "resume failed"; }
grep -q '"step":160' "$tmp/res.out" || fail "resumed run did not reach step 160"
grep -q "resume: the run goes on under its memory plan for budget 2MB" "$tmp/res.err" \
  || { cat "$tmp/res.err"; fail "the resumed run did not keep its memory plan"; }
grep -q '"activation_budget": "2MB"' "$tmp/INT/config.json" || fail "config.json of the resumed run lost memory.activation_budget"
grep -q "differs" "$tmp/res.err" && { cat "$tmp/res.err"; fail "the resume hint's run differs from the run"; }
# the resumed run's log lines go on in the same train.log
grep -q "info interrupted at step" "$tmp/INT/train.log" && grep -q "info run directory $tmp/INT (resuming from" "$tmp/INT/train.log" \
  || { cat "$tmp/INT/train.log"; fail "train.log does not hold the interrupted and the resumed run"; }

# bad input: named, non-zero
check() {  # expected-status pattern args...
  local want="$1" pattern="$2"
  shift 2
  "$lb" "$@" > /dev/null 2> "$tmp/bad.err"
  local got=$?
  [ $got -eq "$want" ] || fail "'$*' exited $got, expected $want"
  grep -q -- "$pattern" "$tmp/bad.err" || { cat "$tmp/bad.err"; fail "'$*' message lacks: $pattern"; }
}
echo '{"model": {"type": "bert",}}' > "$tmp/syntax.json"
check 1 "syntax.json:1:" train "$tmp/syntax.json"
check 1 "optimizer.lr: expected a number" train "$configs/quickstart.json" --set optimizer.lr=fast --out "$tmp/x"
check 1 "train: unknown key 'epoch'" train "$configs/quickstart.json" --set train.epoch=3 --out "$tmp/x"
check 1 "no such config file" train "$tmp/missing.json"
check 2 "--strategy: fancy not in" train "$configs/quickstart.json" --strategy fancy
check 2 "The following argument was not expected" train "$configs/quickstart.json" extra
check 1 "no checkpoint in it" eval "$configs/quickstart.json" --checkpoint "$tmp"
check 1 "^leanback eval: error: --checkpoint $tmp/nothing: no such directory" eval "$configs/quickstart.json" --checkpoint "$tmp/nothing"
touch "$tmp/afile"
check 1 "--out $tmp/afile/run: cannot create the directory (Not a directory)" train "$configs/quickstart.json" --out "$tmp/afile/run"
longname="$tmp/$(printf 'n%.0s' $(seq 1 300))"
check 1 "cannot create the directory (File name too long)" train "$configs/quickstart.json" --out "$longname"
check 1 "quickstart.json: --checkpoint: required, as model.pretrained is not set" eval "$configs/quickstart.json"
check 1 'model.skip_padding: expected true, false or "auto"' train "$configs/quickstart.json" \
  --strategy instant --set model.skip_padding=yes --out "$tmp/x"
check 2 "bad device 'tpu'" train "$configs/quickstart.json" --device tpu --out "$tmp/x"
check 2 "--device cuda:7: " train "$configs/quickstart.json" --device cuda:7 --out "$tmp/x"
check 2 "--device cuda:7: " eval "$configs/quickstart.json" --checkpoint "$tmp" --device cuda:7
[ ! -e "$tmp/x" ] || fail "a failed run left a run directory behind"

# On a machine with a CUDA device: a short vanilla run there, evaluated there, and short
# INSTANT and HOT runs; HOT's f64 emulation oracle is refused before any work (CPU code).
if "$lb" info 2>/dev/null | grep -q "CUDA: compiled in, [1-9]"; then
  check 1 "kernels run on the CPU only so far" train "$configs/quickstart.json" --device cuda \
    --strategy hot --set 'backward.strategies={"hot":{"type":"hot","emulate":true}}' --out "$tmp/x"
  for strategy in instant hot; do
    "$lb" train "$configs/quickstart.json" --device cuda --strategy $strategy --set train.max_steps=20 \
      --out "$tmp/cuda_$strategy" --no-progress > /dev/null 2> "$tmp/cuda.err" ||
      { cat "$tmp/cuda.err"; fail "training with $strategy on cuda failed"; }
  done
  "$lb" train "$configs/quickstart.json" --device cuda --set train.max_steps=20 --out "$tmp/cuda_run" \
    --no-progress > /dev/null 2> "$tmp/cuda.err" || { cat "$tmp/cuda.err"; fail "training on cuda failed"; }
  "$lb" eval "$configs/quickstart.json" --checkpoint "$tmp/cuda_run" --device cuda > "$tmp/cuda_eval.json" \
    2> "$tmp/cuda.err" || { cat "$tmp/cuda.err"; fail "evaluating on cuda failed"; }
  grep -q '"eval_accuracy"' "$tmp/cuda_eval.json" || fail "no accuracy from the cuda evaluation"
fi

# A GLUE task in its original layout (RTE: index, sentence1, sentence2, label; test without
# label), generated here with its own vocabulary: train, eval, predict to a GLUE-server file,
# and the named errors for an unlabeled split and a malformed row.
mkdir -p "$tmp/rte"
printf '[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n.\nyes\nno\n' > "$tmp/vocab.txt"
for i in $(seq 0 40); do echo "w$i" >> "$tmp/vocab.txt"; done
gen() {  # split rows labeled
  local n=$2
  if [ "$3" = 1 ]; then printf 'index\tsentence1\tsentence2\tlabel\n'; else printf 'index\tsentence1\tsentence2\n'; fi
  for i in $(seq 0 $((n - 1))); do
    local a="w$((i % 41)) w$(((i * 7) % 41)) w$(((i * 3) % 41))"
    if [ $((i % 2)) = 0 ]; then b="w$((i % 13)) yes ."; l=entailment; else b="w$((i % 11)) no ."; l=not_entailment; fi
    if [ "$3" = 1 ]; then printf '%d\t%s\t%s\t%s\n' "$i" "$a" "$b" "$l"; else printf '%d\t%s\t%s\n' "$i" "$a" "$b"; fi
  done
}
gen train 128 1 > "$tmp/rte/train.tsv"
gen dev 40 1 > "$tmp/rte/dev.tsv"
gen test 30 0 > "$tmp/rte/test.tsv"
cat > "$tmp/rte.json" <<JSON
{"model": {"type": "bert", "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
           "intermediate_size": 64, "max_position_embeddings": 32},
 "data": {"task": "rte", "dir": "$tmp/rte", "vocab": "$tmp/vocab.txt", "max_seq_len": 32, "batch_size": 16},
 "train": {"epochs": 6, "log_every": 8, "seed": 5},
 "optimizer": {"type": "adamw", "lr": 3e-3},
 "schedule": {"type": "linear", "warmup_ratio": 0.1}}
JSON
"$lb" train "$tmp/rte.json" --out "$tmp/rte_run" --no-progress > "$tmp/rte.out" 2> "$tmp/rte.err" \
  || { cat "$tmp/rte.err"; fail "GLUE-layout training failed"; }
python3 -c "import json,sys; a=json.load(open('$tmp/rte_run/eval_results.json'))['final']['eval_accuracy']; sys.exit(0 if a >= 0.9 else 1)" \
  || fail "RTE-layout task not learnt: $(cat "$tmp/rte.out")"
"$lb" predict "$tmp/rte.json" --checkpoint "$tmp/rte_run" --out "$tmp/rte_sub" 2>/dev/null || fail "GLUE predict failed"
[ "$(head -1 "$tmp/rte_sub/RTE.tsv")" = "$(printf 'index\tprediction')" ] || fail "RTE.tsv header"
[ "$(wc -l < "$tmp/rte_sub/RTE.tsv")" -eq 31 ] || fail "RTE.tsv rows"
grep -q "$(printf '^0\tentailment$')" "$tmp/rte_sub/RTE.tsv" || fail "RTE.tsv does not use label names"
check 1 "has no labels to evaluate against" eval "$tmp/rte.json" --checkpoint "$tmp/rte_run" --split test
printf '7\tw1 w2\tw3 yes .\tmaybe\n' >> "$tmp/rte/dev.tsv"
check 1 "dev.tsv:42" eval "$tmp/rte.json" --checkpoint "$tmp/rte_run"

# export: a Hugging Face directory with the task's label names; never into a directory of the user's
"$lb" export "$tmp/rte_run" --out "$tmp/rte_hf" 2> "$tmp/export.err" || { cat "$tmp/export.err"; fail "export failed"; }
grep -q '"not_entailment"' "$tmp/rte_hf/config.json" || fail "exported config.json lacks the label names"
for f in model.safetensors vocab.txt tokenizer_config.json special_tokens_map.json; do
  [ -f "$tmp/rte_hf/$f" ] || fail "export lacks $f"
done
grep -q "AutoModelForSequenceClassification.from_pretrained" "$tmp/export.err" || fail "export printed no usage"
check 1 "holds an earlier export; pass --overwrite" export "$tmp/rte_run" --out "$tmp/rte_hf"
"$lb" export "$tmp/rte_run" --out "$tmp/rte_hf" --overwrite 2>/dev/null || fail "export --overwrite failed"
mkdir "$tmp/mine_hf" && echo keep > "$tmp/mine_hf/config.json"
check 1 "leanback did not create it for an export" export "$tmp/rte_run" --out "$tmp/mine_hf" --overwrite
[ "$(cat "$tmp/mine_hf/config.json")" = keep ] || fail "export touched the user's file"
check 1 "no LoRA adapters to merge" export "$tmp/rte_run" --out "$tmp/merged" --merge
check 2 "--out is required" export "$tmp/rte_run"
echo "ok"
