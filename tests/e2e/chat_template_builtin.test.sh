#!/usr/bin/env bash
# `--chat-template NAME`: every built-in name oxinfer ships renders byte for byte what llama.cpp's
# built-in renderer (llama_chat_apply_template in node-llama-cpp's libllama, through ctypes:
# tests/e2e/lib/llama_chat_builtin.py) renders, for eight conversations (system / user /
# assistant, multi-turn, whitespace at the ends, system only, no system, two systems, an
# assistant turn last, non-ASCII), with and without the generation prompt. An unknown name is a
# usage error listing the names.
set -euo pipefail
: "${OXINFER:?}"
WORK="${OXI_WORK_DIR:-$(mktemp -d)}"
mkdir -p "$WORK"
echo '[{"role":"user","content":"hi"}]' > "$WORK/m.json"

# The names, from the unknown-name error (so a name added later is tested without editing this).
set +e
err=$("$OXINFER" chat --template-only --chat-template no-such-template --messages "$WORK/m.json" 2>&1 >/dev/null)
rc=$?
set -e
[ "$rc" -ne 0 ] || { echo "FAIL: an unknown template name was accepted"; exit 1; }
echo "$err" | grep -q "not a built-in template name" || { echo "FAIL: unclear error: $err"; exit 1; }
names=$(echo "$err" | sed -n 's/.*built-in names: \(.*\))$/\1/p' | tr -d ',')
for want in chatml llama2 llama3 gemma mistral-v7 phi3 phi4 zephyr deepseek3 command-r; do
  echo " $names " | grep -q " $want " || { echo "FAIL: '$want' is not among the built-in names: $names"; exit 1; }
done
echo "built-in names: $names"

# An empty value and serve / run share the same resolution (args.cpp chat_template_source).
set +e
err=$("$OXINFER" chat --template-only --chat-template "" --messages "$WORK/m.json" 2>&1 >/dev/null)
set -e
echo "$err" | grep -q "needs a template name" || { echo "FAIL: empty --chat-template: $err"; exit 1; }

# shellcheck disable=SC2086
python3 tests/e2e/lib/llama_chat_builtin.py "$OXINFER" "$WORK" $names
echo "PASS"
