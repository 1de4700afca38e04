# Data-parallel training through the CLI (needs mpirun): `leanback train --nproc 2` equals one
# process with the global batch (loss curve to 1e-5), rank 0 alone writes the run directory,
# a rank killed mid-run ends the job with a non-zero status instead of a hang, Ctrl-C leaves
# a checkpoint and exit status 130, and so does SIGINT to a user's own mpirun.
source "$(dirname "$0")/common.sh" "$@"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
cat > "$tmp/dp.json" <<'JSON'
{"model": {"type": "bert", "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
           "intermediate_size": 64, "max_position_embeddings": 64,
           "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0},
 "data": {"task": "synthetic", "max_seq_len": 32, "batch_size": 8, "synthetic_train": 200, "synthetic_eval": 64},
 "train": {"max_steps": 30, "log_every": 1, "seed": 5},
 "optimizer": {"type": "adamw", "lr": 1e-3}}
JSON
"$lb" train "$tmp/dp.json" --nproc 2 --out "$tmp/two" --no-progress > "$tmp/two.log" 2>&1 ||
  { cat "$tmp/two.log"; fail "train --nproc 2 failed"; }
grep -q "data-parallel: 2 ranks (mpi), batch 8 per rank, 16 in all" "$tmp/two.log" || { cat "$tmp/two.log"; fail "no data-parallel line"; }
"$lb" train "$tmp/dp.json" --set data.batch_size=16 --out "$tmp/one" --no-progress > "$tmp/one.log" 2>&1 ||
  { cat "$tmp/one.log"; fail "single-process train failed"; }
losses() { grep '"type":"train"' "$1/metrics.jsonl" | sed 's/.*"loss":\([^,]*\),.*/\1/'; }
paste <(losses "$tmp/two") <(losses "$tmp/one") | awk '
  { n++; d = $1 - $2; if (d < 0) d = -d; if (d > m) m = d }
  END { if (n != 30) { print "FAIL: " n " loss lines, want 30"; exit 1 }
        if (m > 1e-5) { print "FAIL: loss curves differ by " m; exit 1 }
        print "losses: 30 steps, max difference " m }' || fail "2 ranks != 1 process"
[ "$(grep -c '"type":"run"' "$tmp/two/metrics.jsonl")" = 1 ] || fail "metrics.jsonl must be written once (rank 0)"
grep -q '"ranks":2' "$tmp/two/metrics.jsonl" || fail "train lines do not carry ranks"

# A rank killed with SIGKILL: mpirun ends the job, non-zero, within the timeout.
# Few log lines: once mpirun is interrupted it stops reading the ranks' output, and a rank
# logging every millisecond-long step would block on the full pipe before its checkpoint.
sed 's/"max_steps": 30, "log_every": 1/"max_steps": 100000, "log_every": 25/' "$tmp/dp.json" > "$tmp/long.json"
LEANBACK_DIST_TIMEOUT=30 timeout 120 "$lb" train "$tmp/long.json" --nproc 2 --out "$tmp/dead" --no-progress \
  > "$tmp/dead.log" 2>&1 &
job=$!
victim=""
for _ in $(seq 1 100); do  # the rank-1 process, once training has started
  for p in $(pgrep -f "train $tmp/long.json" || true); do
    if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx 'OMPI_COMM_WORLD_RANK=1'; then victim=$p; fi
  done
  [ -n "$victim" ] && [ -s "$tmp/dead/metrics.jsonl" ] && grep -q '"type":"train"' "$tmp/dead/metrics.jsonl" && break
  sleep 0.2
done
[ -n "$victim" ] || { kill $job; fail "no rank-1 process found"; }
kill -9 "$victim"
wait $job
rc=$?
[ "$rc" != 0 ] || fail "the job exited 0 after a rank was killed"
[ "$rc" != 124 ] || { cat "$tmp/dead.log"; fail "the job hung after a rank was killed"; }
grep -qiE "signal 9|killed|exited on signal|did not complete" "$tmp/dead.log" || { cat "$tmp/dead.log"; fail "no message about the dead rank"; }
echo "dead rank: job ended with status $rc"

# SIGINT to PID once RUN_DIR's metrics show a training step; returns PID's exit status.
interrupt_when_training() {
  for _ in $(seq 1 300); do
    [ -s "$1/metrics.jsonl" ] && grep -q '"type":"train"' "$1/metrics.jsonl" && break
    sleep 0.2
  done
  kill -INT "$2"
  wait "$2"
}

# Ctrl-C (SIGINT) to `train --nproc 2`: the ranks stop together, rank 0 writes a checkpoint,
# and the launcher exits 130, as one process does; the run resumes from it.
timeout 300 "$lb" train "$tmp/long.json" --nproc 2 --out "$tmp/stop" --no-progress > "$tmp/stop.log" 2>&1 &
job=$!
interrupt_when_training "$tmp/stop" $job
rc=$?
[ "$rc" = 130 ] || { cat "$tmp/stop.log"; fail "Ctrl-C to train --nproc 2 exited $rc, expected 130"; }
ls -d "$tmp"/stop/checkpoint-* > /dev/null 2>&1 || { cat "$tmp/stop.log"; fail "no checkpoint after Ctrl-C under --nproc"; }
echo "Ctrl-C under --nproc: status $rc, $(ls -d "$tmp"/stop/checkpoint-*)"

# SIGINT to a user's own mpirun alone: it sends the ranks SIGTERM, which they handle as a stop
# request (a small model's step and checkpoint fit in the second before mpirun's SIGKILL).
mpirun -np 2 --oversubscribe "$lb" train "$tmp/long.json" --out "$tmp/own" --no-progress > "$tmp/own.log" 2>&1 &
job=$!
interrupt_when_training "$tmp/own" $job
ls -d "$tmp"/own/checkpoint-* > /dev/null 2>&1 || { cat "$tmp/own.log"; fail "no checkpoint after SIGINT to mpirun"; }
grep -q "interrupted at step" "$tmp/own.log" || { cat "$tmp/own.log"; fail "no interruption message after SIGINT to mpirun"; }
echo ok
