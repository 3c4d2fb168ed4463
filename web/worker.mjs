// One Worker per loaded model: fetches the model file(s) into the Origin Private File System (or
// takes File/Blob objects), starts the wasm engine (the pthreads build when the page is
// cross-origin isolated, else the single-threaded one), mounts the files with WORKERFS (read
// lazily into the heap once: no second copy) and runs generate() requests. The page side is
// oxinfer.mjs; messages:
//   page → worker  {op:'load', sources, threads, nCtx, hfEndpoint}   {op:'generate', id, req, ctrl}
//   worker → page  {op:'progress', loaded, total}  {op:'loaded', info}  {op:'token', id, ev}
//                  {op:'done', id, result}  {op:'error', id?, message}
import { fetchToCache } from './fetch_cache.mjs';

let engine = null;
let ctrl = null;      // Int32Array over a SharedArrayBuffer: [0] = 1 asks generate() to stop
let current = 0;      // id of the running generate request

function fail(message, id) {
  postMessage({ op: 'error', id, message: String(message) });
}

async function startEngine(threads) {
  const mt = self.crossOriginIsolated === true && typeof SharedArrayBuffer !== 'undefined';
  const url = new URL(mt ? './oxinfer-engine-mt.mjs' : './oxinfer-engine-st.mjs', import.meta.url);
  const { default: createEngine } = await import(url.href);
  const mod = await createEngine({
    oxiPoolSize: mt ? Math.max(1, threads) : 0,
    print: (s) => console.log(s),
    printErr: (s) => console.warn(s),
    oxiOnToken: (text) => {
      postMessage({ op: 'token', id: current, ev: text });
      return ctrl && Atomics.load(ctrl, 0) !== 0 ? 1 : 0;
    },
  });
  mod.oxiThreads = mt ? Math.max(1, threads) : 1;
  return mod;
}

// Calls an oxiw_* entry point with string arguments (copied to the heap, not the small stack:
// a chat request can be long) and returns its JSON text; a NULL result throws the engine's message.
function call(name, ...args) {
  const ptrs = args.map((s) => {
    const n = engine.lengthBytesUTF8(s) + 1;
    const p = engine._malloc(n);
    engine.stringToUTF8(s, p, n);
    return p;
  });
  try {
    const p = engine.ccall(name, 'number', ptrs.map(() => 'number'), ptrs);
    if (!p) throw new Error(engine.UTF8ToString(engine.ccall('oxiw_error', 'number', [], [])));
    return engine.UTF8ToString(p);
  } finally {
    for (const p of ptrs) engine._free(p);
  }
}

async function load(msg) {
  let last = 0;
  const progress = (loaded, total) => {
    const now = performance.now();
    if (now - last > 100 || loaded === total) {
      last = now;
      postMessage({ op: 'progress', loaded, total });
    }
  };
  // Every source becomes a File/Blob with a name (split GGUF parts keep their names so the
  // loader finds the siblings of the first part).
  const files = [];
  const sizes = [];
  for (const s of msg.sources) sizes.push(s.kind === 'blob' ? s.blob.size : 0);
  let done = 0;
  for (const s of msg.sources) {
    if (s.kind === 'blob') {
      files.push({ name: s.name, data: s.blob });
      done += s.blob.size;
      progress(done, done);
    } else {
      const base = done;
      const blob = await fetchToCache(s.url, (l, t) => progress(base + l, base + t));
      files.push({ name: s.name, data: blob });
      done += blob.size;
    }
  }
  for (const f of files) {
    const head = new Uint8Array(await f.data.slice(0, 4).arrayBuffer());
    if (String.fromCharCode(...head) !== 'GGUF') {
      throw new Error(`${f.name}: not a GGUF file (the browser build reads .gguf files)`);
    }
  }
  engine = await startEngine(msg.threads);
  engine.FS.mkdir('/models');
  engine.FS.mount(engine.FS.filesystems.WORKERFS, { blobs: files }, '/models');
  const opts = JSON.stringify({ threads: engine.oxiThreads, n_ctx: msg.nCtx ?? 4096 });
  const info = JSON.parse(call('oxiw_load', `/models/${files[0].name}`, opts));
  info.threads = engine.oxiThreads;
  info.build = self.crossOriginIsolated ? 'wasm-pthreads' : 'wasm-single-thread';
  postMessage({ op: 'loaded', info });
}

self.onmessage = async (e) => {
  const msg = e.data;
  try {
    if (msg.op === 'load') {
      await load(msg);
    } else if (msg.op === 'generate') {
      current = msg.id;
      ctrl = msg.ctrl ? new Int32Array(msg.ctrl) : null;
      const result = JSON.parse(call('oxiw_generate', JSON.stringify(msg.req)));
      postMessage({ op: 'done', id: msg.id, result });
    } else if (msg.op === 'free') {
      if (engine) engine.ccall('oxiw_free', null, [], []);
      engine = null;
      postMessage({ op: 'freed' });
    }
  } catch (err) {
    fail(err && err.message ? err.message : err, msg.id);
  }
};
