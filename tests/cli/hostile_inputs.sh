#!/usr/bin/env bash
# Hostile and careless input, replayed through the CLI on every commit (CTest label "input",
# so CI also runs it under ASan + UBSan): the cases of the reliability rounds that are not
# replayed elsewhere (train_eval_predict.sh has resume, --overwrite and the flag errors).
# Every case must end in a named error and a non-zero exit, with no C++ condition or source
# line in the message and nothing of the user's touched. Everything happens inside a
# temporary directory.
# Usage: hostile_inputs.sh LEANBACK_BINARY CONFIG_DIR
source "$(dirname "$0")/common.sh" "$@"
cfg="$configs/quickstart.json"
tiny=(--set train.max_steps=2 --set data.synthetic_train=64 --set data.synthetic_eval=32 --no-progress)
cases=0

# expect STATUS PATTERN ARGS...: leanback ARGS exits STATUS and says PATTERN (grep -E), and
# no message is for developers.
expect() {
  local want="$1" pattern="$2"
  shift 2
  cases=$((cases + 1))
  "$lb" "$@" > "$tmp/out" 2> "$tmp/err"
  local got=$?
  [ $got -eq "$want" ] || { cat "$tmp/err"; fail "'$*' exited $got, expected $want"; }
  grep -qE -- "$pattern" "$tmp/err" || { cat "$tmp/err"; fail "'$*' message lacks: $pattern"; }
  grep -qE "check failed|\.cpp:[0-9]" "$tmp/err" && { cat "$tmp/err"; fail "'$*' message shows source lines"; }
  return 0
}

"$lb" train "$cfg" "${tiny[@]}" --out "$tmp/run" > /dev/null 2>&1 || fail "the base run failed"
"$lb" plan "$cfg" --activation-budget 2MB --json > "$tmp/plan.json" 2> /dev/null || fail "plan --json failed"

# A model setting that changes the maths, on eval / predict of a checkpoint: named, refused.
expect 1 "model.hidden_act: \"relu\" here, \"gelu\" in the checkpoint" \
  eval "$cfg" --checkpoint "$tmp/run" --set model.hidden_act=relu
expect 1 "model.layer_norm_eps: 1 here" predict "$cfg" --checkpoint "$tmp/run" --out "$tmp/pred" \
  --set model.layer_norm_eps=1
[ -e "$tmp/pred" ] && fail "a refused predict created its output directory"

# A pretrained model that is not there (a new user before tools/fetch_pretrained.sh): said, with
# how to get it, on train and eval alike.
expect 1 "model.pretrained: $tmp/no-model does not exist.*tools/fetch_pretrained.sh" \
  train "$configs/minilm_mrpc.json" --set model.pretrained="$tmp/no-model" --out "$tmp/np"
expect 1 "model.pretrained: $tmp/no-model does not exist.*tools/fetch_pretrained.sh" \
  eval "$configs/minilm_mrpc.json" --set model.pretrained="$tmp/no-model"
[ -e "$tmp/np" ] && fail "a refused train created its run directory"
"$lb" --version | grep -qE "^leanback [0-9]+\.[0-9]+\.[0-9]+ \(" || fail "leanback --version says no version"

# Non-finite weights in a pretrained directory: the file and the tensor.
"$lb" export "$tmp/run" --out "$tmp/hf" > /dev/null 2>&1 || fail "export failed"
python3 - "$tmp/hf/model.safetensors" <<'PY' || fail "could not plant a NaN"
import json, struct, sys
path = sys.argv[1]
data = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
name = next(k for k in header if k.startswith("classifier") and k.endswith("weight"))
start = 8 + n + header[name]["data_offsets"][0]
data[start:start + 4] = struct.pack("<f", float("nan"))
open(path, "wb").write(data)
PY
python3 - "$cfg" "$tmp/hf" "$tmp/nan.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["model"] = {"type": "bert", "pretrained": sys.argv[2]}
c.pop("output", None)
json.dump(c, open(sys.argv[3], "w"))
PY
expect 1 "hf/model.safetensors.*classifier.*(NaN|non-finite|inf)" eval "$tmp/nan.json" "${tiny[@]:2:4}"

# A budget (or plan) with explicit memory settings: refused both ways, naming both.
expect 2 "--memory-budget: the planner chooses .* sets memory.codecs" \
  train "$cfg" --memory-budget 2MB --set 'memory.codecs=[{"codec":"int8"}]' --out "$tmp/b1"
expect 1 "memory.budget: the planner chooses .* sets memory.recompute" \
  train "$cfg" --set memory.budget=2MB --set 'memory.recompute=["*"]' --out "$tmp/b2"
expect 1 "--memory-plan carries its own codecs .* sets memory.recompute" \
  train "$cfg" --memory-plan "$tmp/plan.json" --set 'memory.recompute=["*"]' --out "$tmp/b3"

# Settings that cannot succeed: refused before any training, nothing written.
expect 1 "output.export is \"merged\", which folds LoRA" train "$cfg" --set output.export=merged --out "$tmp/e1"
[ -e "$tmp/e1" ] && fail "a refused run created its directory"

# Numbers at the edges: budgets under a byte or past 2^63 bytes, plan files with huge numbers.
expect 2 "'0' is not a memory budget \(a budget is more than 0 bytes\)" plan "$cfg" --memory-budget 0
expect 2 "is not a memory budget \(a budget is below 2\^63 bytes\)" plan "$cfg" --memory-budget 9223372036854775808
expect 1 "is not a memory budget \(a budget is below 2\^63 bytes\)" train "$cfg" --set memory.budget=1e300 \
  --out "$tmp/n1"
for edit in 'budget_bytes=1e300' 'micro_batches=1.5' 'micro_batches=1e300' 'budget=5' 'parts=7' 'memory=4'; do
  key=${edit%%=*}
  python3 - "$tmp/plan.json" "$tmp/bad_plan.json" "$edit" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
key, value = sys.argv[3].split("=")
p[key] = json.loads(value)
json.dump(p, open(sys.argv[2], "w"))
PY
  expect 1 "bad_plan.json: $key: expected" train "$cfg" --memory-plan "$tmp/bad_plan.json" --out "$tmp/n2"
done
"$lb" plan "$cfg" --activation-budget 1TiB 2> /dev/null | grep -qE "planned: activation peak [0-9.]+ MB predicted" \
  || fail "plan at 1TiB printed no predicted peak"
"$lb" plan "$cfg" --activation-budget 1TiB 2> /dev/null | grep -qE "peak 1[0-9]{3}\.[0-9]+ MB predicted" \
  && fail "plan at 1TiB predicts the budget, not the step's peak"

# Resume of a planned run with another plan: refused, naming the run's own.
"$lb" train "$cfg" "${tiny[@]}" --memory-plan "$tmp/plan.json" --out "$tmp/planned" > /dev/null 2>&1 \
  || fail "a run under a plan failed"
python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); p["profile_s"]=1.5; json.dump(p,open(sys.argv[2],"w"))' \
  "$tmp/plan.json" "$tmp/other_plan.json"
expect 1 "the run being resumed has its own memory plan" \
  train "$cfg" "${tiny[@]}" --resume "$tmp/planned" --memory-plan "$tmp/other_plan.json"

# Duplicate JSON keys (the last would win): both lines named.
printf '{"optimizer": {"lr": 1e-3,\n "lr": 7.0}}\n' > "$tmp/dup.json"
expect 1 "dup.json.*lr" train "$tmp/dup.json" --out "$tmp/d1"

# Protected output directories (probed from inside the temporary directory only).
mkdir -p "$tmp/cwd/sub" && echo mine > "$tmp/cwd/mine.txt"
(cd "$tmp/cwd/sub" && expect 1 "the current directory cannot be an output directory" \
  train "$cfg" --out . --overwrite && expect 1 "an ancestor of the current directory" train "$cfg" --out .. --overwrite) \
  || exit 1
[ -f "$tmp/cwd/mine.txt" ] || fail "a refused --overwrite deleted a file"

# A torn checkpoint (its model file cut short): resume and eval name the file.
cp -r "$tmp/run" "$tmp/torn"
ck=$(ls -d "$tmp/torn"/checkpoint-* | head -1)
truncate -s 100 "$ck/model.safetensors"
expect 1 "model.safetensors" train "$cfg" "${tiny[@]}" --resume "$tmp/torn"
expect 1 "model.safetensors" eval "$cfg" --checkpoint "$ck"

echo "ok ($((cases)) hostile cases)"
