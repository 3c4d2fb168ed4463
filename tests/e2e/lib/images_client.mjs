// The client half of server_images.test.sh (which prepared the model, the images and
// llama-mtmd-cli's answers in $OXI_IMG_WORK): asks `oxinfer serve --mmproj` with the real `openai`
// client (chat completions and responses) and the Anthropic / ollama request shapes, and compares
// with llama-mtmd-cli.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import assert from "node:assert/strict";
import { startServer, checks, mtmdNorm as norm, mtmdReference } from "./server.mjs";

const { OXINFER, NLC_DIR, OXI_IMG_WORK: WORK, OXI_IMG_MODEL: MODEL, OXI_IMG_MMPROJ: MMPROJ } = process.env;
const require = createRequire(path.join(NLC_DIR, "package.json"));
const OpenAI = require("openai").default;
const { check, finish } = checks();

const reference = (name) => mtmdReference(WORK, name);
const dataUrl = (file, type = "image/png") => `data:${type};base64,${fs.readFileSync(file).toString("base64")}`;
const square = path.join(WORK, "media/square.png");
const image = (url) => ({ type: "image_url", image_url: { url } });
const text = (t) => ({ type: "text", text: t });
// The whole answer, reasoning included (a random model rarely closes <think>).
const answer = (r) => norm((r.choices[0].message.reasoning_content ?? "") + (r.choices[0].message.content ?? ""));

const srv = await startServer(OXINFER, MODEL, ["--mmproj", MMPROJ, "-c", "4096", "-np", "2", "--alias", "m", "--media-dir", path.join(WORK, "media")]);
const client = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: "x", maxRetries: 0, timeout: 300000 });
const ask = (content, extra = {}) =>
  client.chat.completions.create({ model: "m", messages: [{ role: "user", content }], temperature: 0, max_tokens: 24, ...extra });

let first = null;
await check("/props says vision", async () => {
  assert.equal((await (await fetch(`${srv.base}/props`)).json()).modalities.vision, true);
});
await check("one image (data: URL): greedy text identical to llama-mtmd-cli's", async () => {
  first = await ask([image(dataUrl(square)), text("Describe this picture.")]);
  assert.equal(answer(first), reference("one"));
  assert.equal(first.timings.images, 1);
  assert.equal(first.timings.images_encoded, 1);
  assert.ok(first.usage.prompt_tokens > 64, `prompt_tokens ${first.usage.prompt_tokens} counts the 64 image rows`);
});

await check("second turn about the same image: llama-mtmd-cli's answer, image not encoded again", async () => {
  const r = await client.chat.completions.create({ model: "m", temperature: 0, max_tokens: 24, messages: [
    { role: "user", content: [image(dataUrl(square)), text("Describe this picture.")] },
    { role: "assistant", content: "It is a picture." },
    { role: "user", content: "Say more." }] });
  assert.equal(answer(r), reference("turn2"));
  assert.equal(r.timings.images_encoded, 0, "the image rows came from the prompt cache");
  assert.ok(r.usage.prompt_tokens_details.cached_tokens > 64, JSON.stringify(r.usage));
});

await check("another image after the cached one: encoded, llama-mtmd-cli's answer for it", async () => {
  const r = await ask([image(dataUrl(path.join(WORK, "wide.png"))), text("Describe this picture.")]);
  assert.equal(r.timings.images_encoded, 1);
  assert.equal(answer(r), reference("wide"));
});

await check("two images in one message: identical to llama-mtmd-cli's", async () => {
  const r = await ask([image(dataUrl(square)), image(dataUrl(path.join(WORK, "wide.png"))), text("Compare the two images.")]);
  assert.equal(answer(r), reference("two"));
  assert.equal(r.timings.images, 2);
});

await check("the same new image three times: llama-mtmd-cli's answer, encoded once", async () => {
  const u = dataUrl(path.join(WORK, "third.png"));
  const r = await ask([image(u), image(u), image(u), text("Compare the images.")]);
  assert.equal(answer(r), reference("three"));
  assert.equal(r.timings.images, 3);
  assert.equal(r.timings.images_encoded, 1, "the encode cache serves the repeats");
});

await check("file:// URL under --media-dir: the same answer as the data: URL", async () => {
  const r = await ask([image(`file://${square}`), text("Describe this picture.")]);
  assert.equal(answer(r), reference("one"));
});

await check("streaming with an image: the same text", async () => {
  const s = await ask([image(dataUrl(square)), text("Describe this picture.")], { stream: true });
  let t = "";
  for await (const c of s) t += (c.choices[0]?.delta?.reasoning_content ?? "") + (c.choices[0]?.delta?.content ?? "");
  assert.equal(norm(t), reference("one"));
});

await check("Anthropic /v1/messages image block (thinking off, its default): llama-mtmd-cli's answer", async () => {
  const r = await fetch(`${srv.base}/v1/messages`, { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ model: "m", max_tokens: 24, temperature: 0, messages: [{ role: "user", content: [
      { type: "image", source: { type: "base64", media_type: "image/png", data: fs.readFileSync(square).toString("base64") } },
      { type: "text", text: "Describe this picture." }] }] }) });
  assert.equal(r.status, 200, await r.clone().text());
  const j = await r.json();
  assert.equal(norm(j.content.map((b) => b.thinking ?? b.text ?? "").join("")), reference("nothink"));
});

await check("OpenAI /v1/responses input_image (reasoning effort none): llama-mtmd-cli's answer", async () => {
  const r = await client.responses.create({ model: "m", max_output_tokens: 24, temperature: 0, reasoning: { effort: "none" },
    input: [{ role: "user", content: [{ type: "input_image", detail: "auto", image_url: dataUrl(square) },
      { type: "input_text", text: "Describe this picture." }] }] });
  assert.equal(norm(r.output_text), reference("nothink"));
});

await check("ollama /api/chat images: the same answer", async () => {
  const r = await fetch(`${srv.base}/api/chat`, { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ model: "m", stream: false, options: { temperature: 0, num_predict: 24 }, messages: [
      { role: "user", content: "Describe this picture.", images: [fs.readFileSync(square).toString("base64")] }] }) });
  assert.equal(r.status, 200, await r.clone().text());
  const j = await r.json();
  assert.equal(norm((j.message.thinking ?? "") + j.message.content), reference("one"));
});

// ---- bad input: 4xx naming the reason, the server keeps serving ----
async function refused(content, pattern, status = 400) {
  const e = await ask(content).catch((x) => x);
  assert.equal(e.status, status, String(e));
  assert.match(e.error?.message ?? String(e), pattern);
}
const b64 = (s) => Buffer.from(s).toString("base64");
await check("bad base64 → 400", () => refused([image("data:image/png;base64,@@not base64@@")], /base64/));
await check("not an image → 400", () => refused([image(`data:image/png;base64,${b64("hello, this is text")}`)], /not a PNG, JPEG, WebP, GIF or BMP/));
await check("corrupt PNG → 400", () => refused([image(dataUrl(path.join(WORK, "corrupt.png")))], /corrupt|image/));
await check("20000 × 20000 PNG header (decompression bomb) → 400 before decoding", () =>
  refused([image(dataUrl(path.join(WORK, "bomb.png")))], /20000/));
await check("http(s) URL → 400, never fetched", () => refused([image("https://example.com/cat.png")], /not fetched/));
await check("file:// outside --media-dir (and a symlink out of it) → 400", async () => {
  await refused([image(`file://${path.join(WORK, "outside.png")}`)], /media-dir/);
  await refused([image(`file://${path.join(WORK, "media/link.png")}`)], /media-dir/);
  await refused([image(`file://${path.join(WORK, "media/../outside.png")}`)], /media-dir/);
});
await check("image part without a url → 400", () => refused([{ type: "image_url", image_url: {} }], /image_url/));
await check("server still answers after the bad requests", async () => {
  assert.equal((await fetch(`${srv.base}/health`)).status, 200);
  const r = await ask([image(dataUrl(square)), text("Describe this picture.")]);
  assert.equal(answer(r), reference("one"));
});
srv.proc.kill("SIGTERM");

// --image-preproc llama: an image HF's processor and llama.cpp's mtmd resize differently (200 × 150:
// HF stretches it to 320 × 224, 70 rows; mtmd pads it to 192 × 160, 30 rows) gets llama-mtmd-cli's
// rows and text; the default (HF) server makes more rows of it.
let hfRows = null;
await check("--image-preproc hf (default): HF's resize of a 200 × 150 image (70 rows)", async () => {
  const d = await startServer(OXINFER, MODEL, ["--mmproj", MMPROJ, "-c", "4096", "-np", "1", "--alias", "m"]);
  try {
    const c = new OpenAI({ baseURL: `${d.base}/v1`, apiKey: "x", maxRetries: 0, timeout: 300000 });
    const r = await c.chat.completions.create({ model: "m", temperature: 0, max_tokens: 1,
      messages: [{ role: "user", content: [image(dataUrl(path.join(WORK, "odd.png"))), text("Describe this picture.")] }] });
    hfRows = r.usage.prompt_tokens;
  } finally { d.proc.kill("SIGTERM"); }
});
await check("--image-preproc llama: llama-mtmd-cli's answer for that image, 40 rows fewer", async () => {
  const l = await startServer(OXINFER, MODEL, ["--mmproj", MMPROJ, "-c", "4096", "-np", "1", "--alias", "m", "--image-preproc", "llama"]);
  try {
    const c = new OpenAI({ baseURL: `${l.base}/v1`, apiKey: "x", maxRetries: 0, timeout: 300000 });
    const r = await c.chat.completions.create({ model: "m", temperature: 0, max_tokens: 24,
      messages: [{ role: "user", content: [image(dataUrl(path.join(WORK, "odd.png"))), text("Describe this picture.")] }] });
    assert.equal(answer(r), reference("odd"));
    assert.equal(hfRows - r.usage.prompt_tokens, 70 - 30, `prompt tokens: hf ${hfRows}, llama ${r.usage.prompt_tokens}`);
  } finally { l.proc.kill("SIGTERM"); }
});
await check("--image-preproc other → the server refuses to start", async () => {
  await assert.rejects(startServer(OXINFER, MODEL, ["--mmproj", MMPROJ, "--image-preproc", "bicubic"]), /hf or llama/);
});

// The HF checkpoint served in place: its own tower (model.visual.*), no --mmproj.
const hf = await startServer(OXINFER, path.join(WORK, "q35v"), ["-c", "4096", "-np", "1"]);
await check("HF checkpoint with its own tower (no --mmproj): llama-mtmd-cli's answer", async () => {
  const r = await fetch(`${hf.base}/v1/chat/completions`, { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: [image(dataUrl(square)), text("Describe this picture.")] }],
      temperature: 0, max_tokens: 24 }) });
  assert.equal(r.status, 200);
  assert.equal(answer(await r.json()), reference("one"));
});
hf.proc.kill("SIGTERM");

// A small context: more image rows than it holds. No tower: images refused.
const small = await startServer(OXINFER, MODEL, ["--mmproj", MMPROJ, "-c", "1024", "-np", "1"]);
await check("more image rows than the context holds → 400", async () => {
  const r = await fetch(`${small.base}/v1/chat/completions`, { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: [image(dataUrl(path.join(WORK, "big.png"))), text("hi")] }], max_tokens: 4 }) });
  assert.equal(r.status, 400);
  assert.match((await r.json()).error.message, /entries \(text tokens and image or audio rows\); the context holds 1024/);
  const st = await fetch(`${small.base}/v1/chat/completions`, { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ stream: true, messages: [{ role: "user", content: [image(dataUrl(path.join(WORK, "big.png"))), text("hi")] }] }) });
  assert.equal(st.status, 400, "streamed: refused before the stream starts");
  assert.equal((await fetch(`${small.base}/health`)).status, 200);
});
await check("file:// without --media-dir → 400", async () => {
  const r = await fetch(`${small.base}/v1/chat/completions`, { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: [image(`file://${square}`), text("hi")] }], max_tokens: 4 }) });
  assert.equal(r.status, 400);
  assert.match((await r.json()).error.message, /--media-dir/);
});
small.proc.kill("SIGTERM");
const textOnly = await startServer(OXINFER, MODEL, ["-np", "1"]);
await check("an image for a server without a vision tower → 400, then text still works", async () => {
  const r = await fetch(`${textOnly.base}/v1/chat/completions`, { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: [image(dataUrl(square)), text("hi")] }], max_tokens: 4 }) });
  assert.equal(r.status, 400);
  assert.match((await r.json()).error.message, /vision tower/);
  assert.equal((await (await fetch(`${textOnly.base}/props`)).json()).modalities.vision, false);
  const ok = await fetch(`${textOnly.base}/v1/chat/completions`, { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: "hi" }], max_tokens: 4 }) });
  assert.equal(ok.status, 200);
});
textOnly.proc.kill("SIGTERM");
finish();
