#!/usr/bin/env node
// A tiny static server for the browser build: sends the cross-origin isolation headers
// (COOP/COEP, needed for SharedArrayBuffer and so for threads) and answers range requests (the
// model download is ranged and resumable). Any server that sends these headers will do.
//   node serve.mjs [ROOT] [--port 8080] [--host 127.0.0.1] [--models DIR] [--no-isolation]
// ROOT defaults to this file's folder (build/web after scripts/build_web.sh); --models DIR is
// served under /models/.
import http from 'node:http';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const args = process.argv.slice(2);
let root = path.dirname(fileURLToPath(import.meta.url));
let port = 8080, host = '127.0.0.1', models = null, isolation = true;
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === '--port') port = Number(args[++i]);
  else if (a === '--host') host = args[++i];
  else if (a === '--models') models = path.resolve(args[++i]);
  else if (a === '--no-isolation') isolation = false;
  else if (a === '-h' || a === '--help') {
    console.log('usage: node serve.mjs [ROOT] [--port 8080] [--host 127.0.0.1] [--models DIR] [--no-isolation]');
    process.exit(0);
  } else if (!a.startsWith('-')) root = path.resolve(a);
  else {
    console.error(`serve.mjs: unknown option ${a}`);
    process.exit(2);
  }
}

const TYPES = {
  '.html': 'text/html; charset=utf-8', '.mjs': 'text/javascript', '.js': 'text/javascript',
  '.wasm': 'application/wasm', '.css': 'text/css', '.json': 'application/json', '.png': 'image/png',
  '.svg': 'image/svg+xml', '.gguf': 'application/octet-stream',
};

function resolvePath(urlPath) {
  let p = decodeURIComponent(urlPath.split('?')[0]);
  let base = root;
  if (models && p.startsWith('/models/')) {
    base = models;
    p = p.slice('/models'.length);
  }
  if (p.endsWith('/')) p += 'index.html';
  const full = path.resolve(base, '.' + p);
  if (full !== base && !full.startsWith(base + path.sep)) return null;  // no escaping the roots
  return full;
}

const server = http.createServer((req, res) => {
  const headers = { 'Cache-Control': 'no-cache', 'Accept-Ranges': 'bytes' };
  if (isolation) {
    headers['Cross-Origin-Opener-Policy'] = 'same-origin';
    headers['Cross-Origin-Embedder-Policy'] = 'require-corp';
    headers['Cross-Origin-Resource-Policy'] = 'same-origin';
  }
  let file;
  try {
    file = resolvePath(req.url);
  } catch {
    file = null;
  }
  let st = null;
  try {
    st = file && fs.statSync(file);
  } catch { /* missing */ }
  if (!st || !st.isFile() || (req.method !== 'GET' && req.method !== 'HEAD')) {
    res.writeHead(st ? 405 : 404, { ...headers, 'Content-Type': 'text/plain' });
    res.end(st ? 'method not allowed\n' : 'not found\n');
    return;
  }
  headers['Content-Type'] = TYPES[path.extname(file)] || 'application/octet-stream';
  let start = 0, end = st.size - 1, status = 200;
  const range = /^bytes=(\d*)-(\d*)$/.exec(req.headers.range || '');
  if (range && (range[1] !== '' || range[2] !== '')) {
    if (range[1] === '') {
      start = Math.max(0, st.size - Number(range[2]));
    } else {
      start = Number(range[1]);
      if (range[2] !== '') end = Math.min(end, Number(range[2]));
    }
    if (start > end || start >= st.size) {
      res.writeHead(416, { ...headers, 'Content-Range': `bytes */${st.size}` });
      res.end();
      return;
    }
    status = 206;
    headers['Content-Range'] = `bytes ${start}-${end}/${st.size}`;
  }
  headers['Content-Length'] = String(end - start + 1);
  res.writeHead(status, headers);
  if (req.method === 'HEAD' || st.size === 0) {
    res.end();
    return;
  }
  fs.createReadStream(file, { start, end }).pipe(res);
});
server.listen(port, host, () => {
  const a = server.address();
  console.log(`serving ${root} at http://${a.address}:${a.port}/${isolation ? '' : ' (not cross-origin isolated)'}`);
});
