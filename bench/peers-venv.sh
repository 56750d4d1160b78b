#!/bin/sh
# The peers of bench/peers_bench.py at pinned versions, in two virtual
# environments under the build folder (never in the default test run):
#   BUILD/peer-venv  OpenVINO + NNCF, ONNX Runtime, PyTorch (newest), transformers,
#                    sentence-transformers (bench/text_embedding_speed.py)
#   BUILD/ipex-venv  Intel Extension for PyTorch with the PyTorch it is built for
# PyTorch's Linux wheels on the Python Package Index link CUDA's libraries
# (several GB, installed with it, unused here: there is no GPU).
set -eu
BUILD=${1:-build}
python3 -m venv "$BUILD/peer-venv"
"$BUILD/peer-venv/bin/pip" install -q --upgrade pip
"$BUILD/peer-venv/bin/pip" install -q openvino==2026.4.1 nncf==3.4.0 onnxruntime==1.31.1 onnx==1.23.2 \
  "numpy<2.4" safetensors tokenizers transformers==5.23.0 torch==2.15.0 sentence-transformers==6.2.0
python3 -m venv "$BUILD/ipex-venv"
"$BUILD/ipex-venv/bin/pip" install -q --upgrade pip
# IPEX 2.8 is built for PyTorch 2.8 and loads with no other.
"$BUILD/ipex-venv/bin/pip" install -q numpy psutil packaging safetensors transformers==4.56.2 \
  torch==2.8.0 intel-extension-for-pytorch==2.8.0
echo "peers ready: $BUILD/peer-venv/bin/python bench/peers_bench.py --build $BUILD"
