// Soak test of `oxinfer serve` (issue 29), bounded in time, not part of the default test run
// (scripts/soak.sh). For --duration seconds (default 600) against a tiny synthetic Qwen 3.5 model:
//   - 64 streaming chat clients in a loop, each disconnecting at a random point in one of three
//     requests;
//   - 200 connections that stay idle or send a header byte now and then (slow/idle);
//   - a malformed-request client (bad JSON, deep nesting, wrong types, oversized and chunked
//     bodies, wrong Content-Type, garbage bytes);
//   - /health polled every 200 ms (latency recorded).
// Pass: the server never exits; every well-formed request that was not cut by its own client
// gets 200 and a complete stream; every malformed one a 4xx; /health p99 < 1 s; RSS after the run
// (prompt cache off, --cache-ram 0) within 10 % of RSS after the warm-up (a fifth of the run under
// the full load); when every client disconnects at once at the end, no request is still processing
// 1 s later. Prints one JSON line with the numbers.
import fs from "node:fs";
import net from "node:net";
import assert from "node:assert/strict";
import { startServer, makeQwenModel } from "../e2e/lib/server.mjs";

const args = process.argv.slice(2);
const opt = (name, def) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : def;
};
const DURATION_S = Number(opt("--duration", "600"));
const CLIENTS = Number(opt("--clients", "64"));
const IDLE = Number(opt("--idle", "200"));
const WORK = process.env.OXI_WORK_DIR ?? "/tmp/oxi-soak";
const OXINFER = process.env.OXINFER;
const JSON_CT = { "Content-Type": "application/json" };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const rss = (pid) => Number(/VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))[1]) / 1024;
const model = makeQwenModel(WORK);
const srv = await startServer(OXINFER, model, ["-np", "4", "-c", "8192", "--cache-ram", "0", "--max-body-bytes", "1048576"]);
const base = srv.base;
const stats = { ok: 0, cut_by_client: 0, bad_ok: 0, errors: [], malformed: 0, malformed_wrong: [], health: [] };
let running = true;
const inflight = new Set();  // AbortControllers of the streaming requests in flight

const chatBody = (n, stream) => JSON.stringify({ max_tokens: n, temperature: 0.8, stream, chat_template_kwargs: { enable_thinking: false },
  messages: [{ role: "user", content: `soak ${Math.random().toString(36).slice(2)} tell me something` }] });

// One streaming client: requests of 8..120 tokens; one in three is abandoned after a random delay.
async function client(id) {
  while (running) {
    const ac = new AbortController();
    inflight.add(ac);
    const cut = Math.random() < 1 / 3;
    const timer = cut ? setTimeout(() => ac.abort(), 20 + Math.random() * 600) : null;
    try {
      const r = await fetch(`${base}/v1/chat/completions`, { method: "POST", headers: JSON_CT, signal: ac.signal,
        body: chatBody(8 + Math.floor(Math.random() * 112), true) });
      if (r.status !== 200) throw new Error(`status ${r.status}: ${await r.text()}`);
      const text = await r.text();
      if (!text.endsWith("data: [DONE]\n\n")) throw new Error("stream did not end with [DONE]");
      stats.ok++;
    } catch (e) {
      if (ac.signal.aborted) stats.cut_by_client++;
      else if (running) stats.errors.push(`client ${id}: ${e.message}`.slice(0, 300));
    } finally {
      if (timer) clearTimeout(timer);
      inflight.delete(ac);
    }
  }
}

// Slow and idle connections: half send one header byte every 2 s, half nothing; reconnect when
// the server drops them (its head deadline).
function idler(slow) {
  return new Promise((resolve) => {
    const go = () => {
      if (!running) return resolve();
      const s = net.connect(srv.port, "127.0.0.1");
      let t = null;
      s.on("connect", () => {
        if (slow) t = setInterval(() => s.write("G"), 2000);
      });
      const again = () => {
        if (t) clearInterval(t);
        s.destroy();
        setTimeout(go, 200);
      };
      s.on("error", () => {});
      s.on("close", again);
    };
    go();
  });
}

function raw(data, timeoutMs = 15000) {
  return new Promise((resolve) => {
    const s = net.connect(srv.port, "127.0.0.1");
    let out = "";
    const timer = setTimeout(() => { s.destroy(); resolve(out); }, timeoutMs);
    s.on("connect", () => { for (const d of [].concat(data)) s.write(d); });
    s.on("data", (d) => (out += d));
    s.on("error", () => { clearTimeout(timer); resolve(out); });
    s.on("close", () => { clearTimeout(timer); resolve(out); });
  });
}
const post = (body, ct = "application/json") =>
  `POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: ${ct}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
const malformedCases = [
  () => post("{not json"),
  () => post(`{"messages":${"[".repeat(100000)}${"]".repeat(100000)}}`),
  () => post(JSON.stringify({ messages: "hello" })),
  () => post(JSON.stringify({ messages: [{ role: "user", content: "x" }], max_tokens: "ten" })),
  () => post(JSON.stringify({ messages: [{ role: "user", content: "x" }] }), "text/plain"),
  () => post("x".repeat(2 * 1024 * 1024)),
  () => [`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`,
    ...Array.from({ length: 40 }, () => `10000\r\n${"a".repeat(0x10000)}\r\n`)],
  () => "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n",
];
async function malformed() {
  let i = 0;
  while (running) {
    const resp = await raw(malformedCases[i++ % malformedCases.length]());
    const status = Number(/^HTTP\/1\.1 (\d+)/.exec(resp)?.[1] ?? 0);
    stats.malformed++;
    // a 4xx, or the connection dropped without an answer (garbage that is not HTTP)
    if (!(status >= 400 && status < 500) && !(status === 0 && i % malformedCases.length === 0))
      stats.malformed_wrong.push(`case ${(i - 1) % malformedCases.length}: ${resp.slice(0, 80)}`);
    await sleep(50);
  }
}

async function health() {
  while (running) {
    const t0 = performance.now();
    try {
      const r = await fetch(`${base}/health`, { signal: AbortSignal.timeout(5000) });
      if (r.status !== 200) stats.errors.push(`/health ${r.status}`);
    } catch (e) {
      stats.errors.push(`/health: ${e.message}`);
    }
    stats.health.push(performance.now() - t0);
    await sleep(200);
  }
}

async function processing() {
  const m = await (await fetch(`${base}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
  return Number(/oxinfer_requests_processing (\d+)/.exec(m)[1]);
}

// The whole load runs from the start; the baseline RSS is taken after a warm-up of a fifth of the
// run (at most 120 s), once the worker threads, their malloc arenas and the slots' buffers exist:
// the bound is about growth under sustained load (leaks), not about the first requests' buffers.
// (Measured 2026-12-06: with MALLOC_ARENA_MAX=2 RSS rose 120 → 139 MiB over the first 110 s and then
// stayed within 0.3 MiB for the next 1,100 requests — arenas levelling off, not a leak; a 60 s
// warm-up was too short for glibc's default arena count.)
const t0 = Date.now();
const tasks = [...Array.from({ length: CLIENTS }, (_, i) => client(i)), ...Array.from({ length: IDLE }, (_, i) => idler(i % 2 === 0)),
  malformed(), health()];
const warm = Math.min(120, DURATION_S / 5) * 1000;
await sleep(warm);
const rss0 = rss(srv.proc.pid);
// RSS every 30 s: a leak grows with the requests served, allocator arenas level off.
const rssSamples = [];
const sampler = setInterval(() => rssSamples.push([Math.round((Date.now() - t0) / 1000), Math.round(rss(srv.proc.pid) * 10) / 10, stats.ok + stats.cut_by_client]), 30000);
await sleep(DURATION_S * 1000 - warm);
clearInterval(sampler);
running = false;
// Every client leaves at once, mid-request: their slots (and queued requests) must be freed.
for (const ac of inflight) ac.abort();
const tStop = Date.now();
let drained = -1;
for (;;) {
  if ((await processing()) === 0) { drained = Date.now() - tStop; break; }
  if (Date.now() - tStop > 10000) break;
  await sleep(20);
}
await Promise.race([Promise.all(tasks), sleep(20000)]);
await sleep(1000);
const rss1 = rss(srv.proc.pid);
const alive = srv.proc.exitCode === null && srv.proc.signalCode === null;
srv.proc.kill("SIGTERM");
// OXI_SOAK_SERVER_LOG=FILE: wait for the server to exit (at most 60 s) and keep its stderr there,
// e.g. the leak report of a sanitizer build (LeakSanitizer reports at a normal exit).
if (process.env.OXI_SOAK_SERVER_LOG) {
  if (srv.proc.exitCode === null && srv.proc.signalCode === null)
    await Promise.race([new Promise((r) => srv.proc.once("exit", r)), sleep(60000)]);
  fs.writeFileSync(process.env.OXI_SOAK_SERVER_LOG, srv.log() + `\n[exit code ${srv.proc.exitCode}, signal ${srv.proc.signalCode}]\n`);
}
const h = [...stats.health].sort((a, b) => a - b);
const p99 = h[Math.floor(0.99 * (h.length - 1))];
const result = {
  duration_s: (tStop - t0) / 1000, clients: CLIENTS, idle_connections: IDLE, alive,
  requests_ok: stats.ok, requests_cut_by_client: stats.cut_by_client, errors: stats.errors.length, first_errors: stats.errors.slice(0, 5),
  malformed_sent: stats.malformed, malformed_not_4xx: stats.malformed_wrong.length, first_malformed_not_4xx: stats.malformed_wrong.slice(0, 3),
  health_p50_ms: h[Math.floor(0.5 * (h.length - 1))], health_p99_ms: p99, health_max_ms: h[h.length - 1],
  rss_before_mib: rss0, rss_after_mib: rss1, rss_growth: rss1 / rss0 - 1, rss_samples_s_mib_requests: rssSamples, drained_ms: drained,
};
console.log(JSON.stringify(result));
assert.ok(alive, "the server exited: " + srv.log().slice(-2000));
assert.equal(stats.errors.length, 0, stats.errors.slice(0, 5).join("\n"));
assert.equal(stats.malformed_wrong.length, 0, stats.malformed_wrong.slice(0, 3).join("\n"));
assert.ok(p99 < 1000, `/health p99 ${p99} ms`);
assert.ok(Math.abs(rss1 / rss0 - 1) <= 0.10, `RSS ${rss0.toFixed(1)} → ${rss1.toFixed(1)} MiB`);
assert.ok(drained >= 0 && drained <= 1000, `requests still processing ${drained} ms after every client stopped`);
console.log("PASS");
