#!/usr/bin/env bash
# Gemma 4 audio input against llama.cpp's multimodal library (mtmd, projector gemma4a), on a
# synthetic E2B-like model with vision and audio towers (oxi-gen gemma4 --vision --audio, random
# weights, f32) converted by us (oxinfer convert --mmproj: one mmproj with both towers):
#   1. llama-mtmd-cli loads our pair and encodes a clip: our audio embeddings equal its
#      MTMD_DEBUG_EMBEDDINGS dump within 1e-3 normalised MSE; the HF checkpoint's tower read in
#      place equals the mmproj's;
#   2. greedy text identical to llama-mtmd-cli --audio's: one clip (marker-less prompt), a clip and
#      an image interleaved at <__media__> markers, a 31 s clip (two 30-second chunks), the clip as
#      FLAC and as MP3;
#      the HF checkpoint in place gives the same text as GGUF + mmproj; the log-probabilities of
#      the greedy steps with a clip (and a clip + an image) equal llama.cpp's within 1.5 × its own
#      -fa on/off spread, at least 0.05 (tests/e2e/llama_mtmd_logprobs.cpp);
#   3. bad input: a zero-length file, a corrupt WAV, a PNG given as audio, audio for a model with
#      no audio tower (a GGUF without --mmproj): exit 1 with a message.
# Clips are WAVs written here (Python's wave module) at 16 kHz mono, so no resampling is involved
# (llama.cpp resamples with miniaudio, we with libsamplerate). Skips like the vision oracle when the
# llama-mtmd-cli reference cannot be had.
set -u
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
OXINFER="${OXINFER:-$SRC/build/release/apps/cli/oxinfer}"
OXI_GEN="${OXI_GEN:-$SRC/build/release/tools/gen/oxi-gen}"
AUD_TESTS="${OXI_AUDIO_TESTS:-$(dirname "$OXINFER")/../../tests/oxi_audio_tests}"
export NLC_DIR="${NLC_DIR:-$SRC/tools/node}"
SHARED="${OXI_SHARED_DIR:-$SRC/../shared}"
WORK="${OXI_WORK_DIR:-$(mktemp -d)}/gemma4a_oracle"
PY=/usr/bin/python3
rm -rf "$WORK" && mkdir -p "$WORK"

fails=0
ok() { echo "ok   - $1"; }
bad() { echo "FAIL - $1"; fails=$((fails + 1)); }

[ -x "$AUD_TESTS" ] || { echo "FAIL - $AUD_TESTS not built"; exit 1; }
if "$AUD_TESTS" --gtest_filter=AudioDecode.WavMonoStereoAndRate 2>&1 | grep -q "built without"; then
  echo "SKIP: oxinfer was built without libsndfile / libsamplerate (scripts/setup.sh installs them)"; exit 0
fi
. "$SRC/tests/e2e/lib/mtmd_ref.sh"  # skips, $MTMD, t0

node "$SRC/tools/gen/extract_gemma4_tokenizer.mjs" "$WORK/tok" >/dev/null || { echo "FAIL - tokenizer extraction"; exit 1; }
TPL="$SHARED/testdata/templates/google-gemma-4-31B-it.jinja"
# Audio tower: hidden 64, 2 conformer layers, 4 heads, subsampling channels 16/8, output 96,
# clipped linears. --emb-gain 2.5 as in the vision oracle (decisive greedy choices).
"$OXI_GEN" gemma4 --shape e2b --vision --audio --emb-gain 2.5 --out "$WORK/g4" --seed 5 --dtype f32 \
  --window 16 --tokenizer-dir "$WORK/tok" --chat-template "$TPL" 2>/dev/null || { echo "FAIL - oxi-gen gemma4 --audio"; exit 1; }
"$OXINFER" convert "$WORK/g4" -o "$WORK/m.gguf" --mmproj "$WORK/mmproj.gguf" --type f32 2>/dev/null ||
  { echo "FAIL - convert --mmproj"; exit 1; }

# ---- clips (Python's wave module) and an image (Pillow) ----
$PY - "$WORK" <<'PYEOF'
import sys, math, struct, wave, random
from PIL import Image
d = sys.argv[1]
def clip(name, seconds, f0):
    sr = 16000; n = int(sr * seconds)
    fr = []
    for i in range(n):
        t = i / sr
        f = f0 * (1 + int(t / 0.5) % 3 * 0.5)        # a tone that steps every half second
        fr.append(int(11000 * math.sin(2 * math.pi * f * t) + 2500 * math.sin(2 * math.pi * 97 * t)))
    with wave.open(f"{d}/{name}", "wb") as w:
        w.setnchannels(1); w.setsampwidth(2); w.setframerate(sr)
        w.writeframes(struct.pack("<%dh" % n, *fr))
clip("tones.wav", 2.0, 440)
clip("short.wav", 1.0, 300)
clip("long.wav", 31.0, 220)
random.seed(5)
im = Image.new("RGB", (480, 384)); px = im.load()
for y in range(384):
    for x in range(480): px[x, y] = ((x * 7 + y * 3) % 256, (x * y) % 256, random.randrange(256))
im.save(d + "/square.png")
open(d + "/empty.wav", "wb").close()
b = bytearray(open(d + "/short.wav", "rb").read()[:44]); b[8:12] = b"JUNK"      # not a WAV header
open(d + "/corrupt.wav", "wb").write(bytes(b) + bytes(random.randrange(256) for _ in range(3000)))
PYEOF

# ---- greedy tokens: llama-mtmd-cli vs oxinfer run (same command line) ----
gen_case() {  # name, prompt, media options...
  local name=$1 prompt=$2; shift 2
  local dump=/dev/null; [ "$name" = one ] && dump="$WORK/ll_tones.bin"
  MTMD_DEBUG_EMBEDDINGS="$dump" MTMD_TEST_RESPONSE_MARKER="@@RESPONSE@@" "$MTMD" -m "$WORK/m.gguf" --mmproj "$WORK/mmproj.gguf" "$@" \
    -p "$prompt" -n 24 --temp 0 -t 2 -c 4096 --jinja > "$WORK/gl_$name.out" 2> "$WORK/gl_$name.err"
  "$OXINFER" run -m "$WORK/m.gguf" --mmproj "$WORK/mmproj.gguf" "$@" \
    -p "$prompt" -n 24 --temp 0 -t 2 -c 4096 --jinja > "$WORK/go_$name.out" 2> "$WORK/go_$name.err" ||
    { tail -3 "$WORK/go_$name.err"; bad "oxinfer run --audio ($name)"; return; }
  if $PY - "$WORK/gl_$name.out" "$WORK/go_$name.out" <<'PYEOF'
import re, sys
fix = lambda s: re.sub("\ufffd+", "\ufffd", s)
ll = open(sys.argv[1], encoding="utf-8", errors="replace").read()
assert "@@RESPONSE@@" in ll, "no response marker in llama-mtmd-cli's output"
ll = ll.split("@@RESPONSE@@", 1)[1].strip()
ox = open(sys.argv[2], encoding="utf-8", errors="replace").read().strip()
print("llama.cpp:", repr(ll)); print("oxinfer:  ", repr(ox))
sys.exit(0 if fix(ll) == fix(ox) and ll else 1)
PYEOF
  then ok "greedy text with audio ($name) identical to llama-mtmd-cli's"; else bad "greedy text with audio ($name) differs"; fi
}
gen_case one "Describe the sound." --audio "$WORK/tones.wav"
gen_case mixed "Listen: <__media__> Now look: <__media__> Same mood?" --audio "$WORK/short.wav" --image "$WORK/square.png"
gen_case long "<__media__>Transcribe." --audio "$WORK/long.wav"
# Log-probabilities with a clip and with a clip + an image: ours vs llama.cpp's.
. "$SRC/tests/e2e/lib/mtmd_logprobs.sh"
logprob_case audio "<__media__>Describe the sound." 6 on "$WORK/tones.wav"
logprob_case mixed "Listen: <__media__> Now look: <__media__> Same mood?" 6 on "$WORK/short.wav" "$WORK/square.png"
# FLAC and MP3 (written by libsndfile's encoders; llama.cpp decodes both with miniaudio, we with
# libsndfile): FLAC gives the same text as llama-mtmd-cli's; MP3 decoders (dr_mp3 there, mpg123
# here) round differently (embeddings nMSE ~7e-6), enough to part greedy text on this random
# model after a few tokens, so MP3 is compared by its embeddings (below).
for fmt in flac mp3; do
  OXI_AUD_IN="$WORK/short.wav" OXI_AUD_OUT="$WORK/short.$fmt" OXI_AUD_FORMAT=$fmt "$AUD_TESTS" --gtest_filter=AudioDev.Convert \
    > "$WORK/conv_$fmt.out" 2>&1 || bad "writing short.$fmt"
done
gen_case flac "What is this?" --audio "$WORK/short.flac"
"$OXINFER" run -m "$WORK/g4" --audio "$WORK/tones.wav" -p "Describe the sound." -n 24 --temp 0 -t 2 -c 4096 \
  > "$WORK/go_hf.out" 2> "$WORK/go_hf.err" || tail -3 "$WORK/go_hf.err"
if cmp -s "$WORK/go_hf.out" "$WORK/go_one.out"; then ok "HF checkpoint in place (its own audio tower): same text as GGUF + mmproj"
else bad "HF checkpoint in place differs: $(head -c 200 "$WORK/go_hf.out")"; fi
# `oxinfer chat --audio` (docs/cli.md "Images and audio"): the first reply is llama-mtmd-cli's
# answer for the same clip and prompt; the second turn keeps the clip's rows and encodes nothing.
printf '%s\n' "Describe the sound." "Again?" | OXI_CHAT_DEBUG=1 "$OXINFER" chat -m "$WORK/m.gguf" --mmproj "$WORK/mmproj.gguf" \
  --audio "$WORK/tones.wav" -n 24 --temp 0 -t 2 -c 4096 > "$WORK/chat.out" 2> "$WORK/chat.err"; rc=$?
if [ $rc -eq 0 ] && $PY - "$WORK/gl_one.out" "$WORK/chat.out" "$WORK/chat.err" <<'PYEOF'
import re, sys
fix = lambda s: re.sub("\ufffd+", "\ufffd", s).strip()
rd = lambda p: open(p, encoding="utf-8", errors="replace").read()
ll = rd(sys.argv[1]).split("@@RESPONSE@@", 1)[1].strip()
out, err = rd(sys.argv[2]), rd(sys.argv[3])
print("llama.cpp:", repr(ll)); print("oxinfer chat:", repr(out[:len(ll) + 20]))
assert ll and fix(out).startswith(fix(ll)), "the first reply differs"
turns = [tuple(map(int, m)) for m in re.findall(r"\[prompt (\d+) entries, (\d+) reused, (\d+) files encoded in all\]", err)]
print("turns (entries, reused, encoded):", turns)
assert len(turns) == 2 and turns[1][1] >= turns[0][0] - 8 and turns[1][2] == 1, turns
PYEOF
then ok "chat --audio: first reply = llama-mtmd-cli's, the second turn keeps the clip's rows (no re-encode)"
else bad "chat --audio: rc $rc $(tail -3 "$WORK/chat.err")"; fi

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
MTMD_DEBUG_EMBEDDINGS="$WORK/ll_short.bin" "$MTMD" -m "$WORK/m.gguf" --mmproj "$WORK/mmproj.gguf" --audio "$WORK/short.mp3" \
  -p hi -n 1 --temp 0 -t 2 -c 4096 --jinja > "$WORK/ll_short.out" 2> "$WORK/ll_short.err"
if [ -s "$WORK/ll_tones.bin" ] && [ -s "$WORK/ll_short.bin" ]; then
  for clip in tones.wav short.mp3; do
    OXI_AUD_MMPROJ="$WORK/mmproj.gguf" OXI_AUD_IN="$WORK/$clip" OXI_AUD_OUT="$WORK/ox_${clip%.*}.bin" \
      "$AUD_TESTS" --gtest_filter=AudioDev.Embed > "$WORK/ox_${clip%.*}.out" 2>&1 || bad "oxinfer encodes $clip"
    r=$($PY "$WORK/nmse.py" "$WORK/ox_${clip%.*}.bin" "$WORK/ll_${clip%.*}.bin" 2>&1)
    if below "${r#* }" 1e-3; then ok "audio embeddings $clip (${r%% *} tokens): nMSE ${r#* } < 1e-3"; else bad "audio embeddings $clip: $r"; fi
  done
  OXI_AUD_HF="$WORK/g4" OXI_AUD_IN="$WORK/tones.wav" OXI_AUD_OUT="$WORK/oh_tones.bin" \
    "$AUD_TESTS" --gtest_filter=AudioDev.Embed > "$WORK/oh_tones.out" 2>&1 || bad "the HF audio tower in place encodes tones.wav"
  r=$($PY "$WORK/nmse.py" "$WORK/oh_tones.bin" "$WORK/ox_tones.bin" 2>&1)
  if below "${r#* }" 1e-10; then ok "HF audio tower in place == our mmproj (nMSE ${r#* })"; else bad "HF audio tower vs mmproj: $r"; fi
else
  tail -5 "$WORK/gl_one.err"; bad "llama-mtmd-cli dumps the audio embeddings"
fi

# ---- bad input: clear errors, exit 1 ----
err_case() {  # name, expected message (grep -E), run options...
  local name=$1 want=$2; shift 2
  "$OXINFER" run -m "$WORK/m.gguf" "$@" -p hi -n 1 > /dev/null 2> "$WORK/e_$name.err"; local rc=$?
  if [ $rc -eq 1 ] && grep -qE "$want" "$WORK/e_$name.err"; then ok "$name: exit 1, says why"
  else bad "$name: rc $rc $(head -c 300 "$WORK/e_$name.err")"; fi
}
err_case "zero-length audio file" "empty audio file" --mmproj "$WORK/mmproj.gguf" --audio "$WORK/empty.wav"
err_case "corrupt audio file" "corrupt|not a WAV" --mmproj "$WORK/mmproj.gguf" --audio "$WORK/corrupt.wav"
err_case "unsupported format (a PNG as audio)" "not a WAV, FLAC, Ogg or MP3" --mmproj "$WORK/mmproj.gguf" --audio "$WORK/square.png"
err_case "audio without a tower" "needs --mmproj" --audio "$WORK/tones.wav"
echo "# gemma4a_oracle: $(( $(date +%s) - t0 )) s"
[ "$fails" -eq 0 ] && echo "all passed" || echo "$fails failed"
[ "$fails" -eq 0 ]
