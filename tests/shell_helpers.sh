# Sourced by the shell tests (tests/*_test.sh): what they all need.

# fail MESSAGE: the test fails with MESSAGE.
fail() {
  echo "FAIL: $*"
  exit 1
}

# losses METRICS_FILE: its step losses, "step loss" per line (the loss
# exactly, as Python's repr prints it).
losses() {
  python3 -c 'import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("event") == "step": print(r["step"], repr(r["loss"]))' "$1"
}
