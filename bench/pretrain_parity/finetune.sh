#!/usr/bin/env bash
# Fine-tuning parity: the models run.sh pre-trained (polyhal's export and the
# reference's save_pretrained directory, in OUT), each fine-tuned by polyhal
# (task glue) and by transformers (reference_finetuner.py) on a GLUE-format
# task built from real text (make_glue_task.py: networking or filesystems
# documentation, SST-2's TSV layout), from the same classifier drawn per seed
# (docs/pretraining.md, "Trains like the reference").
#
#   bench/pretrain_parity/finetune.sh [--out DIR] [--precisions "f32 bf16"]
#       [--seeds "1 2 3"] [--epochs 2] [--polyhal BIN]
#
# Run bench/pretrain_parity/run.sh with the same --out first. Writes
# OUT/finetune-PRECISION/*.jsonl, OUT/finetune.json and OUT/finetune.png;
# exits 1 when a comparison misses the test (compare_finetune.py).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${POLYHAL_BUILD_DIR:-$root/build}
precisions="f32 bf16" seeds="1 2 3" epochs=2
out=$build/pretrain-parity polyhal=$build/launcher/polyhal
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --precisions) precisions=$2; shift 2 ;;
    --seeds) seeds=$2; shift 2 ;;
    --epochs) epochs=$2; shift 2 ;;
    --polyhal) polyhal=$2; shift 2 ;;
    *) echo "finetune.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
python=$build/peer-venv/bin/python
here=$root/bench/pretrain_parity
vocab=$build/models/all-MiniLM-L6-v2/vocab.txt
cd "$out"
[ -f glue/train.tsv ] || /usr/bin/python3 "$here/make_glue_task.py" glue
seq=64 batch=32 lr=1.0e-4
train_rows=$(($(wc -l < glue/train.tsv) - 1))
warmup=$((train_rows / batch * epochs / 10))
runs=()
for precision in $precisions; do
  dir=finetune-$precision
  mkdir -p "$dir"
  for source in polyhal reference; do
    pretrained=$source-$precision
    [ "$source" = polyhal ] && pretrained=polyhal-$precision/hf
    if [ ! -f "$pretrained/model.safetensors" ]; then
      echo "finetune.sh: $pretrained/model.safetensors is missing: run run.sh --precisions $precision --out $out first" >&2
      exit 2
    fi
    for seed in $seeds; do
      init=$dir/init-$source-$seed
      [ -f "$init/model.safetensors" ] || "$python" "$here/reference_finetuner.py" \
        --write-init "$init" --init "$pretrained" --seed "$seed" > /dev/null 2>&1
      name=$dir/polyhal-on-$source-$seed
      rm -rf "$name"
      cat > "$name.yaml" <<YAML
backend: cpu
task: glue
model: {seq_len: $seq, precision: $precision, dropout: 0.1, seed: $seed}
batch: {micro: $batch}
data: {vocab: $vocab, lower_case: true, shuffle: false}
optimizer: {name: adamw, learning_rate: $lr, warmup_steps: $warmup, weight_decay: 0.01, max_grad_norm: 1.0}
checkpoint: {init: $init}
finetune: {glue_task: sst-2, train_file: glue/train.tsv, eval_file: glue/dev.tsv, epochs: $epochs, eval_batch: 128, output_dir: $name}
YAML
      "$polyhal" run "$name.yaml" --progress none --metrics-out "$name.jsonl" 2>&1 |
        grep -E "^eval after" || true
      "$python" "$here/reference_finetuner.py" --init "$init" --train glue/train.tsv \
        --dev glue/dev.tsv --vocab "$vocab" --seq $seq --epochs "$epochs" --batch $batch \
        --lr $lr --warmup $warmup --seed "$seed" --precision "$precision" \
        --metrics "$dir/reference-on-$source-$seed.jsonl" 2> /dev/null
    done
  done
  runs+=(--run "$precision" "$dir")
done
"$python" "$here/compare_finetune.py" "${runs[@]}" --seeds $seeds --png finetune.png --json finetune.json
