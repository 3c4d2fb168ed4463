// oxinfer in the browser: the JS API (docs/web.md). Works in a page and in a Worker; each loaded
// model runs in its own Worker (worker.mjs), so the calling thread never blocks.
//
//   const oxi = await createOxinfer({ threads: 2, device: 'auto' });
//   const model = await oxi.loadModel(source, { onProgress });   // URL | 'org/name[:quant]' | File | [..]
//   model.info();  const out = await model.generate({ messages, maxTokens, onToken, signal });
//   await model.free();
import { resolveSources, listCached, deleteCached } from './fetch_cache.mjs';

const DEVICES = ['auto', 'cpu', 'webgpu'];

function defaultThreads() {
  const hc = (self.navigator && navigator.hardwareConcurrency) || 2;
  return Math.max(1, Math.min(hc, 8));
}

// generate() options (camelCase, as the API is written) → the engine's request (snake_case).
function engineRequest(o) {
  const req = {};
  const inputs = ['prompt', 'tokens', 'messages'].filter((k) => o[k] !== undefined);
  if (inputs.length !== 1) throw new Error('generate: give exactly one of prompt, tokens, messages');
  req[inputs[0]] = o[inputs[0]];
  const map = {
    maxTokens: 'max_tokens', temperature: 'temperature', topK: 'top_k', topP: 'top_p', minP: 'min_p',
    seed: 'seed', topLogprobs: 'top_logprobs', stop: 'stop', enableThinking: 'enable_thinking',
    repeatPenalty: 'repeat_penalty', presencePenalty: 'presence_penalty', frequencyPenalty: 'frequency_penalty',
    tools: 'tools', ignoreEos: 'ignore_eos', spec: 'spec', grammar: 'grammar',
  };
  for (const [k, v] of Object.entries(map)) if (o[k] !== undefined) req[v] = o[k];
  const rf = o.responseFormat;
  if (rf && rf.type !== 'text') {
    // OpenAI shape: {type: 'json_object'} (any JSON object: null to the engine) or
    // {type: 'json_schema', json_schema: {schema}}.
    if (rf.type === 'json_object') req.json_schema = null;
    else if (rf.type === 'json_schema') req.json_schema = (rf.json_schema && rf.json_schema.schema) ?? null;
    else throw new Error(`generate: unknown responseFormat.type ${rf.type}`);
  }
  return req;
}

class Model {
  #oxi; #opts; #sources; #worker = null; #info = null; #pending = new Map(); #nextId = 1; #busy = null;

  constructor(oxi, sources, opts) {
    this.#oxi = oxi;
    this.#sources = sources;
    this.#opts = opts;
  }

  // Starts the worker and loads the model; rejects with the engine's message.
  async _start(onProgress) {
    const w = new Worker(new URL('./worker.mjs', import.meta.url), { type: 'module' });
    this.#worker = w;
    this.#info = await new Promise((resolve, reject) => {
      w.onmessage = (e) => {
        const m = e.data;
        if (m.op === 'progress') onProgress && onProgress(m.loaded, m.total);
        else if (m.op === 'loaded') resolve(m.info);
        else if (m.op === 'error') reject(new Error(m.message));
      };
      w.onerror = (e) => reject(new Error(e.message || 'the model worker failed to start'));
      w.postMessage({ op: 'load', sources: this.#sources, threads: this.#oxi.threads, nCtx: this.#opts.nCtx });
    }).catch((err) => {
      w.terminate();
      this.#worker = null;
      throw err;
    });
    this.#info.device = 'cpu';
    w.onmessage = (e) => this.#onMessage(e.data);
    w.onerror = (e) => this.#failAll(new Error(e.message || 'the model worker crashed'));
    return this;
  }

  #onMessage(m) {
    const p = this.#pending.get(m.id);
    if (!p) return;
    if (m.op === 'token') {
      const ev = JSON.parse(m.ev);
      p.tokens.push(ev);
      p.text += ev.content;
      if (p.onToken) {
        try { p.onToken(ev); } catch (err) { console.error(err); }
      }
    } else if (m.op === 'done') {
      this.#pending.delete(m.id);
      p.resolve(m.result);
    } else if (m.op === 'error') {
      this.#pending.delete(m.id);
      p.reject(new Error(m.message));
    }
  }

  #failAll(err) {
    for (const p of this.#pending.values()) p.reject(err);
    this.#pending.clear();
  }

  info() {
    if (!this.#info) throw new Error('the model is freed');
    return { ...this.#info };
  }

  // One request at a time per model (they share its context); later calls wait their turn.
  async generate(opts = {}) {
    const prev = this.#busy;
    let release;
    this.#busy = new Promise((r) => (release = r));
    try {
      await prev;
      return await this.#generate(opts);
    } finally {
      release();
    }
  }

  async #generate(opts) {
    const req = engineRequest(opts);
    if (!this.#worker) {
      if (!this.#info) throw new Error('the model is freed');
      await this._start(null);  // after an abort without SharedArrayBuffer (see below)
    }
    const shared = typeof SharedArrayBuffer !== 'undefined' && self.crossOriginIsolated;
    const ctrl = shared ? new Int32Array(new SharedArrayBuffer(4)) : null;
    const id = this.#nextId++;
    const signal = opts.signal;
    if (signal && signal.aborted) throw new DOMException('generate aborted', 'AbortError');
    return await new Promise((resolve, reject) => {
      const entry = { resolve, reject, tokens: [], text: '', onToken: opts.onToken };
      this.#pending.set(id, entry);
      const onAbort = () => {
        if (ctrl) {
          Atomics.store(ctrl, 0, 1);  // the engine stops at the next token and answers 'done'
          return;
        }
        // Without SharedArrayBuffer the busy worker cannot be told to stop: end it, answer with
        // what streamed so far, and reload the model (from the browser cache) on the next call.
        this.#pending.delete(id);
        this.#worker.terminate();
        this.#worker = null;
        resolve({ text: entry.text, reasoning: entry.tokens.map((t) => t.reasoning).join(''), tool_calls: [],
          tokens: entry.tokens.map(({ id: tid, text, logprob, top_logprobs }) => ({ id: tid, text, logprob, top_logprobs })),
          stop_reason: 'aborted', timings: {} });
      };
      if (signal) signal.addEventListener('abort', onAbort, { once: true });
      const done = (v) => { if (signal) signal.removeEventListener('abort', onAbort); return v; };
      entry.resolve = (v) => resolve(done(v));
      entry.reject = (e) => reject(done(e));
      this.#worker.postMessage({ op: 'generate', id, req, ctrl: ctrl ? ctrl.buffer : null });
    });
  }

  async free() {
    if (this.#worker) this.#worker.terminate();
    this.#worker = null;
    this.#info = null;
    this.#failAll(new Error('the model was freed'));
  }
}

class Oxinfer {
  constructor(opts) {
    this.threads = opts.threads;
    this.device = opts.device;
    this.hfEndpoint = opts.hfEndpoint;
  }

  // source: URL (a .gguf or the first part of a split GGUF), HF id "org/name[:quant]", File/Blob,
  // or an array of them. opts: { onProgress(loaded, total), nCtx }.
  async loadModel(source, opts = {}) {
    const sources = await resolveSources(source, { hfEndpoint: this.hfEndpoint });
    const m = new Model(this, sources, opts);
    return m._start(opts.onProgress);
  }

  listCached() { return listCached(); }
  deleteCached(key) { return deleteCached(key); }
}

// options: { threads (default: hardware threads, at most 8), device: 'auto' | 'cpu' | 'webgpu',
//            hfEndpoint (default https://huggingface.co) }.
export async function createOxinfer(options = {}) {
  const device = options.device ?? 'auto';
  if (!DEVICES.includes(device)) throw new Error(`createOxinfer: device must be one of ${DEVICES.join(', ')}`);
  if (device === 'webgpu') {
    throw new Error("createOxinfer: the WebGPU backend is not in this build yet; use device 'cpu' or 'auto'");
  }
  if (device === 'auto' && self.navigator && navigator.gpu) {
    console.info('oxinfer: WebGPU is present but this build computes on the CPU (wasm SIMD)');
  }
  const threads = options.threads ?? defaultThreads();
  if (!Number.isInteger(threads) || threads < 1 || threads > 64) throw new Error('createOxinfer: threads must be 1..64');
  const isolated = self.crossOriginIsolated === true;
  if (!isolated && threads > 1) {
    console.info('oxinfer: the page is not cross-origin isolated (COOP/COEP headers): one thread');
  }
  return new Oxinfer({ threads: isolated ? threads : 1, device, hfEndpoint: options.hfEndpoint ?? 'https://huggingface.co' });
}

export { listCached, deleteCached };
