#!/usr/bin/env bash
# Gemma 4 images through `oxinfer serve` against llama.cpp's llama-mtmd-cli (projector gemma4v), on
# the synthetic model gemma4v_oracle uses (oxi-gen gemma4 --vision, converted by us with --mmproj).
# Its text width (64) is not E2B's, so llama.cpp attends to each image's rows non-causally and the
# server must too (one pass per image, beside other slots' decodes). The real `openai` client asks:
#   1. one image, an image mid-text (the template's <|image|> between two text parts), two images,
#      the HF checkpoint served in place with its own tower: greedy text identical to
#      llama-mtmd-cli's for the same prompt;
#   2. a second turn about the same image costs no encode (prompt cache), and is llama-mtmd-cli's
#      answer for that two-turn prompt (rendered by @huggingface/jinja, not by us);
#   3. two requests with images at once (two slots, continuous batching): each gets its own answer;
#   4. bad input → 400: a corrupt image, an image too large for one bidirectional pass.
set -u
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
OXINFER="${OXINFER:-$SRC/build/release/apps/cli/oxinfer}"
OXI_GEN="${OXI_GEN:-$SRC/build/release/tools/gen/oxi-gen}"
export NLC_DIR="${NLC_DIR:-$SRC/tools/node}"
SHARED="${OXI_SHARED_DIR:-$SRC/../shared}"
WORK="${OXI_WORK_DIR:-$(mktemp -d)}/server_gemma4v"
PY=/usr/bin/python3
TEMPLATE="$SHARED/testdata/templates/google-gemma-4-31B-it.jinja"
rm -rf "$WORK" && mkdir -p "$WORK"

. "$SRC/tests/e2e/lib/mtmd_ref.sh"  # skips, $MTMD, t0

node "$SRC/tools/gen/extract_gemma4_tokenizer.mjs" "$WORK/tok" >/dev/null || { echo "FAIL - tokenizer extraction"; exit 1; }
# As gemma4v_oracle: --emb-gain 2.5 keeps greedy choices away from near-ties.
"$OXI_GEN" gemma4 --shape e2b --vision --vision-standardize --vision-pos 96 --emb-gain 2.5 --out "$WORK/g4v" --seed 5 --dtype f32 \
  --window 16 --tokenizer-dir "$WORK/tok" --chat-template "$TEMPLATE" 2>/dev/null || { echo "FAIL - oxi-gen gemma4 --vision"; exit 1; }
"$OXINFER" convert "$WORK/g4v" -o "$WORK/m.gguf" --mmproj "$WORK/mmproj.gguf" --type f32 2>/dev/null ||
  { echo "FAIL - convert --mmproj"; exit 1; }

#   square.png: 10 × 8 soft tokens: no resize
#   wide.png: resize + padding
#   big.png: more rows than one pass (512) holds
$PY "$SRC/tests/e2e/lib/synth_images.py" "$WORK" square.png:480x384 wide.png:300x200 big.png:1600x1200 || { echo "FAIL - writing the test images"; exit 1; }
head -c $(( $(stat -c %s "$WORK/square.png") / 2 )) "$WORK/square.png" > "$WORK/corrupt.png"  # a truncated PNG

# The second turn's prompt as the model's template renders it (@huggingface/jinja), the image part
# as llama-mtmd-cli's marker.
node "$SRC/tests/e2e/lib/render_second_turn.mjs" "$TEMPLATE" image "Describe this picture." "It is a picture." > "$WORK/turn2.txt" ||
  { echo "FAIL - rendering with @huggingface/jinja"; exit 1; }

ref() {  # name, llama-mtmd-cli arguments...
  local name=$1; shift
  MTMD_TEST_RESPONSE_MARKER="@@RESPONSE@@" "$MTMD" -m "$WORK/m.gguf" --mmproj "$WORK/mmproj.gguf" "$@" \
    -n 24 --temp 0 -t 2 -c 4096 > "$WORK/ref_$name.out" 2> "$WORK/ref_$name.err" ||
    { tail -5 "$WORK/ref_$name.err"; echo "FAIL - llama-mtmd-cli ($name)"; exit 1; }
}
ref one --jinja --image "$WORK/square.png" -p "Describe this picture."
ref mid --jinja --image "$WORK/wide.png" -p "Look:<__media__>What is it?"
ref two --jinja --image "$WORK/square.png" --image "$WORK/wide.png" -p "Compare the two images."
TURN2="$(cat "$WORK/turn2.txt"; printf x)"; TURN2="${TURN2%x}"
# The rendered prompt starts with <bos>: llama-mtmd-cli adds its own, so it goes.
ref turn2 --image "$WORK/square.png" -p "${TURN2#<bos>}" --jinja --chat-template "{{ messages[0]['content'] }}"

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
const dataUrl = (file) => `data:image/png;base64,${fs.readFileSync(path.join(WORK, file)).toString("base64")}`;
const image = (file) => ({ type: "image_url", image_url: { url: dataUrl(file) } });
const text = (t) => ({ type: "text", text: t });
const answer = (r) => norm((r.choices[0].message.reasoning_content ?? "") + (r.choices[0].message.content ?? ""));

const srv = await startServer(OXINFER, path.join(WORK, "m.gguf"), ["--mmproj", path.join(WORK, "mmproj.gguf"), "-c", "4096", "-np", "2", "--alias", "m"]);
const client = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: "x", maxRetries: 0, timeout: 300000 });
// Thinking on, as llama-mtmd-cli --jinja renders (Gemma 4's template opens a system turn with <|think|>).
const think = { chat_template_kwargs: { enable_thinking: true } };
const ask = (content, extra = {}) =>
  client.chat.completions.create({ model: "m", messages: [{ role: "user", content }], temperature: 0, max_tokens: 24, ...think, ...extra });

await check("/props says vision", async () => {
  assert.equal((await (await fetch(`${srv.base}/props`)).json()).modalities.vision, true);
});
await check("one image: greedy text identical to llama-mtmd-cli's", async () => {
  const r = await ask([image("square.png"), text("Describe this picture.")]);
  assert.equal(answer(r), reference("one"));
  assert.equal(r.timings.images_encoded, 1);
  assert.ok(r.usage.prompt_tokens > 80, `prompt_tokens ${r.usage.prompt_tokens} counts the 80 image rows`);
});
await check("second turn about the same image: llama-mtmd-cli's answer, no encode", async () => {
  const r = await client.chat.completions.create({ model: "m", temperature: 0, max_tokens: 24, ...think, messages: [
    { role: "user", content: [image("square.png"), text("Describe this picture.")] },
    { role: "assistant", content: "It is a picture." },
    { role: "user", content: "Say more." }] });
  assert.equal(answer(r), reference("turn2"));
  assert.equal(r.timings.images_encoded, 0, "the image rows came from the prompt cache");
});
await check("an image between two text parts (resized, padded): llama-mtmd-cli's answer", async () => {
  assert.equal(answer(await ask([text("Look:"), image("wide.png"), text("What is it?")])), reference("mid"));
});
await check("two images: llama-mtmd-cli's answer", async () => {
  const r = await ask([image("square.png"), image("wide.png"), text("Compare the two images.")]);
  assert.equal(answer(r), reference("two"));
  assert.equal(r.timings.images, 2);
});
await check("two image requests at once (two slots): each its own answer", async () => {
  const [a, b] = await Promise.all([ask([text("Look:"), image("wide.png"), text("What is it?")]),
    ask([image("square.png"), image("wide.png"), text("Compare the two images.")])]);
  assert.equal(answer(a), reference("mid"));
  assert.equal(answer(b), reference("two"));
});
async function refused(content, pattern) {
  const e = await ask(content).catch((x) => x);
  assert.equal(e.status, 400, String(e));
  assert.match(e.error?.message ?? String(e), pattern);
}
await check("corrupt image → 400", () => refused([image("corrupt.png")], /corrupt|image/));
await check("an image of more rows than one bidirectional pass → 400", () => refused([image("big.png"), text("hi")], /one pass of at most 512/));
await check("still serving after the bad requests", async () => {
  assert.equal(answer(await ask([image("square.png"), text("Describe this picture.")])), reference("one"));
});
srv.proc.kill("SIGTERM");

const hf = await startServer(OXINFER, path.join(WORK, "g4v"), ["-c", "4096", "-np", "1"]);
await check("HF checkpoint with its own tower (no --mmproj): llama-mtmd-cli's answer", async () => {
  const r = await fetch(`${hf.base}/v1/chat/completions`, { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: [image("square.png"), text("Describe this picture.")] }],
      temperature: 0, max_tokens: 24, ...think }) });
  assert.equal(r.status, 200);
  assert.equal(answer(await r.json()), reference("one"));
});
hf.proc.kill("SIGTERM");
finish();
JSEOF
rc=$?
echo "# server_gemma4v: $(( $(date +%s) - t0 )) s"
exit $rc
