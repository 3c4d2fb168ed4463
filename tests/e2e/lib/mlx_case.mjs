// Shared by the MLX checkpoint tests (tests/e2e/mlx_*.test.mjs; docs/format.md "MLX checkpoints").
// prepare(case): oxi-gen writes a synthetic HF checkpoint; tests/e2e/lib/mlx_checkpoint.py (numpy,
// the independent reference) writes from it an MLX-style directory (mx.quantize's documented affine
// arithmetic and packing, mlx-lm's sanitised names/layouts, config "quantization" with per-module
// overrides) and the same HF checkpoint holding numpy's dequantisation of those weights; the latter
// → f32 GGUF → llama.cpp (node-llama-cpp) greedy is the reference.
// Skips (exit 0) without numpy or node-llama-cpp.
import { run, must } from "../proc.mjs";
import { runJsonSteps } from "./run_json.mjs";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
export const work = process.env.OXI_WORK_DIR ?? fs.mkdtempSync(path.join(os.tmpdir(), "mlxe2e-"));
const gen = process.env.OXI_GEN ?? path.join(root, "build/release/tools/gen/oxi-gen");
export const oxinfer = process.env.OXINFER ?? path.join(root, "build/release/apps/cli/oxinfer");
export const nlc = process.env.NLC_DIR ?? path.join(root, "tools/node");
export const shared = process.env.OXI_SHARED_DIR ?? path.join(root, "..", "shared");
export const py = fs.existsSync("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
export const N = 24;
fs.mkdirSync(work, { recursive: true });

export function skipIfMissing() {
  if (run(py, ["-c", "import numpy"]).status !== 0) {
    console.log("SKIP: numpy missing (python3-numpy; scripts/setup.sh installs it)");
    process.exit(0);
  }
  if (!fs.existsSync(path.join(nlc, "node_modules", "node-llama-cpp"))) {
    console.log("SKIP: node-llama-cpp missing");
    process.exit(0);
  }
}

function promptTokens(n, seed, base, span) {
  let s = seed >>> 0;
  const out = [];
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out.push(base + (s % span));
  }
  return out;
}
export const qwenPrompt = (n, seed) => promptTokens(n, seed, 0, 151643);
export const gemmaPrompt = (n, seed) => [2, ...promptTokens(n - 1, seed, 7000, 250000)];

export function oxiGreedy(model, toks, env = {}) {
  const r = must(oxinfer, ["run", "-m", model, "--tokens", toks.join(","), "-n", String(N), "--temp", "0", "--json",
    "--top-logprobs", "5", "--ignore-eos", "-t", "2", "-c", String(toks.length + N + 16)],
  { env: { ...process.env, OXI_GEMMA4_GGML_THREADS: "2", ...env } });
  return runJsonSteps(r.stdout);
}

// llama.cpp greedy; opts.flash: "off" or undefined (its default), opts.f32kv: f32 KV cache, FA off.
export function llamaGreedy(gguf, toks, outFile, opts = {}) {
  const args = opts.f32kv
    ? [path.join(root, "tests/e2e/llama_greedy.mjs"), "--model", gguf, "--tokens", toks.join(","), "--n", String(N), "--top-k", "5",
      "--threads", "2", "--kv-type", "f32", "--flash-attn", "off", "--out", outFile]
    : [path.join(shared, "oracle", "llama_oracle.mjs"), "--model", gguf, "--tokens", toks.join(","), "--n", String(N), "--top-k", "5",
      "--no-bos", "--threads", "2", ...(opts.flash ? ["--flash-attn", opts.flash] : []), "--out", outFile];
  const r = run("node", args, { env: { ...process.env, NLC_DIR: nlc } });
  const j = fs.existsSync(outFile) ? JSON.parse(fs.readFileSync(outFile, "utf8")) : null;
  if (r.status !== 0 || !j || j.ok === false) throw new Error(`llama.cpp failed on ${gguf}: ${JSON.stringify(j?.error) ?? r.stderr}`);
  return j;
}

// Max |Δ logprob| over the top-5 entries both share, up to the first step where the greedy tokens
// part (that step included). parted: that step or -1. excluded: the tokens parted only because
// llama.cpp picked a token oxinfer's greedy never samples (an unused/control token: ours has it
// as its top logprob too) — the comparison ends there, it is not a disagreement. gap: llama.cpp's
// top1−top2 logprob gap at the parting step (a near-tie when within the tolerance, as
// tests/e2e/gemma4_oracle judges it).
export function diff(ours, ref) {
  let maxDiff = 0, shared5 = 0, parted = -1, excluded = false, gap = null;
  const n = Math.min(ours.steps.length, ref.steps.length);
  const perStep = [];
  for (let s = 0; s < n; s++) {
    const m = new Map(ours.steps[s].top.map((e) => [e.token, e.logprob]));
    let d = 0;
    for (const e of ref.steps[s].top) {
      if (!m.has(e.token)) continue;
      shared5++;
      d = Math.max(d, Math.abs(m.get(e.token) - e.logprob));
    }
    perStep.push(d);
    maxDiff = Math.max(maxDiff, d);
    if (ours.steps[s].token !== ref.steps[s].token) {
      parted = s;
      gap = ref.steps[s].top1_top2_gap ?? null;
      const top = [...ours.steps[s].top].sort((x, y) => y.logprob - x.logprob)[0];
      excluded = top?.token === ref.steps[s].token;
      break;
    }
  }
  return { maxDiff, shared5, parted, excluded, gap, n, perStep };
}

// Failures (strings) of an in-place comparison: tokens identical (up to an excluded token or a
// near-tie: llama.cpp's top1−top2 gap there within tol), Δ < tol.
export function judge(label, d, tol) {
  const f = [];
  const nearTie = d.gap != null && d.gap < tol;
  if (d.parted >= 0 && !d.excluded && !nearTie)
    f.push(`${label}: greedy tokens part at step ${d.parted} (llama.cpp's top1-top2 gap there ${d.gap})`);
  if (d.parted < 0 && d.n !== N) f.push(`${label}: ${d.n} steps, expected ${N}`);
  if (!(d.maxDiff < tol)) f.push(`${label}: max top-5 logprob diff ${d.maxDiff} >= ${tol}`);
  const steps = d.parted >= 0 ? d.parted + 1 : d.n;
  if (d.shared5 < 4 * steps) f.push(`${label}: top-5 sets disagree (${d.shared5} shared over ${steps} steps)`);
  return f;
}

const tok = {
  qwen35: { dir: "tok_qwen35", script: "tools/gen/extract_tokenizer.mjs", template: "testdata/templates/Qwen3.5-4B.jinja" },
  gemma4: { dir: "tok_gemma4", script: "tools/gen/extract_gemma4_tokenizer.mjs", template: "testdata/templates/google-gemma-4-31B-it.jinja" },
};

// c: {name, family, gen: [oxi-gen args], mlx: [mlx_checkpoint.py args], prompt, flash, noWant}
// → {hf, mlx, ref, refGguf, want (llama.cpp on the reference; null with noWant: files only)}
export function prepare(c) {
  const tk = tok[c.family];
  const tokDir = path.join(work, tk.dir);
  if (!fs.existsSync(path.join(tokDir, "tokenizer.json")))
    must("node", [path.join(root, tk.script), tokDir], { env: { ...process.env, NLC_DIR: nlc, OXI_SHARED_DIR: shared } });
  const hf = path.join(work, `${c.name}_hf`), mlx = path.join(work, `${c.name}_mlx`), ref = path.join(work, `${c.name}_ref`);
  fs.rmSync(hf, { recursive: true, force: true });
  must(gen, [...c.gen, "--out", hf, "--seed", String(40 + c.name.charCodeAt(0)), "--dtype", "f32", "--tokenizer-dir", tokDir,
    "--chat-template", path.join(shared, tk.template)]);
  must(py, [path.join(root, "tests/e2e/lib/mlx_checkpoint.py"), hf, mlx, ref, "--family", c.family, ...c.mlx]);
  const refGguf = path.join(work, `${c.name}_ref.f32.gguf`);
  must(oxinfer, ["convert", ref, "-o", refGguf, "--type", "f32"]);
  const want = c.noWant ? null : llamaGreedy(refGguf, c.prompt, path.join(work, `${c.name}_ref.json`), { flash: c.flash });
  return { hf, mlx, ref, refGguf, want };
}

// " (compared up to step k: …)" when the tokens parted without failing.
export function note(d) {
  if (d.parted < 0) return "";
  return ` (compared up to step ${d.parted}: ${d.excluded ? "llama.cpp took an unused token" : `near-tie, llama.cpp gap ${d.gap}`})`;
}

export function finish(report, failures, name) {
  console.log(report.join("\n"));
  if (failures.length) {
    console.error(failures.join("\n"));
    process.exit(1);
  }
  console.log(`${name}: ok`);
}
