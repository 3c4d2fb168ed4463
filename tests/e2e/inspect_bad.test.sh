#!/usr/bin/env bash
# oxinfer inspect on every malformed input in tests/data/bad (made by tests/data/make_corpus.py):
# each must exit 1 with exactly one line "error: ..." on stderr, nothing on stdout, within 10 s and
# 1 GiB of address space (no crash, hang or giant allocation). The good files must inspect fine.
set -u
OXINFER="${OXINFER:?set OXINFER to the oxinfer binary}"
DATA="$(cd "$(dirname "$0")/../data" && pwd)"
WORK="${OXI_WORK_DIR:-/tmp/oxi-inspect-bad}"
mkdir -p "$WORK"
fail=0
n=0
for f in "$DATA"/bad/*; do
  n=$((n + 1))
  name="$(basename "$f")"
  ( ulimit -v 1048576; exec timeout 10 "$OXINFER" inspect "$f" ) >"$WORK/out" 2>"$WORK/err"
  rc=$?
  lines=$(wc -l <"$WORK/err")
  if [ "$rc" -ne 1 ]; then
    echo "FAIL $name: exit code $rc (want 1)"; head -c 600 "$WORK/err"; fail=1; continue
  fi
  if [ "$lines" -ne 1 ] || ! head -n1 "$WORK/err" | grep -q '^error: '; then
    echo "FAIL $name: stderr is not one 'error:' line:"; head -c 600 "$WORK/err"; fail=1; continue
  fi
  if grep -qi 'bad_alloc\|out of memory' "$WORK/err"; then
    echo "FAIL $name: ran out of memory: $(cat "$WORK/err")"; fail=1; continue
  fi
  if [ -s "$WORK/out" ]; then
    echo "FAIL $name: wrote to stdout"; fail=1; continue
  fi
  if ! grep -qF "$name" "$WORK/err"; then
    echo "FAIL $name: error does not name the file: $(cat "$WORK/err")"; fail=1
  fi
done
[ "$n" -ge 90 ] || { echo "FAIL: only $n bad cases (run tests/data/make_corpus.py)"; fail=1; }

for f in "$DATA"/good/independent.gguf "$DATA"/good/independent.safetensors; do
  if ! "$OXINFER" inspect "$f" >/dev/null 2>"$WORK/err"; then
    echo "FAIL good $(basename "$f"): $(cat "$WORK/err")"; fail=1
  fi
  if ! "$OXINFER" inspect "$f" --json | node -e 'const j=JSON.parse(require("fs").readFileSync(0,"utf8")); if(typeof j.tensor_count!=="number") process.exit(1)'; then
    echo "FAIL good $(basename "$f"): --json is not one JSON object"; fail=1
  fi
done
# Usage errors: exit non-zero, one line.
for args in "" "--bogus x" "a b"; do
  # shellcheck disable=SC2086
  "$OXINFER" inspect $args >/dev/null 2>"$WORK/err"
  rc=$?
  if [ "$rc" -eq 0 ] || [ "$(wc -l <"$WORK/err")" -ne 1 ]; then
    echo "FAIL usage '$args': rc $rc, stderr: $(cat "$WORK/err")"; fail=1
  fi
done
[ "$fail" -eq 0 ] && echo "inspect_bad: $n bad cases ok"
exit "$fail"
