// End-to-end test of `oxinfer serve` with the real `openai` npm client (and raw HTTP where the
// client hides the wire format), on a synthetic Qwen 3.5 model made by oxi-gen:
//   /health and /v1/models; chat non-streaming and streaming (same greedy text, usage, raw SSE
//   ending in [DONE]); json_schema output that parses as JSON and obeys the schema; forced tool
//   calls (non-stream and streamed delta.tool_calls); a multi-turn conversation whose second turn
//   reuses the first turn's state (cached_tokens > 0) and equals a cold server's answer;
//   8 concurrent streams share model passes (continuous batching) and equal the request alone;
//   32 concurrent streaming requests with 0 errors, identical to the request alone, RSS flat;
//   client disconnect cancels; malformed JSON, wrong types, oversized bodies, bad API key → 4xx
//   with OpenAI error JSON, and the server stays up.
import { spawn, execFileSync } from "node:child_process";
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import assert from "node:assert/strict";
import { startServer as startOxinfer } from "./lib/server.mjs";

const OXINFER = process.env.OXINFER;
const OXI_GEN = process.env.OXI_GEN;
const NLC_DIR = process.env.NLC_DIR;
const SHARED = process.env.OXI_SHARED_DIR;
const WORK = process.env.OXI_WORK_DIR ?? "/tmp/oxi-server-e2e";
const require = createRequire(path.join(NLC_DIR, "package.json"));
const OpenAI = require("openai").default;

let passed = 0, failed = 0;
async function check(name, fn) {
  try {
    await fn();
    passed++;
    console.log(`ok   ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e.stack ?? e}`);
  }
}

function rssKiB(pid) {
  const s = fs.readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+)/.exec(s)[1]);
}

async function collectStream(stream) {
  let content = "", reasoning = "", usage = null, finish = null;
  const calls = [];
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta?.content) content += c.delta.content;
      if (c.delta?.reasoning_content) reasoning += c.delta.reasoning_content;
      for (const tc of c.delta?.tool_calls ?? []) calls.push(tc);
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  return { content, reasoning, usage, finish, calls };
}

// ---- model ------------------------------------------------------------------------------------
fs.rmSync(WORK, { recursive: true, force: true });
fs.mkdirSync(WORK, { recursive: true });
const tokDir = path.join(WORK, "tok");
const model = path.join(WORK, "qwen35");
execFileSync("node", ["tools/gen/extract_tokenizer.mjs", tokDir], { env: { ...process.env, NLC_DIR }, stdio: "inherit" });
execFileSync(OXI_GEN, ["qwen35", "--out", model, "--seed", "7", "--hidden", "64", "--layers", "4", "--tokenizer-dir", tokDir,
  "--chat-template", path.join(SHARED, "testdata/templates/Qwen3.5-4B.jinja")], { stdio: "inherit" });

const API_KEY = "sk-test-123";
const srv = await startOxinfer(OXINFER, model, ["-np", "4", "--api-key", API_KEY, "--max-body-bytes", "65536", "--alias", "x"]);
const client = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: API_KEY, maxRetries: 0, timeout: 120000 });
const noThink = { chat_template_kwargs: { enable_thinking: false } };
let turn2 = null, warm2 = null, usage1 = null;

try {
  await check("models.list", async () => {
    const list = await client.models.list();
    assert.equal(list.data.length, 1);
    assert.equal(list.data[0].object, "model");
  });

  const base = { model: "x", messages: [{ role: "user", content: "Tell me about the sea." }], max_tokens: 12, temperature: 0, ...noThink };
  let alone = null;
  await check("chat non-stream", async () => {
    const r = await client.chat.completions.create(base);
    assert.equal(r.object, "chat.completion");
    assert.equal(r.choices[0].message.role, "assistant");
    assert.equal(typeof r.choices[0].message.content, "string");
    assert.equal(r.usage.completion_tokens, 12);
    assert.equal(r.choices[0].finish_reason, "length");
    assert.ok(r.usage.prompt_tokens > 5);
    alone = r.choices[0].message.content;
  });

  await check("chat stream equals non-stream, usage chunk", async () => {
    const s = await client.chat.completions.create({ ...base, stream: true, stream_options: { include_usage: true } });
    const got = await collectStream(s);
    assert.equal(got.content, alone);
    assert.equal(got.usage.completion_tokens, 12);
    assert.equal(got.finish, "length");
  });

  await check("raw SSE framing ends with [DONE]", async () => {
    const r = await fetch(`${srv.base}/v1/chat/completions`, {
      method: "POST", headers: { "Content-Type": "application/json", Authorization: `Bearer ${API_KEY}` },
      body: JSON.stringify({ ...base, stream: true }),
    });
    assert.equal(r.status, 200);
    assert.match(r.headers.get("content-type"), /text\/event-stream/);
    const text = await r.text();
    const events = text.split("\n\n").filter(Boolean);
    for (const e of events) assert.ok(e.startsWith("data: "), e);
    assert.equal(events.at(-1), "data: [DONE]");
    for (const e of events.slice(0, -1)) JSON.parse(e.slice(6));
  });

  await check("json_schema output parses and obeys the schema", async () => {
    const schema = { type: "object", properties: { color: { enum: ["red", "green", "blue"] }, ok: { type: "boolean" },
      n: { type: "integer" }, tags: { type: "array", items: { enum: ["a", "b"] }, maxItems: 3 } }, required: ["color", "ok", "n", "tags"] };
    const r = await client.chat.completions.create({ ...base, max_tokens: 300,
      response_format: { type: "json_schema", json_schema: { name: "thing", schema, strict: true } } });
    const v = JSON.parse(r.choices[0].message.content);
    assert.ok(["red", "green", "blue"].includes(v.color));
    assert.equal(typeof v.ok, "boolean");
    assert.ok(Number.isInteger(v.n));
    assert.ok(Array.isArray(v.tags) && v.tags.length <= 3);
    assert.equal(r.choices[0].finish_reason, "stop");
  });

  await check("json_object output parses", async () => {
    const r = await client.chat.completions.create({ ...base, max_tokens: 400, response_format: { type: "json_object" },
      temperature: 0.7, seed: 3 });
    const c = r.choices[0].message.content;
    if (r.choices[0].finish_reason === "stop") assert.equal(typeof JSON.parse(c), "object");
    else assert.ok(c.trimStart().startsWith("{"));  // cut by max_tokens: still a JSON prefix
  });

  const tools = [{ type: "function", function: { name: "get_weather", description: "Weather for a city",
    parameters: { type: "object", properties: { city: { type: "string", maxLength: 16 }, unit: { enum: ["c", "f"] } },
      required: ["city", "unit"] } } }];
  await check("tool call (forced) non-stream", async () => {
    const r = await client.chat.completions.create({ ...base, max_tokens: 200, tools, tool_choice: "required" });
    const m = r.choices[0].message;
    assert.equal(r.choices[0].finish_reason, "tool_calls");
    assert.equal(m.tool_calls.length, 1);
    assert.equal(m.tool_calls[0].type, "function");
    assert.equal(m.tool_calls[0].function.name, "get_weather");
    const args = JSON.parse(m.tool_calls[0].function.arguments);
    assert.equal(typeof args.city, "string");
    assert.ok(["c", "f"].includes(args.unit));
  });

  await check("tool call (named) streamed as delta.tool_calls", async () => {
    const s = await client.chat.completions.create({ ...base, max_tokens: 200, tools, stream: true,
      tool_choice: { type: "function", function: { name: "get_weather" } } });
    const got = await collectStream(s);
    assert.equal(got.finish, "tool_calls");
    assert.equal(got.calls.length, 1);
    assert.equal(got.calls[0].index, 0);
    assert.equal(got.calls[0].function.name, "get_weather");
    JSON.parse(got.calls[0].function.arguments);
  });

  await check("logprobs and top_logprobs", async () => {
    const r = await client.chat.completions.create({ ...base, max_tokens: 4, logprobs: true, top_logprobs: 3 });
    const lp = r.choices[0].logprobs.content;
    assert.equal(lp.length, 4);
    for (const t of lp) {
      assert.ok(t.logprob <= 0);
      assert.equal(t.top_logprobs.length, 3);
      assert.ok(t.top_logprobs[0].logprob >= t.top_logprobs[1].logprob);
      assert.equal(t.top_logprobs[0].logprob, t.logprob);  // greedy picks the top token
    }
  });

  // Multi-turn with the prompt cache, compared with a cold server.
  const turn1 = [{ role: "system", content: "You are terse." }, { role: "user", content: "Name a colour." }];
  await check("turn 2 reuses turn 1 (cached_tokens > 0)", async () => {
    const r1 = await client.chat.completions.create({ ...base, messages: turn1, max_tokens: 6 });
    usage1 = r1.usage;
    turn2 = [...turn1, { role: "assistant", content: r1.choices[0].message.content },
      { role: "user", content: "And another one, please." }];
    const r2 = await client.chat.completions.create({ ...base, messages: turn2, max_tokens: 8 });
    warm2 = r2.choices[0].message.content;
    const cached = r2.usage.prompt_tokens_details.cached_tokens;
    assert.ok(cached > 0, `cached_tokens ${cached}`);
    // Everything up to the end of turn 1's user message is reused; only the rest is pre-filled.
    assert.ok(cached >= usage1.prompt_tokens - 8, `cached ${cached}, turn-1 prompt ${usage1.prompt_tokens}`);
    assert.ok(cached < r2.usage.prompt_tokens);
  });

  const metric = async (name) => {
    const m = await (await fetch(`${srv.base}/metrics`)).text();
    const hit = m.match(new RegExp(`^oxinfer_${name} ([0-9.e+]+)$`, "m"));
    assert.ok(hit, `metric ${name} missing:\n${m}`);
    return Number(hit[1]);
  };
  await check("8 concurrent streams decode together (continuous batching), each as alone", async () => {
    const p0 = await metric("batch_passes"), r0 = await metric("batch_rows");
    const outs = await Promise.all(Array.from({ length: 8 }, async () => {
      const s = await client.chat.completions.create({ ...base, stream: true });
      return (await collectStream(s)).content;
    }));
    for (const o of outs) assert.equal(o, alone);
    const passes = (await metric("batch_passes")) - p0, rows = (await metric("batch_rows")) - r0;
    // -np is 4 here: up to 4 sequences per pass; alone it would be one row per decode pass.
    assert.ok(rows / passes > 2, `sequence steps per model pass ${rows}/${passes}`);
  });

  const rssSamples = [];
  await check("32 concurrent streams: 0 errors, same tokens as alone, RSS flat", async () => {
    const round = async () => {
      const outs = await Promise.all(Array.from({ length: 32 }, async () => {
        const s = await client.chat.completions.create({ ...base, stream: true });
        return (await collectStream(s)).content;
      }));
      for (const o of outs) assert.equal(o, alone);
      rssSamples.push(rssKiB(srv.proc.pid));
    };
    await round();
    await round();
    await round();
    const growth = rssSamples[2] - rssSamples[0];
    assert.ok(growth < 20 * 1024, `RSS grew ${growth} KiB over two rounds (${rssSamples.join(", ")})`);
  });

  await check("client disconnect cancels the generation", async () => {
    const ctl = new AbortController();
    const r = await fetch(`${srv.base}/v1/chat/completions`, {
      method: "POST", signal: ctl.signal, headers: { "Content-Type": "application/json", Authorization: `Bearer ${API_KEY}` },
      body: JSON.stringify({ ...base, max_tokens: 1500, stream: true }),
    });
    const reader = r.body.getReader();
    await reader.read();
    ctl.abort();
    const t0 = Date.now();
    for (;;) {
      const m = await (await fetch(`${srv.base}/metrics`)).text();
      if (/oxinfer_requests_processing 0(\.0)?\n/.test(m)) break;
      if (Date.now() - t0 > 10000) throw new Error("generation still running after disconnect:\n" + m);
      await new Promise((res) => setTimeout(res, 100));
    }
  });

  const raw = (body, headers = {}) => fetch(`${srv.base}/v1/chat/completions`, {
    method: "POST", headers: { "Content-Type": "application/json", Authorization: `Bearer ${API_KEY}`, ...headers }, body });
  await check("malformed JSON → 400 with OpenAI error JSON", async () => {
    const r = await raw("{not json");
    assert.equal(r.status, 400);
    const j = await r.json();
    assert.equal(j.error.type, "invalid_request_error");
  });
  await check("wrong types → 400 naming the parameter", async () => {
    for (const [body, param] of [[{ messages: "hi" }, "messages"], [{ ...base, temperature: "hot" }, "temperature"],
      [{ ...base, max_tokens: -1 }, "max_tokens"], [{ ...base, messages: [{ role: "user", content: 5 }] }, "messages[0].content"],
      [{ ...base, response_format: { type: "json_schema", json_schema: { schema: { type: "widget" } } } }, "response_format"]]) {
      const r = await raw(JSON.stringify(body));
      assert.equal(r.status, 400, JSON.stringify(body));
      assert.equal((await r.json()).error.param, param);
    }
  });
  await check("oversized body → 413", async () => {
    const r = await raw(JSON.stringify({ ...base, messages: [{ role: "user", content: "x".repeat(200000) }] }));
    assert.equal(r.status, 413);
  });
  await check("prompt longer than the context → 400", async () => {
    const r = await raw(JSON.stringify({ ...base, messages: [{ role: "user", content: "word ".repeat(4000) }] }));
    assert.equal(r.status, 400);
  });
  await check("bad API key → 401 via the openai client", async () => {
    const bad = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: "wrong", maxRetries: 0 });
    await assert.rejects(bad.models.list(), (e) => e.status === 401);
  });
  await check("/tokenize, /detokenize round trip", async () => {
    const t = await (await fetch(`${srv.base}/tokenize`, { method: "POST", headers: { "Content-Type": "application/json", Authorization: `Bearer ${API_KEY}` },
      body: JSON.stringify({ content: "Hello world" }) })).json();
    assert.ok(t.tokens.length >= 2);
    const d = await (await fetch(`${srv.base}/detokenize`, { method: "POST", headers: { "Content-Type": "application/json", Authorization: `Bearer ${API_KEY}` },
      body: JSON.stringify({ tokens: t.tokens }) })).json();
    assert.equal(d.content, "Hello world");
  });
  await check("/v1/completions", async () => {
    const r = await client.completions.create({ model: "x", prompt: "Once upon a time", max_tokens: 5, temperature: 0 });
    assert.equal(r.object, "text_completion");
    assert.equal(r.usage.completion_tokens, 5);
  });
  await check("/metrics is Prometheus text; server still healthy", async () => {
    const m = await (await fetch(`${srv.base}/metrics`)).text();
    assert.match(m, /# TYPE oxinfer_requests_total counter/);
    assert.match(m, /oxinfer_prompt_tokens_cached_total [1-9]/);
    assert.equal((await fetch(`${srv.base}/health`)).status, 200);
  });
} finally {
  srv.proc.kill("SIGTERM");
}

// A cold server (no prompt cache) answers turn 2 the same.
if (turn2) {
  const cold = await startOxinfer(OXINFER, model, ["-np", "1", "--cache-ram", "0", "--alias", "x"]);
  try {
    const c2 = new OpenAI({ baseURL: `${cold.base}/v1`, apiKey: "none", maxRetries: 0 });
    await check("turn 2 from the cache equals a cold run", async () => {
      const r = await c2.chat.completions.create({ model: "x", messages: turn2, max_tokens: 8, temperature: 0, ...noThink });
      assert.equal(r.usage.prompt_tokens_details.cached_tokens, 0);
      assert.equal(r.choices[0].message.content, warm2);
    });
  } finally {
    cold.proc.kill("SIGTERM");
  }
}

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
