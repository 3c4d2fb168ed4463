#!/usr/bin/env python3
"""A small stand-in for the Hugging Face Hub on 127.0.0.1, for oxinfer's hub tests (stdlib only).

Serves repos from a directory: ROOT/<org>/<name>/<files...>, with optional ROOT/<org>/<name>.json:
  {"sha": "<40 hex>", "revisions": {"v1": "<40 hex>"}, "gated_token": "secret",
   "drop": {"path": "once"|"always"}, "corrupt": ["path"], "tree_page": 2,
   "fake_size": {"path": 123}, "slow": {"path": bytes_per_second}, "no_tree": false,
   "revision_body": "<raw body of the revision API>", "tree_body": "<raw body of the tree API>"}
URL layout (as the Hub's): /api/models/{repo}/revision/{rev}, /api/models/{repo}/tree/{rev}?recursive=true
(paginated with Link: rel="next"), POST /api/models/{repo}/paths-info/{rev} (used by huggingface.js), /{repo}/resolve/{rev}/{path} (LFS files: 302 to /__lfs/<sha256>
with X-Linked-Etag / X-Linked-Size; others: 200 with ETag = git blob oid), Range requests (206).
Errors carry X-Error-Code like the Hub: RepoNotFound (401), RevisionNotFound (404), GatedRepo (401),
EntryNotFound (404). Control: /__stats, /__reset, /__drop?path=org/name/file&mode=off|once|always,
/__shutdown. Prints "PORT <n>" once listening. Stops by itself after --idle seconds without a request
or --max-requests requests.

Usage: fake_hub.py serve ROOT [--idle 60] [--max-requests 5000]
       fake_hub.py get PORT PATH       (prints the body of GET http://127.0.0.1:PORT/PATH)
"""
import hashlib
import json
import os
import socket
import sys
import threading
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LFS_EXTS = (".gguf", ".safetensors", ".bin", ".onnx", ".png")


class Repo:
    def __init__(self, root, org, name):
        self.id = f"{org}/{name}"
        self.dir = os.path.join(root, org, name)
        cfg_path = os.path.join(root, org, name + ".json")
        self.cfg = json.load(open(cfg_path)) if os.path.exists(cfg_path) else {}
        self.sha = self.cfg.get("sha") or hashlib.sha1(self.id.encode()).hexdigest()
        self.revisions = {"main": self.sha, self.sha: self.sha}
        for k, v in self.cfg.get("revisions", {}).items():
            self.revisions[k] = v
            self.revisions[v] = v
        self.files = {}
        for d, _, names in os.walk(self.dir):
            for n in names:
                full = os.path.join(d, n)
                rel = os.path.relpath(full, self.dir).replace(os.sep, "/")
                data = open(full, "rb").read()
                lfs = rel.endswith(LFS_EXTS) or len(data) > 4096
                self.files[rel] = {
                    "data": data,
                    "lfs": lfs,
                    "sha256": hashlib.sha256(data).hexdigest(),
                    "oid": hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest(),
                }


    def entry(self, p):
        f = self.files[p]
        size = self.cfg.get("fake_size", {}).get(p, len(f["data"]))
        e = {"type": "file", "oid": f["oid"], "size": size, "path": p}
        if f["lfs"]:
            e["lfs"] = {"oid": f["sha256"], "size": size, "pointerSize": 130}
        return e


class State:
    def __init__(self, root):
        self.root = root
        self.lock = threading.Lock()
        self.stats = {}
        self.drops = {}  # "org/name/path" -> mode
        self.last = time.time()
        self.requests = 0

    def repo(self, org, name):
        if not os.path.isdir(os.path.join(self.root, org, name)):
            return None
        return Repo(self.root, org, name)

    def count(self, key, n=1):
        with self.lock:
            self.stats[key] = self.stats.get(key, 0) + n


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state = None

    def log_message(self, *a):
        pass

    def send(self, code, body=b"", headers=None, ctype="application/json"):
        if isinstance(body, str):
            body = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def error(self, code, err_code, msg):
        self.send(code, json.dumps({"error": msg}), {"X-Error-Code": err_code, "X-Error-Message": msg})

    def do_HEAD(self):
        self.handle_any()

    def do_GET(self):
        self.handle_any()

    def do_POST(self):
        # POST /api/models/{repo}/paths-info/{rev} {"paths": [...], "expand": bool}
        st = self.state
        st.last = time.time()
        n = int(self.headers.get("Content-Length", "0") or 0)
        body = self.rfile.read(min(n, 1 << 20)) if n > 0 else b""
        parts = [urllib.parse.unquote(p) for p in urllib.parse.urlsplit(self.path).path.split("/")[1:]]
        st.count("api")
        if len(parts) < 6 or parts[:2] != ["api", "models"] or parts[4] != "paths-info":
            return self.error(404, "EntryNotFound", "not found")
        repo = st.repo(parts[2], parts[3])
        if repo is None:
            return self.error(401, "RepoNotFound", "Repository not found")
        rev = "/".join(parts[5:])
        if rev not in repo.revisions:
            return self.error(404, "RevisionNotFound", "Invalid rev id: " + rev)
        try:
            paths = json.loads(body or b"{}").get("paths", [])
        except ValueError:
            return self.error(400, "BadRequest", "bad json")
        out = []
        for p in paths:
            if p in repo.files:
                e = repo.entry(p)
                e["lastCommit"] = {"id": repo.revisions[rev], "title": "c", "date": "2026-01-01T00:00:00.000Z"}
                out.append(e)
        return self.send(200, json.dumps(out))

    def handle_any(self):
        st = self.state
        st.last = time.time()
        with st.lock:
            st.requests += 1
        url = urllib.parse.urlsplit(self.path)
        q = urllib.parse.parse_qs(url.query)
        parts = [urllib.parse.unquote(p) for p in url.path.split("/")[1:]]
        auth = self.headers.get("Authorization", "")
        try:
            if parts[0] == "__stats":
                with st.lock:
                    return self.send(200, json.dumps(st.stats))
            if parts[0] == "__reset":
                with st.lock:
                    st.stats = {}
                return self.send(200, "{}")
            if parts[0] == "__drop":
                st.drops[q["path"][0]] = q["mode"][0]
                return self.send(200, "{}")
            if parts[0] == "__shutdown":
                self.send(200, "{}")
                threading.Thread(target=self.server.shutdown, daemon=True).start()
                return
            if parts[0] == "__lfs":
                org, name, path = parts[1], parts[2], "/".join(parts[3:])
                repo = st.repo(org, name)
                if repo is None or path not in repo.files:
                    return self.error(404, "EntryNotFound", "no such LFS object")
                return self.serve_content(repo, path, {"ETag": '"%s"' % repo.files[path]["sha256"]})
            if parts[0] == "api" and len(parts) >= 5 and parts[1] == "models":
                org, name, kind, rev = parts[2], parts[3], parts[4], "/".join(parts[5:])
                st.count("api")
                repo = st.repo(org, name)
                if repo is None:
                    return self.error(401, "RepoNotFound", "Repository not found")
                if rev not in repo.revisions:
                    return self.error(404, "RevisionNotFound", "Invalid rev id: " + rev)
                sha = repo.revisions[rev]
                if kind == "revision" and "revision_body" in repo.cfg:
                    return self.send(200, repo.cfg["revision_body"])
                if kind == "tree" and "tree_body" in repo.cfg:
                    return self.send(200, repo.cfg["tree_body"])
                if kind == "revision":
                    return self.send(200, json.dumps({"id": repo.id, "sha": sha,
                                                      "siblings": [{"rfilename": p} for p in sorted(repo.files)]}))
                if kind == "tree":
                    st.count("tree")
                    if repo.cfg.get("no_tree"):
                        return self.error(404, "EntryNotFound", "no tree here")
                    entries = [repo.entry(p) for p in sorted(repo.files)]
                    page = int(repo.cfg.get("tree_page", 0)) or len(entries) or 1
                    start = int(q.get("cursor", ["0"])[0])
                    headers = {}
                    if start + page < len(entries):
                        nxt = f"http://127.0.0.1:{self.server.server_port}/api/models/{repo.id}/tree/{rev}?recursive=true&cursor={start + page}"
                        headers["Link"] = f'<{nxt}>; rel="next"'
                    return self.send(200, json.dumps(entries[start:start + page]), headers)
                return self.error(404, "EntryNotFound", "unknown api")
            if len(parts) >= 5 and parts[2] == "resolve":
                org, name, rev, path = parts[0], parts[1], parts[3], "/".join(parts[4:])
                st.count("resolve")
                st.count("resolve:" + path)
                repo = st.repo(org, name)
                if repo is None:
                    return self.error(401, "RepoNotFound", "Repository not found")
                gated = repo.cfg.get("gated_token")
                if gated and auth != "Bearer " + gated:
                    return self.error(401 if not auth else 403, "GatedRepo", "Access to this repo is restricted")
                if rev not in repo.revisions:
                    return self.error(404, "RevisionNotFound", "Invalid rev id")
                if path not in repo.files:
                    return self.error(404, "EntryNotFound", "Entry not found")
                f = repo.files[path]
                size = repo.cfg.get("fake_size", {}).get(path, len(f["data"]))
                common = {"X-Repo-Commit": repo.revisions[rev]}
                if f["lfs"]:
                    common.update({"X-Linked-Etag": '"%s"' % f["sha256"], "X-Linked-Size": str(size),
                                   "Location": f"/__lfs/{repo.id}/{urllib.parse.quote(path)}"})
                    return self.send(302, b"", common)
                if self.command == "HEAD":
                    common["ETag"] = '"%s"' % f["oid"]
                    return self.send(200, b"", common)
                return self.serve_content(repo, path, {"ETag": '"%s"' % f["oid"], **common})
            return self.error(404, "EntryNotFound", "not found")
        except (BrokenPipeError, ConnectionResetError):
            pass

    def serve_content(self, repo, path, headers=None):
        st = self.state
        f = repo.files[path]
        data = f["data"]
        if path in repo.cfg.get("corrupt", []):
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        start, end = 0, len(data) - 1
        rng = self.headers.get("Range")
        partial = False
        if rng and rng.startswith("bytes=") and "-" in rng and "," not in rng:
            a, b = rng[6:].split("-", 1)
            start = int(a or 0)
            if b:
                end = min(int(b), len(data) - 1)
            partial = True
            st.count("range")
            st.count("range:" + path)
            if start >= len(data) or end < start:
                return self.send(416, b"", {"Content-Range": f"bytes */{len(data)}"})
        if not (partial and start == 0 and end == 0):  # a 1-byte probe (huggingface.js) is not a transfer
            st.count("content:" + path)
        body = data[start:end + 1]
        self.send_response(206 if partial else 200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        if partial:
            self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command == "HEAD":
            return
        key = repo.id + "/" + path
        mode = st.drops.get(key, repo.cfg.get("drop", {}).get(path, "off"))
        if mode == "once":
            st.drops[key] = "off"
        if mode in ("once", "always") and len(body) > 1:
            half = len(body) // 2
            self.wfile.write(body[:half])
            self.wfile.flush()
            st.count("bytes:" + path, half)
            st.count("dropped:" + path)
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        rate = repo.cfg.get("slow", {}).get(path)
        if rate:
            step = max(1, rate // 20)
            for i in range(0, len(body), step):
                self.wfile.write(body[i:i + step])
                time.sleep(0.05)
        else:
            self.wfile.write(body)
        st.count("bytes:" + path, len(body))


def serve(root, idle, max_requests):
    state = State(root)
    Handler.state = state
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    print("PORT %d" % srv.server_port, flush=True)

    def watchdog():
        started = time.time()
        while True:
            time.sleep(0.5)
            if time.time() - state.last > idle or state.requests > max_requests or time.time() - started > 1800:
                srv.shutdown()
                return

    threading.Thread(target=watchdog, daemon=True).start()
    srv.serve_forever()


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "serve":
        args = sys.argv[3:]
        idle = float(args[args.index("--idle") + 1]) if "--idle" in args else 60
        maxr = int(args[args.index("--max-requests") + 1]) if "--max-requests" in args else 5000
        serve(sys.argv[2], idle, maxr)
    elif len(sys.argv) == 4 and sys.argv[1] == "get":
        with urllib.request.urlopen("http://127.0.0.1:%s/%s" % (sys.argv[2], sys.argv[3]), timeout=10) as r:
            sys.stdout.write(r.read().decode())
    else:
        sys.stderr.write(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
