#!/usr/bin/env bash
# `oxinfer chat --template-only` renders the four real chat templates exactly like Python jinja2
# configured as transformers configures it (tests/chat/render_ref.py, the reference, run here).
set -euo pipefail
: "${OXINFER:?}" "${OXI_SHARED_DIR:?}"
WORK="${OXI_WORK_DIR:-$(mktemp -d)}"
mkdir -p "$WORK"
REF="python3 tests/chat/render_ref.py"
python3 -c 'import jinja2' 2>/dev/null || { echo "SKIP: python3-jinja2 missing"; exit 0; }

# Split the shared conversation cases into one messages file (+ tools file) per case.
python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
for c in json.load(open("tests/chat/data/conversations.json", encoding="utf-8")):
    json.dump(c["messages"], open(f"{work}/{c['name']}.messages.json", "w"), ensure_ascii=False)
    if "tools" in c:
        json.dump(c["tools"], open(f"{work}/{c['name']}.tools.json", "w"), ensure_ascii=False)
PY
names=$(python3 -c 'import json; print(" ".join(c["name"] for c in json.load(open("tests/chat/data/conversations.json"))))')

fail=0; n=0
for tmpl in "$OXI_SHARED_DIR"/testdata/templates/*.jinja; do
  for name in $names; do
    for variant in "" "--no-generation-prompt --enable-thinking false"; do
      args=(--messages "$WORK/$name.messages.json" --bos-token "<bos>")
      [ -f "$WORK/$name.tools.json" ] && args+=(--tools "$WORK/$name.tools.json")
      # shellcheck disable=SC2206
      extra=($variant)
      set +e
      $REF "$tmpl" "${args[@]}" "${extra[@]}" > "$WORK/ref.txt" 2> "$WORK/ref.err"; rc_ref=$?
      "$OXINFER" chat --template-only --chat-template-file "$tmpl" "${args[@]}" "${extra[@]}" > "$WORK/ours.txt" 2> "$WORK/ours.err"; rc_ours=$?
      set -e
      n=$((n + 1))
      if [ $rc_ref -ne 0 ]; then
        if [ $rc_ours -ne 1 ] || ! grep -q '^error: ' "$WORK/ours.err"; then
          echo "FAIL $(basename "$tmpl") $name [$variant]: reference raised ($(cat "$WORK/ref.err")), we exited $rc_ours"
          fail=1
        fi
      elif [ $rc_ours -ne 0 ] || ! cmp -s "$WORK/ref.txt" "$WORK/ours.txt"; then
        echo "FAIL $(basename "$tmpl") $name [$variant]: output differs (rc=$rc_ours)"
        diff <(cat -A "$WORK/ref.txt") <(cat -A "$WORK/ours.txt") | head -20 || true
        fail=1
      fi
    done
  done
done
echo "compared $n renders"

# Usage and error behaviour.
set +e
"$OXINFER" chat --template-only --chat-template-file "$OXI_SHARED_DIR/testdata/templates/Qwen3.5-4B.jinja" > /dev/null 2>&1
[ $? -eq 2 ] || { echo "FAIL: missing --messages should exit 2"; fail=1; }
printf '{%% if %%}' > "$WORK/bad.jinja"
"$OXINFER" chat --template-only --chat-template-file "$WORK/bad.jinja" --messages "$WORK/simple_system.messages.json" 2> "$WORK/err.txt" > /dev/null
[ $? -eq 1 ] && grep -q '^error: chat template: line 1' "$WORK/err.txt" || { echo "FAIL: bad template should exit 1 with a line number"; cat "$WORK/err.txt"; fail=1; }
echo '[{"role": "user"' > "$WORK/badjson.json"
"$OXINFER" chat --template-only --chat-template-file "$WORK/bad.jinja" --messages "$WORK/badjson.json" > /dev/null 2>&1
[ $? -eq 1 ] || { echo "FAIL: bad messages JSON should exit 1"; fail=1; }
set -e
exit $fail
