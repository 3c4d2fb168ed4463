// GET /slots (issue 31 item 1, llama-server's monitoring endpoint): behind the API key; one entry
// per slot with llama-server's fields (id, id_task, n_ctx, speculative, is_processing,
// next_token) and our prompt counts; the counts match the usage of the request that ran; a slot
// busy with a stream shows is_processing and ?fail_on_no_slot=1 is a 503 then; --no-slots → 501.
import assert from "node:assert/strict";
import path from "node:path";
import { checks, makeQwenModel, startServer } from "./lib/server.mjs";

const OXINFER = process.env.OXINFER;
const { check, finish } = checks();
const model = makeQwenModel(path.join(process.env.OXI_WORK_DIR ?? "/tmp/oxi-slots", "model"));
const KEY = "slot-key";
const auth = { Authorization: `Bearer ${KEY}` };
const srv = await startServer(OXINFER, model, ["-np", "1", "--api-key", KEY, "--alias", "x"]);
const slots = async (query = "") => {
  const r = await fetch(`${srv.base}/slots${query}`, { headers: auth });
  return { status: r.status, body: await r.json() };
};

try {
  await check("/slots needs the API key", async () => {
    assert.equal((await fetch(`${srv.base}/slots`)).status, 401);
  });

  await check("/slots before any request: one idle slot, llama-server's fields", async () => {
    const { status, body } = await slots();
    assert.equal(status, 200);
    assert.equal(body.length, 1);
    assert.deepEqual(Object.keys(body[0]), ["id", "id_task", "n_ctx", "speculative", "is_processing", "n_prompt_tokens",
      "n_prompt_tokens_cache", "next_token"]);
    assert.equal(body[0].id, 0);
    assert.equal(body[0].id_task, -1);
    assert.equal(body[0].n_ctx, 2048);
    assert.equal(body[0].is_processing, false);
    assert.deepEqual(body[0].next_token, { has_next_token: false, n_remain: -1, n_decoded: 0 });
  });

  await check("/slots after a request: its prompt, cached and generated counts", async () => {
    const req = { model: "x", messages: [{ role: "user", content: "Count to ten." }], max_tokens: 5, temperature: 0 };
    const post = () => fetch(`${srv.base}/v1/chat/completions`, { method: "POST", headers: { ...auth, "Content-Type": "application/json" },
      body: JSON.stringify(req) }).then(async (r) => {
      assert.equal(r.status, 200);
      return r.json();
    });
    await post();
    const r = await post();  // the second time the prompt cache serves part of the prompt
    const s = (await slots()).body[0];
    assert.equal(s.id_task, 1);
    assert.equal(s.is_processing, false);
    assert.equal(s.n_prompt_tokens, r.usage.prompt_tokens);
    assert.equal(s.n_prompt_tokens_cache, r.usage.prompt_tokens_details.cached_tokens);
    assert.ok(s.n_prompt_tokens_cache > 0, JSON.stringify(s));
    assert.equal(s.next_token.n_decoded, r.usage.completion_tokens);
    assert.equal(s.next_token.n_remain, 5 - r.usage.completion_tokens);
  });

  await check("/slots during a stream: is_processing; ?fail_on_no_slot=1 → 503", async () => {
    const ac = new AbortController();
    const res = await fetch(`${srv.base}/v1/completions`, { method: "POST", signal: ac.signal,
      headers: { ...auth, "Content-Type": "application/json" },
      body: JSON.stringify({ model: "x", prompt: "Once upon a time", max_tokens: 1500, temperature: 0, stream: true }) });
    assert.equal(res.status, 200);
    const reader = res.body.getReader();
    await reader.read();  // the first event: the slot is generating
    const { body } = await slots();
    const busy = await slots("?fail_on_no_slot=1");
    ac.abort();
    assert.equal(body[0].is_processing, true, JSON.stringify(body));
    assert.equal(body[0].next_token.has_next_token, true);
    assert.equal(body[0].id_task, 2);
    assert.ok(body[0].next_token.n_remain >= 0 && body[0].next_token.n_remain <= 1500);
    assert.equal(busy.status, 503, JSON.stringify(busy.body));
    assert.equal(busy.body.error.type, "unavailable_error");
  });
} finally {
  srv.proc.kill("SIGTERM");
}

const off = await startServer(OXINFER, model, ["--no-slots"]);
try {
  await check("--no-slots: GET /slots → 501 not_supported_error", async () => {
    const r = await fetch(`${off.base}/slots`);
    assert.equal(r.status, 501);
    const j = await r.json();
    assert.equal(j.error.type, "not_supported_error");
    assert.equal(j.error.code, 501);
  });
} finally {
  off.proc.kill("SIGTERM");
}
finish();
