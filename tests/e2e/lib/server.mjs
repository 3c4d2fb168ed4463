// Shared by the server e2e tests: a free loopback port, and `oxinfer serve` started and waited for
// until /health says ready (only 503 "loading" is accepted before that).
import { spawn } from "node:child_process";
import net from "node:net";
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
