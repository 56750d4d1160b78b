#!/usr/bin/env bash
# Is the oneDNN Graph API's fused attention faster than the CPU plugin's
# three primitives? Builds bench/onednn_graph_sdpa.cpp in the Debian 13 root
# (oneDNN 3.7; Debian 12's 2.6 has no Graph API) and prints one table: per
# shape, one BERT-base layer's attention (12 heads of 64) in ms, best of
# alternating runs, same threads. Needs root and scripts/debian13-root.sh's root.
#   sudo bench/onednn_graph_sdpa.sh [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
threads=${1:-$(nproc)}
root=$(scripts/debian13-root.sh)
mkdir -p "$root/tmp/polyhal-bench"
cp bench/onednn_graph_sdpa.cpp "$root/tmp/polyhal-bench/"
cpu=$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)
echo "One BERT-base attention layer (12 heads x 64), $threads threads, on $cpu; oneDNN 3.7 (Debian 13)"
echo
echo "| batch | seq | type | primitives ms | Graph API sdp ms | speed-up | max difference |"
echo "|---|---|---|---|---|---|---|"
OMP_NUM_THREADS=$threads scripts/debian13-run.sh bash -c '
  set -e
  cd /tmp/polyhal-bench
  g++ -O2 -std=c++20 -Wall -Wextra -Werror onednn_graph_sdpa.cpp -o onednn_graph_sdpa -ldnnl
  for shape in "1 128" "8 128" "1 384" "8 384"; do
    for type in f32 bf16; do ./onednn_graph_sdpa $shape $type; done
  done'
