#!/bin/sh
# The peers of bench/serve_bench.py, pinned, in a virtual environment under
# the build folder (never in the default test run): infinity-emb 0.0.78 (the
# newest on the Python Package Index) with its "all" extra, which brings its
# optimum/ONNX Runtime and PyTorch engines and pins sentence-transformers
# 3.4.1, torch 2.8.0 and transformers 4.57, which bench/st_server.py uses
# too. PyTorch's wheel links CUDA's libraries (several GB, unused here).
# The load generator is Debian's: apt-get install wrk.
set -eu
BUILD=${1:-build}
python3 -m venv "$BUILD/serve-bench-venv"
"$BUILD/serve-bench-venv/bin/pip" install -q --upgrade pip
"$BUILD/serve-bench-venv/bin/pip" install -q "infinity-emb[all]==0.0.78" onnxruntime==1.32.0 \
  optimum==2.1.0 sentence-transformers==3.4.1 torch==2.8.0
echo "serve peers ready: $BUILD/serve-bench-venv/bin/python bench/serve_bench.py --build $BUILD"
