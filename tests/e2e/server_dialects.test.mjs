// End-to-end test of `oxinfer serve`'s other API dialects with their real npm clients, on a
// synthetic Qwen 3.5 model made by oxi-gen (docs/server.md):
//   Anthropic /v1/messages with @anthropic-ai/sdk: non-streaming equals the OpenAI endpoint's greedy
//   text; streaming has Anthropic's event sequence and the SDK's final message equals the
//   non-streaming one; stop_sequences → stop_reason "stop_sequence"; an assistant prefill; thinking blocks; forced
//   tool_use (any / named) streamed and not, with input obeying the schema; a tool_result turn;
//   count_tokens; errors in Anthropic's shape (SDK error classes), x-api-key auth.
//   ollama /api/* with the `ollama` client: chat and generate (stream and not, same greedy text),
//   NDJSON by default on the wire, options (num_predict, temperature, seed, stop), format json /
//   schema, tools, thinking, list / show / version, raw generate, errors {"error": …}.
//   llama-server's /props, /v1/models/{id}, /apply-template (its prompt is the one chat ran); one
//   request log line per request with its prompt / cached / generated tokens.
//   CORS: no Access-Control-* headers without --cors-origin; with it, a preflight from an allowed
//   origin is answered (methods, the asked headers) and a disallowed one is not; responses carry
//   Access-Control-Allow-Origin; non-JSON POSTs stay 415; a page in headless Chromium (another
//   origin) makes preflighted JSON POSTs to /v1/chat/completions and /v1/messages, and is blocked by
//   a server without --cors-origin.
import { execFile } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import { createRequire } from "node:module";
import path from "node:path";
import assert from "node:assert/strict";
import { checks, makeQwenModel, startServer } from "./lib/server.mjs";

const OXINFER = process.env.OXINFER;
const require = createRequire(path.join(process.env.NLC_DIR, "package.json"));
const OpenAI = require("openai").default;
const Anthropic = require("@anthropic-ai/sdk").default;
const { Ollama } = require("ollama");
const { check, finish } = checks();
const model = makeQwenModel(process.env.OXI_WORK_DIR ?? "/tmp/oxi-server-dialects-e2e");

const KEY = "sk-dialects";
const ORIGIN = "http://app.example:3000";

// A web page on another origin (another port) that calls the API with fetch: a JSON POST with an
// Authorization header (OpenAI) and one with x-api-key + anthropic-version (Anthropic) both need
// a CORS preflight. The page writes what it got into <pre id="out"> as JSON.
const PAGE = `<!doctype html><html><body><pre id="out">pending</pre><script>
(async () => {
  const api = new URLSearchParams(location.search).get("api");
  const call = async (p, headers, body) => {
    try {
      const r = await fetch(api + p, { method: "POST", headers: { "Content-Type": "application/json", ...headers },
        body: JSON.stringify(body) });
      return { status: r.status, body: await r.json() };
    } catch (e) { return { blocked: String(e) }; }
  };
  const msgs = [{ role: "user", content: "hi" }];
  const out = {
    openai: await call("/v1/chat/completions", { Authorization: "Bearer ${KEY}" }, { messages: msgs, max_tokens: 2 }),
    anthropic: await call("/v1/messages", { "x-api-key": "${KEY}", "anthropic-version": "2023-06-01" },
      { max_tokens: 2, messages: msgs }),
  };
  document.getElementById("out").textContent = JSON.stringify(out);
})();
</script></body></html>`;
const page = http.createServer((req, res) => { res.setHeader("Content-Type", "text/html"); res.end(PAGE); });
await new Promise((r) => page.listen(0, "127.0.0.1", r));
const PAGE_ORIGIN = `http://127.0.0.1:${page.address().port}`;
const CHROMIUM = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => fs.existsSync(p));

// The page's result in headless Chromium with the API at `api`.
function browse(api) {
  return new Promise((resolve, reject) => {
    execFile(CHROMIUM, ["--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=10000", "--dump-dom",
      `${PAGE_ORIGIN}/?api=${encodeURIComponent(api)}`], { timeout: 60000 }, (err, stdout) => {
      if (err) return reject(err);
      const m = /<pre id="out">(.*?)<\/pre>/s.exec(stdout);
      if (!m) return reject(new Error("no result in the page: " + stdout.slice(0, 500)));
      const txt = m[1].replace(/&quot;/g, '"').replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
      resolve(txt === "pending" ? { pending: true } : JSON.parse(txt));
    });
  });
}

const srv = await startServer(OXINFER, model, ["-np", "2", "--api-key", KEY, "--alias", "x",
  "--cors-origin", `${ORIGIN},http://other.example`, "--cors-origin", PAGE_ORIGIN]);
const openai = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: KEY, maxRetries: 0 });
const anthropic = new Anthropic({ baseURL: srv.base, apiKey: KEY, maxRetries: 0 });
const ollama = new Ollama({ host: srv.base, headers: { Authorization: `Bearer ${KEY}` } });

const question = "Tell me about the sea.";
const tools = [{ name: "get_weather", description: "Weather for a city",
  input_schema: { type: "object", properties: { city: { type: "string", maxLength: 16 }, unit: { enum: ["c", "f"] } },
    required: ["city", "unit"] } }];
const checkWeather = (input) => {
  assert.equal(typeof input.city, "string");
  assert.ok([...input.city].length <= 16, JSON.stringify(input));  // code points, as maxLength counts
  assert.ok(["c", "f"].includes(input.unit), JSON.stringify(input));
};

// Raw SSE events of a streaming /v1/messages request: [{event, data}].
async function rawEvents(body) {
  const r = await fetch(`${srv.base}/v1/messages`, {
    method: "POST", headers: { "Content-Type": "application/json", "x-api-key": KEY, "anthropic-version": "2023-06-01" },
    body: JSON.stringify({ ...body, stream: true }),
  });
  assert.equal(r.status, 200);
  assert.match(r.headers.get("content-type"), /text\/event-stream/);
  const text = await r.text();
  return text.split("\n\n").filter(Boolean).map((e) => {
    const m = /^event: (\S+)\ndata: (.*)$/s.exec(e);
    assert.ok(m, `not an SSE event: ${e}`);
    const data = JSON.parse(m[2]);
    assert.equal(data.type, m[1]);
    return data;
  });
}

try {
  // The reference: the OpenAI endpoint's greedy answer without thinking.
  const ref = await openai.chat.completions.create({ model: "x", messages: [{ role: "user", content: question }],
    max_tokens: 12, temperature: 0, chat_template_kwargs: { enable_thinking: false } });
  const refText = ref.choices[0].message.content;
  const base = { model: "x", max_tokens: 12, temperature: 0, messages: [{ role: "user", content: question }] };
  let nonStream = null;

  // ---- Anthropic ------------------------------------------------------------------------------
  await check("messages.create equals the OpenAI greedy text", async () => {
    const m = await anthropic.messages.create(base);
    assert.equal(m.type, "message");
    assert.equal(m.role, "assistant");
    assert.match(m.id, /^msg_/);
    assert.equal(m.model, "x");
    assert.deepEqual(m.content.map((b) => b.type), ["text"]);
    assert.equal(m.content[0].text, refText);
    assert.equal(m.stop_reason, "max_tokens");
    assert.equal(m.stop_sequence, null);
    assert.equal(m.usage.output_tokens, 12);
    assert.equal(m.usage.input_tokens + m.usage.cache_read_input_tokens, ref.usage.prompt_tokens);
    nonStream = m;
  });

  await check("messages stream: Anthropic's event sequence; SDK final message equals non-stream", async () => {
    const ev = await rawEvents(base);
    const types = ev.map((e) => e.type);
    assert.equal(types[0], "message_start");
    assert.deepEqual(ev[0].message.content, []);
    assert.equal(ev[0].message.stop_reason, null);
    assert.equal(types.at(-2), "message_delta");
    assert.equal(types.at(-1), "message_stop");
    assert.equal(ev.at(-2).delta.stop_reason, "max_tokens");
    assert.equal(ev.at(-2).usage.output_tokens, 12);
    const blocks = types.filter((t) => t.startsWith("content_block"));
    assert.equal(blocks[0], "content_block_start");
    assert.equal(blocks.at(-1), "content_block_stop");
    assert.ok(blocks.slice(1, -1).every((t) => t === "content_block_delta"));
    const text = ev.filter((e) => e.type === "content_block_delta").map((e) => e.delta.text).join("");
    assert.equal(text, refText);

    const stream = anthropic.messages.stream(base);
    let deltas = "";
    stream.on("text", (t) => (deltas += t));
    const fin = await stream.finalMessage();
    assert.equal(deltas, refText);
    assert.deepEqual(fin.content, nonStream.content);
    assert.equal(fin.stop_reason, "max_tokens");
    assert.equal(fin.usage.output_tokens, 12);
  });

  await check("stop_sequences → stop_reason stop_sequence", async () => {
    // A piece from the middle of the greedy answer.
    const words = refText.split(/(\s+)/).filter((w) => w.trim().length >= 2);
    assert.ok(words.length >= 2, `no usable stop word in ${JSON.stringify(refText)}`);
    const stop = words[1];
    const cut = refText.slice(0, refText.indexOf(stop));
    const m = await anthropic.messages.create({ ...base, stop_sequences: [stop, "never-in-the-text-xyz"] });
    assert.equal(m.stop_reason, "stop_sequence");
    assert.equal(m.stop_sequence, stop);
    assert.equal(m.content[0]?.text ?? "", cut.trimEnd());  // the content's trailing whitespace is trimmed (docs/chat.md)
    const fin = await anthropic.messages.stream({ ...base, stop_sequences: [stop] }).finalMessage();
    assert.equal(fin.stop_reason, "stop_sequence");
    assert.equal(fin.stop_sequence, stop);
  });

  await check("a final assistant message is a prefill the answer continues", async () => {
    const prefill = "The sea is";
    const t = await fetch(`${srv.base}/apply-template`, { method: "POST",
      headers: { Authorization: `Bearer ${KEY}`, "Content-Type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: question }], chat_template_kwargs: { enable_thinking: false } }) });
    const prompt = (await t.json()).prompt + prefill;
    const cont = await openai.completions.create({ model: "x", prompt, max_tokens: 6, temperature: 0 });
    const m = await anthropic.messages.create({ ...base, max_tokens: 6,
      messages: [{ role: "user", content: question }, { role: "assistant", content: prefill }] });
    assert.equal(m.content[0].text, cont.choices[0].text.trim());
    assert.equal(m.usage.output_tokens, 6);
    const e = await anthropic.messages.create({ ...base, messages: [{ role: "user", content: question },
      { role: "assistant", content: "trailing " }] }).catch((e) => e);
    assert.equal(e.status, 400);
  });

  await check("thinking enabled: a thinking block, streamed as thinking_delta", async () => {
    const req = { ...base, max_tokens: 2048, thinking: { type: "enabled", budget_tokens: 1024 } };
    const m = await anthropic.messages.create({ ...req, max_tokens: 10 }).catch((e) => e);
    assert.equal(m.status, 400);  // budget_tokens must be below max_tokens
    const r = await anthropic.messages.create({ ...base, system: [{ type: "text", text: "Think first." }],
      max_tokens: 1100, stop_sequences: ["."], thinking: { type: "enabled", budget_tokens: 1024 } });
    assert.equal(r.content[0].type, "thinking");
    assert.ok(r.content[0].thinking.length > 0);
    assert.equal(typeof r.content[0].signature, "string");
    const ev = await rawEvents({ ...base, max_tokens: 1100, stop_sequences: ["."], system: "Think first.",
      thinking: { type: "enabled", budget_tokens: 1024 } });
    const start = ev.find((e) => e.type === "content_block_start");
    assert.equal(start.content_block.type, "thinking");
    assert.ok(ev.some((e) => e.type === "content_block_delta" && e.delta.type === "thinking_delta"));
    assert.ok(ev.some((e) => e.type === "content_block_delta" && e.delta.type === "signature_delta"));
  });

  let toolUse = null;
  await check("tool_choice any: tool_use block, stop_reason tool_use, input obeys the schema", async () => {
    const m = await anthropic.messages.create({ ...base, max_tokens: 200, tools, tool_choice: { type: "any" } });
    assert.equal(m.stop_reason, "tool_use");
    const calls = m.content.filter((b) => b.type === "tool_use");
    assert.equal(calls.length, 1);
    assert.match(calls[0].id, /^toolu_/);
    assert.equal(calls[0].name, "get_weather");
    checkWeather(calls[0].input);
    toolUse = calls[0];
  });

  await check("named tool streamed: input_json_delta; SDK final message has the parsed input", async () => {
    const req = { ...base, max_tokens: 200, tools, tool_choice: { type: "tool", name: "get_weather" } };
    const ev = await rawEvents(req);
    const start = ev.find((e) => e.type === "content_block_start" && e.content_block.type === "tool_use");
    assert.ok(start, JSON.stringify(ev));
    assert.equal(start.content_block.name, "get_weather");
    const json = ev.filter((e) => e.type === "content_block_delta" && e.index === start.index)
      .map((e) => e.delta.partial_json).join("");
    checkWeather(JSON.parse(json));
    assert.equal(ev.at(-2).delta.stop_reason, "tool_use");
    const fin = await anthropic.messages.stream(req).finalMessage();
    const call = fin.content.find((b) => b.type === "tool_use");
    checkWeather(call.input);
    assert.equal(fin.stop_reason, "tool_use");
  });

  await check("a tool_result turn renders and answers", async () => {
    const m = await anthropic.messages.create({ ...base, tools, messages: [
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: [toolUse] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: toolUse.id, content: "sunny, 21 C" }] }] });
    assert.ok(["max_tokens", "end_turn", "tool_use"].includes(m.stop_reason));
    // The tool result is in the prompt: more input tokens than without it.
    const n1 = await anthropic.messages.countTokens({ model: "x", tools, messages: [
      { role: "user", content: "Weather in Paris?" }, { role: "assistant", content: [toolUse] },
      { role: "user", content: [{ type: "tool_result", tool_use_id: toolUse.id, content: "sunny, 21 C" }] }] });
    const n0 = await anthropic.messages.countTokens({ model: "x", tools, messages: [{ role: "user", content: "Weather in Paris?" }] });
    assert.ok(n1.input_tokens > n0.input_tokens + 5, `${n1.input_tokens} vs ${n0.input_tokens}`);
    assert.equal(m.usage.input_tokens + m.usage.cache_read_input_tokens, n1.input_tokens);
  });

  await check("errors in Anthropic's shape through the SDK", async () => {
    const e1 = await anthropic.messages.create({ model: "x", messages: [{ role: "user", content: "hi" }] }).catch((e) => e);
    assert.ok(e1 instanceof Anthropic.BadRequestError, String(e1));
    assert.equal(e1.error.type, "error");
    assert.equal(e1.error.error.type, "invalid_request_error");
    assert.match(e1.error.error.message, /max_tokens/);
    const e2 = await anthropic.messages.create({ ...base, model: "claude-nope" }).catch((e) => e);
    assert.ok(e2 instanceof Anthropic.NotFoundError, String(e2));
    assert.equal(e2.error.error.type, "not_found_error");
    const bad = new Anthropic({ baseURL: srv.base, apiKey: "wrong", maxRetries: 0 });
    const e3 = await bad.messages.create(base).catch((e) => e);
    assert.ok(e3 instanceof Anthropic.AuthenticationError, String(e3));
    assert.equal(e3.error.error.type, "authentication_error");
    const e4 = await anthropic.messages.create({ ...base, messages: [{ role: "user", content: [{ type: "image",
      source: { type: "base64", media_type: "image/png", data: "AAAA" } }] }] }).catch((e) => e);
    assert.equal(e4.status, 400);
    const r = await fetch(`${srv.base}/v1/messages`, { method: "POST",
      headers: { "Content-Type": "application/json", "x-api-key": KEY }, body: "{not json" });
    assert.equal(r.status, 400);
    assert.equal((await r.json()).type, "error");
  });

  // ---- ollama ---------------------------------------------------------------------------------
  const obase = { model: "x", messages: [{ role: "user", content: question }], think: false,
    options: { temperature: 0, num_predict: 12 } };
  await check("ollama chat (stream:false) equals the OpenAI greedy text", async () => {
    const r = await ollama.chat({ ...obase, stream: false });
    assert.equal(r.model, "x");
    assert.equal(r.message.role, "assistant");
    assert.equal(r.message.content, refText);
    assert.equal(r.done, true);
    assert.equal(r.done_reason, "length");
    assert.equal(r.eval_count, 12);
    assert.equal(r.prompt_eval_count, ref.usage.prompt_tokens);
    assert.ok(r.total_duration > 0 && r.eval_duration > 0);
    assert.ok(!Number.isNaN(Date.parse(r.created_at)));
  });

  await check("ollama chat streamed: parts join to the same text, last part done", async () => {
    const it = await ollama.chat({ ...obase, stream: true });
    let text = "", last = null, n = 0;
    for await (const part of it) {
      text += part.message.content;
      last = part;
      n++;
    }
    assert.ok(n > 2);
    assert.equal(text, refText);
    assert.equal(last.done, true);
    assert.equal(last.done_reason, "length");
  });

  await check("ollama streams NDJSON by default on the wire", async () => {
    const r = await fetch(`${srv.base}/api/chat`, { method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${KEY}` }, body: JSON.stringify(obase) });
    assert.equal(r.status, 200);
    assert.match(r.headers.get("content-type"), /application\/x-ndjson/);
    const lines = (await r.text()).split("\n").filter(Boolean).map((l) => JSON.parse(l));
    assert.ok(lines.length > 2);
    assert.ok(lines.slice(0, -1).every((l) => l.done === false));
    assert.equal(lines.at(-1).done, true);
  });

  await check("ollama generate equals the chat answer; raw generate; stop option", async () => {
    const g = await ollama.generate({ model: "x", prompt: question, think: false, options: { temperature: 0, num_predict: 12 } });
    assert.equal(g.response, refText);
    assert.equal(g.done_reason, "length");
    let streamed = "";
    for await (const p of await ollama.generate({ model: "x", prompt: question, think: false, stream: true,
      options: { temperature: 0, num_predict: 12 } })) streamed += p.response;
    assert.equal(streamed, refText);
    const raw = await ollama.generate({ model: "x", prompt: "Once upon a time", raw: true, options: { temperature: 0, num_predict: 6 } });
    assert.equal(raw.eval_count, 6);
    const cmp = await openai.completions.create({ model: "x", prompt: "Once upon a time", max_tokens: 6, temperature: 0 });
    assert.equal(raw.response, cmp.choices[0].text);
    const stop = refText.split(/\s+/).filter((w) => w.length >= 2)[1];
    const s = await ollama.generate({ model: "x", prompt: question, think: false, options: { temperature: 0, num_predict: 12, stop: [stop] } });
    assert.equal(s.response, refText.slice(0, refText.indexOf(stop)).trimEnd());
    assert.equal(s.done_reason, "stop");
  });

  await check("ollama format json / schema; seeded sampling reproducible", async () => {
    const schema = { type: "object", properties: { color: { enum: ["red", "green"] }, n: { type: "integer" } }, required: ["color", "n"] };
    const r = await ollama.chat({ ...obase, format: schema, options: { temperature: 0.8, seed: 5, num_predict: 200 } });
    const v = JSON.parse(r.message.content);
    assert.ok(["red", "green"].includes(v.color));
    assert.ok(Number.isInteger(v.n));
    const r2 = await ollama.chat({ ...obase, format: schema, options: { temperature: 0.8, seed: 5, num_predict: 200 } });
    assert.equal(r2.message.content, r.message.content);
    const j = await ollama.generate({ model: "x", prompt: question, think: false, format: "json", options: { num_predict: 300, seed: 2 } });
    if (j.done_reason === "stop") assert.equal(typeof JSON.parse(j.response), "object");
    else assert.ok(j.response.trimStart().startsWith("{"));
  });

  await check("ollama tools: tool_calls with object arguments; a tool turn renders", async () => {
    const otools = [{ type: "function", function: { name: "get_weather", description: "Weather",
      parameters: tools[0].input_schema } }];
    // Forcing is not in ollama's API: a thinking-off greedy answer may or may not call. The tool
    // schema is rendered (more prompt tokens than without), and a history with a call and a
    // tool message is accepted.
    const a = await ollama.chat({ ...obase, tools: otools, stream: false });
    const b = await ollama.chat({ ...obase, stream: false });
    assert.ok(a.prompt_eval_count > b.prompt_eval_count + 20);
    const h = await ollama.chat({ ...obase, tools: otools, messages: [
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: "", tool_calls: [{ function: { name: "get_weather", arguments: { city: "Paris", unit: "c" } } }] },
      { role: "tool", content: "sunny", tool_name: "get_weather" }] });
    assert.equal(h.done, true);
    for (const c of a.message.tool_calls ?? []) assert.equal(typeof c.function.arguments, "object");
  });

  await check("ollama think: thinking field", async () => {
    const r = await ollama.chat({ ...obase, think: true, options: { temperature: 0, num_predict: 8 } });
    assert.ok(r.message.thinking.length > 0);
  });

  await check("ollama list / show / version", async () => {
    const l = await ollama.list();
    assert.equal(l.models.length, 1);
    assert.equal(l.models[0].name, "x:latest");
    assert.equal(l.models[0].details.family, "qwen35");
    assert.ok(l.models[0].size > 0);
    const s = await ollama.show({ model: "x:latest" });
    assert.ok(s.template.includes("im_start"));
    assert.equal(s.model_info["general.architecture"], "qwen35");
    assert.ok(s.capabilities.includes("completion") && s.capabilities.includes("tools"));
    const v = await ollama.version();
    assert.match(v.version, /^\d+\.\d+\.\d+$/);
  });

  await check("ollama errors: {error} with a 4xx", async () => {
    const e1 = await ollama.chat({ model: "nope", messages: [{ role: "user", content: "hi" }] }).catch((e) => e);
    assert.equal(e1.status_code, 404);
    assert.match(e1.error, /not found/);
    const e2 = await ollama.generate({ model: "x", prompt: "hi", options: { mirostat: 2 } }).catch((e) => e);
    assert.equal(e2.status_code, 400);
    assert.match(e2.error, /mirostat/);
    const e3 = await new Ollama({ host: srv.base }).list().catch((e) => e);
    assert.equal(e3.status_code, 401);
    for (const raw of [false, true]) {  // a bad schema is a 400 before any streaming
      const e4 = await ollama.generate({ model: "x", prompt: "hi", raw, stream: true, format: { type: "object", properties: 5 } })
        .catch((e) => e);
      assert.equal(e4.status_code, 400);
      assert.match(e4.error, /^format: /);
    }
    const load = await ollama.generate({ model: "x", prompt: "" });
    assert.equal(load.done_reason, "load");
  });

  // ---- llama-server extras and the request log ------------------------------------------------
  await check("/props, /v1/models/{id}, /apply-template", async () => {
    const auth = { Authorization: `Bearer ${KEY}` };
    const p = await (await fetch(`${srv.base}/props`, { headers: auth })).json();
    assert.equal(p.total_slots, 2);
    assert.equal(p.default_generation_settings.n_ctx, 2048);
    assert.equal(typeof p.default_generation_settings.params.temperature, "number");
    assert.ok(p.chat_template.includes("im_start"));
    assert.equal((await fetch(`${srv.base}/props`)).status, 401);
    const m = await openai.models.retrieve("x");
    assert.equal(m.id, "x");
    const e = await openai.models.retrieve("nope").catch((e) => e);
    assert.equal(e.status, 404);
    const t = await fetch(`${srv.base}/apply-template`, { method: "POST", headers: { ...auth, "Content-Type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: question }], chat_template_kwargs: { enable_thinking: false } }) });
    const prompt = (await t.json()).prompt;
    assert.ok(prompt.startsWith(`<|im_start|>user\n${question}<|im_end|>\n<|im_start|>assistant\n`), prompt);
    const n = await fetch(`${srv.base}/tokenize`, { method: "POST", headers: { ...auth, "Content-Type": "application/json" },
      body: JSON.stringify({ content: prompt }) });
    assert.equal((await n.json()).tokens.length, ref.usage.prompt_tokens);  // the prompt the chat request ran
  });

  await check("one request log line per request with its tokens", async () => {
    const before = srv.log().length;
    await openai.chat.completions.create({ model: "x", messages: [{ role: "user", content: question }], max_tokens: 3,
      temperature: 0, n: 2, chat_template_kwargs: { enable_thinking: false } });
    await anthropic.messages.create({ ...base, max_tokens: 4, stream: true }).then(async (s) => { for await (const _ of s); });
    await new Promise((r) => setTimeout(r, 200));
    const lines = srv.log().slice(before).split("\n").filter((l) => / (GET|POST) /.test(l));
    assert.equal(lines.length, 2, lines.join("\n"));
    assert.match(lines[0], new RegExp(`^oxinfer: POST /v1/chat/completions 200 prompt=${ref.usage.prompt_tokens} cached=\\d+ generated=6 [\\d.]+ ms$`));
    assert.match(lines[1], /^oxinfer: POST \/v1\/messages 200 prompt=\d+ cached=\d+ generated=4 [\d.]+ ms$/);
  });

  // ---- CORS -----------------------------------------------------------------------------------
  await check("CORS: preflight from an allowed origin, headers on responses, others refused", async () => {
    const pre = await fetch(`${srv.base}/v1/chat/completions`, { method: "OPTIONS", headers: { Origin: ORIGIN,
      "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization,content-type" } });
    assert.equal(pre.status, 204);
    assert.equal(pre.headers.get("access-control-allow-origin"), ORIGIN);
    assert.match(pre.headers.get("access-control-allow-methods"), /POST/);
    assert.equal(pre.headers.get("access-control-allow-headers"), "authorization,content-type");
    const other = await fetch(`${srv.base}/v1/messages`, { method: "OPTIONS", headers: { Origin: "http://evil.example",
      "Access-Control-Request-Method": "POST" } });
    assert.equal(other.headers.get("access-control-allow-origin"), null);
    assert.equal(other.headers.get("access-control-allow-methods"), null);
    const get = await fetch(`${srv.base}/v1/models`, { headers: { Origin: "http://other.example", Authorization: `Bearer ${KEY}` } });
    assert.equal(get.status, 200);
    assert.equal(get.headers.get("access-control-allow-origin"), "http://other.example");
    const err = await fetch(`${srv.base}/v1/models`, { headers: { Origin: ORIGIN } });
    assert.equal(err.status, 401);
    assert.equal(err.headers.get("access-control-allow-origin"), ORIGIN);  // the page can read the error
    const plain = await fetch(`${srv.base}/v1/chat/completions`, { method: "POST",
      headers: { Origin: ORIGIN, "Content-Type": "text/plain", Authorization: `Bearer ${KEY}` }, body: "{}" });
    assert.equal(plain.status, 415);
  });

  await check("CORS in headless Chromium: a page of an allowed origin calls the OpenAI and Anthropic APIs", async () => {
    if (!CHROMIUM) throw new Error("chromium is not installed (scripts/setup.sh installs it)");
    const got = await browse(srv.base);
    assert.equal(got.openai?.status, 200, JSON.stringify(got));
    assert.equal(got.openai.body.object, "chat.completion");
    assert.equal(got.anthropic?.status, 200, JSON.stringify(got));
    assert.equal(got.anthropic.body.type, "message");
  });
} finally {
  srv.proc.kill("SIGTERM");
}

// Without --cors-origin: no CORS headers at all, preflights are not granted.
const bare = await startServer(OXINFER, model, ["-np", "1"]);
try {
  await check("CORS off by default", async () => {
    const pre = await fetch(`${bare.base}/v1/chat/completions`, { method: "OPTIONS", headers: { Origin: ORIGIN,
      "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type" } });
    assert.equal(pre.headers.get("access-control-allow-origin"), null);
    assert.equal(pre.headers.get("access-control-allow-headers"), null);
    const get = await fetch(`${bare.base}/v1/models`, { headers: { Origin: ORIGIN } });
    assert.equal(get.headers.get("access-control-allow-origin"), null);
  });
  await check("CORS off by default: the page in headless Chromium is blocked", async () => {
    if (!CHROMIUM) throw new Error("chromium is not installed (scripts/setup.sh installs it)");
    const got = await browse(bare.base);
    assert.ok(got.openai?.blocked && got.anthropic?.blocked, JSON.stringify(got));
  });
} finally {
  bare.proc.kill("SIGTERM");
  page.close();
}

finish();
