#!/usr/bin/env bash
# Runs that cross hosts: ranks on separate "hosts" (network namespaces on a
# private bridge, scripts/netns-hosts.sh), mpirun over TCP with a hostfile.
# Data-parallel, packed, pipelined and optimizer-state-sharded pre-training
# across 2 hosts each give exactly the losses of the same replicas in one
# process (across hosts the gradient all-reduce overlaps backward, in one
# process it does not: the same values either way). Exit 77 (ctest: skipped) with the reason only where the machine
# forbids namespaces; every namespace and process is removed on any exit.
#   tests/multihost_test.sh POLYHAL_LAUNCHER SOURCE_DIR
set -uo pipefail
polyhal=$1
source_dir=$2
. "$source_dir/scripts/netns-hosts.sh"
. "$source_dir/tests/shell_helpers.sh"
if ! why=$(netns_possible); then
  echo "SKIP: $why: the multi-host test cannot run here"
  exit 77
fi
work=$(mktemp -d)
trap 'netns_down; rm -rf "$work"' EXIT INT TERM
netns_up 2
cd "$work"

# compare NAME SETS...: the config across 2 hosts (one rank each) and as 2
# replicas in one process give the same step losses, bit for bit.
compare() {
  local name=$1
  shift
  netns_mpirun -np 2 "$polyhal" run --config "$work/p.yaml" --set collective.engine=mpi \
    --metrics-out "$work/$name-hosts.jsonl" --progress none "$@" > "$work/$name-hosts.log" 2>&1 ||
    { tail -30 "$work/$name-hosts.log"; fail "$name: the run across 2 hosts failed"; }
  "$polyhal" run --config "$work/p.yaml" --set batch.replicas=2 \
    --metrics-out "$work/$name-local.jsonl" --progress none "$@" > "$work/$name-local.log" 2>&1 ||
    { tail -30 "$work/$name-local.log"; fail "$name: the run in one process failed"; }
  grep -q "replicas 2" "$work/$name-hosts.log" || fail "$name: not 2 replicas across hosts"
  grep -q "gradients all-reduced during backward (the ranks span several hosts)" \
    "$work/$name-hosts.log" || fail "$name: collective.overlap auto did not overlap across hosts"
  local a b
  a=$(losses "$work/$name-hosts.jsonl")
  b=$(losses "$work/$name-local.jsonl")
  [ -n "$a" ] || fail "$name: no steps"
  [ "$a" = "$b" ] || fail "$name: across hosts the losses differ from one process:
$(paste <(echo "$a") <(echo "$b"))"
  echo "ok: $name: $(echo "$a" | wc -l) steps, the same losses across 2 hosts as in one process"
}

cat > p.yaml << 'YAML'
backend: cpu
task: pretrain
model: {preset: tiny, seq_len: 32, precision: f32, vocab_size: 64, dropout: 0.1, num_hidden_layers: 4}
batch: {micro: 8, grad_accum: 2}
data: {source: pattern, seed: 3, max_predictions: 3}
optimizer: {name: lamb, learning_rate: 0.005}
collective: {timeout_seconds: 60}
steps: 5
YAML
compare data-parallel
compare pipelined --set 'model.pipeline=[[0, 1], [2, 3]]'
compare sharded --set optimizer.shard_state=true
"$polyhal" pack --input "$source_dir/tests/data/mlperf" --output "$work/packed" --max-seq-len 32 \
  > pack.log 2>&1 || { cat pack.log; fail "pack"; }
compare packed --set data.source=mlperf_hdf5 --set data.files="$work/packed" --set batch.micro=1 \
  --set batch.grad_accum=1 --set steps=2
# Bad input across hosts: each refused before any step, with mpirun's or
# polyhal's reason and exit code (docs/scale-out.md).
# refused NAME CODE TEXT MPIRUN_ARGS...: the job exits CODE, says TEXT, runs no step.
refused() {
  local name=$1 code=$2 text=$3
  shift 3
  netns_mpirun "$@" > "$work/$name.log" 2>&1
  local got=$?
  [ "$got" -eq "$code" ] || { cat "$work/$name.log"; fail "$name: exit $got, expected $code"; }
  grep -qF "$text" "$work/$name.log" || { cat "$work/$name.log"; fail "$name: no '$text'"; }
  grep -q "step 1" "$work/$name.log" && fail "$name: a step ran"
  echo "ok: $name: exit $code, \"$text\""
}
cp "$netns_work/hostfile" hosts.saved
echo "${netns_subnet}9 slots=1" >> "$netns_work/hostfile"  # no such host
refused unreachable-host 255 "ORTE was unable to reliably start one or more daemons" \
  -np 3 "$polyhal" run --config "$work/p.yaml" --set collective.engine=mpi --progress none
cp hosts.saved "$netns_work/hostfile"
refused too-many-replicas 1 "There are not enough slots available in the system" \
  -np 3 "$polyhal" run --config "$work/p.yaml" --set collective.engine=mpi --progress none
refused configs-differ 2 "rank 1's config differs from rank 0's in optimizer.learning_rate (rank 0: 0.005, rank 1: 0.01)" \
  -np 1 "$polyhal" run --config "$work/p.yaml" --set collective.engine=mpi --progress none : \
  -np 1 "$polyhal" run --config "$work/p.yaml" --set collective.engine=mpi --progress none \
  --set optimizer.learning_rate=0.01
echo "ok: multi-host runs over TCP between network namespaces"
