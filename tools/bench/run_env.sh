# Sourced by the study drivers under tools/studies/ (budget_study.sh, lora_study.sh,
# fidelity_check.sh, ...) and glue_lockstep.sh: the run
# environment they share and record. THREADS=N exports OMP_NUM_THREADS=N; CORE=C pins the
# runs with taskset (the array `pin`, empty otherwise); `cpu` names the CPU as lscpu does
# (model name, family, model) and `commit` the checkout's short hash, for each result line.
pin=()
[ -n "${THREADS:-}" ] && export OMP_NUM_THREADS="$THREADS"
[ -n "${CORE:-}" ] && pin=(taskset -c "$CORE")
cpu="$(lscpu | sed -n 's/^Model name: *//p' | head -1) family $(lscpu | sed -n 's/^CPU family: *//p') model $(lscpu | sed -n 's/^Model: *//p')"
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"

# plan_once FILE LOG CONFIG BUDGET [--set K=V ...]: the memory plan for CONFIG at BUDGET, made
# once (`$lb plan --json`, pinned) into FILE and reused after (train --memory-plan FILE: every
# seed of a study under one plan); the planner's messages go to LOG. Fails where planning did.
plan_once() {
  local file="$1" log="$2" config="$3" budget="$4"
  shift 4
  [ -s "$file" ] && return 0
  mkdir -p "$(dirname "$file")"
  if ! "${pin[@]}" "$lb" plan "$config" --activation-budget "$budget" --json "$@" > "$file.part" 2>> "$log"; then
    rm -f "$file.part"
    return 1
  fi
  mv "$file.part" "$file"
}
