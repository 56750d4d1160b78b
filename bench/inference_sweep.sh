#!/usr/bin/env bash
# Micro-batch sweep of the seeds' SQuAD-shaped (seq 128) BERT inference
# benchmark on every backend. CPU figures are measured here; IPU and Gaudi
# figures are device-model estimates (--compile-only: the model is prepared
# and its memory planned, nothing is simulated), and say so.
#   bench/inference_sweep.sh [base|large] [build-dir]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
preset=${1:-base}
build=${2:-$root/build}
polyhal=$build/launcher/polyhal
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "BERT-$preset, seq 128, generated data"
echo
echo "| backend | micro-batch | sequences/s | kind | fits |"
echo "|---|---|---|---|---|"
for backend in cpu ipu gaudi; do
  config=$root/configs/inference-bert-$preset-seq128-$backend.yaml
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
