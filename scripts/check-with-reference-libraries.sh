#!/usr/bin/env bash
# Files polyhal writes, opened by the libraries users already have
# (tests/reference_libraries/check_exports.py): the pre-training and
# fine-tuned exports with transformers (no missing or unexpected keys, the
# same logits), AutoTokenizer, the safetensors library, TensorBoard events
# through tbparse, prepare-data and pack files through h5py. Then polyhal's
# tokenizer against BertTokenizerFast and BertTokenizer on 12 MB of varied
# text the machine ships (tests/reference_libraries/compare_tokenizers.py:
# identical ids to BertTokenizerFast on every line, each difference from
# BertTokenizer explained). Then `polyhal convert` of the TensorFlow fixture,
# loaded by transformers (check_converted.py). Then runs reaching Weights &
# Biases, offline (check_wandb.py). The same environment makes the real-model
# references (tests/data/real_model/make_reference.py) and, with
# --write-sample tests/data/tokenizer, the tokenizer regression sample.
#
#   scripts/check-with-reference-libraries.sh [BUILD_DIR]
#
# Not part of scripts/test.sh: it needs PyTorch (Debian's python3-torch 1.13,
# installed here when missing) and a few hundred MB of Python packages, too
# much for every CI run. It takes about three minutes once set up.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
venv=$build/ref-venv
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get install -y python3-torch python3-venv python3-pip
fi
if [ ! -x "$venv/bin/python" ]; then
  /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
# Pinned: the versions the committed references and docs/bert.md name.
"$venv/bin/pip" install --disable-pip-version-check -q \
  transformers==4.38.2 tokenizers==0.15.2 safetensors==0.4.2 numpy==1.24.4 scipy==1.10.1 \
  scikit-learn==1.2.2 sentence-transformers==2.6.1 tbparse==0.0.8 tensorboard==2.15.2 \
  pandas==2.0.3 h5py==3.10.0 wandb==0.31.0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$venv/bin/python" "$root/tests/reference_libraries/check_exports.py" \
  "$build/launcher/polyhal" "$root" "$work"
"$venv/bin/python" "$root/tests/reference_libraries/compare_tokenizers.py" \
  "$build/tests/tokenize_lines" "$build/models/all-MiniLM-L6-v2"
"$venv/bin/python" "$root/tests/reference_libraries/check_converted.py" \
  "$build/launcher/polyhal" "$root" "$work"
"$venv/bin/python" "$root/tests/reference_libraries/check_wandb.py" \
  "$build/launcher/polyhal" "$work/wandb-check"
