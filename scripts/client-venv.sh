#!/usr/bin/env bash
# The HTTP clients `polyhal serve` is tested with (tests/serve_clients.py and
# serve_openapi.py, run by the serve tests when this venv exists), pinned, in
# BUILD_DIR/client-venv: the official openai client, requests,
# huggingface_hub's InferenceClient (with numpy, which it returns arrays in),
# the cohere client, LangChain's OpenAI embeddings, and
# jsonschema for the OpenAPI check. About 60 MB from the Python Package
# Index; a second run finds them and does nothing.
#
#   scripts/client-venv.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
venv=$build/client-venv
pins=(openai==3.51.0 requests==2.34.2 huggingface_hub==2.4.0 numpy==2.4.6 cohere==7.3.1
  langchain-openai==1.8.1 jsonschema==4.26.0)
stamp=$venv/pins.txt
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2> /dev/null)" = "${pins[*]}" ]; then
  echo "client-venv: $venv (cached)"
  exit 0
fi
python3 -m venv "$venv"
"$venv/bin/pip" install --disable-pip-version-check -q "${pins[@]}"
echo "${pins[*]}" > "$stamp"
echo "client-venv: $venv (${pins[*]})"
