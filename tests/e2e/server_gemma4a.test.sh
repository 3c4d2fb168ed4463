#!/usr/bin/env bash
# Gemma 4 audio through `oxinfer serve` and the C API against llama.cpp's llama-mtmd-cli (projector
# gemma4a), on the synthetic E2B-like model gemma4a_oracle uses (oxi-gen gemma4 --vision --audio,
# converted by us with --mmproj: one mmproj with both towers). The real `openai` client asks:
#   1. one WAV clip before the text, and a clip between two text parts (input_audio parts, greedy):
#      the text identical to llama-mtmd-cli --audio's for the same prompt (marker-less / at a
#      <__media__> marker, as the template places the part);
#      a 31 s clip (two 30-second chunks, each its own piece);
#   2. the same clip again: llama-mtmd-cli's answer with no audio encode (prompt cache); a second
#      turn about the clip: llama-mtmd-cli's answer for that two-turn prompt (rendered by
#      @huggingface/jinja, not by us), no encode;
#   3. bad input → 400 and the server still answers: corrupt audio, bad base64, a clip whose rows
#      exceed the context; audio for the model served without an audio tower (no --mmproj) → 400.
# Then the C API (oxi_context_prefill_audio through python/oxinfer.py): llama-mtmd-cli's text.
set -u
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
OXINFER="${OXINFER:-$SRC/build/release/apps/cli/oxinfer}"
OXI_GEN="${OXI_GEN:-$SRC/build/release/tools/gen/oxi-gen}"
AUD_TESTS="${OXI_AUDIO_TESTS:-$(dirname "$OXINFER")/../../tests/oxi_audio_tests}"
export NLC_DIR="${NLC_DIR:-$SRC/tools/node}"
SHARED="${OXI_SHARED_DIR:-$SRC/../shared}"
WORK="${OXI_WORK_DIR:-$(mktemp -d)}/server_gemma4a"
PY=/usr/bin/python3
TEMPLATE="$SHARED/testdata/templates/google-gemma-4-31B-it.jinja"
rm -rf "$WORK" && mkdir -p "$WORK"

[ -x "$AUD_TESTS" ] || { echo "FAIL - $AUD_TESTS not built"; exit 1; }
if "$AUD_TESTS" --gtest_filter=AudioDecode.WavMonoStereoAndRate 2>&1 | grep -q "built without"; then
  echo "SKIP: oxinfer was built without libsndfile / libsamplerate (scripts/setup.sh installs them)"; exit 0
fi
. "$SRC/tests/e2e/lib/mtmd_ref.sh"  # skips, $MTMD, t0

node "$SRC/tools/gen/extract_gemma4_tokenizer.mjs" "$WORK/tok" >/dev/null || { echo "FAIL - tokenizer extraction"; exit 1; }
# As gemma4a_oracle (--emb-gain 2.5: decisive greedy choices).
"$OXI_GEN" gemma4 --shape e2b --vision --audio --emb-gain 2.5 --out "$WORK/g4" --seed 5 --dtype f32 \
  --window 16 --tokenizer-dir "$WORK/tok" --chat-template "$TEMPLATE" 2>/dev/null || { echo "FAIL - oxi-gen gemma4 --audio"; exit 1; }
"$OXINFER" convert "$WORK/g4" -o "$WORK/m.gguf" --mmproj "$WORK/mmproj.gguf" --type f32 2>/dev/null ||
  { echo "FAIL - convert --mmproj"; exit 1; }

# Clips at 16 kHz mono (Python's wave module: no resampling on either side), a corrupt one, and a
# 90 s one (≈ 2250 rows: more than the server's 2048-entry context).
$PY - "$WORK" <<'PYEOF' || { echo "FAIL - writing the clips"; exit 1; }
import sys, math, struct, wave, random, array
d = sys.argv[1]
def write(name, fr):
    with wave.open(f"{d}/{name}", "wb") as w:
        w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000)
        w.writeframes(array.array("h", fr).tobytes())
def clip(seconds, f0):
    sr = 16000; out = []
    for i in range(int(sr * seconds)):
        t = i / sr
        f = f0 * (1 + int(t / 0.5) % 3 * 0.5)        # a tone that steps every half second
        out.append(int(11000 * math.sin(2 * math.pi * f * t) + 2500 * math.sin(2 * math.pi * 97 * t)))
    return out
write("tones.wav", clip(2.0, 440))
write("short.wav", clip(1.0, 300))
write("long31.wav", clip(31.0, 220))
write("long.wav", clip(1.0, 220) * 90)
random.seed(5)
b = bytearray(open(d + "/short.wav", "rb").read()[:44]); b[8:12] = b"JUNK"      # not a WAV header
open(d + "/corrupt.wav", "wb").write(bytes(b) + bytes(random.randrange(256) for _ in range(3000)))
PYEOF

# The second turn's prompt as the model's template renders it (@huggingface/jinja), the audio part
# as llama-mtmd-cli's marker.
node "$SRC/tests/e2e/lib/render_second_turn.mjs" "$TEMPLATE" audio "Describe the sound." "It is a sound." > "$WORK/turn2.txt" ||
  { echo "FAIL - rendering with @huggingface/jinja"; exit 1; }

ref() {  # name, llama-mtmd-cli arguments...
  local name=$1; shift
  MTMD_TEST_RESPONSE_MARKER="@@RESPONSE@@" "$MTMD" -m "$WORK/m.gguf" --mmproj "$WORK/mmproj.gguf" "$@" \
    -n 16 --temp 0 -t 2 -c 4096 > "$WORK/ref_$name.out" 2> "$WORK/ref_$name.err" ||
    { tail -5 "$WORK/ref_$name.err"; echo "FAIL - llama-mtmd-cli ($name)"; exit 1; }
}
ref one --jinja --audio "$WORK/tones.wav" -p "Describe the sound."
# The clip between two text parts: a prompt whose 16 greedy steps are clear-cut on both of
# llama.cpp's attention paths and ours (top-2 margin at least 0.11 in log-probability, measured
# with tests/e2e/llama_mtmd_logprobs.cpp). The earlier "Now describe it." sat on a tie: its first
# token was 0.007 ahead on llama.cpp's -fa on path and behind on its -fa off path, so no exact
# text could be asked of it.
ref mid --jinja --audio "$WORK/short.wav" -p "Hear this:<__media__>Now summarise it."
ref long --jinja --audio "$WORK/long31.wav" -p "Transcribe."
TURN2="$(cat "$WORK/turn2.txt"; printf x)"; TURN2="${TURN2%x}"
# The rendered prompt starts with <bos>: llama-mtmd-cli adds its own, so it goes.
ref turn2 --audio "$WORK/tones.wav" -p "${TURN2#<bos>}" --jinja --chat-template "{{ messages[0]['content'] }}"

OXI_G4_WORK="$WORK" OXI_E2E_LIB="$SRC/tests/e2e/lib" OXINFER="$OXINFER" node --input-type=module - <<'JSEOF'
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import assert from "node:assert/strict";
const { OXINFER, NLC_DIR, OXI_G4_WORK: WORK } = process.env;
const { startServer, checks, mtmdNorm: norm, mtmdReference } = await import(path.join(process.env.OXI_E2E_LIB, "server.mjs"));
const require = createRequire(path.join(NLC_DIR, "package.json"));
const OpenAI = require("openai").default;
const { check, finish } = checks();

const reference = (name) => mtmdReference(WORK, name);
const audio = (file, data) => ({ type: "input_audio",
  input_audio: { data: data ?? fs.readFileSync(path.join(WORK, file)).toString("base64"), format: "wav" } });
const text = (t) => ({ type: "text", text: t });
const answer = (r) => norm((r.choices[0].message.reasoning_content ?? "") + (r.choices[0].message.content ?? ""));
// Thinking on, as llama-mtmd-cli --jinja renders (Gemma 4's template opens a system turn with <|think|>).
const think = { chat_template_kwargs: { enable_thinking: true } };
const client = (srv) => new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: "x", maxRetries: 0, timeout: 300000 });
const asker = (c) => (content) =>
  c.chat.completions.create({ model: "m", messages: [{ role: "user", content }], temperature: 0, max_tokens: 16, ...think });
async function refused(ask, content, pattern) {
  const e = await ask(content).catch((x) => x);
  assert.equal(e.status, 400, String(e));
  assert.match(e.error?.message ?? String(e), pattern);
}

const srv = await startServer(OXINFER, path.join(WORK, "m.gguf"),
  ["--mmproj", path.join(WORK, "mmproj.gguf"), "-c", "2048", "-np", "1", "--alias", "m", "--max-body-bytes", "16000000"]);
const ask = asker(client(srv));
await check("/props says audio", async () => {
  assert.equal((await (await fetch(`${srv.base}/props`)).json()).modalities.audio, true);
});
await check("one clip: greedy text identical to llama-mtmd-cli's", async () => {
  const r = await ask([audio("tones.wav"), text("Describe the sound.")]);
  assert.equal(answer(r), reference("one"));
  assert.equal(r.timings.audio, 1);
  assert.equal(r.timings.audio_encoded, 1);
  assert.ok(r.usage.prompt_tokens > 50, `prompt_tokens ${r.usage.prompt_tokens} counts the clip's 50 rows`);
});
await check("the same clip again: llama-mtmd-cli's answer, no audio encode", async () => {
  const r = await ask([audio("tones.wav"), text("Describe the sound.")]);
  assert.equal(answer(r), reference("one"));
  assert.equal(r.timings.audio_encoded, 0, "the rows came from the prompt cache");
});
await check("a second turn about the clip: llama-mtmd-cli's answer, no encode", async () => {
  const r = await client(srv).chat.completions.create({ model: "m", temperature: 0, max_tokens: 16, ...think, messages: [
    { role: "user", content: [audio("tones.wav"), text("Describe the sound.")] },
    { role: "assistant", content: "It is a sound." },
    { role: "user", content: "Say more." }] });
  assert.equal(answer(r), reference("turn2"));
  assert.equal(r.timings.audio_encoded, 0);
});
await check("a 31 s clip (two 30-second chunks): llama-mtmd-cli's answer", async () => {
  const r = await ask([audio("long31.wav"), text("Transcribe.")]);
  assert.equal(answer(r), reference("long"));
  assert.ok(r.usage.prompt_tokens > 775, `prompt_tokens ${r.usage.prompt_tokens} counts the clip's rows`);
});
await check("text + clip + text: llama-mtmd-cli's answer", async () => {
  assert.equal(answer(await ask([text("Hear this:"), audio("short.wav"), text("Now summarise it.")])), reference("mid"));
});
await check("corrupt audio → 400", () => refused(ask, [audio("corrupt.wav"), text("hi")], /corrupt|not a WAV/));
await check("bad base64 → 400", () => refused(ask, [audio(null, "UklG%%%"), text("hi")], /not valid base64/));
await check("a clip whose rows exceed the context → 400", () =>
  refused(ask, [audio("long.wav"), text("hi")], /image or audio rows\); the context holds 2048/));
await check("still serving after the bad requests", async () => {
  assert.equal(answer(await ask([text("Hear this:"), audio("short.wav"), text("Now summarise it.")])), reference("mid"));
});
srv.proc.kill("SIGTERM");

const plain = await startServer(OXINFER, path.join(WORK, "m.gguf"), ["-c", "2048", "-np", "1", "--alias", "m"]);
const ask2 = asker(client(plain));
await check("audio for a model served without an audio tower → 400", () =>
  refused(ask2, [audio("short.wav"), text("hi")], /takes no audio/));
await check("... and it still answers text", async () => {
  assert.ok((await ask2("Hello")).choices[0].message !== undefined);
});
plain.proc.kill("SIGTERM");
finish();
JSEOF
rc=$?

# The C API (oxi_context_prefill_audio, through the Python binding): llama-mtmd-cli's text.
if OXINFER_LIB="$(dirname "$OXINFER")/../../src/api/liboxinfer.so" PYTHONPATH="$SRC/python" \
   OXI_CAPI_N=16 $PY "$SRC/tests/e2e/lib/c_api_images.py" "$WORK/m.gguf" "$WORK/mmproj.gguf" "$WORK/ref_mid.out" "Hear this:<__media__>Now summarise it." \
   "$WORK/short.wav" > "$WORK/capi.out" 2>&1
then echo "ok   - C API audio (oxi_context_prefill_audio): greedy text identical to llama-mtmd-cli's"
else cat "$WORK/capi.out"; echo "FAIL - C API audio differs from llama-mtmd-cli"; rc=1; fi
# The C API's refusals: no tower, corrupt bytes, a clip larger than the context left — each an
# OXI_ERR_INVALID_ARGUMENT naming why, nothing appended.
if OXINFER_LIB="$(dirname "$OXINFER")/../../src/api/liboxinfer.so" PYTHONPATH="$SRC/python" $PY - "$WORK" > "$WORK/capi_bad.out" 2>&1 <<'PYEOF'
import sys, oxinfer
d = sys.argv[1]
def refused(ctx, data, want):
    try:
        ctx.prefill_audio(data)
    except oxinfer.OxinferError as e:
        assert e.status == 1 and want in str(e), (e.status, str(e))
        assert ctx.n_past == 0, ctx.n_past
        print("refused:", e)
        return
    raise AssertionError("accepted: " + want)
refused(oxinfer.Model(d + "/m.gguf", n_threads=2).context(256), open(d + "/short.wav", "rb").read(), "no audio tower")
m = oxinfer.Model(d + "/m.gguf", n_threads=2, mmproj=d + "/mmproj.gguf")
refused(m.context(256), open(d + "/corrupt.wav", "rb").read(), "not a WAV")
refused(m.context(256), open(d + "/long31.wav", "rb").read(), "entries; the context has 256 left")
PYEOF
then echo "ok   - C API audio refusals (no tower, corrupt, too long): OXI_ERR_INVALID_ARGUMENT, nothing appended"
else cat "$WORK/capi_bad.out"; echo "FAIL - C API audio refusals"; rc=1; fi
echo "# server_gemma4a: $(( $(date +%s) - t0 )) s"
exit $rc
