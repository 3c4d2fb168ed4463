// Speed of the browser build against npm @wllama/wllama (llama.cpp's server core in wasm) in the
// same headless Chromium, same GGUF files, same thread count, CPU only (issue 25):
//   node bench/web_bench.mjs [--models a.gguf,b.gguf] [--threads 2] [--pp 512] [--tg 128] [--reps 2]
// Defaults: the 0.8B-shaped Q4_0 and Q4_K_M files of scripts/bench.sh (~/.cache/oxinfer-bench).
// pp: one prompt of --pp tokens (the same text for both engines; prompt_n is printed) and
// generation of 1 token; tg: --tg tokens after a short prompt, end-of-generation ignored. wllama
// runs with a printable-ASCII grammar (`root ::= [a-z ]+`): with random weights its completion
// otherwise fails on invalid UTF-8 (see docs/benchmarks.md); oxinfer runs unconstrained, with its
// default speculation (auto) and with none. Prints one JSON line per engine, file and test.
import { createRequire } from 'node:module';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const nlc = path.join(root, 'tools/node');
const { chromium } = createRequire(path.join(nlc, 'package.json'))('playwright-core');
const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const cache = path.join(os.homedir(), '.cache/oxinfer-bench');
const models = opt('--models', ['q08b-q4_0.gguf', 'q08b-q4_k_m.gguf'].map((f) => path.join(cache, f)).join(',')).split(',');
const threads = Number(opt('--threads', '2'));
const PP = Number(opt('--pp', '512')), TG = Number(opt('--tg', '128')), REPS = Number(opt('--reps', '2'));

// One folder to serve: the browser build, wllama's ES module and wasm, and the models.
const site = fs.mkdtempSync(path.join(os.tmpdir(), 'oxi-webbench-'));
for (const f of fs.readdirSync(path.join(root, 'build/web'))) fs.symlinkSync(path.join(root, 'build/web', f), path.join(site, f));
fs.symlinkSync(path.join(nlc, 'node_modules/@wllama/wllama/esm'), path.join(site, 'wllama'));
fs.mkdirSync(path.join(site, 'm'));
for (const m of models) fs.symlinkSync(path.resolve(m), path.join(site, 'm', path.basename(m)));
const port = 19500 + (process.pid % 400);
const srv = spawn('node', [path.join(root, 'web/serve.mjs'), site, '--port', String(port)], { stdio: ['ignore', 'pipe', 'inherit'] });
process.on('exit', () => srv.kill());
await new Promise((r) => srv.stdout.once('data', r));

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium', args: ['--no-sandbox', '--disable-dev-shm-usage'] });
const page = await browser.newPage();
page.on('pageerror', (e) => console.error(`[pageerror] ${e.message}`));
await page.goto(`http://127.0.0.1:${port}/index.html`);

// A prompt of about n tokens: a sentence repeated (the same text for both engines).
const sentence = 'The quick brown fox jumps over the lazy dog near the river bank. ';
for (const file of models) {
  const url = `/m/${path.basename(file)}`;
  const ox = await page.evaluate(async ({ url, threads, PP, TG, REPS, sentence }) => {
    const { createOxinfer } = await import('/oxinfer.mjs');
    const oxi = await createOxinfer({ threads, device: 'cpu' });
    const t0 = performance.now();
    const m = await oxi.loadModel(url);
    const load_ms = performance.now() - t0;
    const out = { load_ms, info: m.info(), pp: [], tg: [], tg_nospec: [] };
    for (let r = 0; r < REPS; r++) {
      // A different prompt each time: the context would otherwise reuse the previous one.
      const text = `${r} `.repeat(3) + sentence.repeat(Math.ceil(PP / 14));
      const a = await m.generate({ prompt: text, maxTokens: 1 });
      out.pp.push({ n: a.timings.prompt_n, ms: a.timings.prompt_ms });
      const b = await m.generate({ prompt: `Story ${r}:`, maxTokens: TG, ignoreEos: true });
      out.tg.push({ n: b.timings.gen_n, ms: b.timings.gen_ms });
      const c = await m.generate({ prompt: `Tale ${r}:`, maxTokens: TG, ignoreEos: true, spec: 'none' });
      out.tg_nospec.push({ n: c.timings.gen_n, ms: c.timings.gen_ms });
    }
    await m.free();
    return out;
  }, { url, threads, PP, TG, REPS, sentence });
  const best = (xs) => Math.max(...xs.map((x) => (x.n * 1000) / x.ms));
  console.log(JSON.stringify({ engine: 'oxinfer', file: path.basename(file), threads, load_ms: Math.round(ox.load_ms),
    isa: ox.info.isa, build: ox.info.build, pp_n: ox.pp[0].n, pp: best(ox.pp), tg: best(ox.tg), tg_spec_none: best(ox.tg_nospec) }));

  const wl = await page.evaluate(async ({ url, threads, PP, TG, REPS, sentence }) => {
    const { Wllama } = await import('/wllama/index.js');
    const w = new Wllama({ default: '/wllama/wasm/wllama.wasm' }, { logger: { debug() {}, log() {}, warn() {}, error: console.error } });
    const t0 = performance.now();
    await w.loadModelFromUrl(url, { n_threads: threads, n_ctx: 2048, n_batch: 512, n_gpu_layers: 0 });
    const load_ms = performance.now() - t0;
    const out = { load_ms, pp: [], tg: [] };
    const grammar = 'root ::= [a-z ]+';
    for (let r = 0; r < REPS; r++) {
      const text = `${r} `.repeat(3) + sentence.repeat(Math.ceil(PP / 14));
      const a = await w.createCompletion({ prompt: text, max_tokens: 1, temperature: 0, grammar, cache_prompt: false });
      out.pp.push({ n: a.timings.prompt_n, ms: a.timings.prompt_ms });
      const b = await w.createCompletion({ prompt: `Story ${r}:`, max_tokens: TG, temperature: 0, grammar, ignore_eos: true, cache_prompt: false });
      out.tg.push({ n: b.timings.predicted_n, ms: b.timings.predicted_ms });
    }
    await w.exit();
    return out;
  }, { url, threads, PP, TG, REPS, sentence }).catch((e) => ({ error: e.message }));
  if (wl.error) {
    console.log(JSON.stringify({ engine: 'wllama', file: path.basename(file), error: wl.error }));
  } else {
    console.log(JSON.stringify({ engine: 'wllama', file: path.basename(file), threads, load_ms: Math.round(wl.load_ms),
      pp_n: wl.pp[0].n, pp: best(wl.pp), tg: best(wl.tg) }));
  }
}
await browser.close();
process.exit(0);
