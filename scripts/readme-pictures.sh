#!/usr/bin/env bash
# Makes the README's pictures of polyhal's reports from real runs (about 2
# minutes): the run report of two demo pre-training runs, the memory page of
# BERT-Large phase 1 on the IPU-POD16 model, a measured step trace of
# BERT-base training on this CPU and an estimated one of the pipelined IPU
# run. Needs a build (scripts/build.sh), chromium (Debian's package) and
# matplotlib (build/peer-venv has it, or PYTHON=... with it installed).
#   bash scripts/readme-pictures.sh    # writes docs/images/*.png
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${POLYHAL_BUILD_DIR:-$root/build}
polyhal=$build/launcher/polyhal
python=${PYTHON:-$build/peer-venv/bin/python}
out=$root/docs/images
command -v chromium > /dev/null || { echo "readme-pictures: needs chromium (apt install chromium)"; exit 1; }
"$python" -c "import matplotlib" 2> /dev/null ||
  { echo "readme-pictures: $python has no matplotlib (pip install matplotlib, or set PYTHON)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
shot() {  # shot PAGE PNG HEIGHT
  chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size="1200,$3" \
    --screenshot="$2" "file://$1" 2> /dev/null
}
run() {
  "$polyhal" "$@" --progress none > /dev/null 2>> "$work/runs.log" || { tail -20 "$work/runs.log"; exit 1; }
}

# The run report: the demo pre-training at two learning rates, overlaid.
run run "$root/configs/pretrain-demo-cpu.yaml" --set checkpoint.dir=a --metrics-out lr-0.005.jsonl
run run "$root/configs/pretrain-demo-cpu.yaml" --set checkpoint.dir=b \
  --set optimizer.learning_rate=0.002 --metrics-out lr-0.002.jsonl
"$polyhal" report lr-0.005.jsonl lr-0.002.jsonl --output report.html > /dev/null
shot "$work/report.html" "$out/run-report.png" 1100

# The memory page of a pipelined IPU plan.
run run "$root/configs/pretrain-bert-large-phase1-ipu.yaml" --compile-only --report memory
shot "$work/memory/memory.html" "$out/memory-report-ipu.png" 1000

# Step traces: measured on this CPU (step 2 of BERT-base, bf16, micro-batch 8
# x 2), and the IPU model's estimated 1F1B timeline with 8 micro-batches.
run run "$root/configs/pretrain-bert-base-phase1-cpu.yaml" --set batch.micro=8 \
  --set batch.grad_accum=2 --set steps=3 --set checkpoint.dir=c --profile 2 \
  --profile-out cpu-trace.json
"$python" "$root/scripts/trace_picture.py" cpu-trace.json "$out/trace-bert-base-cpu.png" \
  --zoom "$("$python" - cpu-trace.json <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
x = [e for e in t["traceEvents"] if e.get("ph") == "X"]
start = min(e["ts"] for e in x)
b = min(e["ts"] for e in x if e["name"] == "backward")  # the first backward's first layers
print(f"{(b - start) / 1e3:.1f}:{(b - start) / 1e3 + 90:.1f}")
PY
)" --title "BERT-base pre-training step 2 on this CPU (bf16, 2 micro-batches of 8): measured"
run run "$root/configs/pretrain-bert-large-phase1-ipu.yaml" --compile-only \
  --set batch.grad_accum=8 --profile 1 --profile-out ipu-trace.json
"$python" "$root/scripts/trace_picture.py" ipu-trace.json "$out/trace-bert-large-ipu.png" \
  --title "BERT-Large phase 1 on the IPU-POD16 model, 4 stages, 8 micro-batches: estimated"
python3 "$root/scripts/trace_summary.py" cpu-trace.json
echo "readme-pictures: wrote $out/{run-report,memory-report-ipu,trace-bert-base-cpu,trace-bert-large-ipu}.png"
