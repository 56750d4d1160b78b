#!/usr/bin/env bash
# Sets everything up and runs the main job on the CPU plugin. No data or
# weights are downloaded: inputs are generated.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/install-deps.sh"
"$root/scripts/build.sh"
exec "${POLYHAL_BUILD_DIR:-$root/build}/launcher/polyhal" run --config "$root/configs/bert-demo-cpu.yaml" "$@"
