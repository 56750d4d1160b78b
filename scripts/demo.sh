#!/usr/bin/env bash
# Sets up what the main job needs and runs it on the CPU plugin. No data or
# weights are downloaded: inputs are generated. On a fresh Debian 12 root
# with 2 cores this took 5 minutes in all (README.md); run again, seconds.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
echo "demo: installs the Debian packages a build of polyhal's launcher and CPU plugin needs" \
  "(if missing), builds them, and runs BERT-mini inference on this CPU: about 5 minutes" \
  "on 2 cores the first time, seconds after that. The test suite and the other backends:" \
  "scripts/build.sh after scripts/install-deps.sh."
"$root/scripts/install-deps.sh" demo
"$root/scripts/build.sh" --demo
exec "${POLYHAL_BUILD_DIR:-$root/build}/launcher/polyhal" run --config "$root/configs/bert-demo-cpu.yaml" "$@"
