#!/usr/bin/env bash
# Qwen 3.5 image input against llama.cpp's multimodal library (mtmd), on a synthetic model with a
# vision tower (oxi-gen --vision, random weights) converted by us (oxinfer convert --mmproj):
#   1. llama-mtmd-cli loads our model + mmproj pair and answers a prompt with an image;
#   2. our tower's image embeddings equal llama.cpp's (MTMD_DEBUG_EMBEDDINGS dump) within 1e-3
#      normalised MSE, for an image needing no resize (HF and llama.cpp preprocessing agree) and for
#      odd sizes in llama.cpp's preprocessing mode (resize + padding);
#   3. greedy text with images identical to llama-mtmd-cli's, and the log-probabilities of the
#      greedy steps with an image equal llama.cpp's (tests/e2e/llama_mtmd_logprobs.cpp) within 1.5 × its
#      own -fa on/off spread, at least 0.05 (tests/e2e/lib/mtmd_logprobs.sh).
# The reference is built once by scripts/build_llama_mtmd.sh (cached under ~/.cache/oxinfer-llama).
set -u
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
OXINFER="${OXINFER:-$SRC/build/release/apps/cli/oxinfer}"
OXI_GEN="${OXI_GEN:-$SRC/build/release/tools/gen/oxi-gen}"
VIS_TESTS="${OXI_VISION_TESTS:-$(dirname "$OXINFER")/../../tests/oxi_vision_tests}"
export NLC_DIR="${NLC_DIR:-$SRC/tools/node}"
SHARED="${OXI_SHARED_DIR:-$SRC/../shared}"
WORK="${OXI_WORK_DIR:-$(mktemp -d)}/mtmd_oracle"
PY=/usr/bin/python3
rm -rf "$WORK" && mkdir -p "$WORK"

fails=0
ok() { echo "ok   - $1"; }
bad() { echo "FAIL - $1"; fails=$((fails + 1)); }

[ -x "$VIS_TESTS" ] || { echo "FAIL - $VIS_TESTS not built"; exit 1; }
. "$SRC/tests/e2e/lib/vision_setup.sh"  # skips, $MTMD, t0, the model pair m.gguf + mmproj.gguf

# ---- images (written by Pillow): sizes that need no resize, and odd ones ----
$PY "$SRC/tests/e2e/lib/synth_images.py" "$WORK" square.png:256x256 wide.png:300x200 tall.png:100x700 tiny.png:20x12 || { echo "FAIL - writing the test images"; exit 1; }

# ---- embeddings: ours vs llama.cpp's ----
cat > "$WORK/nmse.py" <<'PYEOF'
import struct, sys
def load(p):
    b = open(p, "rb").read()
    n, d = struct.unpack("<ii", b[:8])
    return n, d, struct.unpack("<%df" % (n * d), b[8:8 + 4 * n * d])
n1, d1, a = load(sys.argv[1]); n2, d2, b = load(sys.argv[2])
assert (n1, d1) == (n2, d2), f"shapes differ: ours {n1}x{d1}, llama.cpp {n2}x{d2}"
num = sum((x - y) ** 2 for x, y in zip(a, b)); den = sum(y * y for y in b)
print(f"{n1} {num / den:.3e}")
PYEOF
for case in "square hf" "square llama" "wide llama" "tall llama" "tiny llama"; do
  set -- $case
  name=$1; mode=$2
  MTMD_DEBUG_EMBEDDINGS="$WORK/ll_$name.bin" "$MTMD" -m "$WORK/m.gguf" --mmproj "$WORK/mmproj.gguf" \
    --image "$WORK/$name.png" -p "What is in the picture?" -n 1 --temp 0 -t 2 -c 4096 \
    > "$WORK/ll_$name.out" 2> "$WORK/ll_$name.err"
  if [ ! -s "$WORK/ll_$name.bin" ]; then tail -5 "$WORK/ll_$name.err"; bad "llama-mtmd-cli encodes $name.png"; continue; fi
  OXI_VIS_MMPROJ="$WORK/mmproj.gguf" OXI_VIS_IMAGE="$WORK/$name.png" OXI_VIS_OUT="$WORK/ox_${name}_$mode.bin" OXI_VIS_MODE=$mode \
    "$VIS_TESTS" --gtest_filter=VisionDev.Embed > "$WORK/ox_$name.out" 2>&1 || { bad "oxinfer encodes $name.png"; continue; }
  r=$($PY "$WORK/nmse.py" "$WORK/ox_${name}_$mode.bin" "$WORK/ll_$name.bin" 2>&1)
  nm=${r#* }
  if $PY -c "import sys; sys.exit(0 if float('$nm') < 1e-3 else 1)" 2>/dev/null; then
    ok "image embeddings $name.png ($mode preprocessing, ${r%% *} tokens): nMSE $nm < 1e-3"
  else
    bad "image embeddings $name.png ($mode preprocessing): $r"
  fi
done

# ---- greedy tokens with images: llama-mtmd-cli vs oxinfer run (same command line) ----
gen_case() {  # name, preproc, prompt, images...
  local name=$1 pre=$2 prompt=$3; shift 3
  local imgs=() ; for f in "$@"; do imgs+=(--image "$WORK/$f"); done
  MTMD_TEST_RESPONSE_MARKER="@@RESPONSE@@" "$MTMD" -m "$WORK/m.gguf" --mmproj "$WORK/mmproj.gguf" "${imgs[@]}" \
    -p "$prompt" -n 24 --temp 0 -t 2 -c 4096 -fa off --jinja > "$WORK/gl_$name.out" 2> "$WORK/gl_$name.err"
  "$OXINFER" run -m "$WORK/m.gguf" --mmproj "$WORK/mmproj.gguf" "${imgs[@]}" --image-preproc "$pre" \
    -p "$prompt" -n 24 --temp 0 -t 2 -c 4096 -fa off --jinja > "$WORK/go_$name.out" 2> "$WORK/go_$name.err" ||
    { tail -3 "$WORK/go_$name.err"; bad "oxinfer run --image ($name)"; return; }
  if $PY - "$WORK/gl_$name.out" "$WORK/go_$name.out" <<'PYEOF'
import re, sys
# llama-mtmd-cli writes raw token bytes; oxinfer streams U+FFFD per invalid byte of an incomplete
# or invalid UTF-8 sequence: compare with runs of U+FFFD collapsed.
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
gen_case one hf "Describe this picture." square.png
gen_case marker hf "Look: <__media__> What is it?" square.png
gen_case two llama "Compare the two images." wide.png tall.png
# The HF checkpoint read in place (its own tower, no --mmproj) gives the same text.
"$OXINFER" run -m "$WORK/q35v" --image "$WORK/square.png" -p "Describe this picture." -n 24 --temp 0 -t 2 -c 4096 \
  > "$WORK/go_hf.out" 2> "$WORK/go_hf.err" || tail -3 "$WORK/go_hf.err"
if cmp -s "$WORK/go_hf.out" "$WORK/go_one.out"; then ok "HF checkpoint in place (tower from model.visual.*): same text as GGUF + mmproj"
else bad "HF checkpoint in place differs: $(head -c 200 "$WORK/go_hf.out")"; fi

# ---- log-probabilities with an image (M-RoPE positions): ours vs llama.cpp's ----
. "$SRC/tests/e2e/lib/mtmd_logprobs.sh"
logprob_case image "Look: <__media__> Describe this picture." 6 on "$WORK/square.png"

# ---- bad input: clear errors, exit 1 ----
"$OXINFER" run -m "$WORK/m.gguf" --image "$WORK/square.png" -p hi -n 1 > /dev/null 2> "$WORK/e1.err"; rc=$?
if [ $rc -eq 1 ] && grep -q "mmproj" "$WORK/e1.err"; then ok "image without a vision tower: exit 1, says why"; else bad "image without tower: rc $rc $(cat "$WORK/e1.err")"; fi
head -c 100 /dev/urandom > "$WORK/junk.png"
"$OXINFER" run -m "$WORK/m.gguf" --mmproj "$WORK/mmproj.gguf" --image "$WORK/junk.png" -p hi -n 1 > /dev/null 2> "$WORK/e2.err"; rc=$?
if [ $rc -eq 1 ] && grep -q "junk.png" "$WORK/e2.err"; then ok "corrupt image: exit 1, names the file"; else bad "corrupt image: rc $rc $(cat "$WORK/e2.err")"; fi
"$OXINFER" run -m "$WORK/m.gguf" --mmproj "$WORK/m.gguf" --image "$WORK/square.png" -p hi -n 1 > /dev/null 2> "$WORK/e3.err"; rc=$?
if [ $rc -eq 1 ] && grep -q "mmproj" "$WORK/e3.err"; then ok "a text GGUF as --mmproj: exit 1"; else bad "text GGUF as mmproj: rc $rc $(cat "$WORK/e3.err")"; fi

echo "# mtmd_oracle: $(( $(date +%s) - t0 )) s"
[ "$fails" -eq 0 ] && echo "all passed" || echo "$fails failed"
[ "$fails" -eq 0 ]
