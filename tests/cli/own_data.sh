#!/usr/bin/env bash
# A user's own text data through the CLI: sentence-pair classification from CSV and regression
# from JSON Lines (train, eval, predict a split, predict --text / --input), and the errors a
# newcomer's files meet, each naming the file and line or the config key. Everything happens
# inside a temporary directory.
# Usage: own_data.sh LEANBACK_BINARY CONFIG_DIR
source "$(dirname "$0")/common.sh" "$@"
quiet=(--no-progress --threads 1)

# expect PATTERN ARGS...: leanback ARGS fails (exit 1) saying PATTERN (grep -E).
expect() {
  local pattern="$1"
  shift
  "$lb" "$@" > "$tmp/out" 2> "$tmp/err"
  local got=$?
  [ $got -eq 1 ] || { cat "$tmp/err"; fail "'$*' exited $got, expected 1"; }
  grep -qE -- "$pattern" "$tmp/err" || { cat "$tmp/err"; fail "'$*' message lacks: $pattern"; }
}

printf '%s\n' '[PAD]' '[UNK]' '[CLS]' '[SEP]' '[MASK]' the cat dog sat ran on mat park a is yes no > "$tmp/vocab.txt"
model='"model": {"type": "bert", "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                 "intermediate_size": 64, "max_position_embeddings": 32}'
mkdir -p "$tmp/pairs" "$tmp/scores"
# Sentence pairs in CSV, with other column names than the defaults, a quoted comma and a
# quoted line break; the label is "yes" when both sentences name the same animal.
{
  echo 'id,premise,hypothesis,answer'
  for i in $(seq 1 24); do
    echo "$i,\"the cat sat, on a mat\",the cat ran,yes"
    echo "$i,the dog sat,\"the cat
ran\",no"
  done
} > "$tmp/pairs/train.csv"
head -5 "$tmp/pairs/train.csv" | sed 's/^1,/9,/' > "$tmp/pairs/dev.csv"
printf 'premise,hypothesis\nthe dog ran,the dog sat\n"the cat",the dog\n' > "$tmp/pairs/test.csv"
cat > "$tmp/pairs.json" <<EOF
{ $model,
  "data": {"task": "text_classification", "dir": "$tmp/pairs", "vocab": "$tmp/vocab.txt",
           "text_columns": ["premise", "hypothesis"], "label_column": "answer", "max_seq_len": 16, "batch_size": 8},
  "train": {"max_steps": 12, "log_every": 4}, "optimizer": {"type": "adamw", "lr": 1e-3} }
EOF
"$lb" train "$tmp/pairs.json" --out "$tmp/run" "${quiet[@]}" > "$tmp/train.out" 2>&1 || { cat "$tmp/train.out"; fail "train on CSV pairs failed"; }
grep -q '"text_columns":\["premise","hypothesis"\]' <(tr -d ' \n' < "$tmp/run/config.json") ||
  fail "config.json lacks the text columns"
grep -q '"label_names":\["no","yes"\]' <(tr -d ' \n' < "$tmp/run/checkpoint-12/trainer_state.json") ||
  fail "the checkpoint lacks the class names in sorted order"
"$lb" eval "$tmp/run/config.json" --checkpoint "$tmp/run" --threads 1 > "$tmp/eval.out" 2> "$tmp/err" ||
  { cat "$tmp/err"; fail "eval failed"; }
grep -q '"eval_accuracy"' "$tmp/eval.out" || fail "eval printed no accuracy: $(cat "$tmp/eval.out")"
"$lb" predict "$tmp/pairs.json" --checkpoint "$tmp/run" --text "the cat sat" --text-pair "the cat ran" \
  --text "a dog" --text-pair "a cat" --threads 1 > "$tmp/pred.out" 2> "$tmp/err" || { cat "$tmp/err"; fail "predict --text failed"; }
[ "$(grep -cE '^\{"index":[01],"label":"(no|yes)","score":0\.[0-9]+' "$tmp/pred.out")" = 2 ] ||
  fail "predict --text printed: $(cat "$tmp/pred.out")"
printf 'the cat sat\tthe cat ran\n\nthe dog\tthe cat\n' > "$tmp/in.txt"
"$lb" predict "$tmp/pairs.json" --checkpoint "$tmp/run" --input "$tmp/in.txt" --threads 1 > "$tmp/pred2.out" 2> "$tmp/err" ||
  { cat "$tmp/err"; fail "predict --input failed"; }
# The same texts, one per line, give the same predictions as --text.
[ "$(cut -d, -f1-2 "$tmp/pred2.out")" = "$(cut -d, -f1-2 "$tmp/pred.out")" ] || fail "--input and --text disagree"
"$lb" predict "$tmp/pairs.json" --checkpoint "$tmp/run" --out "$tmp/preds" --threads 1 2> "$tmp/err" ||
  { cat "$tmp/err"; fail "predict --out failed"; }
[ "$(head -1 "$tmp/preds/test_predictions.tsv")" = "$(printf 'index\tprediction')" ] || fail "no prediction header"
[ "$(grep -cE $'^[01]\t(no|yes)$' "$tmp/preds/test_predictions.tsv")" = 2 ] || fail "prediction rows: $(cat "$tmp/preds/test_predictions.tsv")"

# Regression from JSON Lines: a score per text.
for split in train dev; do
  for i in $(seq 1 16); do
    echo '{"sentence": "the cat sat on a mat", "score": 4.5}'
    echo '{"sentence": "a dog ran", "score": 1}'
  done > "$tmp/scores/$split.jsonl"
done
cat > "$tmp/scores.json" <<EOF
{ $model,
  "data": {"task": "text_regression", "dir": "$tmp/scores", "vocab": "$tmp/vocab.txt", "text_columns": "sentence",
           "label_column": "score", "max_seq_len": 16, "batch_size": 8},
  "train": {"max_steps": 8, "log_every": 4}, "optimizer": {"type": "adamw", "lr": 1e-3} }
EOF
"$lb" train "$tmp/scores.json" --out "$tmp/run2" "${quiet[@]}" > "$tmp/train.out" 2>&1 || { cat "$tmp/train.out"; fail "train on JSON Lines failed"; }
grep -q '"eval_pearson"' "$tmp/run2/eval_results.json" || fail "regression reports no pearson: $(cat "$tmp/run2/eval_results.json")"
"$lb" predict "$tmp/scores.json" --checkpoint "$tmp/run2" --text "a dog" --threads 1 > "$tmp/pred.out" 2> "$tmp/err" ||
  { cat "$tmp/err"; fail "regression predict --text failed"; }
grep -qE '^\{"index":0,"score":-?[0-9]' "$tmp/pred.out" || fail "regression predict printed: $(cat "$tmp/pred.out")"

# The errors a newcomer's files and flags meet.
cp -r "$tmp/pairs" "$tmp/bad"
printf 'id,premise,hypothesis,answer\n1,a,b,yes\n2,a,b,maybe\n' > "$tmp/bad/dev.csv"
expect "bad/dev.csv:3: label 'maybe' is not one of the classes \(no, yes\)" \
  train "$tmp/pairs.json" --set data.dir="$tmp/bad" --out "$tmp/run3" "${quiet[@]}"
[ -e "$tmp/run3" ] && fail "a refused run created its directory"
expect "pairs/train.csv:1: no text column 'sentence' in the header \(columns: id, premise, hypothesis, answer\)" \
  train "$tmp/pairs.json" --set 'data.text_columns=["sentence"]' --out "$tmp/run3" "${quiet[@]}"
touch "$tmp/bad/train.jsonl"
expect "has both .*train.csv and .*train.jsonl for the 'train' split; say which with data.format" \
  train "$tmp/pairs.json" --set data.dir="$tmp/bad" --out "$tmp/run3" "${quiet[@]}"
expect "data.text_columns: only for data.task text_classification or text_regression" \
  train "$configs/quickstart.json" --set 'data.text_columns=["a"]' "${quiet[@]}"
expect "takes sentence pairs: give each text its second sentence" \
  predict "$tmp/pairs.json" --checkpoint "$tmp/run" --text "the cat" --threads 1
# Classes in another order than the checkpoint's would mislabel every prediction.
expect "the classes in id order are \[\"yes\",\"no\"\] but checkpoint .* trained with \[\"no\",\"yes\"\]" \
  predict "$tmp/pairs.json" --checkpoint "$tmp/run" --text "a" --text-pair "b" --set 'data.labels=["yes","no"]' --threads 1
expect "--text / --input print their predictions on stdout" \
  predict "$tmp/pairs.json" --checkpoint "$tmp/run" --text "a" --text-pair "b" --out "$tmp/x" --threads 1
expect "not a finite number \(data.task text_regression\)" \
  train "$tmp/scores.json" --set data.label_column=sentence --out "$tmp/run3" "${quiet[@]}"
echo ok
