// End-to-end test of `oxinfer serve` with the real `openai` npm client (and raw HTTP where the
// client hides the wire format), on a synthetic Qwen 3.5 model made by oxi-gen:
//   /health and /v1/models; chat non-streaming and streaming (same greedy text, usage, raw SSE
//   ending in [DONE]); json_schema output that parses as JSON and obeys the schema; forced tool
//   calls (non-stream and streamed delta.tool_calls); a multi-turn conversation whose second turn
//   reuses the first turn's state (cached_tokens > 0) and equals a cold server's answer;
//   8 concurrent streams share model passes (continuous batching) and equal the request alone;
//   32 concurrent streaming requests with 0 errors, identical to the request alone, RSS flat;
//   speculative decoding keeps the greedy text and reports llama-server's timings, also with
//   `--spec mtp` (the MTP head) for 4 concurrent requests under continuous batching;
//   client disconnect cancels; malformed JSON, wrong types, oversized bodies, bad API key → 4xx
//   with OpenAI error JSON, and the server stays up; n > 1 (each choice as the single request
//   with seed + i, streamed by choice index), ignore_eos, logit_bias (object and llama-server array forms:
//   +100 forces a token, -100 / false bans the greedy one), and unknown fields that would change
//   the output (suffix, …) and invalid grammars refused with 400 while harmless ones (user, metadata) pass.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import assert from "node:assert/strict";
import { startServer as startOxinfer, makeQwenModel } from "./lib/server.mjs";

const OXINFER = process.env.OXINFER;
const NLC_DIR = process.env.NLC_DIR;
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

// Content and finish reason per choice index of a chat stream.
async function collectChoices(stream) {
  const by = [];
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      by[c.index] ??= { content: "", finish: null };
      if (c.delta?.content) by[c.index].content += c.delta.content;
      if (c.finish_reason) by[c.index].finish = c.finish_reason;
    }
  }
  return by;
}

// ---- model ------------------------------------------------------------------------------------
const model = makeQwenModel(WORK);

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

  await check("json_schema strings: whole UTF-8 characters, maxLength in characters", async () => {
    // Issue 31, bug 2: byte-level tokens that split characters gave U+FFFD runs and long strings.
    const schema = { type: "object", properties: { name: { type: "string", maxLength: 5 } }, required: ["name"],
      additionalProperties: false };
    let nonAscii = 0;
    for (const seed of [1, 2, 3, 4, 5, 6]) {
      const r = await client.chat.completions.create({ ...base, max_tokens: 60, temperature: 1.0, top_k: 0, top_p: 1,
        min_p: 0, seed, messages: [{ role: "user", content: "用中文写一个名字。" }],
        response_format: { type: "json_schema", json_schema: { name: "n", schema } } });
      const c = r.choices[0].message.content;
      assert.ok(!c.includes("\uFFFD"), `seed ${seed}: U+FFFD in ${JSON.stringify(c)}`);
      if (r.choices[0].finish_reason !== "stop") continue;  // cut by max_tokens (whitespace runs)
      const name = JSON.parse(c).name;
      assert.ok([...name].length <= 5, `seed ${seed}: ${JSON.stringify(name)} has ${[...name].length} characters`);
      nonAscii += /[^\x00-\x7f]/.test(name) ? 1 : 0;
    }
    assert.ok(nonAscii > 0, "no non-ASCII name generated: the check did not exercise multi-byte characters");
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
  await check("speculative decoding: greedy text as without it, llama-server timings, bad n_max → 400", async () => {
    const req = { model: "x", prompt: "one two three four one two three four one two three", max_tokens: 48, temperature: 0 };
    const plain = await client.completions.create({ ...req, "speculative.n_max": 0 });
    const spec = await client.completions.create({ ...req, "speculative.n_min": 1 });  // draft whenever there is a proposal
    assert.equal(spec.choices[0].text, plain.choices[0].text);
    assert.equal(plain.timings.draft_n, 0);
    assert.equal(spec.timings.predicted_n, 48);
    assert.ok(spec.timings.draft_n >= spec.timings.draft_n_accepted, JSON.stringify(spec.timings));
    console.log(`     speculative timings: ${JSON.stringify(spec.timings)}`);
    const bad = await fetch(`${srv.base}/v1/completions`, {
      method: "POST", headers: { "Content-Type": "application/json", Authorization: `Bearer ${API_KEY}` },
      body: JSON.stringify({ ...req, "speculative.n_max": 99 }) });
    assert.equal(bad.status, 400);
    const m = await (await fetch(`${srv.base}/metrics`)).text();
    assert.match(m, /# TYPE oxinfer_draft_tokens_total counter/);
  });
  await check("speculative.mode per request: ngram / none keep the text, mtp on a model without a head → 400", async () => {
    const req = { model: "x", prompt: "one two three four one two three four one two three", max_tokens: 32, temperature: 0 };
    const plain = await client.completions.create({ ...req, "speculative.n_max": 0 });
    const ngram = await client.completions.create({ ...req, "speculative.mode": "ngram", "speculative.n_min": 1 });
    const none = await client.completions.create({ ...req, "speculative.mode": "none", "speculative.n_min": 1 });
    assert.equal(ngram.choices[0].text, plain.choices[0].text);
    assert.equal(none.choices[0].text, plain.choices[0].text);
    assert.ok(ngram.timings.draft_n > 0, JSON.stringify(ngram.timings));  // the prompt repeats: lookup proposes
    assert.equal(none.timings.draft_n, 0);
    for (const [mode, re] of [["mtp", /no MTP head/], ["draft", /no draft model/], ["eagle", /must be one of/]]) {
      const e = await client.completions.create({ ...req, "speculative.mode": mode }).catch((x) => x);
      assert.equal(e.status, 400, `${mode}: ${e}`);
      assert.equal(e.error?.param, "speculative.mode");
      assert.match(e.error?.message ?? "", re);
    }
  });
  // ---- n > 1, logit_bias, unknown fields (issue 31, bug 4) ----
  const sampled = { ...base, max_tokens: 8, temperature: 1.0, top_k: 0, top_p: 1, min_p: 0 };
  let two = null;
  await check("n=2: two choices, choice i is the request alone with seed + i", async () => {
    const r = await client.chat.completions.create({ ...sampled, n: 2, seed: 11 });
    assert.equal(r.choices.length, 2);
    assert.deepEqual(r.choices.map((c) => c.index), [0, 1]);
    assert.equal(r.usage.completion_tokens, 16);
    for (const i of [0, 1]) {
      const one = await client.chat.completions.create({ ...sampled, seed: 11 + i });
      assert.equal(r.choices[i].message.content, one.choices[0].message.content, `choice ${i}`);
    }
    assert.notEqual(r.choices[0].message.content, r.choices[1].message.content);
    two = r.choices.map((c) => c.message.content);
  });
  await check("n=2 streamed: chunks carry the choice index, same texts", async () => {
    const s = await client.chat.completions.create({ ...sampled, n: 2, seed: 11, stream: true });
    const got = await collectChoices(s);
    assert.deepEqual(got.map((c) => c.content), two);
    assert.deepEqual(got.map((c) => c.finish), ["length", "length"]);
  });
  await check("/v1/completions n=3, non-stream and stream", async () => {
    const req = { model: "x", prompt: "Once upon a time", max_tokens: 6, temperature: 1.0, top_k: 0, seed: 5 };
    const r = await client.completions.create({ ...req, n: 3 });
    assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
    const alone = await client.completions.create({ ...req, seed: 7 });
    assert.equal(r.choices[2].text, alone.choices[0].text);
    const s = await client.completions.create({ ...req, n: 3, stream: true });
    const texts = ["", "", ""];
    for await (const chunk of s) for (const c of chunk.choices) texts[c.index] += c.text;
    assert.deepEqual(texts, r.choices.map((c) => c.text));
  });
  await check("n above 16 → 400 naming n", async () => {
    await assert.rejects(client.chat.completions.create({ ...base, n: 17 }), (e) => e.status === 400 && e.param === "n");
  });

  const tokenize = async (content) => (await (await fetch(`${srv.base}/tokenize`, { method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${API_KEY}` }, body: JSON.stringify({ content }) })).json()).tokens;
  const detokenize = async (tokens) => (await (await fetch(`${srv.base}/detokenize`, { method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${API_KEY}` }, body: JSON.stringify({ tokens }) })).json()).content;
  const greedy = { model: "x", prompt: "Once upon a time", max_tokens: 3, temperature: 0 };
  await check("logit_bias +100 forces a token (chat and completions)", async () => {
    const [forced] = await tokenize("banana");
    const want = await detokenize([forced, forced, forced]);
    const r = await client.completions.create({ ...greedy, logit_bias: { [forced]: 100 } });
    assert.equal(r.choices[0].text, want);
    const c = await client.chat.completions.create({ ...base, max_tokens: 3, logit_bias: { [forced]: 100 } });
    assert.equal(c.choices[0].message.content, want);
  });
  await check("logit_bias -100 and llama-server's [[id, false]] ban the greedy token", async () => {
    const plain = await client.completions.create({ ...greedy, max_tokens: 1 });
    const ids = await tokenize(plain.choices[0].text);
    assert.equal(ids.length, 1, `greedy token ${JSON.stringify(plain.choices[0].text)} re-tokenizes as ${ids}`);
    for (const logit_bias of [{ [ids[0]]: -100 }, [[ids[0], false]]]) {
      const r = await client.completions.create({ ...greedy, max_tokens: 1, logit_bias });
      assert.notEqual(r.choices[0].text, plain.choices[0].text, JSON.stringify(logit_bias));
    }
  });
  await check("ignore_eos (llama-server's): an end-of-generation token forced by logit_bias is never chosen", async () => {
    const props = await (await fetch(`${srv.base}/props`, { headers: { Authorization: `Bearer ${API_KEY}` } })).json();
    const eosIds = (await (await fetch(`${srv.base}/tokenize`, { method: "POST",
      headers: { "Content-Type": "application/json", Authorization: `Bearer ${API_KEY}` },
      body: JSON.stringify({ content: props.eos_token, parse_special: true }) })).json()).tokens;
    assert.equal(eosIds.length, 1, `eos_token ${JSON.stringify(props.eos_token)} is one token`);
    const forceEos = { ...greedy, max_tokens: 4, logit_bias: { [eosIds[0]]: 100 } };
    const ended = await client.completions.create(forceEos);
    assert.equal(ended.choices[0].finish_reason, "stop");
    assert.equal(ended.usage.completion_tokens, 0);
    const r = await client.completions.create({ ...forceEos, ignore_eos: true });
    assert.equal(r.choices[0].finish_reason, "length");
    assert.equal(r.usage.completion_tokens, 4);
    // Apart from the end-of-generation ids, the bias changes nothing: the same text as plain greedy.
    const plain = await client.completions.create({ ...greedy, max_tokens: 4, ignore_eos: true });
    assert.equal(r.choices[0].text, plain.choices[0].text);
    await assert.rejects(client.completions.create({ ...greedy, ignore_eos: "yes" }),
      (e) => e.status === 400 && e.param === "ignore_eos");
  });
  await check("bad logit_bias → 400", async () => {
    for (const logit_bias of [{ abc: 1 }, { 5: 101 }, [[5]], { 99999999: 1 }]) {
      await assert.rejects(client.chat.completions.create({ ...base, logit_bias }),
        (e) => e.status === 400 && e.param === "logit_bias", JSON.stringify(logit_bias));
    }
  });
  await check("grammar, suffix and unknown fields → 400; user and metadata accepted", async () => {
    await assert.rejects(client.chat.completions.create({ ...base, grammar: 'root ::= yes' }),
      (e) => e.status === 400 && e.param === "grammar" && /undefined rule 'yes'/.test(e.message));
    await assert.rejects(client.completions.create({ ...greedy, suffix: " The end." }),
      (e) => e.status === 400 && e.param === "suffix");
    await assert.rejects(client.chat.completions.create({ ...base, mirostat: 2 }),
      (e) => e.status === 400 && e.param === "mirostat");
    const r = await client.chat.completions.create({ ...base, user: "u-1", metadata: { run: "e2e" }, suffix: null });
    assert.equal(r.choices[0].message.content, alone);
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

// --spec mtp: the model's MTP head drafts for every slot while the continuous batcher serves them
// together; each of 4 concurrent greedy requests keeps the text of the same request without
// drafting (speculative.n_max 0), and drafts were made and verified.
{
  const mtpModel = makeQwenModel(WORK + "-mtp", ["--mtp"]);
  const ms = await startOxinfer(OXINFER, mtpModel, ["-np", "4", "--spec", "mtp", "--alias", "x"]);
  try {
    const c = new OpenAI({ baseURL: `${ms.base}/v1`, apiKey: "none", maxRetries: 0, timeout: 120000 });
    await check("--spec mtp under continuous batching: 4 concurrent greedy requests equal plain, drafts verified", async () => {
      const reqs = [0, 1, 2, 3].map((i) => ({ model: "x", prompt: `story ${i}: one two three four one two three`, max_tokens: 24,
        temperature: 0 }));
      const plain = await Promise.all(reqs.map((r) => c.completions.create({ ...r, "speculative.n_max": 0 })));
      const mtpMetric = async (name) => Number((await (await fetch(`${ms.base}/metrics`)).text()).match(new RegExp(`^oxinfer_${name} ([0-9.e+]+)$`, "m"))[1]);
      const f0 = await mtpMetric("batch_mtp_feeds"), p0 = await mtpMetric("batch_mtp_passes");
      const spec = await Promise.all(reqs.map((r) => c.completions.create({ ...r, "speculative.n_min": 1 })));
      // The slots' heads went through the batcher: 4 concurrent drafting requests share head passes.
      const feeds = (await mtpMetric("batch_mtp_feeds")) - f0, hp = (await mtpMetric("batch_mtp_passes")) - p0;
      console.log(`     mtp head: ${feeds} feeds in ${hp} passes`);
      assert.ok(feeds > 0 && hp < feeds, `head feeds ${feeds} in ${hp} passes`);
      for (let i = 0; i < 4; ++i) {
        assert.equal(spec[i].choices[0].text, plain[i].choices[0].text, `request ${i}`);
        assert.equal(plain[i].timings.draft_n, 0);
        assert.ok(spec[i].timings.draft_n > 0, JSON.stringify(spec[i].timings));
      }
      console.log(`     mtp timings: ${JSON.stringify(spec.map((r) => [r.timings.draft_n, r.timings.draft_n_accepted]))}`);
      // Per request, on the same slots: prompt lookup for two, the head for two, none for one.
      const modes = ["ngram", "mtp", "ngram", "mtp"];
      const mixed = await Promise.all(reqs.map((r, i) => c.completions.create({ ...r, "speculative.mode": modes[i], "speculative.n_min": 1 })));
      for (let i = 0; i < 4; ++i) assert.equal(mixed[i].choices[0].text, plain[i].choices[0].text, `${modes[i]} request ${i}`);
      const off = await c.completions.create({ ...reqs[0], "speculative.mode": "none" });
      assert.equal(off.choices[0].text, plain[0].choices[0].text);
      assert.equal(off.timings.draft_n, 0);
    });
  } finally {
    ms.proc.kill("SIGTERM");
  }
  await check("--spec mtp on a model without an MTP head: the server refuses to start", async () => {
    await assert.rejects(startOxinfer(OXINFER, model, ["--spec", "mtp"]), /no MTP head/);
  });
}

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
