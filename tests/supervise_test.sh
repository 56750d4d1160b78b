#!/usr/bin/env bash
# `polyhal run --max-restarts N` and `polyhal supervise`, on one host: a
# training run whose process is killed mid-run is restarted, resumes from its
# last checkpoint and ends with the uninterrupted run's losses; a failure a
# restart would repeat (a bad config) is not retried; the usage errors exit 2.
# And SIGTERM: the run stops after its step with a checkpoint, exit 143.
#   tests/supervise_test.sh POLYHAL_LAUNCHER
set -uo pipefail
polyhal=$1
. "$(dirname "$0")/shell_helpers.sh"
work=$(mktemp -d)
trap 'pkill -KILL -P $$ 2> /dev/null; rm -rf "$work"' EXIT
cd "$work"
cat > p.yaml << 'YAML'
backend: cpu
task: pretrain
model: {preset: tiny, seq_len: 32, precision: f32, vocab_size: 256, num_hidden_layers: 2}
batch: {micro: 8, grad_accum: 2, replicas: 2}
data: {source: pattern, seed: 5, max_predictions: 6}
optimizer: {name: lamb, learning_rate: 0.004}
checkpoint: {every: 10}
steps: 60
YAML

"$polyhal" run p.yaml --set checkpoint.dir=whole --metrics-out whole.jsonl --progress none \
  > whole.log 2>&1 || { tail whole.log; fail "the uninterrupted run failed"; }

# Killed once its checkpoint of step 10 exists: restarted, resumed, same losses.
"$polyhal" run p.yaml --max-restarts 2 --set checkpoint.dir=supervised \
  --metrics-out supervised.jsonl --progress none > supervised.log 2>&1 &
supervisor=$!
for tries in $(seq 1 600); do
  [ -f supervised/checkpoint-00000010.safetensors ] && break
  sleep 0.05
done
child=$(pgrep -P "$supervisor" | head -1)
[ -n "$child" ] || fail "no supervised run to kill"
kill -KILL "$child"
wait "$supervisor" || { cat supervised.log; fail "the supervised run did not finish"; }
grep -q "was killed by signal 9 (Killed) (a lost replica); restart 1 of 2" supervised.log ||
  { cat supervised.log; fail "the restart was not logged"; }
grep -q "resumed from" supervised.log || fail "the restart did not resume"
first=$(losses supervised.jsonl | awk 'NR == 1' | cut -d' ' -f1)
[ "$(losses supervised.jsonl)" = "$(losses whole.jsonl | awk -v s="$first" '$1 >= s')" ] ||
  fail "resumed at step $first: the losses differ from the uninterrupted run"
echo "ok: killed after step 10, restarted, resumed at step $first with the uninterrupted run's losses"

# SIGTERM mid-run (what a scheduler sends): the step in flight finishes on
# both replicas, is checkpointed, the summary is printed, and the run exits
# 143; the rerun resumes there with the uninterrupted run's losses.
"$polyhal" run p.yaml --set checkpoint.dir=stopped --metrics-out stopped.jsonl --progress none \
  > stopped.log 2>&1 &
run=$!
for tries in $(seq 1 600); do
  [ -f stopped/checkpoint-00000010.safetensors ] && break
  sleep 0.05
done
kill -TERM "$run"
wait "$run"
code=$?
[ "$code" -eq 143 ] || { cat stopped.log; fail "SIGTERM: exit $code, expected 143"; }
step=$(sed -n 's/.*stopped by Terminated after step \([0-9]*\) of 60.*/\1/p' stopped.log | head -1)
[ -n "$step" ] || { cat stopped.log; fail "SIGTERM: no 'stopped by Terminated after step'"; }
[ -f "stopped/checkpoint-$(printf %08d "$step").safetensors" ] ||
  { ls stopped; fail "SIGTERM after step $step: no checkpoint of it"; }
grep -q "stopped by Terminated after step $step: run the same command to resume" stopped.log ||
  { cat stopped.log; fail "SIGTERM: no summary"; }
[ ! -e stopped/hf ] || fail "a stopped run exported its unfinished weights as the final ones"
"$polyhal" run p.yaml --set checkpoint.dir=stopped --metrics-out resumed.jsonl --progress none \
  > resumed.log 2>&1 || { cat resumed.log; fail "the run after SIGTERM failed"; }
grep -q "resuming from step $step of 60" resumed.log || { cat resumed.log; fail "no 'resuming from'"; }
[ "$(losses resumed.jsonl)" = "$(losses whole.jsonl | awk -v s="$((step + 1))" '$1 >= s')" ] ||
  fail "resumed after SIGTERM at step $step: the losses differ from the uninterrupted run"
echo "ok: SIGTERM stopped both replicas after step $step with a checkpoint (exit 143); the rerun resumed with the uninterrupted run's losses"

# Stopping an MPI job (docs/scale-out.md): SIGUSR1 to mpirun, which Open MPI
# 4.1 and 5.0 pass to the ranks at once and without killing them; and
# SIGTERM with odls_base_sigkill_timeout on Open MPI 4.1 (5.0's launcher
# kills the ranks a fixed quarter second after it, too soon for a step). The
# ranks stop after a step with its checkpoint and the same command resumes
# there. Open MPI 5's mpirun stops forwarding the ranks' output once it has
# a stopping signal, so what they say about it is read from log.file, which
# they write themselves.
# stop_mpi_job SIGNAL NAME [MPIRUN_OPTIONS...]
stop_mpi_job() {
  local signal=$1 name=$2 dir="mpi-$1"
  shift 2
  local long=(--set collective=mpi --set checkpoint.every=5 --set "checkpoint.dir=$dir"
    --set "log.file=$dir.log" --progress none)
  mpirun "$@" -np 2 "$polyhal" run p.yaml --set steps=1000000 "${long[@]}" > "$dir.out" 2>&1 &
  local job=$!
  # Stopped in its training loop (a signal before it stops the job at once).
  for tries in $(seq 1 600); do
    [ -f "$dir/checkpoint-00000005.safetensors" ] && break
    sleep 0.05
  done
  kill "-$signal" "$job"
  wait "$job"
  local step
  step=$(sed -n "s/.*stopped by $name after step \([0-9]*\) of.*/\1/p" "$dir.log" | head -1)
  [ -n "$step" ] || { cat "$dir.out" "$dir.log"; fail "$signal to mpirun: the ranks did not stop after a step"; }
  [ -f "$dir/checkpoint-$(printf %08d "$step").safetensors" ] ||
    { ls "$dir"; fail "$signal to mpirun after step $step: no checkpoint of it"; }
  mpirun -np 2 "$polyhal" run p.yaml --set steps=$((step + 3)) "${long[@]}" > "$dir-resumed.log" 2>&1 ||
    { cat "$dir-resumed.log"; fail "the MPI run after $signal failed"; }
  grep -q "resuming from step $step of $((step + 3))" "$dir-resumed.log" ||
    { cat "$dir-resumed.log"; fail "the MPI run after $signal did not resume at step $step"; }
  echo "ok: $signal to mpirun stopped both ranks after step $step with a checkpoint; the rerun resumed there"
}
if command -v mpirun > /dev/null; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
  stop_mpi_job USR1 "User defined signal 1"
  if mpirun --version 2>&1 | grep -q "Open MPI) 4\."; then
    stop_mpi_job TERM Terminated --mca odls_base_sigkill_timeout 3
  fi
fi

# A bad config fails the same way every time: one attempt, its exit code.
"$polyhal" run p.yaml --max-restarts 2 --set checkpoint.dir=bad --set optimizer.learning_rate=-1 \
  > bad.log 2>&1
code=$?
[ "$code" -eq 2 ] || { cat bad.log; fail "a bad config under --max-restarts: exit $code, expected 2"; }
grep -q "restart" bad.log && { cat bad.log; fail "a bad config was restarted"; }
echo "ok: a bad config is not restarted (exit 2)"

# Usage errors.
"$polyhal" run p.yaml --max-restarts 1 > nodir.log 2>&1
[ $? -eq 2 ] && grep -q "checkpoint.dir is not set" nodir.log || { cat nodir.log; fail "--max-restarts without checkpoint.dir"; }
OMPI_COMM_WORLD_SIZE=2 "$polyhal" run p.yaml --max-restarts 1 --set checkpoint.dir=x > mpi.log 2>&1
[ $? -eq 2 ] && grep -q "supervise mpirun instead" mpi.log || { cat mpi.log; fail "--max-restarts under mpirun"; }
"$polyhal" supervise mpirun -np 2 > dash.log 2>&1
[ $? -eq 2 ] && grep -q "put '--' before" dash.log || { cat dash.log; fail "supervise without --"; }
"$polyhal" supervise --max-restarts 1 -- sh -c 'exit 4' > four.log 2>&1
[ $? -eq 4 ] && grep -q "restarted 1 time" four.log || { cat four.log; fail "supervise: exit 4 twice"; }
echo "ok: usage errors exit 2; a job that keeps losing a replica ends after --max-restarts"
