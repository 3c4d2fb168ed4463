// Shared by the server e2e tests: a free loopback port, and `oxinfer serve` started and waited for
// until /health says ready (only 503 "loading" is accepted before that).
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import assert from "node:assert/strict";

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => {
      const p = s.address().port;
      s.close(() => resolve(p));
    });
    s.on("error", reject);
  });
}

// Starts `oxinfer serve -m model --port P -c 2048 -t 2 ...extra` (P: `port`, else a free one;
// `env`: extra environment variables).
// Resolves with { proc, base, port, log() } once ready; throws with the server's stderr if it
// exits or is not ready within `timeoutMs`.
export async function startServer(oxinfer, model, extra = [], { port, timeoutMs = 120000, env = {} } = {}) {
  port = port ?? (await freePort());
  const args = ["serve", "-m", model, "--port", String(port), "-c", "2048", "-t", "2", ...extra];
  const proc = spawn(oxinfer, args, { stdio: ["ignore", "ignore", "pipe"], env: { ...process.env, ...env } });
  let log = "";
  proc.stderr.on("data", (d) => (log += d));
  const base = `http://127.0.0.1:${port}`;
  const t0 = Date.now();
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`server exited: ${log}`);
    try {
      const r = await fetch(`${base}/health`);
      if (r.status === 200) break;
      assert.equal(r.status, 503);  // only "loading" is allowed before ready
    } catch (e) {
      if (e.code === "ERR_ASSERTION") throw e;
    }
    if (Date.now() - t0 > timeoutMs) throw new Error("server did not become ready: " + log);
    await new Promise((r) => setTimeout(r, 100));
  }
  return { proc, base, port, log: () => log };
}

// The synthetic Qwen 3.5 model the server tests share (oxi-gen seed 7, hidden 64, 4 layers, the
// Qwen3.5-4B chat template), made afresh in `work` (emptied first); `extra`: more oxi-gen flags
// (e.g. --mtp). Returns the model directory.
export function makeQwenModel(work, extra = []) {
  const { NLC_DIR, OXI_GEN, OXI_SHARED_DIR } = process.env;
  fs.rmSync(work, { recursive: true, force: true });
  fs.mkdirSync(work, { recursive: true });
  const tokDir = path.join(work, "tok");
  const model = path.join(work, "qwen35");
  execFileSync("node", ["tools/gen/extract_tokenizer.mjs", tokDir], { env: { ...process.env, NLC_DIR }, stdio: "inherit" });
  execFileSync(OXI_GEN, ["qwen35", "--out", model, "--seed", "7", "--hidden", "64", "--layers", "4", "--tokenizer-dir", tokDir,
    "--chat-template", path.join(OXI_SHARED_DIR, "testdata/templates/Qwen3.5-4B.jinja"), ...extra], { stdio: "inherit" });
  return model;
}

// A synthetic Gemma 4 model (oxi-gen gemma4, E2B shape shrunk: hidden 256, 4 layers, seed 11, the
// gemma-4-31B-it chat template), made afresh in `work` (emptied first). Returns the model directory.
export function makeGemmaModel(work) {
  const { NLC_DIR, OXI_GEN, OXI_SHARED_DIR } = process.env;
  fs.rmSync(work, { recursive: true, force: true });
  fs.mkdirSync(work, { recursive: true });
  const tokDir = path.join(work, "tok");
  const model = path.join(work, "gemma4");
  execFileSync("node", ["tools/gen/extract_gemma4_tokenizer.mjs", tokDir], { env: { ...process.env, NLC_DIR }, stdio: "inherit" });
  execFileSync(OXI_GEN, ["gemma4", "--shape", "e2b", "--out", model, "--seed", "11", "--hidden", "256", "--layers", "4",
    "--kv-shared", "2", "--ple", "8", "--ffn", "256", "--full-every", "2", "--window", "16", "--tokenizer-dir", tokDir,
    "--chat-template", path.join(OXI_SHARED_DIR, "testdata/templates/google-gemma-4-31B-it.jinja")], { stdio: "inherit" });
  return model;
}

// llama-mtmd-cli's answer `name` from $work/ref_<name>.out (run with MTMD_TEST_RESPONSE_MARKER=
// "@@RESPONSE@@"), normalised by mtmdNorm: llama-mtmd-cli writes raw token bytes, the server one
// U+FFFD per invalid byte; the server's reasoning parser trims the text's ends.
export const mtmdNorm = (s) => s.replace(/\uFFFD+/g, "\uFFFD").trim();
export function mtmdReference(work, name) {
  const out = fs.readFileSync(path.join(work, `ref_${name}.out`), "utf8");
  if (!out.includes("@@RESPONSE@@")) throw new Error(`no response marker in llama-mtmd-cli's ${name} output`);
  return mtmdNorm(out.split("@@RESPONSE@@")[1]);
}

// Named checks: check(name, fn) runs one and prints ok/FAIL (only those whose name contains
// $OXI_TEST_ONLY when set); finish() prints the totals and exits 1 if any failed.
export function checks() {
  let passed = 0, failed = 0;
  const only = process.env.OXI_TEST_ONLY;
  return {
    async check(name, fn) {
      if (only && !name.includes(only)) return;
      const t0 = Date.now();
      try {
        await fn();
        passed++;
        console.log(`ok   ${name} (${Date.now() - t0} ms)`);
      } catch (e) {
        failed++;
        console.log(`FAIL ${name}: ${e.stack ?? e}`);
      }
    },
    finish() {
      console.log(`${passed} passed, ${failed} failed`);
      process.exit(failed ? 1 : 0);
    },
  };
}
