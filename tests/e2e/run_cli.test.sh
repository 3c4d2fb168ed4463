#!/usr/bin/env bash
# End-to-end tests of `oxinfer run`: the --json contract, --tokens vs -p (chat template), greedy and
# seeded determinism, context refusal / context-full stop, --grammar, flag errors and exit codes. Uses a
# synthetic Qwen 3.5 checkpoint (oxi-gen, random weights) with the real Qwen tokenizer.
set -u
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
OXINFER="${OXINFER:-$SRC/build/release/apps/cli/oxinfer}"
OXI_GEN="${OXI_GEN:-$SRC/build/release/tools/gen/oxi-gen}"
export NLC_DIR="${NLC_DIR:-$SRC/tools/node}"
SHARED="${OXI_SHARED_DIR:-$SRC/../shared}"
WORK="${OXI_WORK_DIR:-$(mktemp -d)}/run_cli"
rm -rf "$WORK" && mkdir -p "$WORK"

fails=0
ok() { echo "ok   - $1"; }
bad() { echo "FAIL - $1"; fails=$((fails + 1)); }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }

# ---- model ----
node "$SRC/tools/gen/extract_tokenizer.mjs" "$WORK/tok" >/dev/null || { echo "FAIL - tokenizer extraction"; exit 1; }
"$OXI_GEN" qwen35 --out "$WORK/q35" --seed 11 --tokenizer-dir "$WORK/tok" \
  --chat-template "$SHARED/testdata/templates/Qwen3.5-4B.jinja" >/dev/null || { echo "FAIL - oxi-gen"; exit 1; }
M="$WORK/q35"
run() { "$OXINFER" run -m "$M" "$@"; }

# Validates a --json stdout: N token lines then the summary line. Prints the generated ids.
cat > "$WORK/check_json.py" <<'EOF'
import json, math, sys
path, n_expected, k, prompt, greedy = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5] == "1"
lines = open(path, encoding="utf-8").read().split("\n")
assert lines[-1] == "", "stdout must end with a newline"
lines = lines[:-1]
objs = [json.loads(l) for l in lines]
toks, last = objs[:-1], objs[-1]
if n_expected >= 0:
    assert len(toks) == n_expected, f"{len(toks)} token lines, expected {n_expected}"
for t in toks:
    assert list(t.keys()) == ["id", "text", "logprob", "top_logprobs"], t.keys()
    assert isinstance(t["id"], int) and isinstance(t["text"], str)
    assert isinstance(t["logprob"], float) and t["logprob"] <= 0.0
    top = t["top_logprobs"]
    assert len(top) == k, f"{len(top)} top entries, expected {k}"
    for e in top:
        assert list(e.keys()) == ["id", "logprob"], e.keys()
        assert isinstance(e["id"], int) and isinstance(e["logprob"], float) and e["logprob"] <= 0.0
    lps = [e["logprob"] for e in top]
    assert lps == sorted(lps, reverse=True), "top_logprobs not sorted"
    assert sum(math.exp(x) for x in lps) <= 1.0 + 1e-5
    assert len({e["id"] for e in top}) == len(top), "duplicate ids in top_logprobs"
    if greedy and k > 0:
        assert t["id"] == top[0]["id"] and t["logprob"] == top[0]["logprob"], "greedy token is not the top one"
    for e in top:
        if e["id"] == t["id"]:
            assert e["logprob"] == t["logprob"]
assert list(last.keys()) == ["prompt_ids", "timings"], last.keys()
assert list(last["timings"].keys()) == ["prompt_tok_s", "gen_tok_s"]
assert all(isinstance(v, (int, float)) and v >= 0 for v in last["timings"].values())
if prompt != "-":
    assert last["prompt_ids"] == [int(x) for x in prompt.split(",")], last["prompt_ids"]
print(",".join(str(t["id"]) for t in toks))
EOF
cj() { python3 "$WORK/check_json.py" "$@"; }

# 1. The contract the model tests rely on.
run --tokens 1,2,3 -n 6 --json --top-logprobs 5 --temp 0 > "$WORK/g1.out" 2> "$WORK/g1.err"
rc=$?
check "json: exit 0" "[ $rc -eq 0 ]"
G1=$(cj "$WORK/g1.out" 6 5 1,2,3 1 2>"$WORK/g1.py") || true
check "json: shape, sorted top-5, greedy = top-1, summary line" "[ -n '$G1' ]" || cat "$WORK/g1.py"
check "json: logs stay on stderr" "grep -q 'prompt:' '$WORK/g1.err' && ! grep -q 'prompt:' '$WORK/g1.out'"

# 2. Greedy is deterministic (ids and logprobs byte for byte).
run --tokens 1,2,3 -n 6 --json --top-logprobs 5 --temp 0 > "$WORK/g2.out" 2>/dev/null
check "greedy: same output twice" "head -n 6 '$WORK/g1.out' | cmp -s - <(head -n 6 '$WORK/g2.out')"

# 3. Seeded sampling: same seed → same ids; another seed → different ids.
S1=$(run --tokens 1,2,3 -n 16 --json --temp 1.5 --top-k 0 --top-p 1 --min-p 0 --seed 7 2>/dev/null > "$WORK/s1.out"; cj "$WORK/s1.out" 16 0 1,2,3 0)
S2=$(run --tokens 1,2,3 -n 16 --json --temp 1.5 --top-k 0 --top-p 1 --min-p 0 --seed 7 2>/dev/null > "$WORK/s2.out"; cj "$WORK/s2.out" 16 0 1,2,3 0)
S3=$(run --tokens 1,2,3 -n 16 --json --temp 1.5 --top-k 0 --top-p 1 --min-p 0 --seed 8 2>/dev/null > "$WORK/s3.out"; cj "$WORK/s3.out" 16 0 1,2,3 0)
check "seed: same seed, same tokens" "[ -n '$S1' ] && [ '$S1' = '$S2' ]"
check "seed: another seed, other tokens" "[ -n '$S3' ] && [ '$S1' != '$S3' ]"
check "seed: sampling differs from greedy" "[ '$S1' != '$G1' ]"

# 3b. Model-default penalties do not change --temp 0 (greedy = argmax of the raw logits).
mkdir -p "$WORK/q35pen"
for f in "$M"/*; do ln -sf "$f" "$WORK/q35pen/"; done
rm -f "$WORK/q35pen/generation_config.json"
echo '{"temperature":1.0,"top_k":20,"top_p":0.95,"repetition_penalty":3.0,"presence_penalty":10.0}' > "$WORK/q35pen/generation_config.json"
"$OXINFER" run -m "$WORK/q35pen" --tokens 1,2,3 -n 6 --json --top-logprobs 5 --temp 0 > "$WORK/pen.out" 2>/dev/null
check "greedy ignores the model's default penalties" "head -n 6 '$WORK/pen.out' | cmp -s - <(head -n 6 '$WORK/g1.out')"

# 4. -p goes through the Qwen 3.5 template: <|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n
#    (ids of the public Qwen vocabulary: 151644 <|im_start|>, 872 user, 198 \n, 9707 Hello,
#    151645 <|im_end|>, 77091 assistant, 151667 <think>, 271 \n\n, 151668 </think>).
CHAT_IDS=151644,872,198,9707,151645,198,151644,77091,198,151667,198
NOTHINK_IDS=151644,872,198,9707,151645,198,151644,77091,198,151667,271,151668,271
run -p Hello -n 4 --json --temp 0 > "$WORK/p1.out" 2>/dev/null
P1=$(cj "$WORK/p1.out" 4 0 $CHAT_IDS 1 2>&1)
rc=$?
check "-p: chat template applied (prompt_ids)" "[ $rc -eq 0 ]" || echo "$P1"
run --tokens $CHAT_IDS -n 4 --json --temp 0 > "$WORK/t1.out" 2>/dev/null
T1=$(cj "$WORK/t1.out" 4 0 $CHAT_IDS 1 2>&1)
check "--tokens with the same ids: same continuation as -p" "[ -n '$T1' ] && [ '$P1' = '$T1' ]"
run -p Hello -n 1 --json --temp 0 --no-think > "$WORK/p2.out" 2>/dev/null
check "--no-think: empty think block in the prompt" "cj '$WORK/p2.out' 1 0 $NOTHINK_IDS 1 >/dev/null"
run -p Hello -n 1 --json --temp 0 --no-chat > "$WORK/p3.out" 2>/dev/null
check "--no-chat: raw prompt ids" "cj '$WORK/p3.out' 1 0 9707 1 >/dev/null"
run -p Hello -n 1 --json --temp 0 --system 'Be brief.' > "$WORK/p4.out" 2>/dev/null
check "--system: a system turn first" "python3 -c \"import json,sys; l=open('$WORK/p4.out').read().split(chr(10))[-2]; p=json.loads(l)['prompt_ids']; sys.exit(0 if p[:3]==[151644,8948,198] and p[-11:]==[int(x) for x in '$CHAT_IDS'.split(',')] else 1)\""

# 5. Text mode streams the same text as the JSON pieces.
run --tokens 1,2,3 -n 6 --temp 0 > "$WORK/txt.out" 2>/dev/null
python3 - "$WORK/g1.out" > "$WORK/txt.expected" <<'EOF'
import json, sys
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")[:-2]
s = "".join(json.loads(l)["text"] for l in lines)
sys.stdout.write(s if s.endswith("\n") else s + "\n")
EOF
check "text mode: stdout is the streamed text" "cmp -s '$WORK/txt.out' '$WORK/txt.expected'"

# 6. Context: a prompt longer than -c is refused; a full context stops generation.
IDS20=$(seq -s, 1 20)
run --tokens $IDS20 -c 8 --json > "$WORK/c1.out" 2> "$WORK/c1.err"
rc=$?
check "-c overflow: exit 1" "[ $rc -eq 1 ]"
check "-c overflow: clear message" "grep -q '^error: .*20 tokens.*context' '$WORK/c1.err'" || cat "$WORK/c1.err"
check "-c overflow: nothing on stdout" "[ ! -s '$WORK/c1.out' ]"
run --tokens 1,2,3 -c 6 -n 50 --json --temp 0 --ignore-eos > "$WORK/c2.out" 2> "$WORK/c2.err"
check "context full: 6 - 3 + 1 = 4 tokens" "cj '$WORK/c2.out' 4 0 1,2,3 1 >/dev/null && grep -q 'context full' '$WORK/c2.err'"
run --tokens 1,2,3 -n 0 --json > "$WORK/n0.out" 2>/dev/null
check "-n 0: only the summary line" "cj '$WORK/n0.out' 0 0 1,2,3 1 >/dev/null"

# 7. Flag errors: usage mistakes exit 2, run-time errors exit 1, nothing on stdout.
expect_rc() {  # NAME RC ARGS...
  local name=$1 want=$2; shift 2
  "$OXINFER" run "$@" > "$WORK/e.out" 2> "$WORK/e.err"
  local got=$?
  if [ $got -eq $want ] && [ ! -s "$WORK/e.out" ] && grep -q '^error: ' "$WORK/e.err"; then ok "$name"; else
    bad "$name (rc $got, want $want)"; cat "$WORK/e.err"; fi
}
expect_rc "no prompt but --json → 2 (run without a prompt is the chat)" 2 -m "$M" --json
expect_rc "-f missing file → 1" 1 -m "$M" -f "$WORK/no-such-prompt.txt"
expect_rc "no model → 2" 2 -p hi
expect_rc "-p and --tokens → 2" 2 -m "$M" -p hi --tokens 1
expect_rc "unknown option → 2" 2 -m "$M" -p hi --frobnicate 3
expect_rc "bad --tokens → 2" 2 -m "$M" --tokens 1,x
expect_rc "bad --temp → 2" 2 -m "$M" -p hi --temp abc
expect_rc "--top-logprobs 21 → 2" 2 -m "$M" -p hi --top-logprobs 21
expect_rc "negative -n below -1 → 2" 2 -m "$M" -p hi -n -5
expect_rc "missing model file → 1" 1 -m "$WORK/nope.gguf" -p hi
expect_rc "token id out of range → 1" 1 -m "$M" --tokens 999999999
"$OXINFER" run --help > "$WORK/h.out" 2>&1
rc=$?
check "--help → 0 with usage" "[ $rc -eq 0 ] && grep -q 'usage: oxinfer run' '$WORK/h.out'"

# 8. oxinfer chat: turns from stdin, history kept with the context prefix reused, /exit and EOF.
printf 'Hello\nHow are you?\nAnd then?\n/exit\nnot read\n' | OXI_CHAT_DEBUG=1 \
  "$OXINFER" chat -m "$M" -n 6 --temp 0 > "$WORK/chat.out" 2> "$WORK/chat.err"
rc=$?
check "chat: exit 0 on /exit" "[ $rc -eq 0 ]" || cat "$WORK/chat.err"
check "chat: three turns answered, not the line after /exit" "[ \$(grep -c '^\[prompt' '$WORK/chat.err') -eq 3 ]"
check "chat: first turn starts from nothing" "grep -q '^\[prompt 11 tokens, 0 reused\]' '$WORK/chat.err'"
check "chat: later turns reuse the previous prefix" "[ \$(grep -c '^\[prompt [0-9]* tokens, [1-9][0-9]* reused\]' '$WORK/chat.err') -eq 2 ]"
printf 'Hi' | "$OXINFER" chat -m "$M" -n 2 --temp 0 > /dev/null 2>&1
rc=$?
check "chat: end of input quits with 0" "[ $rc -eq 0 ]"
"$OXINFER" chat -m "$M" --bogus 1 < /dev/null > /dev/null 2>&1
rc=$?
check "chat: unknown option → 2" "[ $rc -eq 2 ]"
printf '[{"role":"user","content":"Hello"}]' > "$WORK/msgs.json"
"$OXINFER" chat --template-only -m "$M" --messages "$WORK/msgs.json" > "$WORK/tmpl.out" 2>&1
check "chat --template-only: delegated" "grep -q '<|im_start|>user' '$WORK/tmpl.out'"

# 8b. Issue 31 item 4: -f - reads the prompt from stdin (llama.cpp's -f: one trailing newline
#     dropped), the same tokens as -p; run with no prompt is the interactive chat (ollama run).
run -p Hello -n 4 --json --temp 0 > "$WORK/fp.out" 2>/dev/null
ids_of() { python3 -c 'import json,sys; l=open(sys.argv[1]).read().split("\n")[:-1]; print([json.loads(x)["id"] for x in l[:-1]], json.loads(l[-1])["prompt_ids"])' "$1"; }
printf 'Hello' | run -f - -n 4 --json --temp 0 > "$WORK/fs.out" 2>/dev/null
check "-f -: same prompt ids and tokens as -p" "[ -n \"\$(ids_of '$WORK/fp.out')\" ] && [ \"\$(ids_of '$WORK/fs.out')\" = \"\$(ids_of '$WORK/fp.out')\" ]"
printf 'Hello\n' | run -f - -n 4 --json --temp 0 > "$WORK/fs2.out" 2>/dev/null
printf 'Hello\n' > "$WORK/prompt.txt"
run --file "$WORK/prompt.txt" -n 4 --json --temp 0 > "$WORK/ff.out" 2>/dev/null
check "-f - and --file FILE: one trailing newline dropped" "[ \"\$(ids_of '$WORK/fs2.out')\" = \"\$(ids_of '$WORK/fp.out')\" ] && [ \"\$(ids_of '$WORK/ff.out')\" = \"\$(ids_of '$WORK/fp.out')\" ]"
printf 'Hello\n' | run -n 4 --temp 0 --no-think > "$WORK/rc.out" 2> "$WORK/rc.err"
rc=$?
printf 'Hello\n' | "$OXINFER" chat -m "$M" -n 4 --temp 0 --no-think > "$WORK/cc.out" 2>/dev/null
check "run with no prompt: chat answers a stdin line, exit 0 at EOF" "[ $rc -eq 0 ] && [ -n \"\$(tr -d ' \n' < '$WORK/rc.out')\" ] && grep -q 'context .* tokens' '$WORK/rc.err'" || cat "$WORK/rc.err"
check "run with no prompt: the same answer as oxinfer chat" "cmp -s '$WORK/rc.out' '$WORK/cc.out'"

# 8c. Issue 31 item 6: --progress on a long prefill (the 2 s delay set to 0 for the test): lines of
#     tokens done / total and tok/s on stderr, the same tokens as without it.
IDS1100=$(seq -s, 1 1100)
run --tokens $IDS1100 -n 4 --json --temp 0 > "$WORK/np.out" 2> "$WORK/np.err"
OXI_PROGRESS_AFTER_S=0 run --tokens $IDS1100 -n 4 --json --temp 0 --progress > "$WORK/pg.out" 2> "$WORK/pg.err"
check "--progress: a line per 512-token chunk, done / total and tok/s" "grep -q '^prefill: 512/1100 tokens (47%), [0-9.]* tok/s' '$WORK/pg.err' && grep -q '^prefill: 1024/1100 tokens' '$WORK/pg.err'" || cat "$WORK/pg.err"
check "--progress: same tokens, all 1100 prompt tokens counted" "cmp -s <(head -n 4 '$WORK/np.out') <(head -n 4 '$WORK/pg.out') && grep -q '^prompt: 1100 tokens' '$WORK/pg.err'"
check "no progress lines when stderr is not a terminal" "! grep -q '^prefill:' '$WORK/np.err'"
python3 -c "print(' '.join('word%d' % i for i in range(300)))" > "$WORK/long.txt"
"$OXINFER" chat -m "$M" -n 3 --temp 0 --no-think < "$WORK/long.txt" > "$WORK/cnp.out" 2>/dev/null
OXI_PROGRESS_AFTER_S=0 "$OXINFER" chat -m "$M" -n 3 --temp 0 --no-think --progress < "$WORK/long.txt" > "$WORK/cpg.out" 2> "$WORK/cpg.err"
check "chat --progress: prefill lines, the same answer" "grep -q '^prefill: 512/[0-9]* tokens' '$WORK/cpg.err' && [ -s '$WORK/cpg.out' ] && cmp -s '$WORK/cnp.out' '$WORK/cpg.out'"

# 8e. llama.cpp flags that carry over (issue 31 item 5): accepted, and the greedy tokens are those
#     of the plain run (--no-mmap reads the file into memory, --mlock locks it or warns, -b / -ub
#     are prefill chunk sizes, -fa on|off picks the attention path).
run -p "The capital" -n 6 --json --temp 0 > "$WORK/fl0.out" 2>/dev/null
run -p "The capital" -n 6 --json --temp 0 --no-mmap --mlock -b 64 -ub 32 -fa on --jinja > "$WORK/fl1.out" 2> "$WORK/fl1.err"
run -p "The capital" -n 6 --json --temp 0 -fa off > "$WORK/fl2.out" 2>/dev/null
check "--no-mmap --mlock -b -ub -fa on --jinja: the same greedy tokens" "cmp -s <(head -n 6 '$WORK/fl0.out') <(head -n 6 '$WORK/fl1.out')" || cat "$WORK/fl1.err"
check "-fa off: the same greedy tokens" "cmp -s <(head -n 6 '$WORK/fl0.out') <(head -n 6 '$WORK/fl2.out')"

# 8d. Progress while quantising at load (--quant on the HF checkpoint): "N/M tensors" lines with
#     --progress (delay 0), none when stderr is not a terminal and --progress is not given.
OXI_PROGRESS_AFTER_S=0 run --quant q8_0 -p "Hi" -n 2 --temp 0 --progress > /dev/null 2> "$WORK/qp.err"
check "--quant --progress: 'quantising at load' lines, tensors done / total" "grep -qE '^quantising at load \(--quant Q8_0\): [0-9]+/[0-9]+ tensors \([0-9]+%\), [0-9.]+ tensors/s' '$WORK/qp.err'" || cat "$WORK/qp.err"
OXI_PROGRESS_AFTER_S=0 run --quant q8_0 -p "Hi" -n 2 --temp 0 > /dev/null 2> "$WORK/qnp.err"
check "--quant without --progress (stderr not a terminal): no progress lines" "! grep -q '^quantising at load' '$WORK/qnp.err'"

OXI_PROGRESS=1 OXI_PROGRESS_AFTER_S=0 "$OXINFER" convert "$M" -o "$WORK/pc.gguf" --type q8_0 > /dev/null 2> "$WORK/pc.err"
check "convert with OXI_PROGRESS=1: 'writing pc.gguf: done/total MiB' lines" "grep -qE '^writing pc.gguf: [0-9]+/[0-9]+ MiB \([0-9]+%\)' '$WORK/pc.err' && [ -s '$WORK/pc.gguf' ]" || cat "$WORK/pc.err"

# 9. Gemma 4: BOS exactly once (spec B.9), with and without the template.
# ---- --grammar / --grammar-file (llama.cpp's grammars/ from node-llama-cpp) ----
GRAMMARS="$NLC_DIR/node_modules/node-llama-cpp/llama/grammars"
run -p "Yes or no?" --grammar 'root ::= ("yes" | "no") "!"' -n 20 --temp 0.8 --seed 4 > "$WORK/gr1.out" 2>/dev/null
check "--grammar: the output is one of the grammar's strings" "grep -qxE '(yes|no)!' '$WORK/gr1.out'"
if [ -f "$GRAMMARS/json.gbnf" ]; then
  for seed in 1 2 3; do
    run -p "JSON please" --grammar-file "$GRAMMARS/json.gbnf" -n 400 --temp 0.8 --seed $seed --json > "$WORK/grj.out" 2>/dev/null
    # The text of the token lines; complete (ended by end-of-generation) → JSON.parse-able object.
    check "--grammar-file json.gbnf, seed $seed: an object, or a prefix cut by -n" "python3 -c \"
import json, sys
lines = [json.loads(l) for l in open('$WORK/grj.out', encoding='utf-8') if l.strip()]
toks = [l for l in lines if 'id' in l]
text = ''.join(t['text'] for t in toks)
assert text.startswith('{'), text
if len(toks) < 400: assert isinstance(json.loads(text), dict), text
\""
  done
else
  echo "skip - no llama.cpp grammars at $GRAMMARS"
fi
run -p hi --grammar 'root ::= x' -n 2 > /dev/null 2> "$WORK/gr2.err"; rc=$?
check "--grammar: a bad grammar is an error naming its place (exit 1)" "[ $rc -eq 1 ] && grep -q \"line 1, column 10: undefined rule 'x'\" '$WORK/gr2.err'"
run -p hi --grammar a --grammar-file b > /dev/null 2>&1; rc=$?
check "--grammar with --grammar-file: usage error (exit 2)" "[ $rc -eq 2 ]"

if node "$SRC/tools/gen/extract_gemma4_tokenizer.mjs" "$WORK/gtok" >/dev/null 2>&1 &&
   "$OXI_GEN" gemma4 --shape e2b --out "$WORK/g4" --seed 3 --tokenizer-dir "$WORK/gtok" \
     --chat-template "$SHARED/testdata/templates/google-gemma-4-31B-it.jinja" >/dev/null 2>&1; then
  G="$WORK/g4"
  "$OXINFER" run -m "$G" -p Hello --no-chat -n 1 --json --temp 0 > "$WORK/gm1.out" 2>/dev/null
  check "gemma4 --no-chat: <bos> Hello = [2, 9259]" "cj '$WORK/gm1.out' 1 0 2,9259 1 >/dev/null"
  "$OXINFER" run -m "$G" -p Hello -n 2 --json --temp 0 --top-logprobs 2 > "$WORK/gm2.out" 2>/dev/null
  check "gemma4 -p: template ids, one <bos>" "python3 -c \"import json,sys; p=json.loads(open('$WORK/gm2.out').read().split(chr(10))[-2])['prompt_ids']; sys.exit(0 if p[:5]==[2,105,2364,107,9259] and p.count(2)==1 and 106 in p else 1)\""
  check "gemma4 -p: JSON contract" "cj '$WORK/gm2.out' 2 2 - 1 >/dev/null"
else
  bad "gemma4 model generation"
fi

echo "run_cli: $fails failure(s)"
[ $fails -eq 0 ]
