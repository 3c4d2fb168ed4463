#!/usr/bin/env bash
# Issue 29 #2 and issue 31 #5 regression tests for the CLI (each failed before its fix):
#   a config.json (or a messages file) nested 80,000 levels → one "error:" line, exit 1, fast
#   (was SIGSEGV in a recursive copy); an unknown option at the end of the line →
#   "unknown option X", exit 2 (was "option X needs a value"); a known option missing its value
#   still says "needs a value"; #12: serve --max-body-bytes -1 is a usage error (was "no limit").
set -u
OXINFER="${OXINFER:?set OXINFER to the oxinfer binary}"
WORK="${OXI_WORK_DIR:-/tmp/oxi-cli-hardening}"
rm -rf "$WORK"
mkdir -p "$WORK/deep"
fail=0

python3 - "$WORK/deep" <<'PY'
import struct, sys
d = sys.argv[1]
deep = "[" * 80000 + "]" * 80000
open(f"{d}/config.json", "w").write('{"architectures": ["Qwen3_5ForCausalLM"], "x": ' + deep + "}")
h = b'{"__metadata__":{}}'
h += b" " * ((8 - len(h) % 8) % 8)
open(f"{d}/model.safetensors", "wb").write(struct.pack("<Q", len(h)) + h)
PY

expect() {  # expect RC PATTERN -- command...
  local want_rc="$1" pattern="$2"; shift 3
  ( ulimit -v 4194304; exec timeout 20 "$@" ) >"$WORK/out" 2>"$WORK/err"
  local rc=$?
  if [ "$rc" -ne "$want_rc" ]; then
    echo "FAIL $*: exit $rc (want $want_rc): $(head -c 300 "$WORK/err")"; fail=1; return
  fi
  if [ "$(wc -l <"$WORK/err")" -ne 1 ] || ! grep -q "^error: .*$pattern" "$WORK/err"; then
    echo "FAIL $*: stderr is not one 'error: ...$pattern' line: $(head -c 300 "$WORK/err")"; fail=1; return
  fi
  echo "ok   $*"
}

expect 1 "config.json: JSON nested deeper than 512 levels" -- "$OXINFER" inspect "$WORK/deep"
expect 1 "config.json: JSON nested deeper than 512 levels" -- "$OXINFER" run -m "$WORK/deep" -p hi -n 1

# A messages file nested as deep (chat --template-only reads it itself).
deep_msgs="$WORK/deep_msgs.json"
python3 -c "import sys; open(sys.argv[1], 'w').write('[{\"role\":\"user\",\"content\":\"hi\",\"x\":' + '[' * 80000 + ']' * 80000 + '}]')" "$deep_msgs"
printf '{{ messages[0].content }}' >"$WORK/t.jinja"
expect 1 "nested deeper than 512 levels" -- "$OXINFER" chat --template-only --chat-template-file "$WORK/t.jinja" --messages "$deep_msgs"

# Usage errors: the unknown name wins over "needs a value" when it is the last argument.
expect 2 "unknown option --jinja" -- "$OXINFER" run -m "$WORK/deep" -p hi --jinja
expect 2 "unknown option --definitely-not-an-option" -- "$OXINFER" run -m "$WORK/deep" -p hi --definitely-not-an-option
expect 2 "option -n needs a value" -- "$OXINFER" run -m "$WORK/deep" -p hi -n

# Issue 29 #12: serve's option checks come before any model work.
expect 2 "max-body-bytes must be at least 1" -- "$OXINFER" serve -m "$WORK/deep" --max-body-bytes -1
expect 2 "not both" -- "$OXINFER" serve -m "$WORK/deep" --api-key a --api-key-file "$WORK/t.jinja"

exit $fail
