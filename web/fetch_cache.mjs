// Model files in the browser: resolving a source (URL, Hugging Face "org/name[:quant]", split
// GGUF) to the list of files to fetch, and fetching them into the Origin Private File System so a
// second load needs no network. Downloads use HTTP range requests in 16 MiB chunks, four at a
// time, written in place with a sync access handle (workers only); the chunks already written are
// recorded beside the file, so an interrupted download resumes where it stopped. Where OPFS or
// ranges are missing the file is streamed whole (into OPFS, or into memory as a last resort).
//
// OPFS layout: directory "oxinfer-models"; per file KEY (the URL's file name + a hash of the URL)
// the data in KEY and {url, name, size, chunk, done: [chunk indices], complete, lastUsed} in
// KEY.json.

const DIR = 'oxinfer-models';
const CHUNK = 16 << 20;
const PARALLEL = 4;

function fnv1a(s) {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h.toString(16).padStart(8, '0');
}

export function fileNameOf(url) {
  const path = new URL(url, self.location.href).pathname;
  const name = decodeURIComponent(path.slice(path.lastIndexOf('/') + 1)) || 'model.gguf';
  return name.replace(/[^A-Za-z0-9._-]/g, '_');
}

function cacheKey(url) {
  return `${fileNameOf(url)}-${fnv1a(url)}`;
}

async function opfsDir() {
  if (!self.navigator || !navigator.storage || !navigator.storage.getDirectory) return null;
  try {
    const root = await navigator.storage.getDirectory();
    return await root.getDirectoryHandle(DIR, { create: true });
  } catch {
    return null;
  }
}

async function readMeta(dir, key) {
  try {
    const f = await (await dir.getFileHandle(`${key}.json`)).getFile();
    return JSON.parse(await f.text());
  } catch {
    return null;
  }
}

async function writeMeta(dir, key, meta) {
  const fh = await dir.getFileHandle(`${key}.json`, { create: true });
  const w = await fh.createWritable();
  await w.write(JSON.stringify(meta));
  await w.close();
}

function httpError(url, r) {
  return new Error(`${url}: HTTP ${r.status}${r.statusText ? ' ' + r.statusText : ''}`);
}

// Size of the file and whether the server answers range requests (one byte asked for).
async function probe(url) {
  let r;
  try {
    r = await fetch(url, { headers: { Range: 'bytes=0-0' } });
  } catch (e) {
    throw new Error(`${url}: ${e.message || 'network error'}`);
  }
  if (!r.ok) throw httpError(url, r);
  if (r.status === 206) {
    const cr = r.headers.get('Content-Range') || '';
    await r.arrayBuffer();
    const total = Number(cr.slice(cr.lastIndexOf('/') + 1));
    if (Number.isFinite(total) && total > 0) return { size: total, ranged: true };
    return { size: 0, ranged: false, response: null };
  }
  // A 200 with the whole body: use this response as the download.
  return { size: Number(r.headers.get('Content-Length') || 0), ranged: false, response: r };
}

// Streams a response body to write(bytes, offset); returns the bytes written.
async function pump(response, offset, write, onBytes) {
  const reader = response.body.getReader();
  let at = offset;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    write(value, at);
    at += value.byteLength;
    onBytes(value.byteLength);
  }
  return at - offset;
}

async function fetchToMemory(url, onProgress, first) {
  const r = first || (await fetch(url));
  if (!r.ok) throw httpError(url, r);
  const total = Number(r.headers.get('Content-Length') || 0);
  const parts = [];
  let loaded = 0;
  await pump(r, 0, (v) => parts.push(v), (n) => onProgress((loaded += n), Math.max(total, loaded)));
  return new Blob(parts);
}

// Fetches url (cached in OPFS when possible) and returns a Blob/File of its bytes.
// onProgress(loaded, total) as bytes arrive (a cached file reports once, complete).
export async function fetchToCache(url, onProgress = () => {}) {
  const dir = await opfsDir();
  const canSync = typeof FileSystemFileHandle !== 'undefined' &&
    typeof FileSystemFileHandle.prototype.createSyncAccessHandle === 'function';
  const key = cacheKey(url);
  let meta = dir ? await readMeta(dir, key) : null;
  if (dir && meta && meta.complete) {
    try {
      const f = await (await dir.getFileHandle(key)).getFile();
      if (f.size === meta.size) {
        meta.lastUsed = Date.now();
        await writeMeta(dir, key, meta);
        onProgress(f.size, f.size);
        return f;
      }
    } catch { /* fall through: fetch again */ }
  }
  const p = await probe(url);
  if (!dir || !canSync) return fetchToMemory(url, onProgress, p.response);
  if (!meta || meta.url !== url || meta.size !== p.size || !p.ranged) {
    meta = { url, name: fileNameOf(url), size: p.size, chunk: CHUNK, done: [], complete: false, lastUsed: Date.now() };
  }
  const fh = await dir.getFileHandle(key, { create: true });
  const ah = await fh.createSyncAccessHandle();
  const write = (bytes, at) => {
    let off = 0;
    while (off < bytes.byteLength) off += ah.write(bytes.subarray(off), { at: at + off });
  };
  try {
    if (!p.ranged) {
      ah.truncate(0);
      let loaded = 0;
      const r = p.response || (await fetch(url));
      if (!r.ok) throw httpError(url, r);
      const n = await pump(r, 0, write, (k) => onProgress((loaded += k), Math.max(p.size, loaded)));
      meta.size = n;
    } else {
      if (ah.getSize() !== p.size) ah.truncate(p.size);
      const nChunks = Math.ceil(p.size / CHUNK);
      const done = new Set(meta.done);
      const todo = [];
      let loaded = 0;
      for (let i = 0; i < nChunks; i++) {
        if (done.has(i)) loaded += Math.min(CHUNK, p.size - i * CHUNK);
        else todo.push(i);
      }
      onProgress(loaded, p.size);
      let saving = Promise.resolve();
      const worker = async () => {
        while (todo.length) {
          const i = todo.shift();
          const a = i * CHUNK;
          const b = Math.min(p.size, a + CHUNK) - 1;
          const r = await fetch(url, { headers: { Range: `bytes=${a}-${b}` } });
          if (r.status !== 206) throw httpError(url, r);
          const n = await pump(r, a, write, (k) => onProgress((loaded += k), p.size));
          if (n !== b - a + 1) throw new Error(`${url}: short read (${n} of ${b - a + 1} bytes at ${a})`);
          meta.done.push(i);
          saving = saving.then(() => { ah.flush(); return writeMeta(dir, key, meta); });
        }
      };
      await Promise.all(Array.from({ length: Math.min(PARALLEL, todo.length) }, worker));
      await saving;
    }
    ah.flush();
  } finally {
    ah.close();
  }
  meta.complete = true;
  meta.lastUsed = Date.now();
  await writeMeta(dir, key, meta);
  return await fh.getFile();
}

// Models in this browser's cache: [{key, url, name, size, complete, lastUsed}].
export async function listCached() {
  const dir = await opfsDir();
  if (!dir) return [];
  const out = [];
  for await (const [name] of dir.entries()) {
    if (!name.endsWith('.json')) continue;
    const key = name.slice(0, -5);
    const meta = await readMeta(dir, key);
    if (meta) out.push({ key, url: meta.url, name: meta.name, size: meta.size, complete: !!meta.complete, lastUsed: meta.lastUsed || 0 });
  }
  return out.sort((a, b) => b.lastUsed - a.lastUsed);
}

export async function deleteCached(key) {
  const dir = await opfsDir();
  if (!dir) return;
  for (const n of [key, `${key}.json`]) {
    try { await dir.removeEntry(n); } catch { /* already gone */ }
  }
}

// ---- sources ----

const HF_ID = /^([A-Za-z0-9][\w.-]*\/[\w.-]+)(?::([\w.-]+))?$/;
const SPLIT = /-(\d{5})-of-(\d{5})\.gguf$/;

// The quant label of a GGUF file name ("x-Q4_K_M-00001-of-00002.gguf" → "Q4_K_M"): the part
// that matches a label, bounded so that Q4_K does not match Q4_K_M.
function hasQuant(file, quant) {
  const base = file.slice(file.lastIndexOf('/') + 1).replace(SPLIT, '.gguf').replace(/\.gguf$/i, '');
  const re = new RegExp(`(^|[^A-Za-z0-9_])${quant.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}($|[^A-Za-z0-9_])`, 'i');
  return re.test(base) || file.toLowerCase().startsWith(`${quant.toLowerCase()}/`);
}

// A Hugging Face repo id → the GGUF to load, as the CLI's -hf picks it: the file for the quant
// asked for (default Q4_K_M, else the only GGUF); mmproj files are skipped.
async function resolveHf(repo, quant, endpoint) {
  const api = `${endpoint}/api/models/${repo}/tree/main?recursive=true`;
  const r = await fetch(api);
  if (!r.ok) throw new Error(`${repo}: Hugging Face answered HTTP ${r.status} (is the repo id right, and public?)`);
  const files = (await r.json()).filter((f) => f.type === 'file' && /\.gguf$/i.test(f.path) && !/mmproj/i.test(f.path))
    .map((f) => f.path);
  if (!files.length) throw new Error(`${repo}: the repo has no GGUF files`);
  const firsts = files.filter((f) => !SPLIT.test(f) || SPLIT.exec(f)[1] === '00001');
  let pick = firsts.filter((f) => hasQuant(f, quant || 'Q4_K_M'));
  if (!pick.length && !quant && firsts.length === 1) pick = firsts;
  if (!pick.length) {
    throw new Error(`${repo}: no GGUF for quant ${quant || 'Q4_K_M'}; files: ${firsts.join(', ')}`);
  }
  return `${endpoint}/${repo}/resolve/main/${pick[0].split('/').map(encodeURIComponent).join('/')}`;
}

// source: URL string, HF id "org/name[:quant]", File/Blob, or an array of them (split parts).
// Returns [{kind: 'url', url, name} | {kind: 'blob', blob, name}], first part first.
export async function resolveSources(source, { hfEndpoint = 'https://huggingface.co' } = {}) {
  const list = Array.isArray(source) ? source : [source];
  if (!list.length) throw new Error('loadModel: no source given');
  const out = [];
  for (const s of list) {
    if (typeof Blob !== 'undefined' && s instanceof Blob) {
      out.push({ kind: 'blob', blob: s, name: (s.name || `part${out.length}.gguf`).replace(/[^A-Za-z0-9._-]/g, '_') });
    } else if (typeof s === 'string') {
      const m = HF_ID.exec(s);
      const isUrl = /^[a-z]+:\/\//i.test(s) || s.startsWith('/') || s.startsWith('.');
      const url = !isUrl && m ? await resolveHf(m[1], m[2], hfEndpoint) : new URL(s, self.location.href).href;
      out.push({ kind: 'url', url, name: fileNameOf(url) });
    } else {
      throw new Error('loadModel: a source is a URL string, a Hugging Face id, a File/Blob, or an array of them');
    }
  }
  // One URL to the first part of a split GGUF: its siblings follow the same naming.
  if (out.length === 1 && out[0].kind === 'url') {
    const m = SPLIT.exec(new URL(out[0].url).pathname);
    if (m && m[1] === '00001') {
      const n = Number(m[2]);
      for (let i = 2; i <= n; i++) {
        const part = String(i).padStart(5, '0');
        const url = out[0].url.replace(/-00001-of-(\d{5})\.gguf/, `-${part}-of-$1.gguf`);
        out.push({ kind: 'url', url, name: fileNameOf(url) });
      }
    }
  }
  return out;
}
