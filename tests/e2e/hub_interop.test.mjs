// Cache interoperability with an independent implementation of the Hugging Face cache layout:
// huggingface.js (@huggingface/hub, snapshotDownload / downloadFileToCacheDir). Both download the
// same synthetic repos from tests/hub/fake_hub.py (127.0.0.1) into separate caches, which must be
// laid out identically (blob names, relative links, refs); then each reads the other's cache
// without transferring a file. Skips (exit 0) when @huggingface/hub is not installed in tools/node
// (or OXI_HFJS_DIR/node_modules).
import { spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath, pathToFileURL } from "node:url";

const SRC = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const OXINFER = process.env.OXINFER ?? path.join(SRC, "build/release/apps/cli/oxinfer");
const WORK = path.join(process.env.OXI_WORK_DIR ?? fs.mkdtempSync(path.join(os.tmpdir(), "oxi-")), "hub-interop");

let hub = null;
for (const dir of [process.env.OXI_HFJS_DIR, process.env.NLC_DIR, path.join(SRC, "tools/node")]) {
  if (!dir) continue;
  try {
    const req = createRequire(path.join(dir, "package.json"));
    hub = await import(pathToFileURL(req.resolve("@huggingface/hub")).href);
    break;
  } catch {}
}
if (!hub) {
  console.log("skipped: @huggingface/hub is not installed (add it to tools/node/package.json)");
  process.exit(0);
}

fs.rmSync(WORK, { recursive: true, force: true });
const REPOS = path.join(WORK, "repos");
const put = (p, data) => {
  fs.mkdirSync(path.dirname(p), { recursive: true });
  fs.writeFileSync(p, data);
};
for (const name of ["gguf", "gguf2"]) {
  const r = path.join(REPOS, "inter", name);
  put(path.join(r, "m-Q4_K_M.gguf"), randomBytes(70000));
  put(path.join(r, "m-Q8_0.gguf"), randomBytes(9000));
  for (let i = 1; i <= 2; i++) put(path.join(r, `Q6_K/m-Q6_K-0000${i}-of-00002.gguf`), randomBytes(20000 + i));
}
for (const name of ["hf", "hf2"]) {
  const r = path.join(REPOS, "inter", name);
  put(path.join(r, "config.json"), '{"architectures":["Qwen3ForCausalLM"]}\n');
  put(path.join(r, "tokenizer.json"), '{"model":{}}\n');
  put(path.join(r, "model.safetensors"), randomBytes(50000));
}

// ---- fake Hub ----
const server = spawn("python3", [path.join(SRC, "tests/hub/fake_hub.py"), "serve", REPOS, "--idle", "60"], {
  stdio: ["ignore", "pipe", "inherit"],
});
const port = await new Promise((resolve, reject) => {
  let buf = "";
  const t = setTimeout(() => reject(new Error("fake hub did not start")), 10000);
  server.stdout.on("data", (d) => {
    buf += d;
    const m = buf.match(/PORT (\d+)/);
    if (m) {
      clearTimeout(t);
      resolve(Number(m[1]));
    }
  });
});
const hubUrl = `http://127.0.0.1:${port}`;
const get = async (p) => (await fetch(`${hubUrl}/${p}`)).json();
const transfers = async () => Object.keys(await get("__stats")).filter((k) => k.startsWith("content:"));

let fails = 0;
const check = (name, cond, extra = "") => {
  console.log(`${cond ? "ok  " : "FAIL"} - ${name}${cond ? "" : " " + extra}`);
  if (!cond) fails++;
};
const oxi = (cache, ...args) =>
  spawnSync(OXINFER, ["pull", ...args, "--quiet"], {
    env: { ...process.env, HF_HUB_CACHE: cache, HF_ENDPOINT: hubUrl, HF_TOKEN: "", HF_HUB_OFFLINE: "" },
    encoding: "utf8",
  });
// {relative snapshot path → link target} plus refs, for a cache's repo folder.
const layout = (cache, repo) => {
  const root = path.join(cache, "models--" + repo.replace("/", "--"));
  const out = {};
  const walk = (d) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isSymbolicLink()) out[path.relative(root, p)] = fs.readlinkSync(p);
      else if (p.includes(`${path.sep}refs${path.sep}`)) out[path.relative(root, p)] = fs.readFileSync(p, "utf8");
      else if (!p.endsWith(".lock")) out[path.relative(root, p)] = "file";
    }
  };
  walk(root);
  return out;
};

try {
  const JS = path.join(WORK, "cache-js"), OX = path.join(WORK, "cache-oxi");

  // 1. Same layout for the same files (GGUF repo, split part in a subfolder; HF checkpoint).
  await hub.snapshotDownload({ repo: "inter/gguf", hubUrl, cacheDir: JS });
  for (const q of ["Q4_K_M", "Q8_0", "Q6_K"]) oxi(OX, `inter/gguf:${q}`);
  check("gguf repo: identical layout", JSON.stringify(layout(JS, "inter/gguf")) === JSON.stringify(layout(OX, "inter/gguf")),
        JSON.stringify([layout(JS, "inter/gguf"), layout(OX, "inter/gguf")]));
  await hub.snapshotDownload({ repo: "inter/hf", hubUrl, cacheDir: JS });
  const r = oxi(OX, "inter/hf");
  check("hf repo: pull ok", r.status === 0, r.stderr);
  check("hf repo: identical layout", JSON.stringify(layout(JS, "inter/hf")) === JSON.stringify(layout(OX, "inter/hf")),
        JSON.stringify([layout(JS, "inter/hf"), layout(OX, "inter/hf")]));

  // 2. oxinfer reads huggingface.js's cache, offline and online, without transfers.
  const snapJs = await hub.snapshotDownload({ repo: "inter/gguf2", hubUrl, cacheDir: JS });
  await get("__reset");
  let p = oxi(JS, "inter/gguf2:Q6_K", "--offline");
  check("oxinfer offline on a huggingface.js cache", p.status === 0 &&
        p.stdout.trim() === path.join(snapJs, "Q6_K/m-Q6_K-00001-of-00002.gguf"), p.stdout + p.stderr);
  p = oxi(JS, "inter/gguf2:Q8_0");
  check("oxinfer online on a huggingface.js cache", p.status === 0 && p.stdout.trim() === path.join(snapJs, "m-Q8_0.gguf"),
        p.stdout + p.stderr);
  check("... no file transferred", (await transfers()).length === 0, JSON.stringify(await get("__stats")));

  // 3. huggingface.js reads oxinfer's cache without transfers.
  p = oxi(OX, "inter/hf2");
  check("oxinfer pull hf2", p.status === 0, p.stderr);
  await get("__reset");
  for (const f of ["config.json", "tokenizer.json", "model.safetensors"]) {
    const got = await hub.downloadFileToCacheDir({ repo: "inter/hf2", path: f, hubUrl, cacheDir: OX, revision: "main" });
    check(`huggingface.js finds oxinfer's ${f}`, got === path.join(p.stdout.trim(), f), got);
  }
  check("... no file transferred", (await transfers()).length === 0, JSON.stringify(await get("__stats")));
} catch (e) {
  console.log("FAIL - " + (e.stack ?? e));
  fails++;
} finally {
  await fetch(`${hubUrl}/__shutdown`).catch(() => {});
  server.kill();
}
console.log(`hub interop: ${fails} failure(s)`);
process.exit(fails ? 1 : 0);
