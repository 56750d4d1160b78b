#!/usr/bin/env bash
# Pre-training parity: polyhal against Hugging Face transformers on real
# prose, same data, initial weights, masking, batches, schedule and optimizer
# (docs/pretraining.md, "Trains like the reference").
#
#   bench/pretrain_parity/run.sh [--steps 2000] [--batch 16] [--dropout 0.1]
#       [--precisions "f32 bf16"] [--eval-every 200] [--out DIR] [--polyhal BIN]
#
# 1. text: the Linux kernel's documentation from Debian's linux-doc-6.1
#    (installed when missing), one sentence per line (make_corpus.py);
# 2. vocabulary: bert-base-uncased's (scripts/fetch-real-model.sh);
# 3. polyhal prepare-data: MLPerf HDF5, seq 128, 20 predictions, dupe 2;
# 4. the initial weights: transformers' BertForPreTraining(BERT-mini), seed 1;
# 5. per precision, polyhal pretrain and reference_trainer.py (the peer venv
#    of bench/peers-venv.sh, PyTorch and transformers from the Python Package
#    Index, plus h5py and matplotlib);
# 6. compare.py: the table, OUT/parity.json and OUT/parity.png; exit 1 when
#    a run misses the test.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${POLYHAL_BUILD_DIR:-$root/build}
steps=2000 batch=16 dropout=0.1 precisions="f32 bf16" eval_every=200
out=$build/pretrain-parity polyhal=$build/launcher/polyhal
while [ $# -gt 0 ]; do
  case $1 in
    --steps) steps=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --dropout) dropout=$2; shift 2 ;;
    --precisions) precisions=$2; shift 2 ;;
    --eval-every) eval_every=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --polyhal) polyhal=$2; shift 2 ;;
    *) echo "run.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
python=$build/peer-venv/bin/python
[ -x "$python" ] || sh "$root/bench/peers-venv.sh" "$build"
"$build/peer-venv/bin/pip" install -q --disable-pip-version-check h5py==3.16.0 matplotlib==3.11.2
docs=/usr/share/doc/linux-doc-6.1/Documentation
if [ ! -d "$docs" ]; then
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get install -y --no-install-recommends linux-doc-6.1
fi
"$root/scripts/fetch-real-model.sh" "$build" > /dev/null
vocab=$build/models/all-MiniLM-L6-v2/vocab.txt
mkdir -p "$out"
cd "$out"
here=$root/bench/pretrain_parity
[ -f text/train.txt ] || /usr/bin/python3 "$here/make_corpus.py" text
for split in train eval; do
  dupe=$([ $split = train ] && echo 2 || echo 1)
  [ -d "${split}_hdf5" ] || "$polyhal" prepare-data --input "text/$split.txt" --vocab "$vocab" \
    --output "${split}_hdf5" --max-seq-len 128 --max-predictions 20 --dupe-factor "$dupe" \
    --progress none
done
[ -f init/model.safetensors ] || "$python" "$here/reference_trainer.py" --write-init init \
  --preset mini --seed 1 --dropout "$dropout"
lr=0.002 warmup=$((steps / 10))
runs=()
for precision in $precisions; do
  cat > "polyhal-$precision.yaml" <<YAML
backend: cpu
task: pretrain
model: {hf_config: init/config.json, seq_len: 128, precision: $precision, dropout: $dropout}
batch: {micro: $batch}
data: {source: mlperf_hdf5, files: train_hdf5, shuffle: false}
optimizer: {name: lamb, learning_rate: $lr, warmup_steps: $warmup, weight_decay: 0.01}
eval: {files: eval_hdf5, every_steps: $eval_every, micro: 64}
checkpoint: {init: init, dir: polyhal-$precision}
steps: $steps
log: {every: 100}
YAML
  rm -rf "polyhal-$precision" "reference-$precision"
  start=$(date +%s)
  "$polyhal" run "polyhal-$precision.yaml" --progress lines --metrics-out "polyhal-$precision.jsonl" \
    2>&1 | grep -E "eval after|done:" || true
  echo "polyhal $precision: $(( $(date +%s) - start )) s"
  start=$(date +%s)
  "$python" "$here/reference_trainer.py" --init init --train train_hdf5 --eval eval_hdf5 \
    --steps "$steps" --batch "$batch" --lr $lr --warmup $warmup --dropout "$dropout" \
    --eval-every "$eval_every" --precision "$precision" --metrics "reference-$precision.jsonl" \
    --save "reference-$precision"
  echo "transformers $precision: $(( $(date +%s) - start )) s"
  runs+=(--run "$precision" "polyhal-$precision.jsonl" "reference-$precision.jsonl")
done
"$python" "$here/compare.py" "${runs[@]}" --png parity.png --json parity.json
