// End-to-end test of `oxinfer serve`'s OpenAI Responses endpoint (POST /v1/responses) with the
// real `openai` npm client (client.responses.create / .stream), on the synthetic Qwen 3.5 model the
// server tests share. References for the text: llama.cpp's greedy answer (node-llama-cpp through
// llama_greedy.mjs, on the model converted to GGUF, the prompt rendered by @huggingface/jinja from
// the model's template) for one conversation, and /v1/chat/completions on the same conversation
// for the rest (the Responses request is a translation onto that path, so the same conversation
// must give the same tokens).
//   create: output_text and usage equal llama.cpp's / the chat answer (string input; instructions
//   + input_text parts; an assistant output item given back), status incomplete with reason
//   max_output_tokens when cut; the response object's shape.
//   stream: the documented event order, sequence_number 0..n-1, `event:` names equal data.type,
//   deltas join to the final text, response.incomplete / response.completed carry the final usage,
//   SDK finalResponse() equals the non-streaming response's output.
//   function tools: tool_choice by name and "required" force a call whose arguments parse as JSON
//   and obey the schema (one call with parallel_tool_calls false); streamed as
//   function_call_arguments.delta/.done; a function_call_output round trip answers as chat
//   completions does with the equivalent tool messages.
//   text.format json_schema: the output parses and obeys the schema, status completed.
//   reasoning: thinking on gives a reasoning item (reasoning_text content) and reasoning_tokens.
//   4xx in OpenAI's error shape: bad input types, unknown item and tool types, previous_response_id,
//   unknown fields, input_image without a vision tower, wrong API key; harmless fields pass; the
//   request log line; a CORS preflight.
// input_image against llama-mtmd-cli (an independent reference) is in server_images
// (lib/images_client.mjs).
import { execFile, execFileSync } from "node:child_process";
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import assert from "node:assert/strict";
import { checks, makeQwenModel, startServer } from "./lib/server.mjs";

const require = createRequire(path.join(process.env.NLC_DIR, "package.json"));
const OpenAI = require("openai").default;
const { Template } = require("@huggingface/jinja");
const { check, finish } = checks();
const WORK = process.env.OXI_WORK_DIR ?? "/tmp/oxi-server-responses-e2e";
const model = makeQwenModel(WORK);

// llama.cpp's greedy answer to [system, user] (thinking off), started now: it runs while the
// server loads. The GGUF is our conversion (checked against llama.cpp by e2e_qwen35_oracle).
const SYSTEM = "Answer briefly.", QUESTION = "Tell me about the sea.";
const llamaRef = (() => {
  const gguf = path.join(WORK, "m.gguf"), promptFile = path.join(WORK, "prompt.txt");
  execFileSync(process.env.OXINFER, ["convert", model, "-o", gguf, "--type", "f32"], { stdio: "ignore" });
  const tmpl = fs.readFileSync(path.join(process.env.OXI_SHARED_DIR, "testdata/templates/Qwen3.5-4B.jinja"), "utf8");
  fs.writeFileSync(promptFile, new Template(tmpl).render({ add_generation_prompt: true, enable_thinking: false,
    messages: [{ role: "system", content: SYSTEM }, { role: "user", content: QUESTION }] }));
  const greedy = path.join(path.dirname(fileURLToPath(import.meta.url)), "llama_greedy.mjs");
  return new Promise((resolve, reject) => execFile("node", [greedy, "--model", gguf, "--prompt-file", promptFile, "--n", "8",
    "--flash-attn", "off"], { maxBuffer: 1 << 26 }, (err, out, errText) => (err ? reject(new Error(errText)) : resolve(JSON.parse(out)))));
})();
llamaRef.catch(() => {});  // reported by the check that awaits it

const KEY = "sk-responses";
const ORIGIN = "http://app.example:3000";
const srv = await startServer(process.env.OXINFER, model, ["-np", "2", "--api-key", KEY, "--alias", "x",
  "--cors-origin", ORIGIN]);
const client = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: KEY, maxRetries: 0, timeout: 120000 });

const question = QUESTION;
const noThink = { effort: "none" };
const schema = { type: "object", properties: { city: { type: "string", maxLength: 16 }, unit: { enum: ["c", "f"] } },
  required: ["city", "unit"], additionalProperties: false };
const tools = [{ type: "function", name: "get_weather", description: "Weather for a city", parameters: schema, strict: true },
  { type: "function", name: "get_time", description: "Local time", parameters: { type: "object",
    properties: { zone: { type: "string" } }, required: ["zone"] }, strict: false }];
const checkWeather = (args) => {
  const a = JSON.parse(args);
  assert.equal(typeof a.city, "string");
  // maxLength counts characters (code points, as JSON Schema defines it), not UTF-16 units
  assert.ok([...a.city].length <= 16, args);
  assert.ok(["c", "f"].includes(a.unit), args);
  assert.deepEqual(Object.keys(a).sort(), ["city", "unit"]);
};

// The chat completions answer for the same conversation (thinking off).
async function chatRef(messages, extra = {}) {
  const r = await client.chat.completions.create({ model: "x", messages, temperature: 0,
    chat_template_kwargs: { enable_thinking: false }, ...extra });
  return r;
}

// Raw SSE events of a streaming /v1/responses request: [data] (checked: `event:` = data.type).
async function rawEvents(body) {
  const r = await fetch(`${srv.base}/v1/responses`, { method: "POST",
    headers: { "Content-Type": "application/json", Authorization: `Bearer ${KEY}` }, body: JSON.stringify({ ...body, stream: true }) });
  assert.equal(r.status, 200);
  assert.match(r.headers.get("content-type"), /text\/event-stream/);
  const text = await r.text();
  const ev = text.split("\n\n").filter(Boolean).map((e) => {
    const m = /^event: (\S+)\ndata: (.*)$/s.exec(e);
    assert.ok(m, `not an SSE event: ${e}`);
    const data = JSON.parse(m[2]);
    assert.equal(data.type, m[1]);
    return data;
  });
  ev.forEach((e, i) => assert.equal(e.sequence_number, i));
  return ev;
}

// An OpenAI error from the SDK: status and param.
async function rejects(req, status, param) {
  const e = await client.responses.create(req).catch((x) => x);
  assert.ok(e instanceof OpenAI.APIError, String(e));
  assert.equal(e.status, status, e.message);
  if (param !== undefined) assert.equal(e.param, param, e.message);
  assert.equal(e.error.type, status === 401 ? "authentication_error" : "invalid_request_error");
}

try {
  const ref = await chatRef([{ role: "user", content: question }], { max_tokens: 12 });
  const refText = ref.choices[0].message.content;
  assert.equal(ref.choices[0].finish_reason, "length");
  const base = { model: "x", input: question, max_output_tokens: 12, temperature: 0, reasoning: noThink };
  let nonStream = null;

  await check("responses.create equals the chat greedy text; incomplete at max_output_tokens", async () => {
    const r = await client.responses.create(base);
    assert.match(r.id, /^resp_/);
    assert.equal(r.object, "response");
    assert.equal(r.model, "x");
    assert.ok(Number.isInteger(r.created_at));
    assert.equal(r.status, "incomplete");
    assert.deepEqual(r.incomplete_details, { reason: "max_output_tokens" });
    assert.equal(r.error, null);
    assert.equal(r.output_text, refText);
    assert.deepEqual(r.output.map((o) => o.type), ["message"]);
    const m = r.output[0];
    assert.match(m.id, /^msg_/);
    assert.equal(m.role, "assistant");
    assert.equal(m.status, "incomplete");
    assert.deepEqual(m.content, [{ type: "output_text", text: refText, annotations: [], logprobs: [] }]);
    assert.equal(r.usage.input_tokens, ref.usage.prompt_tokens);
    assert.equal(r.usage.output_tokens, 12);
    assert.equal(r.usage.total_tokens, r.usage.input_tokens + 12);
    assert.equal(r.usage.output_tokens_details.reasoning_tokens, 0);
    assert.ok(r.usage.input_tokens_details.cached_tokens >= 0);
    assert.equal(r.max_output_tokens, 12);
    assert.equal(r.temperature, 0);
    assert.deepEqual(r.reasoning, noThink);
    nonStream = r;
  });

  await check("instructions + input_text parts: llama.cpp's greedy answer (and the chat endpoint's)", async () => {
    const ll = await llamaRef;
    const r = await client.responses.create({ ...base, max_output_tokens: 8, instructions: SYSTEM,
      input: [{ role: "user", content: [{ type: "input_text", text: question }] }] });
    // (the output parser trims the answer's leading whitespace)
    assert.equal(r.output_text, ll.text.trim());
    assert.equal(r.usage.input_tokens, ll.prompt_tokens.length);
    assert.ok(ll.min_top1_top2_gap > 1e-3, `near-tie in llama.cpp's greedy steps: ${ll.min_top1_top2_gap}`);
    const c = await chatRef([{ role: "system", content: SYSTEM }, { role: "user", content: question }], { max_tokens: 8 });
    assert.equal(r.output_text, c.choices[0].message.content);
    assert.equal(r.usage.input_tokens, c.usage.prompt_tokens);
    assert.equal(r.instructions, SYSTEM);
    // A multi-turn conversation with an assistant message given back as an output item.
    const turns = [{ role: "user", content: question }, { role: "assistant", content: refText }, { role: "user", content: "More." }];
    const c2 = await chatRef(turns, { max_tokens: 6 });
    const r2 = await client.responses.create({ ...base, max_output_tokens: 6, input: [turns[0],
      { type: "message", role: "assistant", status: "completed", id: "msg_1", content: [{ type: "output_text", text: refText, annotations: [] }] },
      turns[2]] });
    assert.equal(r2.output_text, c2.choices[0].message.content);
    assert.equal(r2.usage.input_tokens, c2.usage.prompt_tokens);
  });

  await check("stream: the Responses event sequence; deltas join to the text; SDK final equals create", async () => {
    const ev = await rawEvents(base);
    const types = ev.map((e) => e.type);
    assert.deepEqual(types.slice(0, 4), ["response.created", "response.in_progress", "response.output_item.added",
      "response.content_part.added"]);
    assert.equal(ev[0].response.status, "in_progress");
    assert.deepEqual(ev[0].response.output, []);
    const deltas = ev.filter((e) => e.type === "response.output_text.delta");
    assert.ok(deltas.length >= 2);
    assert.deepEqual(types.slice(4, 4 + deltas.length), deltas.map(() => "response.output_text.delta"));
    assert.deepEqual(types.slice(4 + deltas.length), ["response.output_text.done", "response.content_part.done",
      "response.output_item.done", "response.incomplete"]);
    const item = ev[2].item;
    assert.equal(item.type, "message");
    assert.equal(item.status, "in_progress");
    for (const d of deltas) {
      assert.equal(d.item_id, item.id);
      assert.equal(d.output_index, 0);
      assert.equal(d.content_index, 0);
    }
    assert.equal(deltas.map((d) => d.delta).join(""), refText);
    assert.equal(ev.at(-4).text, refText);
    assert.equal(ev.at(-2).item.status, "incomplete");
    const fin = ev.at(-1).response;
    assert.equal(fin.status, "incomplete");
    assert.deepEqual(fin.incomplete_details, { reason: "max_output_tokens" });
    assert.equal(fin.usage.output_tokens, 12);
    assert.equal(fin.usage.input_tokens, nonStream.usage.input_tokens);

    const stream = client.responses.stream(base);
    let text = "";
    stream.on("response.output_text.delta", (e) => (text += e.delta));
    const r = await stream.finalResponse();
    assert.equal(text, refText);
    assert.equal(r.output_text, refText);
    assert.equal(r.status, "incomplete");
    // (the SDK adds `parsed: null` to output_text parts; ids are per response)
    const strip = (out) => out.map(({ id, ...o }) => ({ ...o, content: o.content.map(({ parsed, ...c }) => c) }));
    assert.deepEqual(strip(r.output), strip(nonStream.output));
    assert.equal(r.usage.output_tokens, 12);
  });

  let call = null;
  await check("tool_choice by name: a function_call whose arguments obey the schema", async () => {
    const r = await client.responses.create({ ...base, max_output_tokens: 200, tools,
      tool_choice: { type: "function", name: "get_weather" }, input: "Weather in Paris?" });
    assert.equal(r.status, "completed");
    const calls = r.output.filter((o) => o.type === "function_call");
    assert.equal(calls.length, 1, JSON.stringify(r.output));
    assert.match(calls[0].id, /^fc_/);
    assert.match(calls[0].call_id, /^call_/);
    assert.equal(calls[0].name, "get_weather");
    assert.equal(calls[0].status, "completed");
    checkWeather(calls[0].arguments);
    assert.deepEqual(r.tools, tools);
    call = calls[0];
    // "required" with two tools: a call to one of them, with that tool's arguments.
    const q = await client.responses.create({ ...base, max_output_tokens: 200, tools, tool_choice: "required", input: "Weather in Paris?" });
    const qc = q.output.filter((o) => o.type === "function_call");
    assert.ok(qc.length >= 1, JSON.stringify(q.output));
    assert.ok(["get_weather", "get_time"].includes(qc[0].name));
    assert.equal(typeof JSON.parse(qc[0].arguments), "object");
    // parallel_tool_calls false: one call at most, generation stopped after it.
    const one = await client.responses.create({ ...base, max_output_tokens: 200, tools, tool_choice: "required",
      parallel_tool_calls: false, input: "Weather in Paris?" });
    assert.equal(one.output.filter((o) => o.type === "function_call").length, 1, JSON.stringify(one.output));
    assert.equal(one.parallel_tool_calls, false);
  });

  await check("tool call streamed: function_call_arguments.delta/.done; SDK final response", async () => {
    const req = { ...base, max_output_tokens: 200, tools, tool_choice: { type: "function", name: "get_weather" }, input: "Weather in Paris?" };
    const ev = await rawEvents(req);
    const added = ev.find((e) => e.type === "response.output_item.added" && e.item.type === "function_call");
    assert.ok(added, JSON.stringify(ev.map((e) => e.type)));
    assert.equal(added.item.name, "get_weather");
    const args = ev.filter((e) => e.type === "response.function_call_arguments.delta" && e.item_id === added.item.id)
      .map((e) => e.delta).join("");
    checkWeather(args);
    const done = ev.find((e) => e.type === "response.function_call_arguments.done");
    assert.equal(done.arguments, args);
    assert.equal(done.name, "get_weather");
    assert.equal(ev.at(-1).type, "response.completed");
    const stream = client.responses.stream(req);
    const r = await stream.finalResponse();
    const c = r.output.find((o) => o.type === "function_call");
    checkWeather(c.arguments);
    assert.equal(r.status, "completed");
  });

  await check("function_call_output round trip answers as chat completions does", async () => {
    const out = "sunny, 21 C";
    const c = await chatRef([{ role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: null, tool_calls: [{ id: call.call_id, type: "function",
        function: { name: call.name, arguments: call.arguments } }] },
      { role: "tool", tool_call_id: call.call_id, content: out }], { max_tokens: 10, tools: tools.map(({ type, strict, ...f }) => ({ type, function: f })) });
    const r = await client.responses.create({ ...base, max_output_tokens: 10, tools, input: [
      { role: "user", content: "Weather in Paris?" }, call, { type: "function_call_output", call_id: call.call_id, output: out }] });
    assert.equal(r.usage.input_tokens, c.usage.prompt_tokens);
    assert.equal(r.output_text, c.choices[0].message.content ?? "");
  });

  await check("text.format json_schema: output parses and obeys the schema", async () => {
    const req = { ...base, max_output_tokens: 200, input: "Give a city and a unit.",
      text: { format: { type: "json_schema", name: "weather", schema, strict: true } } };
    const r = await client.responses.create(req);
    assert.equal(r.status, "completed");
    checkWeather(r.output_text);
    assert.equal(r.text.format.type, "json_schema");
    const fin = await client.responses.stream(req).finalResponse();
    assert.equal(fin.output_text, r.output_text);
    const t = await client.responses.create({ ...base, text: { format: { type: "text" } } });
    assert.equal(t.output_text, refText);
  });

  await check("reasoning on: a reasoning item with reasoning_text, reasoning_tokens counted", async () => {
    const r = await client.responses.create({ ...base, max_output_tokens: 24, reasoning: { effort: "medium" } });
    assert.equal(r.output[0].type, "reasoning", JSON.stringify(r.output));
    assert.match(r.output[0].id, /^rs_/);
    assert.deepEqual(r.output[0].summary, []);
    assert.equal(r.output[0].content[0].type, "reasoning_text");
    assert.ok(r.output[0].content[0].text.length > 0);
    const rt = r.usage.output_tokens_details.reasoning_tokens;
    assert.ok(rt > 0 && rt <= r.usage.output_tokens, JSON.stringify(r.usage));
    const ev = await rawEvents({ ...base, max_output_tokens: 24, reasoning: { effort: "medium" } });
    const rd = ev.filter((e) => e.type === "response.reasoning_text.delta").map((e) => e.delta).join("");
    assert.equal(rd, r.output[0].content[0].text);
    const fin = await client.responses.stream({ ...base, max_output_tokens: 24, reasoning: { effort: "medium" } }).finalResponse();
    assert.deepEqual(fin.output.map(({ id, ...o }) => o), r.output.map(({ id, ...o }) => o));
    // The reasoning item given back goes into the template's reasoning of that assistant turn.
    await client.responses.create({ ...base, input: [{ role: "user", content: question }, r.output[0],
      { role: "assistant", content: "Yes." }, { role: "user", content: "More." }] });
  });

  await check("4xx in OpenAI's shape: bad input, unknown item and tool types, previous_response_id", async () => {
    await rejects({ ...base, input: 5 }, 400, "input");
    await rejects({ ...base, input: [] }, 400, "input");
    await rejects({ model: "x", max_output_tokens: 4 }, 400, "input");
    await rejects({ ...base, input: [{ role: "user", content: [{ type: "input_file", file_id: "f" }] }] }, 400, "input[0].content[0].type");
    await rejects({ ...base, input: [{ role: "wizard", content: "hi" }] }, 400, "input[0].role");
    await rejects({ ...base, input: [{ type: "web_search_call", id: "ws" }] }, 400, "input[0].type");
    await rejects({ ...base, input: [{ type: "function_call_output", output: "x" }] }, 400, "input[0].call_id");
    await rejects({ ...base, tools: [{ type: "web_search" }] }, 400, "tools[0].type");
    await rejects({ ...base, tools, tool_choice: { type: "file_search" } }, 400, "tool_choice");
    await rejects({ ...base, tools, tool_choice: { type: "function", name: "nope" } }, 400, "tool_choice");
    await rejects({ ...base, previous_response_id: "resp_123" }, 400, "previous_response_id");
    await rejects({ ...base, max_output_tokens: 0 }, 400, "max_output_tokens");
    await rejects({ ...base, temperature: 3 }, 400, "temperature");
    await rejects({ ...base, text: { format: { type: "json_schema", name: "n" } } }, 400, "text.format.schema");
    await rejects({ ...base, text: { format: { type: "grammar" } } }, 400, "text.format.type");
    await rejects({ ...base, text: { format: { type: "json_schema", name: "n", schema: { type: "strange" } } } }, 400, "text.format.schema");
    await rejects({ ...base, input: [{ role: "user", content: "hi" },
      { type: "function_call", call_id: "c", name: "get_weather", arguments: "not json" }] }, 400, "input[1].arguments");
    await rejects({ ...base, reasoning: { effort: "extreme" } }, 400, "reasoning.effort");
    await rejects({ ...base, logit_bias: { 1: 5 } }, 400, "logit_bias");
    await rejects({ ...base, model: "gpt-nope" }, 404, "model");
    // No vision tower: an input_image is refused (the chat endpoints' image path).
    await rejects({ ...base, input: [{ role: "user", content: [{ type: "input_text", text: "What is it?" },
      { type: "input_image", detail: "auto", image_url: "data:image/png;base64,iVBORw0KGgo=" }] }] }, 400);
    const bad = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: "wrong", maxRetries: 0 });
    const e = await bad.responses.create(base).catch((x) => x);
    assert.equal(e.status, 401);
    // Harmless fields pass.
    const r = await client.responses.create({ ...base, max_output_tokens: 2, store: false, metadata: { k: "v" }, user: "u",
      parallel_tool_calls: true, truncation: "disabled", include: ["reasoning.encrypted_content"] });
    assert.equal(r.output_text, await client.responses.create({ ...base, max_output_tokens: 2 }).then((x) => x.output_text));
    assert.deepEqual(r.metadata, { k: "v" });
    assert.equal(r.store, false);  // nothing is stored, whatever `store` says
  });

  await check("request log line; CORS preflight", async () => {
    assert.match(srv.log(), /POST \/v1\/responses 200 prompt=\d+ cached=\d+ generated=12 /);
    assert.match(srv.log(), /POST \/v1\/responses 400 /);
    const r = await fetch(`${srv.base}/v1/responses`, { method: "OPTIONS", headers: { Origin: ORIGIN,
      "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "authorization,content-type" } });
    assert.equal(r.status, 204);
    assert.equal(r.headers.get("access-control-allow-origin"), ORIGIN);
    assert.match(r.headers.get("access-control-allow-methods"), /POST/);
  });
} finally {
  srv.proc.kill("SIGTERM");
}
finish();
