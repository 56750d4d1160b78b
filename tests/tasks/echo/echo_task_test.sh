#!/usr/bin/env bash
# The task `echo` comes from tests/tasks/echo/ alone. Its program (the
# launcher plus that folder) must accept it in validate, run, config show and
# config reference, with the reader's file:line errors for its keys; the
# plain `polyhal` must not know it.
#   echo_task_test.sh POLYHAL_ECHO POLYHAL
set -euo pipefail
echo_bin=$1
polyhal=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }

cat > echo.yaml <<'YAML'
backend: cpu
task: echo
model: {preset: tiny, seq_len: 16}
echo:
  message: hello from a task folder
  times: 3
  output: out/lines.txt
YAML
mkdir out

# config reference: the task's keys, with their defaults and its name.
"$echo_bin" config reference > reference.md
grep -q '^| `echo.times` | `1` | echo | how many times to write it |$' reference.md ||
  fail "config reference lacks echo.times: $(grep echo reference.md)"
grep -q '^| `echo.message` |' reference.md || fail "config reference lacks echo.message"
"$polyhal" config reference | grep -q 'echo\.' && fail "plain polyhal knows the echo task"

# validate: ok, with the task's own plan.
"$echo_bin" validate echo.yaml > validate.txt || fail "validate: $(cat validate.txt)"
grep -q 'ok (backend cpu, task echo; 3 line(s) of 25 bytes)' validate.txt ||
  fail "validate said: $(cat validate.txt)"

# config show: every key of the task with where it came from.
"$echo_bin" config show echo.yaml > show.txt
grep -Eq '^echo\.message: +hello from a task folder +# .*echo\.yaml:5$' show.txt ||
  fail "config show: $(grep echo show.txt)"
grep -Eq '^echo\.times: +3 +# .*echo\.yaml:6$' show.txt || fail "config show: times"
grep -Eq '^model\.preset: +tiny ' show.txt || fail "config show: model.preset"
grep -q '^optimizer\.' show.txt && fail "config show lists keys echo does not read"

# run: the lines on stdout, in the output file, and the summary in metrics.
"$echo_bin" run echo.yaml --metrics-out m.jsonl > run.txt
[ "$(grep -c '^hello from a task folder$' run.txt)" = 3 ] || fail "run printed: $(cat run.txt)"
[ "$(wc -l < out/lines.txt)" = 3 ] || fail "run wrote: $(cat out/lines.txt)"
tail -n 1 m.jsonl | grep -q '"task":"echo"' || fail "metrics: $(cat m.jsonl)"

# Errors name file, line and key, with the documented exit code 2.
expect_error() {  # expect_error NAME MESSAGE YAML...
  local name=$1 message=$2
  shift 2
  printf '%s\n' "$@" > "$name.yaml"
  set +e
  "$echo_bin" validate "$name.yaml" > /dev/null 2> "$name.err"
  local code=$?
  set -e
  [ "$code" = 2 ] || fail "$name: exit $code, not 2: $(cat "$name.err")"
  grep -qF -- "$message" "$name.err" || fail "$name: $(cat "$name.err")"
}
expect_error typo "typo.yaml:3: key 'echo.mesage': unknown key (did you mean 'echo.message'?)" \
  'backend: cpu' 'task: echo' 'echo: {mesage: hi}'
expect_error missing "key 'echo.message': required: the line to write" \
  'backend: cpu' 'task: echo' 'echo: {times: 2}'
expect_error range "range.yaml:3: key 'echo.times': expected an integer <= 1000, got 5000" \
  'backend: cpu' 'task: echo' 'echo: {message: hi, times: 5000}'
expect_error section "key 'echo': required by task echo" 'backend: cpu' 'task: echo'
expect_error unread "unread.yaml:4: key 'optimizer': not used by task echo" \
  'backend: cpu' 'task: echo' 'echo: {message: hi}' 'optimizer: {name: sgd}'
expect_error other "other.yaml:3: key 'echo': not used by task pretrain" \
  'backend: cpu' 'task: pretrain' 'echo: {message: hi}'
expect_error rule "key 'model.seq_len': echo needs at least 8" \
  'backend: cpu' 'task: echo' 'echo: {message: hi}' 'model: {seq_len: 4}'
expect_error output "key 'echo.output': $work/out is a directory, not a file" \
  'backend: cpu' 'task: echo' 'echo: {message: hi, output: out}'
echo "task echo: validate, run, config show and config reference all take it"
