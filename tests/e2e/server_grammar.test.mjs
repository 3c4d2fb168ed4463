// Issue 31: GBNF `grammar` on /v1/chat/completions and /v1/completions through the real `openai`
// client (an extra body field, as llama-server takes it), with llama.cpp's own grammars/json.gbnf,
// arithmetic.gbnf and list.gbnf (node-llama-cpp ships llama.cpp's grammars/ folder), sampled at
// temperature 0.8 with several seeds on the synthetic Qwen 3.5 model. Every output is checked by
// a parser written here, independent of the server's matcher: JSON.parse for json; a small
// backtracking parser of arithmetic.gbnf's language; a regex for list.gbnf. An output cut by
// max_tokens must still be a prefix of the language: some short completion of it parses.
// With thinking on, the grammar starts after the forced "</think>". A bad grammar is a 400 naming
// the line and column; grammar + response_format is a 400.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";
import assert from "node:assert/strict";
import { startServer, makeQwenModel, checks } from "./lib/server.mjs";

const { OXINFER, NLC_DIR } = process.env;
const WORK = process.env.OXI_WORK_DIR ?? "/tmp/oxi-server-grammar-e2e";
const GRAMMARS = path.join(NLC_DIR, "node_modules/node-llama-cpp/llama/grammars");
if (!fs.existsSync(path.join(GRAMMARS, "json.gbnf"))) {
  console.log(`skip: no llama.cpp grammars at ${GRAMMARS} (scripts/setup.sh installs node-llama-cpp)`);
  process.exit(0);
}
const grammar = (name) => fs.readFileSync(path.join(GRAMMARS, name), "utf8");
const require = createRequire(path.join(NLC_DIR, "package.json"));
const OpenAI = require("openai").default;

// ---- independent checkers ----------------------------------------------------------------------
// arithmetic.gbnf:  root ::= (expr "=" ws term "\n")+   expr ::= term ([-+*/] term)*
//   term ::= ident | num | "(" ws expr ")" ws   ident ::= [a-z] [a-z0-9_]* ws   num ::= [0-9]+ ws
//   ws ::= [ \t\n]*
// Each function maps a set of start positions to the set of positions where a match can end.
function arithmeticParses(s) {
  const ws = (ps) => new Set([...ps].flatMap((p) => { const out = [p]; while (/[ \t\n]/.test(s[p] ?? "")) out.push(++p); return out; }));
  const lit = (ps, c) => new Set([...ps].filter((p) => s[p] === c).map((p) => p + 1));
  const run = (ps, first, rest) => {  // first rest*: greedy positions, every prefix kept
    const out = new Set();
    for (const p of ps) {
      if (!first.test(s[p] ?? "")) continue;
      let q = p + 1;
      out.add(q);
      while (rest.test(s[q] ?? "")) out.add(++q);
    }
    return out;
  };
  const term = (ps, depth) => {
    if (depth > 200 || ps.size === 0) return new Set();
    const a = ws(run(ps, /[a-z]/, /[a-z0-9_]/));
    const b = ws(run(ps, /[0-9]/, /[0-9]/));
    const c = ws(lit(expr(ws(lit(ps, "(")), depth + 1), ")"));
    return new Set([...a, ...b, ...c]);
  };
  const expr = (ps, depth) => {
    let cur = term(ps, depth);
    const all = new Set(cur);
    while (cur.size) {
      const ops = new Set([...cur].filter((p) => /[-+*/]/.test(s[p] ?? "")).map((p) => p + 1));
      cur = new Set([...term(ops, depth)].filter((p) => !all.has(p)));
      for (const p of cur) all.add(p);
    }
    return all;
  };
  let cur = new Set([0]);
  const ends = new Set();
  while (cur.size) {
    cur = lit(term(ws(lit(expr(cur, 0), "=")), 0), "\n");
    cur = new Set([...cur].filter((p) => !ends.has(p)));
    for (const p of cur) ends.add(p);
  }
  return ends.has(s.length);
}
const LIST = /^(- [^\r\n\x0b\x0c\x85\u2028\u2029]+\n)+$/u;

function jsonObject(s) {
  try {
    const v = JSON.parse(s);
    return v !== null && typeof v === "object" && !Array.isArray(v);
  } catch {
    return false;
  }
}
// A JSON prefix: close an open string (and \u escape), add one of a few fillers, close brackets.
function jsonPrefixCompletes(s) {
  const stack = [];
  let inStr = false, esc = false, hex = 0;
  for (const ch of s) {
    if (inStr) {
      if (hex) hex--;
      else if (esc) { esc = false; if (ch === "u") hex = 4; }
      else if (ch === "\\") esc = true;
      else if (ch === '"') inStr = false;
    } else if (ch === '"') inStr = true;
    else if (ch === "{" || ch === "[") stack.push(ch === "{" ? "}" : "]");
    else if (ch === "}" || ch === "]") stack.pop();
  }
  const closeStr = inStr ? (esc ? "n" : "") + "0".repeat(hex) + '"' : "";
  const closers = stack.reverse().join("");
  return ["", "0", ":0", '"a":0', "rue", "ue", "e", "alse", "lse", "se", "ull", "ll", "l"]
    .some((mid) => jsonObject(s + closeStr + mid + closers));
}
function arithmeticPrefixCompletes(s) {
  const open = [...s].filter((c) => c === "(").length - [...s].filter((c) => c === ")").length;
  return ["", "1"].some((a) => ["\n", "=1\n", "1=1\n"].some((b) => arithmeticParses(s + a + ")".repeat(Math.max(0, open)) + b)));
}
const CHECK = {
  "json.gbnf": { full: jsonObject, prefix: jsonPrefixCompletes },
  "arithmetic.gbnf": { full: arithmeticParses, prefix: arithmeticPrefixCompletes },
  "list.gbnf": { full: (s) => LIST.test(s), prefix: (s) => ["", "\n", "x\n", " x\n", "- x\n"].some((t) => LIST.test(s + t)) },
};
// The checkers themselves, on texts whose membership is known.
assert.ok(arithmeticParses("1+2*(x -3)= 4\n(a1_b)= 7\n") && !arithmeticParses("1+=2\n") && !arithmeticParses("a=1"));
assert.ok(arithmeticPrefixCompletes("(a+(b*") && !arithmeticPrefixCompletes("a==") && !arithmeticPrefixCompletes("A"));
assert.ok(jsonPrefixCompletes('{"a": [1, {"b": "x\\u00') && !jsonPrefixCompletes('{"a" 1') && !jsonPrefixCompletes("[1"));
assert.ok(LIST.test("- a\n- b c\n") && !LIST.test("-a\n"));
assert.ok(CHECK["list.gbnf"].prefix("- a\n-") && !CHECK["list.gbnf"].prefix("- a\n\n"));

// ---- server ------------------------------------------------------------------------------------
const { check, finish } = checks();
const model = makeQwenModel(WORK);
const srv = await startServer(OXINFER, model, ["-np", "2", "--alias", "x"]);
const client = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: "none", maxRetries: 0, timeout: 300000 });
const tokenize = async (content) => (await (await fetch(`${srv.base}/tokenize`, { method: "POST",
  headers: { "Content-Type": "application/json" }, body: JSON.stringify({ content, parse_special: true }) })).json()).tokens;
// A nudge towards ending (the end-of-turn token and closing characters): the synthetic model's
// text is noise, so without it most outputs run to max_tokens. The grammar still decides which
// tokens may be sampled: the bias is applied first, the mask after.
const eot = (await tokenize("<|im_end|>"))[0];
async function nudge([b, texts]) {
  const bias = { [eot]: b };
  for (const t of texts) for (const id of await tokenize(t)) bias[id] = b;
  return bias;
}
const NUDGE = { "json.gbnf": [6, ['"', '":', '",', "1"]], "arithmetic.gbnf": [10, ["=", "\n", "1"]], "list.gbnf": [6, ["\n"]] };
const base = { model: "x", messages: [{ role: "user", content: "Answer in the required format." }], temperature: 0.8,
  max_tokens: 300, chat_template_kwargs: { enable_thinking: false } };

let outputs = 0, complete = 0;
for (const name of ["json.gbnf", "arithmetic.gbnf", "list.gbnf"]) {
  await check(`${name}: chat outputs at temperature 0.8, seeds 1..4, are in the language`, async () => {
    const logit_bias = await nudge(NUDGE[name]);
    for (const seed of [1, 2, 3, 4]) {
      const r = await client.chat.completions.create({ ...base, seed, logit_bias, grammar: grammar(name) });
      const c = r.choices[0];
      const text = c.message.content;
      outputs++;
      console.log(`  ${name} seed ${seed}: ${c.finish_reason}, ${r.usage.completion_tokens} tokens: ${JSON.stringify(text.slice(0, 100))}`);
      assert.ok(!text.includes("\uFFFD"), `${name} seed ${seed}: U+FFFD in ${JSON.stringify(text)}`);
      if (c.finish_reason === "stop") {
        complete++;
        // The chat reply parser drops the reply's trailing whitespace (here list.gbnf's and
        // arithmetic.gbnf's final "\n"), as for every chat reply; /v1/completions keeps it.
        const ok = CHECK[name].full(text) || CHECK[name].full(text + "\n");
        assert.ok(ok, `${name} seed ${seed}: not in the language: ${JSON.stringify(text)}`);
      } else {
        assert.equal(c.finish_reason, "length");
        assert.ok(CHECK[name].prefix(text), `${name} seed ${seed}: not a prefix of the language: ${JSON.stringify(text)}`);
      }
    }
  });
}
await check("some outputs ended by themselves (the full-language check ran)", async () => {
  assert.ok(complete >= 4, `${complete} of ${outputs} outputs finished with "stop"`);
});

await check("streamed output is the same constrained text", async () => {
  const req = { ...base, seed: 2, logit_bias: await nudge(NUDGE["json.gbnf"]), grammar: grammar("json.gbnf") };
  const whole = (await client.chat.completions.create(req)).choices[0].message.content;
  let streamed = "";
  for await (const chunk of await client.chat.completions.create({ ...req, stream: true })) {
    streamed += chunk.choices[0]?.delta?.content ?? "";
  }
  assert.equal(streamed, whole);
  assert.ok(jsonObject(whole) || jsonPrefixCompletes(whole), JSON.stringify(whole));
});

await check("with thinking on, the grammar starts after the closed reasoning block", async () => {
  const tpl = await (await fetch(`${srv.base}/apply-template`, { method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ messages: base.messages }) })).json();
  assert.ok(tpl.prompt.endsWith("<think>\n"), JSON.stringify(tpl.prompt.slice(-40)));  // the prompt opens reasoning
  for (const seed of [1, 2]) {
    const r = await client.chat.completions.create({ ...base, chat_template_kwargs: {}, seed, max_tokens: 30,
      grammar: 'root ::= ("yes" | "no") "."' });
    const m = r.choices[0].message;
    assert.ok(["yes.", "no."].includes(m.content), JSON.stringify(m));
    assert.ok(!m.reasoning_content, JSON.stringify(m));
    assert.equal(r.choices[0].finish_reason, "stop");
  }
});

await check("/v1/completions takes grammar too (list.gbnf, n = 2)", async () => {
  const r = await client.completions.create({ model: "x", prompt: "Shopping list:\n", temperature: 0.8, seed: 5, n: 2,
    max_tokens: 120, grammar: grammar("list.gbnf"), logit_bias: await nudge(NUDGE["list.gbnf"]) });
  assert.equal(r.choices.length, 2);
  for (const c of r.choices) {
    const ok = c.finish_reason === "stop" ? LIST.test(c.text) : CHECK["list.gbnf"].prefix(c.text);
    assert.ok(ok, `${c.finish_reason}: ${JSON.stringify(c.text)}`);
  }
});

await check("an invalid grammar is a 400 naming line and column; no conflicting constraints", async () => {
  await assert.rejects(client.chat.completions.create({ ...base, grammar: 'root ::= "a"\nitem ::= [a-' }),
    (e) => e.status === 400 && e.param === "grammar" && /line 2, column \d+: unterminated character class/.test(e.message));
  await assert.rejects(client.chat.completions.create({ ...base, grammar: "root ::= item\n" }),
    (e) => e.status === 400 && /undefined rule 'item'/.test(e.message));
  await assert.rejects(client.chat.completions.create({ ...base, grammar: "root ::= root \"a\" | \"b\"\n" }),
    (e) => e.status === 400 && /left recursion/.test(e.message));
  await assert.rejects(client.completions.create({ model: "x", prompt: "a", grammar: 'root ::= "a"{0,99999}' }),
    (e) => e.status === 400 && /repetition/.test(e.message));
  await assert.rejects(client.chat.completions.create({ ...base, grammar: grammar("json.gbnf"),
    response_format: { type: "json_object" } }), (e) => e.status === 400 && e.param === "grammar" && /response_format/.test(e.message));
  const ok = await client.chat.completions.create({ ...base, max_tokens: 4, grammar: "" });  // "" is no grammar
  assert.equal(ok.choices.length, 1);
});

srv.proc.kill();
finish();
