#!/usr/bin/env bash
# Gemma 4 image input against llama.cpp's multimodal library (mtmd, projector gemma4v), on a synthetic
# E2B-like model with a vision tower (oxi-gen gemma4 --vision, random weights, f32) converted by us
# (oxinfer convert --mmproj):
#   1. llama-mtmd-cli loads our model + mmproj pair;
#   2. our tower's image embeddings equal llama.cpp's (MTMD_DEBUG_EMBEDDINGS dump) within 1e-3
#      normalised MSE, for an image needing no resize and for odd sizes (resize, padding, upscale to
#      the 70-token minimum); the HF checkpoint's tower read in place equals the mmproj's;
#   3. greedy text with one image (marker-less and a <__media__> marker mid-prompt) and with two
#      images identical to llama-mtmd-cli's. The text width (64) is not E2B's 1536, so llama.cpp
#      decodes the image rows non-causally and so must we (Batch::non_causal);
#   3b. the same through the C API (oxi_context_prefill_image via python/oxinfer.py);
#   3c. log-probabilities with an image against llama.cpp's (tests/e2e/llama_mtmd_logprobs.cpp),
#      flash attention on and off (the non-causal image batch through both attention paths);
#   4. bad input: an image for the model without a tower, a text GGUF as --mmproj, an image larger
#      than the tower's position table: exit 1 with a message.
# The reference is built once by scripts/build_llama_mtmd.sh (cached under ~/.cache/oxinfer-llama).
set -u
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
OXINFER="${OXINFER:-$SRC/build/release/apps/cli/oxinfer}"
OXI_GEN="${OXI_GEN:-$SRC/build/release/tools/gen/oxi-gen}"
VIS_TESTS="${OXI_VISION_TESTS:-$(dirname "$OXINFER")/../../tests/oxi_vision_tests}"
export NLC_DIR="${NLC_DIR:-$SRC/tools/node}"
SHARED="${OXI_SHARED_DIR:-$SRC/../shared}"
WORK="${OXI_WORK_DIR:-$(mktemp -d)}/gemma4v_oracle"
PY=/usr/bin/python3
rm -rf "$WORK" && mkdir -p "$WORK"

fails=0
ok() { echo "ok   - $1"; }
bad() { echo "FAIL - $1"; fails=$((fails + 1)); }

[ -x "$VIS_TESTS" ] || { echo "FAIL - $VIS_TESTS not built"; exit 1; }
. "$SRC/tests/e2e/lib/mtmd_ref.sh"  # skips, $MTMD, t0

node "$SRC/tools/gen/extract_gemma4_tokenizer.mjs" "$WORK/tok" >/dev/null || { echo "FAIL - tokenizer extraction"; exit 1; }
# Tower: hidden 64, 2 blocks, 4 heads, clipped linears, standardisation, a 96-entry position table.
# --emb-gain 2.5 widens the tied head's logit spread: with the default (logits ~ N(0, 1) over 262k
# tokens) llama.cpp's own flash and non-flash runs part after 5 greedy tokens on near-ties.
"$OXI_GEN" gemma4 --shape e2b --vision --vision-standardize --vision-pos 96 --emb-gain 2.5 --out "$WORK/g4v" --seed 5 --dtype f32 \
  --window 16 --tokenizer-dir "$WORK/tok" --chat-template "$SHARED/testdata/templates/google-gemma-4-31B-it.jinja" \
  2>/dev/null || { echo "FAIL - oxi-gen gemma4 --vision"; exit 1; }
"$OXINFER" convert "$WORK/g4v" -o "$WORK/m.gguf" --mmproj "$WORK/mmproj.gguf" --type f32 2>/dev/null ||
  { echo "FAIL - convert --mmproj"; exit 1; }

# ---- images (written by Pillow) ----
#   square.png: 10 × 8 soft tokens: no resize
#   wide.png: resize + padding
#   tall.png: 2:7, padding
#   tiny.png: upscaled to the 70-token minimum
#   long.png: more patches per row than the position table holds
$PY "$SRC/tests/e2e/lib/synth_images.py" "$WORK" square.png:480x384 wide.png:300x200 tall.png:100x700 tiny.png:20x12 long.png:2000x100 || { echo "FAIL - writing the test images"; exit 1; }

# ---- greedy tokens with images: llama-mtmd-cli vs oxinfer run (same command line) ----
gen_case() {  # name, prompt, images...
  local name=$1 prompt=$2; shift 2
  local imgs=() ; for f in "$@"; do imgs+=(--image "$WORK/$f"); done
  # One image: llama.cpp's projected embeddings are dumped on the way (compared below).
  local dump=/dev/null; [ $# -eq 1 ] && dump="$WORK/ll_${1%.png}.bin"
  MTMD_DEBUG_EMBEDDINGS="$dump" MTMD_TEST_RESPONSE_MARKER="@@RESPONSE@@" "$MTMD" -m "$WORK/m.gguf" --mmproj "$WORK/mmproj.gguf" "${imgs[@]}" \
    -p "$prompt" -n 24 --temp 0 -t 2 -c 4096 --jinja > "$WORK/gl_$name.out" 2> "$WORK/gl_$name.err"
  "$OXINFER" run -m "$WORK/m.gguf" --mmproj "$WORK/mmproj.gguf" "${imgs[@]}" \
    -p "$prompt" -n 24 --temp 0 -t 2 -c 4096 --jinja > "$WORK/go_$name.out" 2> "$WORK/go_$name.err" ||
    { tail -3 "$WORK/go_$name.err"; bad "oxinfer run --image ($name)"; return; }
  if $PY - "$WORK/gl_$name.out" "$WORK/go_$name.out" <<'PYEOF'
import re, sys
# llama-mtmd-cli writes raw token bytes; oxinfer streams U+FFFD per invalid byte: collapse runs.
fix = lambda s: re.sub("\ufffd+", "\ufffd", s)
ll = open(sys.argv[1], encoding="utf-8", errors="replace").read()
assert "@@RESPONSE@@" in ll, "no response marker in llama-mtmd-cli's output"
ll = ll.split("@@RESPONSE@@", 1)[1].strip()
ox = open(sys.argv[2], encoding="utf-8", errors="replace").read().strip()
print("llama.cpp:", repr(ll)); print("oxinfer:  ", repr(ox))
sys.exit(0 if fix(ll) == fix(ox) and ll else 1)
PYEOF
  then ok "greedy text with images ($name) identical to llama-mtmd-cli's"; else bad "greedy text with images ($name) differs"; fi
}
gen_case one "Describe this picture." square.png
gen_case marker "Look: <__media__> What is it?" wide.png
gen_case tall "<__media__>" tall.png
gen_case two "Compare the two images." wide.png tall.png
"$OXINFER" run -m "$WORK/g4v" --image "$WORK/square.png" -p "Describe this picture." -n 24 --temp 0 -t 2 -c 4096 \
  > "$WORK/go_hf.out" 2> "$WORK/go_hf.err" || tail -3 "$WORK/go_hf.err"
if cmp -s "$WORK/go_hf.out" "$WORK/go_one.out"; then ok "HF checkpoint in place (its own tower): same text as GGUF + mmproj"
else bad "HF checkpoint in place differs: $(head -c 200 "$WORK/go_hf.out")"; fi
# The C API (oxi_context_prefill_image, through the Python binding): llama-mtmd-cli's text for two images.
if OXINFER_LIB="$(dirname "$OXINFER")/../../src/api/liboxinfer.so" PYTHONPATH="$SRC/python" \
   $PY "$SRC/tests/e2e/lib/c_api_images.py" "$WORK/m.gguf" "$WORK/mmproj.gguf" "$WORK/gl_two.out" "Compare the two images." \
   "$WORK/wide.png" "$WORK/tall.png" > "$WORK/capi.out" 2>&1
then ok "C API images (oxi_context_prefill_image): greedy text identical to llama-mtmd-cli's"
else cat "$WORK/capi.out"; bad "C API images differ from llama-mtmd-cli"; fi

# ---- log-probabilities with an image: ours vs llama.cpp's (both attention paths) ----
. "$SRC/tests/e2e/lib/mtmd_logprobs.sh"
logprob_case fa_on "<__media__>Describe this picture." 6 on "$WORK/square.png"
logprob_case fa_off "<__media__>Describe this picture." 6 off "$WORK/square.png"

# ---- embeddings: ours vs llama.cpp's ----
cat > "$WORK/nmse.py" <<'PYEOF'
import struct, sys
def load(p):
    b = open(p, "rb").read()
    n, d = struct.unpack("<ii", b[:8])
    return n, d, struct.unpack("<%df" % (n * d), b[8:8 + 4 * n * d])
n1, d1, a = load(sys.argv[1]); n2, d2, b = load(sys.argv[2])
assert (n1, d1) == (n2, d2), f"shapes differ: ours {n1}x{d1}, reference {n2}x{d2}"
num = sum((x - y) ** 2 for x, y in zip(a, b)); den = sum(y * y for y in b)
print(f"{n1} {num / den:.3e}")
PYEOF
below() { $PY -c "import sys; sys.exit(0 if float('$1') < $2 else 1)" 2>/dev/null; }
for name in square wide tall tiny; do
  [ -s "$WORK/ll_$name.bin" ] || MTMD_DEBUG_EMBEDDINGS="$WORK/ll_$name.bin" "$MTMD" -m "$WORK/m.gguf" --mmproj "$WORK/mmproj.gguf" \
    --image "$WORK/$name.png" -p "What is in the picture?" -n 1 --temp 0 -t 2 -c 4096 --jinja \
    > "$WORK/ll_$name.out" 2> "$WORK/ll_$name.err"
  if [ ! -s "$WORK/ll_$name.bin" ]; then tail -5 "$WORK/ll_$name.err"; bad "llama-mtmd-cli encodes $name.png"; continue; fi
  OXI_VIS_TOWER=gemma4v OXI_VIS_MMPROJ="$WORK/mmproj.gguf" OXI_VIS_IMAGE="$WORK/$name.png" OXI_VIS_OUT="$WORK/ox_$name.bin" \
    "$VIS_TESTS" --gtest_filter=VisionDev.Embed > "$WORK/ox_$name.out" 2>&1 || { bad "oxinfer encodes $name.png"; continue; }
  r=$($PY "$WORK/nmse.py" "$WORK/ox_$name.bin" "$WORK/ll_$name.bin" 2>&1)
  if below "${r#* }" 1e-3; then ok "image embeddings $name.png (${r%% *} soft tokens): nMSE ${r#* } < 1e-3"
  else bad "image embeddings $name.png: $r"; fi
done
OXI_VIS_TOWER=gemma4v OXI_VIS_HF="$WORK/g4v" OXI_VIS_IMAGE="$WORK/wide.png" OXI_VIS_OUT="$WORK/oh_wide.bin" \
  "$VIS_TESTS" --gtest_filter=VisionDev.Embed > "$WORK/oh_wide.out" 2>&1 || bad "the HF tower in place encodes wide.png"
r=$($PY "$WORK/nmse.py" "$WORK/oh_wide.bin" "$WORK/ox_wide.bin" 2>&1)
if below "${r#* }" 1e-12; then ok "HF tower in place == our mmproj (nMSE ${r#* })"; else bad "HF tower in place vs mmproj: $r"; fi

# ---- bad input: clear errors, exit 1 ----
"$OXINFER" run -m "$WORK/m.gguf" --image "$WORK/square.png" -p hi -n 1 > /dev/null 2> "$WORK/e1.err"; rc=$?
if [ $rc -eq 1 ] && grep -q "mmproj" "$WORK/e1.err"; then ok "Gemma 4 image without a vision tower: exit 1, says why"; else bad "image without tower: rc $rc $(cat "$WORK/e1.err")"; fi
"$OXINFER" run -m "$WORK/m.gguf" --mmproj "$WORK/m.gguf" --image "$WORK/square.png" -p hi -n 1 > /dev/null 2> "$WORK/e2.err"; rc=$?
if [ $rc -eq 1 ] && grep -q "mmproj" "$WORK/e2.err"; then ok "a text GGUF as --mmproj: exit 1"; else bad "text GGUF as mmproj: rc $rc $(cat "$WORK/e2.err")"; fi
"$OXINFER" run -m "$WORK/m.gguf" --mmproj "$WORK/mmproj.gguf" --image "$WORK/long.png" -p hi -n 1 > /dev/null 2> "$WORK/e3.err"; rc=$?
if [ $rc -eq 1 ] && grep -q "position table" "$WORK/e3.err"; then ok "image beyond the position table: exit 1, says why"; else bad "long image: rc $rc $(cat "$WORK/e3.err")"; fi

echo "# gemma4v_oracle: $(( $(date +%s) - t0 )) s"
[ "$fails" -eq 0 ] && echo "all passed" || echo "$fails failed"
[ "$fails" -eq 0 ]
