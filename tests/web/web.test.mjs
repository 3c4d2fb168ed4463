// The browser build in headless Chromium (issue 25), against the native CLI on the same GGUF:
// - oxinfer.mjs in a cross-origin isolated page (pthreads build, 2 threads) and in a page that is
//   not (single-threaded build): greedy tokens equal the native CLI's and top-5 logprobs agree
//   within 1e-4, on synthetic Qwen 3.5 dense (Q8_0) and MoE (Q4_K) and Gemma 4 E2B-shaped (PLE,
//   Q8_0) and 26B-shaped (MoE, Q4_0) files; a chat request equals `oxinfer run -p`;
// - the OPFS cache: a second load of the same URL fetches nothing;
// - abort (SharedArrayBuffer flag, and worker restart without it) and a request after it;
// - Hugging Face ids (`org/name[:quant]`, default Q4_K_M, mmproj skipped) against a stand-in Hub;
// - bad input: 404, a non-GGUF URL, a truncated GGUF, an unsupported architecture: each rejects
//   with a clear message and the page stays usable;
// - the chat page: load, type, send, streamed text, stop (a screenshot goes to the work dir;
//   OXI_WEB_SCREENSHOT=FILE also writes it there).
// Needs build/web (scripts/build_web.sh), build/release's oxinfer and oxi-gen, Debian chromium
// and npm playwright-core (tools/node).
import { createRequire } from 'node:module';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const oxinfer = process.env.OXINFER ?? path.join(root, 'build/release/apps/cli/oxinfer');
const gen = process.env.OXI_GEN ?? path.join(root, 'build/release/tools/gen/oxi-gen');
const nlc = process.env.NLC_DIR ?? path.join(root, 'tools/node');
const shared = process.env.OXI_SHARED_DIR ?? path.join(root, '../shared');
const webDir = path.join(root, 'build/web');
const work = path.join(process.env.OXI_WORK_DIR ?? fs.mkdtempSync(path.join(os.tmpdir(), 'oxi-web-')), 'web');
const chromiumPath = process.env.CHROMIUM ?? '/usr/bin/chromium';
const { chromium } = createRequire(path.join(nlc, 'package.json'))('playwright-core');

let fails = 0;
const ok = (m) => console.log(`ok   - ${m}`);
const bad = (m) => { console.log(`FAIL - ${m}`); fails++; };
const check = (cond, m) => (cond ? ok(m) : bad(m));

function must(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 1 << 28, ...opts });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed:\n${r.stderr}`);
  return r.stdout;
}

// ---- models ----
fs.mkdirSync(work, { recursive: true });
const env = { ...process.env, NLC_DIR: nlc, OXI_SHARED_DIR: shared };
const qtok = path.join(work, 'qtok'), gtok = path.join(work, 'gtok');
if (!fs.existsSync(path.join(qtok, 'tokenizer.json'))) must('node', [path.join(root, 'tools/gen/extract_tokenizer.mjs'), qtok], { env });
if (!fs.existsSync(path.join(gtok, 'tokenizer.json'))) must('node', [path.join(root, 'tools/gen/extract_gemma4_tokenizer.mjs'), gtok], { env });
const qtpl = path.join(shared, 'testdata/templates/Qwen3.5-4B.jinja');
const gtpl = path.join(shared, 'testdata/templates/google-gemma-4-31B-it.jinja');
const models = [
  { file: 'q35.q8_0.gguf', type: 'q8_0', gen: ['qwen35', '--seed', '11', '--tokenizer-dir', qtok, '--chat-template', qtpl] },
  { file: 'q35moe.q4_k.gguf', type: 'q4_k', gen: ['qwen35', '--moe', '--experts', '8', '--top-k', '2', '--expert-ffn', '64', '--shared-ffn', '64', '--seed', '12', '--tokenizer-dir', qtok, '--chat-template', qtpl] },
  { file: 'g4e2b.q8_0.gguf', type: 'q8_0', gen: ['gemma4', '--shape', 'e2b', '--window', '16', '--seed', '13', '--tokenizer-dir', gtok, '--chat-template', gtpl] },
  { file: 'g4moe.q4_0.gguf', type: 'q4_0', gen: ['gemma4', '--shape', '26b', '--window', '16', '--seed', '14', '--tokenizer-dir', gtok, '--chat-template', gtpl] },
];
for (const m of models) {
  const gguf = path.join(work, m.file);
  if (fs.existsSync(gguf)) continue;
  const hf = path.join(work, m.file + '.hf');
  fs.rmSync(hf, { recursive: true, force: true });
  must(gen, [m.gen[0], '--out', hf, ...m.gen.slice(1)]);
  must(oxinfer, ['convert', hf, '-o', gguf, '--type', m.type]);
  fs.rmSync(hf, { recursive: true, force: true });
}
// Bad files: truncated, and an architecture nobody implements (same length, so offsets hold).
const good = fs.readFileSync(path.join(work, models[0].file));
fs.writeFileSync(path.join(work, 'truncated.gguf'), good.subarray(0, Math.floor(good.length / 2)));
const alien = Buffer.from(good);
const at = alien.indexOf(Buffer.from('qwen35'), alien.indexOf(Buffer.from('general.architecture')));
alien.write('zzzz99', at);
fs.writeFileSync(path.join(work, 'alien.gguf'), alien);

// Native reference: greedy tokens and top-5 logprobs (`oxinfer run --json`).
const PROMPT = [9707, 11, 1879, 374, 264, 1273, 13, 576, 3974];  // ids valid in both vocabularies
const N = 12;
// Gemma 4 emulates llama.cpp's numerics of the host it runs on (vector widths, AVX-512 code
// paths): the reference for the wasm module is the native CLI emulating a host without AVX-512
// on the scalar kernels (OXI_GGML_NO_AVX512=1 --isa scalar), what the wasm build computes.
// The wasm build's kernel set (simd128) has integer-dot kernels for every quantised type (Q3_K,
// IQ4_XS, Q5_0, IQ4_NL, Q4_1, Q5_1 included since 2026-12-07; before, it dequantised those and
// this reference sent them to the same fallback with OXI_KERNEL_OFF), each bit-identical to the
// scalar set (Matmul.Simd128QuantTilesBitIdenticalToScalar): so the reference runs --isa scalar
// for every file. With the host's AVX-512 kernels instead (summation order only), the random
// Qwen MoE's chat request amplified the difference to 4e-3 in a logprob by token 5.
function native(file, extra) {
  const gemma = file.startsWith('g4');
  const env = gemma ? { ...process.env, OXI_GGML_NO_AVX512: '1' } : process.env;
  const out = must(oxinfer, ['run', '-m', path.join(work, file), '-n', String(N), '--temp', '0', '--json',
    '--top-logprobs', '5', '-t', '2', '--isa', 'scalar', ...extra], { env });
  return out.trim().split('\n').map((l) => JSON.parse(l)).filter((o) => 'id' in o);
}

// Tokens equal up to a near-tie (where they first differ, the native top-1/top-2 gap is under
// max(1e-3, 2·tol): a logprob error of tol can swap them); logprobs of the compared tokens within
// tol. Returns a message, or '' when they agree.
function compare(web, ref, tol) {
  const n = Math.min(web.length, ref.length);
  for (let i = 0; i < n; i++) {
    const w = web[i], r = ref[i];
    if (w.id !== r.id) {
      const gap = r.top_logprobs.length > 1 ? r.top_logprobs[0].logprob - r.top_logprobs[1].logprob : 1;
      return gap < Math.max(1e-3, 2 * tol) ? '' : `token ${i}: ${w.id} vs native ${r.id} (gap ${gap.toExponential(2)})`;
    }
    if (Math.abs(w.logprob - r.logprob) > tol) return `token ${i}: logprob ${w.logprob} vs ${r.logprob}`;
    // Top-k by id (near-ties may swap places); an entry missing on one side must be at the
    // edge of the other's list (within tol of its last logprob).
    const wl = w.top_logprobs, last = wl.length ? wl[wl.length - 1].logprob : -Infinity;
    if (wl.length !== r.top_logprobs.length) return `token ${i}: ${wl.length} top entries vs ${r.top_logprobs.length}`;
    for (const b of r.top_logprobs) {
      const a = wl.find((e) => e.id === b.id);
      if (a ? Math.abs(a.logprob - b.logprob) > tol : b.logprob > last + tol) {
        return `token ${i} top id ${b.id}: ${a ? a.logprob : 'missing'} vs native ${b.logprob}`;
      }
    }
  }
  if (web.length !== ref.length) return `${web.length} tokens vs native ${ref.length}`;
  return '';
}

// ---- servers and browser ----
function serve(port, isolated) {
  const p = spawn('node', [path.join(webDir, 'serve.mjs'), webDir, '--port', String(port), '--models', work,
    ...(isolated ? [] : ['--no-isolation'])], { stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    p.stdout.once('data', () => resolve(p));
    p.once('exit', (c) => reject(new Error(`serve.mjs exited ${c}`)));
  });
}
const servers = [];
process.on('exit', () => servers.forEach((s) => s.kill()));
const portA = 18000 + (process.pid % 1000) * 2, portB = portA + 1;
servers.push(await serve(portA, true), await serve(portB, false));
// A stand-in for the Hugging Face Hub (another origin, CORS as the Hub sends it): a repo listing
// and /resolve/ downloads with ranges.
const hfFiles = { 'q35-Q8_0.gguf': models[0].file, 'q35-Q4_K_M.gguf': models[1].file, 'mmproj-q35-F16.gguf': models[0].file };
const hf = http.createServer((req, res) => {
  const cors = { 'Access-Control-Allow-Origin': '*', 'Access-Control-Allow-Headers': 'Range',
    'Access-Control-Expose-Headers': 'Content-Range, Content-Length', 'Cross-Origin-Resource-Policy': 'cross-origin' };
  if (req.method === 'OPTIONS') { res.writeHead(204, cors); res.end(); return; }
  const u = new URL(req.url, 'http://x');
  if (u.pathname === '/api/models/org/q35/tree/main') {
    const list = [{ type: 'file', path: 'README.md' }, ...Object.keys(hfFiles).map((p) => ({ type: 'file', path: p }))];
    res.writeHead(200, { ...cors, 'Content-Type': 'application/json' });
    res.end(JSON.stringify(list));
    return;
  }
  const m = /^\/org\/q35\/resolve\/main\/(.+)$/.exec(u.pathname);
  if (!m || !hfFiles[m[1]]) { res.writeHead(404, cors); res.end(); return; }
  const data = fs.readFileSync(path.join(work, hfFiles[m[1]]));
  const r = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range || '');
  if (r) {
    const a = Number(r[1]), b = r[2] ? Math.min(Number(r[2]), data.length - 1) : data.length - 1;
    res.writeHead(206, { ...cors, 'Content-Range': `bytes ${a}-${b}/${data.length}`, 'Content-Length': b - a + 1 });
    res.end(data.subarray(a, b + 1));
  } else {
    res.writeHead(200, { ...cors, 'Content-Length': data.length });
    res.end(data);
  }
});
await new Promise((r) => hf.listen(0, '127.0.0.1', r));
const hfEndpoint = `http://127.0.0.1:${hf.address().port}`;
process.on('exit', () => hf.close());

const browser = await chromium.launch({
  executablePath: chromiumPath,
  args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'],
});

async function openPage(port) {
  const ctx = await browser.newContext();
  const page = await ctx.newPage();
  page.on('pageerror', (e) => console.log(`[pageerror] ${e.message}`));
  const requests = [];
  page.on('request', (r) => requests.push(r.url()));
  await page.goto(`http://127.0.0.1:${port}/index.html`);
  return { ctx, page, requests };
}

// Runs fn(args) in the page with oxinfer.mjs imported as `oxi` (created with 2 threads).
async function inPage(page, fn, args) {
  return page.evaluate(async ({ src, args }) => {
    const { createOxinfer } = await import('./oxinfer.mjs');
    const oxi = await createOxinfer({ threads: 2, device: 'cpu', hfEndpoint: args && args.hfEndpoint });
    const f = new Function('oxi', 'args', `return (${src})(oxi, args);`);
    try {
      return await f(oxi, args);
    } catch (e) {
      return { error: String(e && e.message ? e.message : e) };
    }
  }, { src: fn.toString(), args });
}

const generateAll = async (oxi, { url, prompt, n, chatText }) => {
  const m = await oxi.loadModel(url);
  const info = m.info();
  const raw = await m.generate({ tokens: prompt, maxTokens: n, temperature: 0, topLogprobs: 5 });
  const chat = await m.generate({ messages: [{ role: 'user', content: chatText }], maxTokens: n, temperature: 0, topLogprobs: 5 });
  await m.free();
  return { info, raw, chat };
};

try {
  // ---- exactness, isolated (pthreads) and not (single thread) ----
  for (const [label, port, build, threads] of [['isolated', portA, 'wasm-pthreads', 2], ['not isolated', portB, 'wasm-single-thread', 1]]) {
    const { ctx, page } = await openPage(port);
    const list = label === 'isolated' ? models : models.slice(0, 1);
    for (const m of list) {
      const ref = native(m.file, ['--tokens', PROMPT.join(',')]);
      const refChat = native(m.file, ['-p', 'Hello there']);
      const r = await inPage(page, generateAll, { url: `/models/${m.file}`, prompt: PROMPT, n: N, chatText: 'Hello there' });
      if (r.error) { bad(`${label} ${m.file}: ${r.error}`); continue; }
      check(r.info.build === build && r.info.threads === threads && r.info.isa === 'simd128',
        `${label} ${m.file}: ${r.info.build}, ${r.info.threads} threads, isa ${r.info.isa}, ${r.info.file_type}`);
      const tol = 1e-4;
      const d = compare(r.raw.tokens, ref, tol);
      check(!d, `${label} ${m.file}: greedy tokens equal the native CLI's, top-5 logprobs within ${tol}${d ? ': ' + d : ''}`);
      const dc = compare(r.chat.tokens, refChat, tol);
      check(!dc, `${label} ${m.file}: a chat request equals \`oxinfer run -p\`${dc ? ': ' + dc : ''}`);
    }
    await ctx.close();
  }

  // ---- cache, abort, bad input (one page: it must stay usable) ----
  const { ctx, page, requests } = await openPage(portA);
  const url = `/models/${models[0].file}`;
  const first = await inPage(page, async (oxi, { url }) => { const m = await oxi.loadModel(url); await m.free(); return oxi.listCached(); }, { url });
  check(Array.isArray(first) && first.some((c) => c.url.endsWith(url) && c.complete), 'the model is listed in the browser cache, complete');
  requests.length = 0;
  await inPage(page, async (oxi, { url }) => { const m = await oxi.loadModel(url); await m.free(); }, { url });
  check(!requests.some((u) => u.includes('/models/')), 'a second load reads the cache: no model request');

  for (const [label, p] of [['isolated', page], ['not isolated', (await openPage(portB)).page]]) {
    const abort = await inPage(p, async (oxi, { url, prompt }) => {
      const m = await oxi.loadModel(url);
      const ac = new AbortController();
      let n = 0;
      const a = await m.generate({ tokens: prompt, maxTokens: 400, temperature: 0, signal: ac.signal,
        onToken: () => { if (++n === 3) ac.abort(); } });
      const b = await m.generate({ tokens: prompt, maxTokens: 4, temperature: 0 });
      await m.free();
      return { a: a.stop_reason, na: a.tokens.length, b: b.tokens.length };
    }, { url, prompt: PROMPT });
    check(abort.a === 'aborted' && abort.na >= 3 && abort.na < 50 && abort.b === 4,
      `${label}: abort stops the generation (${JSON.stringify(abort)}) and the next request runs`);
  }

  const hfRes = await inPage(page, async (oxi) => {
    const a = await oxi.loadModel('org/q35:Q8_0');
    const ia = a.info();
    await a.free();
    const b = await oxi.loadModel('org/q35');
    const ib = b.info();
    await b.free();
    let err = '';
    try { await oxi.loadModel('org/q35:IQ2_XS'); } catch (e) { err = e.message; }
    return { a: [ia.arch, ia.file_type], b: [ib.arch, ib.file_type], err };
  }, { hfEndpoint });
  check(hfRes.a && hfRes.a[1] === 'Q8_0' && hfRes.b[0] === 'qwen35moe' && /IQ2_XS/.test(hfRes.err) && /q35-Q8_0.gguf/.test(hfRes.err),
    `Hugging Face ids: org/q35:Q8_0 → ${hfRes.a}, org/q35 → ${hfRes.b} (Q4_K_M by default), missing quant: "${hfRes.err}"`);

  for (const [what, src, want] of [
    ['404', '/models/missing.gguf', /HTTP 404/],
    ['non-GGUF URL', '/index.html', /not a GGUF file/],
    ['truncated GGUF', '/models/truncated.gguf', /truncat|out of range|range|short|end of/i],
    ['unsupported arch', '/models/alien.gguf', /zzzz99|architecture/i],
  ]) {
    const r = await inPage(page, async (oxi, { src }) => { await oxi.loadModel(src); return { loaded: true }; }, { src });
    check(r.error && want.test(r.error), `${what}: rejected with "${r.error}"`);
  }
  // grammar (GBNF) through the JS API: the native CLI's --grammar tokens, and a bad grammar's message.
  {
    const G = 'root ::= [a-z ]+ "."';
    const ref = native(models[0].file, ['--tokens', PROMPT.join(','), '--grammar', G]);
    const g = await inPage(page, async (oxi, { url, prompt, n, G }) => {
      const m = await oxi.loadModel(url);
      const ok = await m.generate({ tokens: prompt, maxTokens: n, temperature: 0, topLogprobs: 5, grammar: G });
      let err = '';
      try { await m.generate({ tokens: prompt, maxTokens: 2, grammar: 'root ::= [' }); } catch (e) { err = e.message; }
      await m.free();
      return { ok, err };
    }, { url, prompt: PROMPT, n: N, G });
    const d = g.ok ? compare(g.ok.tokens, ref, 1e-4) : 'no output';
    check(!d && /^[a-z .]*$/.test(g.ok.text), `grammar: the tokens of native --grammar, text "${g.ok && g.ok.text}"${d ? ': ' + d : ''}`);
    check(/grammar|parse|expected/i.test(g.err), `a bad grammar rejects: "${g.err}"`);
  }
  const after = await inPage(page, async (oxi, { url }) => { const m = await oxi.loadModel(url);
    const o = await m.generate({ tokens: [1, 2, 3], maxTokens: 3, temperature: 0 }); await m.free(); return o.tokens.length; }, { url });
  check(after === 3, 'the page still loads and runs a model after the bad ones');
  await ctx.close();

  // ---- the chat page ----
  {
    const ctx2 = await browser.newContext({ viewport: { width: 1100, height: 700 } });
    const page = await ctx2.newPage();
    await page.goto(`http://127.0.0.1:${portA}/index.html?model=${encodeURIComponent(url)}`);
    await page.waitForFunction(() => !document.getElementById('input').disabled, null, { timeout: 120000 });
    const status = await page.textContent('#status');
    check(/qwen35/.test(status) && /2 threads/.test(status), `page status: ${status}`);
    await page.fill('#maxTokens', '300');
    await page.uncheck('#thinking');  // the answer as content (Qwen 3.5's template thinks by default)
    await page.fill('#input', 'Write a long story about the sea.');
    await page.press('#input', 'Enter');
    await page.waitForFunction(() => {
      const m = document.querySelectorAll('.msg.assistant');
      const last = m[m.length - 1];
      return last && last.querySelector('.content').textContent.length > 40;
    }, null, { timeout: 60000 });
    await page.click('#stop');
    await page.waitForFunction(() => !document.getElementById('send').disabled, null, { timeout: 30000 });
    const stats = await page.textContent('#stats');
    check(/tok\/s/.test(stats) && /stopped/.test(stats), `streamed, stopped: ${stats}`);
    const shot = path.join(work, 'chat.png');
    await page.screenshot({ path: shot });
    if (process.env.OXI_WEB_SCREENSHOT) fs.copyFileSync(shot, process.env.OXI_WEB_SCREENSHOT);
    check(fs.statSync(shot).size > 1000, `screenshot ${shot}`);
    await ctx2.close();
  }
} catch (e) {
  bad(`unexpected: ${e.stack || e}`);
} finally {
  await browser.close();
}
console.log(fails ? `${fails} failed` : 'all passed');
process.exit(fails ? 1 : 0);
