// Child processes for the e2e scripts: run() returns spawnSync's result (stdout/stderr as text,
// up to 256 MiB), must() also throws with both streams when the exit status is not 0.
import { spawnSync } from "node:child_process";

export function run(cmd, args, opts = {}) {
  const r = spawnSync(cmd, args, { encoding: "utf8", maxBuffer: 1 << 28, ...opts });
  if (r.error) throw r.error;
  return r;
}

export function must(cmd, args, opts = {}) {
  const r = run(cmd, args, opts);
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")} failed (${r.status}):\n${r.stdout}\n${r.stderr}`);
  return r;
}
