// Embeddings in `oxinfer serve` (docs/server.md "Embeddings"), on the synthetic Qwen 3.5 model the
// server tests share, converted to an F32 GGUF:
//   - the real `openai` npm client: embeddings.create with one input and a batch, its default
//     (base64, decoded by the client), encoding_format "float" and "base64" (decoded here as
//     little-endian f32) all give the same vectors, L2-normalised, with usage and indices;
//   - the vectors against llama.cpp's (node-llama-cpp's embedding context on the same GGUF, with
//     the pooling written into the GGUF as <arch>.pooling_type, the key llama.cpp reads): mean and
//     cls pooling, short text inputs and token-id inputs across our 256-token chunks; the raw
//     (embd_normalize -1) vectors of llama-server's /embeddings too. The tolerance is far below
//     the distance between two poolings (checked), so a wrong pooling or another layer fails;
//   - the default pooling is llama.cpp's: the GGUF key when present, else none — then
//     /v1/embeddings refuses (400, as llama-server) and /embeddings gives every token's row;
//   - embeddings requests beside a streaming chat leave the chat's greedy text as it is alone, and
//     their vectors are the request's alone within float rounding (own sequence states, shared
//     passes whose row blocking may differ);
//   - 4xx: no --embeddings (501 on every embeddings route; chat still served), empty input,
//     wrong types, token ids out of range, input longer than the context, unknown fields,
//     `dimensions` other than n_embd, bad encoding_format, another model (404), no API key (401);
//   - ollama's /api/embed and legacy /api/embeddings with the real `ollama` client (embed(),
//     embeddings()): vectors against llama.cpp's (mean; last when the server's pooling is none, as
//     ollama's runner falls back; also without --embeddings), L2 on embed and raw on the legacy
//     route, dimensions, truncate and options.num_ctx, and the malformed requests → 400/404/401
//     in ollama's {"error": "…"} shape;
//   - an HF directory with a sentence-transformers pooling config (modules.json + 1_Pooling):
//     its mode is the default pooling (cls here, = llama.cpp's cls vectors), and `oxinfer convert`
//     writes it as qwen35.pooling_type, which llama.cpp then pools with; a config whose module
//     path leaves the directory is ignored with a warning (pooling none);
//   - reranking is not offered: --pooling rank and --reranking are usage errors, /rerank,
//     /reranking, /v1/rerank, /v1/reranking answer 501, each saying why;
//   - opt-in (OXI_EMBED_GEMMA=1, ~25 s more): a synthetic Gemma 4 E2B-shaped GGUF, mean pooling,
//     against llama.cpp likewise.
import { createRequire } from "node:module";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import assert from "node:assert/strict";
import { startServer, makeQwenModel, checks } from "./lib/server.mjs";

const OXINFER = process.env.OXINFER;
const NLC_DIR = process.env.NLC_DIR;
const WORK = process.env.OXI_WORK_DIR ?? "/tmp/oxi-server-embeddings";
const require = createRequire(path.join(NLC_DIR, "package.json"));
const OpenAI = require("openai").default;
const { Ollama } = require("ollama");
const { getLlama, LlamaLogLevel } = await import(
  pathToFileURL(path.join(NLC_DIR, "node_modules", "node-llama-cpp", "dist", "index.js")).href);

// A copy of a GGUF with one more u32 key, from the GGUF v3 layout: header (magic, version,
// n_tensors u64, n_kv u64), the key/value pairs, the tensor infos, then the data at the next
// multiple of general.alignment (default 32; tensor offsets are relative to it, so they stay).
function ggufWithU32(src, dst, key, value) {
  const b = fs.readFileSync(src);
  let o = 4;
  const u32 = () => { const v = b.readUInt32LE(o); o += 4; return v; };
  const u64 = () => { const v = Number(b.readBigUInt64LE(o)); o += 8; return v; };
  const str = () => { const n = u64(); const s = b.toString("utf8", o, o + n); o += n; return s; };
  const size = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
  const skip = (t) => {
    if (t === 8) return void str();
    if (t === 9) { const et = u32(); const n = u64(); for (let i = 0; i < n; i++) skip(et); return; }
    if (!(t in size)) throw new Error(`GGUF value type ${t}`);
    o += size[t];
  };
  assert.equal(b.toString("latin1", 0, 4), "GGUF");
  u32();
  const nTensors = u64(), nKv = u64(), kvStart = o;
  let alignment = 32;
  for (let i = 0; i < nKv; i++) {
    const k = str(), t = u32();
    if (k === "general.alignment") alignment = b.readUInt32LE(o);
    skip(t);
  }
  const kvEnd = o;
  for (let i = 0; i < nTensors; i++) { str(); const nd = u32(); o += 8 * nd + 4 + 8; }
  const infoEnd = o, dataStart = Math.ceil(infoEnd / alignment) * alignment;
  const kb = Buffer.from(key, "utf8"), kv = Buffer.alloc(16 + kb.length);
  kv.writeBigUInt64LE(BigInt(kb.length), 0);
  kb.copy(kv, 8);
  kv.writeUInt32LE(4, 8 + kb.length);  // type u32
  kv.writeUInt32LE(value, 12 + kb.length);
  const head = Buffer.from(b.subarray(0, kvStart));
  head.writeBigUInt64LE(BigInt(nKv + 1), 16);
  const meta = Buffer.concat([head, b.subarray(kvStart, kvEnd), kv, b.subarray(kvEnd, infoEnd)]);
  const pad = Buffer.alloc(Math.ceil(meta.length / alignment) * alignment - meta.length);
  fs.writeFileSync(dst, Buffer.concat([meta, pad, b.subarray(dataStart)]));
}

const l2 = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const unit = (v) => { const n = l2(v); return Array.from(v, (x) => x / n); };
const cosine = (a, b) => a.reduce((s, x, i) => s + x * b[i], 0) / (l2(a) * l2(b));
const maxAbs = (a, b) => a.reduce((m, x, i) => Math.max(m, Math.abs(x - b[i])), 0);
// Vectors agree with llama.cpp's: direction (cosine) and, normalised, element-wise.
const COS_MIN = 0.99999, ABS_MAX = 2e-3;
const worst = { c: 1, m: 0, n: 0 };
function assertClose(ours, ref, what, cosMin = COS_MIN, absMax = ABS_MAX) {
  assert.equal(ours.length, ref.length, `${what}: length`);
  const c = cosine(ours, ref), m = maxAbs(unit(ours), unit(ref));
  worst.c = Math.min(worst.c, c);
  worst.m = Math.max(worst.m, m);
  worst.n++;
  assert.ok(c >= cosMin && m <= absMax, `${what}: cosine ${c}, max |Δ| ${m} (need ≥ ${cosMin}, ≤ ${absMax})`);
  return { c, m };
}

// Deterministic token ids over the real (non-special) vocabulary: a stride walk.
const promptTokens = (n, seed) => Array.from({ length: n }, (_, i) => (seed * 104729 + i * 7919) % 151643);

const TEXTS = ["The sea is wide and deep.", "hello world", "Embeddings: pooled final hidden states, one vector per input."];
const LONG = [promptTokens(300, 11), promptTokens(700, 12)];  // > one 256-token chunk; > one 512-token pass

// ---- model and references ---------------------------------------------------------------------
const hf = makeQwenModel(WORK);
const gguf = path.join(WORK, "q.gguf");
execFileSync(OXINFER, ["convert", hf, "-o", gguf, "--type", "f32"], { stdio: "ignore" });
const withPooling = {};
for (const [name, code] of [["mean", 1], ["cls", 2], ["last", 3]]) {
  withPooling[name] = path.join(WORK, `q-${name}.gguf`);
  ggufWithU32(gguf, withPooling[name], "qwen35.pooling_type", code);
}

// The same checkpoint as a sentence-transformers directory (its files linked, plus modules.json
// and 1_Pooling/config.json saying cls), one whose pooling config is broken, and the GGUF
// `oxinfer convert` makes of the first (it must carry qwen35.pooling_type for llama.cpp to read).
function stDir(name, modules, poolingConfig) {
  const dir = path.join(WORK, name);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(path.join(dir, "1_Pooling"), { recursive: true });
  for (const f of fs.readdirSync(hf)) fs.symlinkSync(path.join(hf, f), path.join(dir, f));
  fs.writeFileSync(path.join(dir, "modules.json"), modules);
  fs.writeFileSync(path.join(dir, "1_Pooling", "config.json"), poolingConfig);
  return dir;
}
const ST_MODULES = JSON.stringify([
  { idx: 0, name: "0", path: "", type: "sentence_transformers.models.Transformer" },
  { idx: 1, name: "1", path: "1_Pooling", type: "sentence_transformers.models.Pooling" },
  { idx: 2, name: "2", path: "2_Normalize", type: "sentence_transformers.models.Normalize" }]);
const stCls = stDir("st-cls", ST_MODULES, JSON.stringify({ word_embedding_dimension: 64, pooling_mode_cls_token: true,
  pooling_mode_mean_tokens: false, pooling_mode_max_tokens: false, pooling_mode_mean_sqrt_len_tokens: false,
  pooling_mode_weightedmean_tokens: false, pooling_mode_lasttoken: false, include_prompt: true }));
const stBad = stDir("st-bad", ST_MODULES.replace("1_Pooling", "../../etc"), "{}");
const stGguf = path.join(WORK, "st-cls.gguf");
execFileSync(OXINFER, ["convert", stCls, "-o", stGguf, "--type", "f32"], { stdio: "ignore" });

// llama.cpp's raw (unnormalised) vectors per pooling: node-llama-cpp's embedding context uses the
// GGUF's pooling; with none (the plain file) it returns the last token's row.
const llama = await getLlama({ gpu: false, build: "never", maxThreads: 2, logLevel: LlamaLogLevel.error });
const ref = {};
for (const [name, file] of [["none", gguf], ["mean", withPooling.mean], ["cls", withPooling.cls], ["st", stGguf]]) {
  const model = await llama.loadModel({ modelPath: file, gpuLayers: 0 });
  // No BOS/EOS is added for this vocabulary (node-llama-cpp would add them to the input itself).
  assert.equal(model.tokens.shouldPrependBosToken, false);
  assert.equal(model.tokens.shouldAppendEosToken, false);
  const ctx = await model.createEmbeddingContext({ contextSize: 1024, batchSize: 1024, threads: 2 });
  ref[name] = { texts: [], long: [], textTokens: TEXTS.map((t) => model.tokenize(t, true)) };
  for (const t of TEXTS) ref[name].texts.push(Array.from((await ctx.getEmbeddingFor(t)).vector));
  for (const ids of LONG) ref[name].long.push(Array.from((await ctx.getEmbeddingFor(ids)).vector));
  await ctx.dispose();
  await model.dispose();
}
await llama.dispose();

const post = (base, p, body, headers = {}) =>
  fetch(`${base}${p}`, { method: "POST", headers: { "Content-Type": "application/json", ...headers }, body: JSON.stringify(body) });
async function expectError(res, status, re) {
  const text = await res.text();
  assert.equal(res.status, status, text);
  const j = JSON.parse(text);
  assert.ok(j.error && typeof j.error.message === "string", text);
  if (re) assert.match(j.error.message, re);
  return j;
}

const { check, finish } = checks();
const API_KEY = "sk-embed";
const servers = [];
try {
  // ---- mean pooling (--pooling), with an API key ---------------------------------------------
  const s1 = await startServer(OXINFER, gguf, ["-np", "2", "--embeddings", "--pooling", "mean", "--api-key", API_KEY]);
  servers.push(s1);
  const auth = { Authorization: `Bearer ${API_KEY}` };
  const client = new OpenAI({ baseURL: `${s1.base}/v1`, apiKey: API_KEY, maxRetries: 0, timeout: 120000 });
  const model = "qwen35";
  let single = null;

  await check("openai client: one input (default base64, decoded by the client) vs llama.cpp mean", async () => {
    const r = await client.embeddings.create({ model, input: TEXTS[0] });
    assert.equal(r.object, "list");
    assert.equal(r.model, model);
    assert.equal(r.data.length, 1);
    assert.equal(r.data[0].object, "embedding");
    assert.equal(r.data[0].index, 0);
    const v = Array.from(r.data[0].embedding);
    assert.equal(v.length, 64);
    assert.ok(Math.abs(l2(v) - 1) < 1e-5, `L2 norm ${l2(v)}`);
    assert.equal(r.usage.prompt_tokens, ref.mean.textTokens[0].length);
    assert.equal(r.usage.total_tokens, r.usage.prompt_tokens);
    const { c, m } = assertClose(v, ref.mean.texts[0], "mean");
    console.log(`     mean vs llama.cpp: cosine ${c.toFixed(8)}, max |Δ| ${m.toExponential(2)}`);
    // The tolerance separates poolings: the same text pooled cls or last is far outside it.
    assert.ok(cosine(v, ref.cls.texts[0]) < COS_MIN && cosine(v, ref.none.texts[0]) < COS_MIN);
    single = v;
  });

  await check("openai client: batch, encoding_format float and base64 agree", async () => {
    const r = await client.embeddings.create({ model, input: TEXTS });
    assert.deepEqual(r.data.map((d) => d.index), [0, 1, 2]);
    assert.equal(r.usage.prompt_tokens, ref.mean.textTokens.reduce((s, t) => s + t.length, 0));
    r.data.forEach((d, i) => assertClose(Array.from(d.embedding), ref.mean.texts[i], `mean text ${i}`));
    assert.ok(maxAbs(Array.from(r.data[0].embedding), single) <= 1e-5);  // alone or in a batch: the same
    const f = await client.embeddings.create({ model, input: TEXTS, encoding_format: "float" });
    const b = await client.embeddings.create({ model, input: TEXTS, encoding_format: "base64" });
    for (let i = 0; i < TEXTS.length; i++) {
      assert.ok(Array.isArray(f.data[i].embedding));
      assert.equal(typeof b.data[i].embedding, "string");
      const raw = Buffer.from(b.data[i].embedding, "base64");
      const dec = Array.from({ length: raw.length / 4 }, (_, k) => raw.readFloatLE(4 * k));
      assert.deepEqual(f.data[i].embedding, Array.from(r.data[i].embedding));
      assert.deepEqual(dec, Array.from(r.data[i].embedding));
    }
  });

  await check("token-id inputs across chunks and passes vs llama.cpp mean; text = its tokens", async () => {
    const r = await client.embeddings.create({ model, input: [...LONG, ref.mean.textTokens[1]] });
    LONG.forEach((_, i) => assertClose(Array.from(r.data[i].embedding), ref.mean.long[i], `mean long ${i}`));
    const t = await client.embeddings.create({ model, input: TEXTS[1] });
    assert.ok(maxAbs(Array.from(r.data[2].embedding), Array.from(t.data[0].embedding)) <= 1e-5);
  });

  await check("/embeddings and /embedding (llama-server shape): raw vectors vs llama.cpp", async () => {
    for (const p of ["/embeddings", "/embedding"]) {
      const res = await post(s1.base, p, { content: TEXTS[2], embd_normalize: -1 }, auth);
      assert.equal(res.status, 200);
      const j = await res.json();
      assert.ok(Array.isArray(j) && j.length === 1 && j[0].index === 0 && j[0].embedding.length === 1);
      assertClose(j[0].embedding[0], ref.mean.texts[2], `${p} raw`);
      assert.ok(Math.abs(l2(j[0].embedding[0]) - l2(ref.mean.texts[2])) < 1e-3 * l2(ref.mean.texts[2]));
    }
    const res = await post(s1.base, "/embeddings", { input: [TEXTS[0], TEXTS[1]] }, auth);
    const j = await res.json();
    assert.deepEqual(j.map((e) => e.index), [0, 1]);
    assert.ok(Math.abs(l2(j[0].embedding[0]) - 1) < 1e-5);  // pooled: L2 by default, as llama-server
  });

  await check("embeddings beside a streaming chat: both as alone", async () => {
    const chat = { model, messages: [{ role: "user", content: "Tell me about the sea." }], max_tokens: 48, temperature: 0,
      chat_template_kwargs: { enable_thinking: false } };
    const aloneText = (await client.chat.completions.create(chat)).choices[0].message.content;
    const aloneEmb = await client.embeddings.create({ model, input: [...TEXTS, ...LONG], encoding_format: "float" });
    const stream = client.chat.completions.create({ ...chat, stream: true }).then(async (s) => {
      let text = "";
      for await (const c of s) text += c.choices[0]?.delta?.content ?? "";
      return text;
    });
    const embs = [];
    for (let i = 0; i < 4; i++) embs.push(client.embeddings.create({ model, input: [...TEXTS, ...LONG], encoding_format: "float" }));
    const [text, ...got] = await Promise.all([stream, ...embs]);
    assert.equal(text, aloneText);
    let worst = 0;
    for (const g of got) g.data.forEach((d, i) => { worst = Math.max(worst, maxAbs(d.embedding, aloneEmb.data[i].embedding)); });
    // Shared passes change the kernels' row blocking, so float rounding may differ (~1e-7); a
    // state mixed up with another sequence's would be off by far more.
    assert.ok(worst <= 1e-5, `concurrent vs alone: max |Δ| ${worst}`);
    for (const g of got) assert.deepEqual(g.data.map((d) => d.index), aloneEmb.data.map((d) => d.index));
  });

  await check("4xx: bad inputs, fields, lengths; 401 without the key; 404 for another model", async () => {
    const e = (body) => post(s1.base, "/v1/embeddings", body, auth);
    await expectError(await e({ input: "" }), 400, /cannot be empty/);
    await expectError(await e({ input: [] }), 400, /empty/);
    await expectError(await e({ input: ["a", ""] }), 400, /cannot be empty/);
    await expectError(await e({}), 400, /'input' is required/);
    await expectError(await e({ input: 42 }), 400, /must be a string/);
    await expectError(await e({ input: { text: "a" } }), 400, /must be a string/);
    await expectError(await e({ input: [1, "a"] }), 400, /token id/);
    await expectError(await e({ input: [["a"]] }), 400, /token id/);
    await expectError(await e({ input: [-1, 2] }), 400, /token id/);
    await expectError(await e({ input: [99999999] }), 400, /out of range/);
    await expectError(await e({ input: promptTokens(2049, 5) }), 400, /2049 tokens; the context holds 2048/);
    await expectError(await e({ input: "a", content: "b" }), 400, /unsupported field 'content'/);
    await expectError(await e({ input: "a", temperature: 0.5 }), 400, /unsupported field 'temperature'/);
    await expectError(await e({ input: "a", dimensions: 32 }), 400, /embedding size, 64/);
    await expectError(await e({ input: "a", encoding_format: "int8" }), 400, /encoding_format/);
    await expectError(await e({ input: "a", model: "other" }), 404, /does not exist/);
    await expectError(await post(s1.base, "/embeddings", { content: "a", encoding_format: "base64" }, auth), 400, /only offered by \/v1/);
    await expectError(await post(s1.base, "/v1/embeddings", { input: "a" }), 401);
    const ok = await e({ input: "a", dimensions: 64, user: "u" });
    assert.equal(ok.status, 200);
    // The request log line counts the input tokens as the prompt; /metrics the inputs.
    assert.match(s1.log(), /POST \/v1\/embeddings 200 prompt=\d+ cached=0 generated=0/);
    const metrics = await (await fetch(`${s1.base}/metrics`)).text();
    assert.ok(Number(/oxinfer_embedding_inputs_total (\d+)/.exec(metrics)[1]) > 10, metrics);
  });

  // ---- ollama /api/embed and /api/embeddings (the `ollama` client) -------------------------------
  const ollama = new Ollama({ host: s1.base, headers: auth });
  await check("ollama embed(): one input and a batch vs llama.cpp mean, L2-normalised", async () => {
    const r = await ollama.embed({ model: "qwen35", input: TEXTS[0] });
    assert.equal(r.model, "qwen35");
    assert.equal(r.embeddings.length, 1);
    assert.ok(Math.abs(l2(r.embeddings[0]) - 1) < 1e-5, `L2 norm ${l2(r.embeddings[0])}`);
    assertClose(r.embeddings[0], ref.mean.texts[0], "ollama embed mean");
    assert.equal(r.prompt_eval_count, ref.mean.textTokens[0].length);
    assert.ok(Number.isInteger(r.total_duration) && r.total_duration > 0 && r.load_duration === 0);
    const b = await ollama.embed({ model: "qwen35:latest", input: TEXTS, keep_alive: "5m", options: { temperature: 0.3, num_thread: 2 } });
    assert.equal(b.embeddings.length, TEXTS.length);
    b.embeddings.forEach((v, i) => assertClose(v, ref.mean.texts[i], `ollama embed batch ${i}`));
    assert.equal(b.prompt_eval_count, ref.mean.textTokens.reduce((s, t) => s + t.length, 0));
    // Nothing to embed: no vectors (ollama's answer to an empty input).
    for (const input of ["", []]) assert.deepEqual((await ollama.embed({ model: "qwen35", input })).embeddings, []);
  });

  await check("ollama embed(): dimensions keep the first values, renormalised; truncate", async () => {
    const full = (await ollama.embed({ model: "qwen35", input: TEXTS[2] })).embeddings[0];
    const r = await ollama.embed({ model: "qwen35", input: TEXTS[2], dimensions: 16 });
    assert.equal(r.embeddings[0].length, 16);
    const want = unit(full.slice(0, 16));
    assert.ok(maxAbs(r.embeddings[0], want) < 1e-6, "dimensions: the first 16 values, unit length");
    assert.equal((await ollama.embed({ model: "qwen35", input: TEXTS[2], dimensions: 64 })).embeddings[0].length, 64);
    // truncate (default true): a 2500-token text keeps its first 2048 tokens (-c 2048), which are
    // the first 2048 tokens' vector; truncate false refuses.
    const longText = Array.from({ length: 2500 }, (_, i) => `w${i % 97}`).join(" ");
    const ids = (await (await post(s1.base, "/tokenize", { content: longText }, auth)).json()).tokens;
    assert.ok(ids.length > 2048, `${ids.length} tokens`);
    const t = await ollama.embed({ model: "qwen35", input: longText, options: { num_ctx: 300 } });
    assert.equal(t.prompt_eval_count, 300);
    const head = await client.embeddings.create({ model, input: ids.slice(0, 300), encoding_format: "float" });
    assert.ok(maxAbs(t.embeddings[0], head.data[0].embedding) < 1e-5, "num_ctx 300: the first 300 tokens' vector");
    const t2 = await ollama.embed({ model: "qwen35", input: longText });
    assert.equal(t2.prompt_eval_count, 2048);
    await assert.rejects(ollama.embed({ model: "qwen35", input: longText, truncate: false }),
      (e) => e.status_code === 400 && /more than the context length 2048 \(truncate is false\)/.test(e.error));
  });

  await check("ollama embeddings() (legacy): the pooled vector, not normalised, = llama.cpp's", async () => {
    const r = await ollama.embeddings({ model: "qwen35", prompt: TEXTS[1] });
    assert.deepEqual(Object.keys(r), ["embedding"]);
    assertClose(r.embedding, ref.mean.texts[1], "ollama legacy mean");
    assert.ok(Math.abs(l2(r.embedding) - l2(ref.mean.texts[1])) < 1e-3 * l2(ref.mean.texts[1]), "unnormalised norm");
    assert.deepEqual((await ollama.embeddings({ model: "qwen35", prompt: "" })).embedding, []);
  });

  await check("ollama embed 4xx: ollama's {error} shape, never a crash", async () => {
    const bad = async (p, body, status, re) => {
      const res = await post(s1.base, p, body, auth);
      const text = await res.text();
      assert.equal(res.status, status, text);
      const j = JSON.parse(text);
      assert.equal(typeof j.error, "string", text);
      if (re) assert.match(j.error, re);
    };
    await bad("/api/embed", { input: "a" }, 400, /model is required/);
    await bad("/api/embed", { model: "other", input: "a" }, 404, /model 'other' not found/);
    await bad("/api/embed", { model: "qwen35", input: 42 }, 400, /string or an array of strings/);
    await bad("/api/embed", { model: "qwen35", input: ["a", 7] }, 400, /string or an array of strings/);
    await bad("/api/embed", { model: "qwen35", input: [["a"]] }, 400, /string or an array of strings/);
    await bad("/api/embed", { model: "qwen35", input: { a: 1 } }, 400, /string or an array of strings/);
    await bad("/api/embed", { model: "qwen35", input: ["a", ""] }, 400, /no tokens/);
    await bad("/api/embed", { model: "qwen35", input: "a", truncate: "yes" }, 400, /truncate/);
    await bad("/api/embed", { model: "qwen35", input: "a", dimensions: -1 }, 400, /dimensions/);
    await bad("/api/embed", { model: "qwen35", input: "a", dimensions: 1.5 }, 400, /dimensions/);
    await bad("/api/embed", { model: "qwen35", input: "a", dimensions: 65 }, 400, /embedding size, 64/);
    await bad("/api/embed", { model: "qwen35", input: "a", options: { mirostat: 2 } }, 400, /unsupported option 'mirostat'/);
    await bad("/api/embed", { model: "qwen35", input: "a", options: "x" }, 400, /options/);
    await bad("/api/embed", { model: "qwen35", input: "a", options: { num_ctx: 0 } }, 400, /num_ctx/);
    await bad("/api/embed", { model: "qwen35", input: "a", keep_alive: [] }, 400, /keep_alive/);
    await bad("/api/embed", { model: "qwen35", input: "a", prompt: "b" }, 400, /prompt/);
    await bad("/api/embed", { model: "qwen35", input: Array(2049).fill("a") }, 400, /at most 2048/);
    await bad("/api/embeddings", { model: "qwen35", prompt: ["a"] }, 400, /'prompt' must be a string/);
    await bad("/api/embeddings", { model: "qwen35", input: "a" }, 400, /input/);
    await bad("/api/embeddings", { model: "qwen35", prompt: Array(2100).fill("x y").join(" ") }, 400, /context length 2048/);
    await bad("/api/embed", "[1,2]", 400);
    const res = await fetch(`${s1.base}/api/embed`, { method: "POST", headers: { "Content-Type": "application/json", ...auth }, body: "{nope" });
    assert.equal(res.status, 400);
    assert.equal(typeof (await res.json()).error, "string");
    assert.equal((await post(s1.base, "/api/embed", { model: "qwen35", input: "a" })).status, 401);
  });

  // ---- the pooling from the GGUF (llama.cpp's default): cls ------------------------------------
  const s2 = await startServer(OXINFER, withPooling.cls, ["-np", "1", "--embeddings"]);
  servers.push(s2);
  await check("GGUF pooling_type cls is the default; vs llama.cpp cls", async () => {
    assert.match(s2.log(), /embeddings on \(pooling cls\)/);
    const res = await post(s2.base, "/v1/embeddings", { input: [...TEXTS, ...LONG] });
    const j = await res.json();
    TEXTS.forEach((_, i) => assertClose(j.data[i].embedding, ref.cls.texts[i], `cls text ${i}`));
    LONG.forEach((_, i) => assertClose(j.data[TEXTS.length + i].embedding, ref.cls.long[i], `cls long ${i}`));
  });

  // ---- no pooling key, no --pooling: none ----------------------------------------------------
  const s3 = await startServer(OXINFER, gguf, ["-np", "1", "--embeddings"]);
  servers.push(s3);
  await check("default none: /v1/embeddings refused, /embeddings per-token rows (last = llama.cpp's)", async () => {
    await expectError(await post(s3.base, "/v1/embeddings", { input: "a" }), 400, /Pooling type 'none' is not OAI compatible/);
    const res = await post(s3.base, "/embeddings", { input: [TEXTS[0], LONG[0]] });
    assert.equal(res.status, 200);
    const j = await res.json();
    assert.equal(j[0].embedding.length, ref.none.textTokens[0].length);
    assert.equal(j[1].embedding.length, LONG[0].length);
    assertClose(j[0].embedding.at(-1), ref.none.texts[0], "none: last row");
    assertClose(j[1].embedding.at(-1), ref.none.long[0], "none: long last row");
    // Unnormalised, as llama-server: the row's norm is llama.cpp's.
    assert.ok(Math.abs(l2(j[0].embedding.at(-1)) - l2(ref.none.texts[0])) < 1e-3 * l2(ref.none.texts[0]));
  });

  await check("pooling none: ollama embed takes the last token's row (ollama's runner fallback) = llama.cpp's", async () => {
    const o = new Ollama({ host: s3.base });
    const r = await o.embed({ model: "qwen35", input: [TEXTS[0], TEXTS[1]] });
    assertClose(r.embeddings[0], ref.none.texts[0], "ollama none → last");
    assertClose(r.embeddings[1], ref.none.texts[1], "ollama none → last 1");
  });

  // ---- an HF directory with a sentence-transformers pooling config --------------------------------
  const s7 = await startServer(OXINFER, stCls, ["-np", "1", "--embeddings"]);
  servers.push(s7);
  await check("HF dir: 1_Pooling/config.json (cls) is the default pooling; convert writes it for llama.cpp", async () => {
    assert.match(s7.log(), /embeddings on \(pooling cls\)/);
    // llama.cpp on our converted GGUF pools cls too: its vectors are the cls GGUF's.
    ref.st.texts.forEach((v, i) => assertClose(v, ref.cls.texts[i], `converted st GGUF (llama.cpp) text ${i}`));
    // The directory's BF16 matrices are used as stored (the reference GGUF holds them as F32), so
    // float rounding differs: a looser bound (1 − cosine < 2e-3), with the vector at least 20×
    // nearer llama.cpp's cls vector than its mean or last-row vector, so another pooling fails.
    const j = await (await post(s7.base, "/v1/embeddings", { input: [...TEXTS, LONG[0]] })).json();
    const near = (v, r, what) => {
      const d = (x) => 1 - cosine(v, x);
      console.log(`     ${what}: 1 − cosine vs llama.cpp cls ${d(r.cls).toExponential(2)}, mean ${d(r.mean).toExponential(2)}, last ${d(r.none).toExponential(2)}`);
      assert.ok(d(r.cls) < 2e-3, `${what}: 1 − cosine ${d(r.cls)} vs llama.cpp cls`);
      for (const other of [r.mean, r.none]) assert.ok(d(other) > 20 * d(r.cls), `${what}: not nearer cls than another pooling`);
    };
    TEXTS.forEach((_, i) => near(j.data[i].embedding, { cls: ref.cls.texts[i], mean: ref.mean.texts[i], none: ref.none.texts[i] }, `HF dir cls text ${i}`));
    near(j.data[TEXTS.length].embedding, { cls: ref.cls.long[0], mean: ref.mean.long[0], none: ref.none.long[0] }, "HF dir cls long");
  });
  const s8 = await startServer(OXINFER, stBad, ["-np", "1", "--embeddings"]);
  servers.push(s8);
  await check("HF dir: a pooling path outside the directory is ignored with a warning (pooling none)", async () => {
    assert.match(s8.log(), /warning: ignoring the sentence-transformers pooling config .*modules\.json/);
    assert.match(s8.log(), /embeddings on \(pooling none\)/);
    await expectError(await post(s8.base, "/v1/embeddings", { input: "a" }), 400, /Pooling type 'none'/);
  });

  // ---- --pooling last over a GGUF that says mean ------------------------------------------------
  const s4 = await startServer(OXINFER, withPooling.mean, ["-np", "1", "--embeddings", "--pooling", "last"]);
  servers.push(s4);
  await check("--pooling last overrides the GGUF's mean; = llama.cpp's last row", async () => {
    const j = await (await post(s4.base, "/v1/embeddings", { input: [TEXTS[1], LONG[1]] })).json();
    assertClose(j.data[0].embedding, ref.none.texts[1], "last text");
    assertClose(j.data[1].embedding, ref.none.long[1], "last long");
  });

  // ---- without --embeddings --------------------------------------------------------------------
  const s5 = await startServer(OXINFER, gguf, ["-np", "1"]);
  servers.push(s5);
  await check("without --embeddings: 501 on every embeddings route, chat still served", async () => {
    for (const p of ["/v1/embeddings", "/embeddings", "/embedding"]) {
      const j = await expectError(await post(s5.base, p, { input: "a" }), 501, /Start it with `--embeddings`/);
      assert.equal(j.error.type, "not_supported_error");
    }
    const r = await post(s5.base, "/v1/chat/completions", { messages: [{ role: "user", content: "hi" }], max_tokens: 2 });
    assert.equal(r.status, 200);
  });

  await check("without --embeddings: ollama /api/embed and /api/embeddings still answer (ollama has no switch)", async () => {
    const o = new Ollama({ host: s5.base });
    assertClose((await o.embed({ model: "qwen35", input: TEXTS[2] })).embeddings[0], ref.none.texts[2], "ollama, no --embeddings");
    assertClose((await o.embeddings({ model: "qwen35", prompt: TEXTS[2] })).embedding, ref.none.texts[2], "legacy, no --embeddings");
  });

  await check("--pooling: a bad value is a usage error", async () => {
    let err = null;
    try {
      execFileSync(OXINFER, ["serve", "-m", gguf, "--embeddings", "--pooling", "rank"], { stdio: "pipe" });
    } catch (e) {
      err = e;
    }
    assert.ok(err && err.status !== 0);
    assert.match(String(err.stderr), /--pooling: 'rank'.*reranking is not offered: it needs a reranker checkpoint/);
  });

  await check("reranking: --reranking is a usage error, the rerank routes 501, both saying why", async () => {
    let err = null;
    try {
      execFileSync(OXINFER, ["serve", "-m", gguf, "--reranking"], { stdio: "pipe" });
    } catch (e) {
      err = e;
    }
    assert.ok(err && err.status === 2, `exit ${err?.status}`);
    assert.match(String(err.stderr), /--reranking: reranking is not offered.*Qwen 3\.5, Gemma 4/);
    for (const p of ["/rerank", "/reranking", "/v1/rerank", "/v1/reranking"]) {
      const j = await expectError(await post(s5.base, p, { query: "q", documents: ["a", "b"] }), 501, /reranker checkpoint/);
      assert.equal(j.error.type, "not_supported_error");
    }
  });
  // ---- Gemma 4 (opt-in: OXI_EMBED_GEMMA=1; its 262k-token vocabulary makes the synthetic GGUF
  // ~170 MB, ~25 s more on 2 cores) ----------------------------------------------------------
  if (process.env.OXI_EMBED_GEMMA === "1") {
    const gw = path.join(WORK, "gemma4");
    fs.mkdirSync(gw, { recursive: true });
    const tok = path.join(gw, "tok"), g4 = path.join(gw, "hf"), g4gguf = path.join(gw, "g4.gguf"), g4mean = path.join(gw, "g4-mean.gguf");
    execFileSync("node", ["tools/gen/extract_gemma4_tokenizer.mjs", tok], { stdio: "ignore" });
    execFileSync(process.env.OXI_GEN, ["gemma4", "--shape", "e2b", "--out", g4, "--seed", "11", "--dtype", "f32", "--window", "16",
      "--tokenizer-dir", tok, "--chat-template", path.join(process.env.OXI_SHARED_DIR, "testdata/templates/google-gemma-4-31B-it.jinja")],
    { stdio: "ignore" });
    execFileSync(OXINFER, ["convert", g4, "-o", g4gguf, "--type", "f32"], { stdio: "ignore" });
    ggufWithU32(g4gguf, g4mean, "gemma4.pooling_type", 1);
    const gl = await getLlama({ gpu: false, build: "never", maxThreads: 2, logLevel: LlamaLogLevel.error });
    const gm = await gl.loadModel({ modelPath: g4mean, gpuLayers: 0 });
    const gbos = gm.tokens.bos;
    assert.equal(gm.tokens.shouldPrependBosToken, true);
    const gctx = await gm.createEmbeddingContext({ contextSize: 1024, batchSize: 1024, threads: 2 });
    const gref = [];
    for (const t of [TEXTS[0], LONG[0]]) gref.push(Array.from((await gctx.getEmbeddingFor(t)).vector));  // BOS prepended, as ours
    await gctx.dispose();
    await gm.dispose();
    await gl.dispose();
    const s6 = await startServer(OXINFER, g4mean, ["-np", "1", "--embeddings"]);
    servers.push(s6);
    await check("Gemma 4 (GGUF pooling mean) vs llama.cpp", async () => {
      const j = await (await post(s6.base, "/v1/embeddings", { input: TEXTS[0] })).json();
      // Gemma 4 runs flash attention by default on both sides (f16 accumulation in llama.cpp's
      // kernels; docs/gemma4.md): a looser bound, still far from another pooling's vector.
      const g = (o, r, w) => {
        const { c, m } = assertClose(o, r, w, 0.9999, 5e-3);
        console.log(`     ${w}: 1 − cosine ${(1 - c).toExponential(2)}, max |Δ| ${m.toExponential(2)}`);
      };
      g(j.data[0].embedding, gref[0], "gemma4 mean text");
      const raw = await (await post(s6.base, "/embeddings", { input: [gbos, ...LONG[0]], embd_normalize: -1 })).json();
      g(raw[0].embedding[0], gref[1], "gemma4 mean ids (301 tokens)");
    });
  }
} finally {
  for (const s of servers) s.proc.kill("SIGKILL");
}
console.log(`     ${worst.n} vectors vs llama.cpp: worst 1 − cosine ${(1 - worst.c).toExponential(2)}, worst max |Δ| (normalised) ${worst.m.toExponential(2)}`);
finish();
