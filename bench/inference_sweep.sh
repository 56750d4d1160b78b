#!/usr/bin/env bash
# Micro-batch sweep of the seeds' BERT inference benchmarks on every
# backend: the encoder at seq 128 (configs/inference-bert-*), or with
# `squad` the SQuAD benchmark with its qa_outputs head at seq 128 or 384
# (configs/squad-inference-bert-*). CPU figures are measured here; IPU and
# Gaudi figures are device-model estimates (--compile-only: the model is
# prepared and its memory planned, nothing is simulated), and say so.
#   bench/inference_sweep.sh [base|large] [build-dir] [encoder|squad] [128|384]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
preset=${1:-base}
build=${2:-$root/build}
kind=${3:-encoder}
seq=${4:-128}
case $kind in
  encoder) family=inference ;;
  squad) family=squad-inference ;;
  *) echo "inference_sweep: expected encoder or squad, got $kind" >&2; exit 2 ;;
esac
polyhal=$build/launcher/polyhal
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "BERT-$preset ($kind), seq $seq, generated data"
echo
echo "| backend | micro-batch | sequences/s | kind | fits |"
echo "|---|---|---|---|---|"
for backend in cpu ipu gaudi; do
  config=$root/configs/$family-bert-$preset-seq$seq-$backend.yaml
  [ -f "$config" ] || { echo "inference_sweep: no $config" >&2; exit 2; }
  for micro in 1 2 4 8 16 32; do
    args=(run --config "$config" --set batch.micro=$micro --metrics-out "$tmp/m.jsonl")
    [ "$backend" = cpu ] || args+=(--compile-only)
    "$polyhal" "${args[@]}" > /dev/null 2>&1 || true
    tail -n 1 "$tmp/m.jsonl" | /usr/bin/python3 -c '
import json, sys
m = json.loads(sys.stdin.read())
measured = m.get("sequences_per_second")
value, kind = (measured, "measured") if measured else (m.get("estimated_sequences_per_second"), "estimated (device model)")
print("| %s | %d | %s | %s | %s |" % (m["backend"] + " " + m["device"], m["global_batch"],
      "%.1f" % value if value else "-", kind, "yes" if m["fits"] else "no"))'
  done
done
