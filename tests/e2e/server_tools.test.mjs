// Issue 31 bug 3: forced tool calls tie the arguments to the chosen tool's schema when several
// tools are offered (Qwen 3.5), and work on Gemma 4 (its own call syntax). Sampled at temperature
// 0.9 with several seeds on synthetic models (random weights: without the constraint the output is
// noise), through the real `openai` client, non-streaming and streamed. Every call is checked by
// a small JSON-schema validator written here, independent of the server's automata.
import { createRequire } from "node:module";
import path from "node:path";
import assert from "node:assert/strict";
import { startServer, makeQwenModel, makeGemmaModel, checks } from "./lib/server.mjs";

const { OXINFER, NLC_DIR } = process.env;
const WORK = process.env.OXI_WORK_DIR ?? "/tmp/oxi-server-tools-e2e";
const require = createRequire(path.join(NLC_DIR, "package.json"));
const OpenAI = require("openai").default;

const tools = [
  { type: "function", function: { name: "get_weather", description: "Weather for a city", parameters: {
    type: "object", properties: { city: { type: "string", maxLength: 12 }, days: { type: "integer" },
      unit: { type: "string", enum: ["c", "f"] } }, required: ["city", "unit"] } } },
  { type: "function", function: { name: "set_alarm", description: "Set alarms", parameters: {
    type: "object", properties: { at: { type: "array", items: { type: "number" }, minItems: 1 },
      loud: { type: "boolean" } }, required: ["at", "loud"] } } },
  { type: "function", function: { name: "ping", description: "Ping", parameters: { type: "object", properties: {} } } },
];

// The subset of JSON Schema the tools above use; returns a list of violations.
function violations(schema, v, where = "$") {
  const out = [];
  const t = schema.type;
  const typeOk = { string: typeof v === "string", integer: Number.isInteger(v), number: typeof v === "number",
    boolean: typeof v === "boolean", array: Array.isArray(v), object: v !== null && typeof v === "object" && !Array.isArray(v) };
  if (t && !typeOk[t]) return [`${where}: not ${t}: ${JSON.stringify(v)}`];
  if (schema.enum && !schema.enum.includes(v)) out.push(`${where}: not in enum`);
  if (t === "string" && schema.maxLength !== undefined && [...v].length > schema.maxLength) out.push(`${where}: too long`);
  if (t === "array") {
    if (schema.minItems && v.length < schema.minItems) out.push(`${where}: too few items`);
    v.forEach((x, i) => out.push(...violations(schema.items ?? {}, x, `${where}[${i}]`)));
  }
  if (t === "object") {
    for (const r of schema.required ?? []) if (!(r in v)) out.push(`${where}: missing ${r}`);
    for (const [k, x] of Object.entries(v)) {
      if (!schema.properties || !(k in schema.properties)) out.push(`${where}: unexpected key ${k}`);
      else out.push(...violations(schema.properties[k], x, `${where}.${k}`));
    }
  }
  return out;
}

function checkCall(call, allowed) {
  assert.equal(call.type, "function");
  assert.ok(allowed.includes(call.function.name), `unexpected tool ${call.function.name}`);
  const tool = tools.find((t) => t.function.name === call.function.name);
  const args = JSON.parse(call.function.arguments);
  const bad = violations(tool.function.parameters, args);
  assert.deepEqual(bad, [], `${call.function.name}(${call.function.arguments})`);
  return call.function.name;
}

async function streamCalls(stream) {
  const calls = [];
  let finish = null;
  for await (const c of stream) {
    for (const d of c.choices[0]?.delta?.tool_calls ?? []) {
      if (d.id) calls.push({ id: d.id, type: d.type, function: { name: d.function?.name ?? "", arguments: "" } });
      if (d.function?.arguments) calls[calls.length - 1].function.arguments += d.function.arguments;
    }
    finish = c.choices[0]?.finish_reason ?? finish;
  }
  return { calls, finish };
}

const { check, finish } = checks();
for (const family of ["qwen35", "gemma4"]) {
  const work = path.join(WORK, family);
  const model = family === "qwen35" ? makeQwenModel(work) : makeGemmaModel(work);
  const srv = await startServer(OXINFER, model, ["-c", "1024"]);
  const client = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: "none" });
  const base = { model: family, messages: [{ role: "user", content: "What should I do now?" }], temperature: 0.9, max_tokens: 120 };
  try {
    await check(`${family}: tool_choice required, several tools, arguments fit the chosen tool`, async () => {
      const names = new Set();
      for (let seed = 1; seed <= 8; ++seed) {
        const r = await client.chat.completions.create({ ...base, seed, tools, tool_choice: "required" });
        const m = r.choices[0].message;
        assert.equal(r.choices[0].finish_reason, "tool_calls", JSON.stringify(m));
        assert.equal(m.tool_calls.length, 1);
        names.add(checkCall(m.tool_calls[0], ["get_weather", "set_alarm", "ping"]));
      }
      console.log(`     tools picked: ${[...names].join(", ")}`);
    });
    await check(`${family}: named tool, streamed delta.tool_calls`, async () => {
      for (let seed = 1; seed <= 3; ++seed) {
        const s = await client.chat.completions.create({ ...base, seed, tools, stream: true,
          tool_choice: { type: "function", function: { name: "set_alarm" } } });
        const got = await streamCalls(s);
        assert.equal(got.finish, "tool_calls");
        assert.equal(got.calls.length, 1);
        checkCall(got.calls[0], ["set_alarm"]);
      }
    });
    await check(`${family}: the OpenAI agent-loop shape (assistant content null + tool_calls, then a tool message) is served`, async () => {
      // Issue 31 bug 3: this was a 400 on the Qwen 3.5 template ("argument of type 'NoneType' is not iterable").
      const r = await client.chat.completions.create({ ...base, temperature: 0, max_tokens: 8, tools, messages: [
        { role: "user", content: "Weather in Paris?" },
        { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function",
          function: { name: "get_weather", arguments: JSON.stringify({ city: "Paris", unit: "c" }) } }] },
        { role: "tool", tool_call_id: "call_1", content: "{\"temp\": 21}" }] });
      assert.ok(r.choices[0].message, JSON.stringify(r));
      assert.ok(r.usage.prompt_tokens > 20);
    });
    await check(`${family}: tool_choice naming an unknown function is a 400`, async () => {
      await assert.rejects(client.chat.completions.create({ ...base, tools,
        tool_choice: { type: "function", function: { name: "nope" } } }), (e) => e.status === 400);
    });
  } finally {
    srv.proc.kill("SIGKILL");
  }
}
finish();
