#!/usr/bin/env bash
# The CLI's media paths against llama.cpp's multimodal CLI (llama-mtmd-cli), on the synthetic
# Qwen 3.5 model with a vision tower (oxi-gen --vision, converted by us; tests/e2e/lib/vision_setup.sh):
#   1. `oxinfer run --image --json --top-logprobs 5`: the greedy tokens' text equals llama-mtmd-cli's
#      greedy answer, the ids detokenize (by llama.cpp, node-llama-cpp) to that text, and the
#      logprobs are consistent (llama.cpp has no route to logprobs with media — llama-mtmd-cli
#      prints none and node-llama-cpp has no mtmd — so they are not compared with llama.cpp's);
#   2. `run --image --grammar`: the reply matches the grammar;
#   3. `oxinfer chat --image`: a scripted two-turn chat whose first reply equals llama-mtmd-cli's
#      greedy answer for the same image and prompt, and whose second turn reuses the first turn's
#      image rows (no second encode, the prefix kept).
set -u
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
OXINFER="${OXINFER:-$SRC/build/release/apps/cli/oxinfer}"
OXI_GEN="${OXI_GEN:-$SRC/build/release/tools/gen/oxi-gen}"
export NLC_DIR="${NLC_DIR:-$SRC/tools/node}"
SHARED="${OXI_SHARED_DIR:-$SRC/../shared}"
WORK="${OXI_WORK_DIR:-$(mktemp -d)}/cli_media"
PY=/usr/bin/python3
rm -rf "$WORK" && mkdir -p "$WORK"

fails=0
ok() { echo "ok   - $1"; }
bad() { echo "FAIL - $1"; fails=$((fails + 1)); }

. "$SRC/tests/e2e/lib/vision_setup.sh"  # skips, $MTMD, t0, the model pair m.gguf + mmproj.gguf
$PY "$SRC/tests/e2e/lib/synth_images.py" "$WORK" square.png:256x256 || { echo "FAIL - writing the test image"; exit 1; }

PROMPT="Describe this picture."
N=16
MTMD_TEST_RESPONSE_MARKER="@@RESPONSE@@" "$MTMD" -m "$WORK/m.gguf" --mmproj "$WORK/mmproj.gguf" --image "$WORK/square.png" \
  -p "$PROMPT" -n $N --temp 0 -t 2 -c 4096 -fa off --jinja > "$WORK/ll.out" 2> "$WORK/ll.err" ||
  { tail -5 "$WORK/ll.err"; echo "FAIL - llama-mtmd-cli"; exit 1; }
$PY - "$WORK/ll.out" > "$WORK/ll.txt" <<'PYEOF' || { echo "FAIL - no response marker in llama-mtmd-cli's output"; exit 1; }
import sys
ll = open(sys.argv[1], encoding="utf-8", errors="replace").read()
assert "@@RESPONSE@@" in ll
sys.stdout.write(ll.split("@@RESPONSE@@", 1)[1].strip())
PYEOF

# ---- 1. run --image --json --top-logprobs 5 ----
"$OXINFER" run -m "$WORK/m.gguf" --mmproj "$WORK/mmproj.gguf" --image "$WORK/square.png" -p "$PROMPT" -n $N --temp 0 -t 2 \
  -c 4096 --json --top-logprobs 5 > "$WORK/run.jsonl" 2> "$WORK/run.err" || { tail -3 "$WORK/run.err"; bad "run --image --json"; }
cat > "$WORK/detok.mjs" <<'JSEOF'
// llama.cpp's detokenization of ids (node-llama-cpp, vocabulary only): node detok.mjs MODEL ID,ID,...
import path from "node:path";
import { pathToFileURL } from "node:url";
const { getLlama, LlamaLogLevel } = await import(pathToFileURL(path.join(process.env.NLC_DIR, "node_modules", "node-llama-cpp", "dist", "index.js")).href);
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath: process.argv[2], gpuLayers: 0, vocabOnly: true });
process.stdout.write(model.detokenize(process.argv[3].split(",").map(Number)));
process.exit(0);
JSEOF
ids=$($PY -c "import json,sys; print(','.join(str(json.loads(l)['id']) for l in open(sys.argv[1]) if '\"id\"' in l))" "$WORK/run.jsonl")
node "$WORK/detok.mjs" "$WORK/m.gguf" "$ids" > "$WORK/detok.txt" 2> "$WORK/detok.err" || tail -3 "$WORK/detok.err"
if $PY - "$WORK/run.jsonl" "$WORK/ll.txt" "$WORK/detok.txt" $N <<'PYEOF'
import json, math, re, sys
fix = lambda s: re.sub("\ufffd+", "\ufffd", s).strip()
lines = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
toks, last = lines[:-1], lines[-1]
ll = open(sys.argv[2], encoding="utf-8", errors="replace").read()
detok = open(sys.argv[3], encoding="utf-8", errors="replace").read()
ours = "".join(t["text"] for t in toks)
print("llama.cpp:", repr(ll)); print("oxinfer:  ", repr(ours))
assert ll and fix(ours) == fix(ll), "greedy text differs from llama-mtmd-cli's"
assert fix(detok) == fix(ll), f"llama.cpp detokenizes our ids to {detok!r}"
assert len(toks) == int(sys.argv[4]), f"{len(toks)} token objects"
for t in toks:
    top = t["top_logprobs"]
    assert len(top) == 5, t
    lps = [x["logprob"] for x in top]
    assert all(v <= 0 for v in lps) and lps == sorted(lps, reverse=True), t
    assert top[0]["id"] == t["id"] and top[0]["logprob"] == t["logprob"], t   # greedy: the chosen is top-1
    assert sum(math.exp(v) for v in lps) <= 1 + 1e-5, t
assert "prompt_ids" in last and "timings" in last, last
neg = [i for i in last["prompt_ids"] if i < 0]
# The image rows carry ids from the file's SHA-256 (8 of them, cycled), not one placeholder id.
assert len(neg) == 64 and len(set(neg)) == 8, f"{len(neg)} image rows, {len(set(neg))} distinct ids"
PYEOF
then ok "run --image --json --top-logprobs 5: greedy text = llama-mtmd-cli's, ids detokenize (llama.cpp) to it, logprobs consistent"
else bad "run --image --json --top-logprobs 5"; fi

# ---- 2. run --image --grammar ----
"$OXINFER" run -m "$WORK/m.gguf" --mmproj "$WORK/mmproj.gguf" --image "$WORK/square.png" -p "Yes or no?" -n 8 --temp 0 -t 2 \
  --grammar 'root ::= ("yes" | "no") "."' > "$WORK/gram.out" 2> "$WORK/gram.err"; rc=$?
g=$(cat "$WORK/gram.out")
if [ $rc -eq 0 ] && { [ "$g" = "yes." ] || [ "$g" = "no." ]; }; then ok "run --image --grammar: '$g' matches the grammar"
else bad "run --image --grammar: rc $rc '$g' $(tail -2 "$WORK/gram.err")"; fi

# ---- 3. chat --image: the first reply as llama-mtmd-cli's; the second turn keeps the image rows ----
printf '%s\n' "$PROMPT" | "$OXINFER" chat -m "$WORK/m.gguf" --mmproj "$WORK/mmproj.gguf" --image "$WORK/square.png" -n $N \
  --temp 0 -t 2 -c 4096 > "$WORK/chat1.out" 2> "$WORK/chat1.err" || { tail -3 "$WORK/chat1.err"; bad "chat --image (one turn)"; }
printf '%s\n' "$PROMPT" "And what else?" "/image $WORK/square.png" "The same picture again?" |
  OXI_CHAT_DEBUG=1 "$OXINFER" chat -m "$WORK/m.gguf" --mmproj "$WORK/mmproj.gguf" --image "$WORK/square.png" -n $N \
  --temp 0 -t 2 -c 4096 > "$WORK/chat3.out" 2> "$WORK/chat3.err"; rc=$?
if $PY - "$WORK/chat1.out" "$WORK/chat1.err" "$WORK/ll.txt" "$WORK/chat3.err" "$WORK/run.jsonl" $rc <<'PYEOF'
import json, re, sys
fix = lambda s: re.sub("\ufffd+", "\ufffd", s).strip()
rd = lambda p: open(p, encoding="utf-8", errors="replace").read()
out1, err1, ll, err3 = rd(sys.argv[1]), rd(sys.argv[2]), rd(sys.argv[3]), rd(sys.argv[4])
# The template opens a <think> block, so the reply is reasoning: on stderr when stdout is no
# terminal, after the encode note.
one = out1 + err1.split("ms)\n", 1)[1]
print("llama.cpp:   ", repr(ll)); print("oxinfer chat:", repr(one))
assert fix(one) == fix(ll), "the first reply differs from llama-mtmd-cli's"
assert sys.argv[6] == "0", f"chat exit {sys.argv[6]}: {err3[-300:]}"
turns = [tuple(map(int, m)) for m in re.findall(r"\[prompt (\d+) entries, (\d+) reused, (\d+) files encoded in all\]", err3)]
print("turns (entries, reused, encoded):", turns)
assert len(turns) == 3, err3[-500:]
assert fix(err3.split(re.findall(r"\[prompt 80 entries[^\n]*\n", err3)[0], 1)[1]).startswith(fix(ll)), "the three-turn chat's first reply differs"
prompt_ids = [json.loads(l) for l in open(sys.argv[5])][-1]["prompt_ids"]
image_end = max(i for i, t in enumerate(prompt_ids) if t < 0) + 1
assert turns[0][0] == len(prompt_ids), "the chat's first prompt is not run's"
# Turn 2: the first turn's image rows are kept, nothing encoded again. Turn 3: the same file
# attached again is not encoded again either (its rows are new entries, its embedding is known).
assert turns[1][1] >= image_end and turns[1][2] == 1, turns
assert turns[2][1] >= turns[1][0] - 8 and turns[2][2] == 1 and turns[2][0] > turns[1][0] + 64, turns
PYEOF
then ok "chat --image: first reply = llama-mtmd-cli's; later turns keep the image rows (prefix by content hash), no re-encode"
else bad "chat --image"; fi

# ---- 4. bad media in the chat: an error line, the chat goes on ----
head -c 100 /dev/urandom > "$WORK/junk.png"
printf '%s\n' "/image $WORK/nope.png" "/image $WORK/junk.png" "hi" "/image" "hello" |
  "$OXINFER" chat -m "$WORK/m.gguf" --mmproj "$WORK/mmproj.gguf" -n 2 --temp 0 -t 2 > "$WORK/bad1.out" 2> "$WORK/bad1.err"; rc=$?
if [ $rc -eq 0 ] && grep -q "nope.png: no such file" "$WORK/bad1.err" && grep -q "junk.png: not a PNG" "$WORK/bad1.err" &&
   grep -q "/image needs a file" "$WORK/bad1.err"; then ok "chat: a missing, a corrupt, a nameless /image: errors, the chat goes on"
else bad "chat bad media: rc $rc $(tail -4 "$WORK/bad1.err")"; fi
printf '%s\n' "/image $WORK/square.png" "hi" "hello" |
  OXI_CHAT_DEBUG=1 "$OXINFER" chat -m "$WORK/m.gguf" -n 2 --temp 0 -t 2 > "$WORK/bad2.out" 2> "$WORK/bad2.err"; rc=$?
if [ $rc -eq 0 ] && grep -q "needs --mmproj" "$WORK/bad2.err" && [ "$(grep -c '^\[prompt' "$WORK/bad2.err")" = 1 ]; then
  ok "chat: an image for a model without a vision tower: says why, the next message is answered"
else bad "chat image without tower: rc $rc $(tail -3 "$WORK/bad2.err")"; fi

echo "# cli_media: $(( $(date +%s) - t0 )) s"
[ "$fails" -eq 0 ] && echo "all passed" || echo "$fails failed"
[ "$fails" -eq 0 ]
