#!/usr/bin/env bash
# The HTTP clients `polyhal serve` is tested with (tests/serve_clients.py,
# run by ctest serve_http when this venv exists): the official openai
# client and requests, pinned, in BUILD_DIR/client-venv. About 10 MB from the
# Python Package Index; a second run finds them and does nothing.
#
#   scripts/client-venv.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
venv=$build/client-venv
pins=(openai==3.51.0 requests==2.34.2)
if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import openai, requests" 2> /dev/null &&
  [ "$("$venv/bin/python" -c 'import openai; print(openai.__version__)')" = 3.51.0 ]; then
  echo "client-venv: $venv (cached)"
  exit 0
fi
python3 -m venv "$venv"
"$venv/bin/pip" install --disable-pip-version-check -q "${pins[@]}"
echo "client-venv: $venv (${pins[*]})"
