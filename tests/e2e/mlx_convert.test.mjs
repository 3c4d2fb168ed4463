// `oxinfer convert` of an MLX checkpoint, and bad MLX input (docs/format.md "MLX checkpoints";
// setup in tests/e2e/lib/mlx_case.mjs: Qwen 3.5 dense, 4 bits, groups of 64, bf16 scales).
//  - convert --type f32 → llama.cpp: the same logprobs as numpy's dequantisation (the reference
//    f32 GGUF) to 1e-5 — the converted values are numpy's;
//  - convert with no --type (Q8_0 for MLX checkpoints) → llama.cpp: the same logprobs (1e-5) and
//    tokens as llama.cpp's own quantizer (llama_model_quantize, Q8_0) applied to the reference;
//    the distance of that Q8_0 file from the f32 reference is reported;
//  - bits=3, group_size=48, mode=mxfp4 and a scales tensor of the wrong shape: inspect, run and
//    convert each exit 1 with one error line naming the problem.
import { prepare, llamaGreedy, diff, finish, skipIfMissing, qwenPrompt, work, oxinfer, py, root, shared, nlc } from "./lib/mlx_case.mjs";
import { run, must } from "./proc.mjs";
import fs from "node:fs";
import path from "node:path";

skipIfMissing();
const failures = [], report = [];
const c = { name: "cv", family: "qwen35", gen: ["qwen35", "--hidden", "128", "--layers", "4", "--hk", "2", "--hv", "4"],
  mlx: ["--bits", "4", "--group", "64", "--scale-dtype", "bf16"], prompt: qwenPrompt(20, 3), flash: "off" };
const t0 = Date.now();
const p = prepare(c);

const f32 = path.join(work, "cv_mlx.f32.gguf");
must(oxinfer, ["convert", p.mlx, "-o", f32, "--type", "f32"]);
const d32 = diff(llamaGreedy(f32, c.prompt, path.join(work, "cv_mlx_f32.json"), { flash: "off" }), p.want);
if (d32.parted >= 0 || !(d32.maxDiff < 1e-5)) failures.push(`convert --type f32: Δ ${d32.maxDiff}, tokens part at ${d32.parted}`);

const q8 = path.join(work, "cv_mlx.default.gguf");
const cv = must(oxinfer, ["convert", p.mlx, "-o", q8]);
if (!/Q8_0/.test(cv.stderr)) failures.push(`convert default: not Q8_0 (${cv.stderr.trim()})`);
const refQ8 = path.join(work, "cv_ref.llama_q8_0.gguf");
must(py, [path.join(shared, "oracle", "quantize_llama.py"), p.refGguf, refQ8, "Q8_0", "--threads", "2"], { env: { ...process.env, NLC_DIR: nlc } });
const wantQ8 = llamaGreedy(refQ8, c.prompt, path.join(work, "cv_ref_q8.json"), { flash: "off" });
const d8 = diff(llamaGreedy(q8, c.prompt, path.join(work, "cv_mlx_q8.json"), { flash: "off" }), wantQ8);
if (d8.parted >= 0 || !(d8.maxDiff < 1e-5)) failures.push(`convert default (Q8_0) vs llama-quantize Q8_0: Δ ${d8.maxDiff}, tokens part at ${d8.parted}`);
const dq = diff(wantQ8, p.want);
report.push(`convert f32: Δ ${d32.maxDiff.toExponential(2)}; default (Q8_0) vs llama.cpp's Q8_0 of the reference: Δ ${d8.maxDiff.toExponential(2)}` +
  ` (that Q8_0 vs the f32 reference: Δ ${dq.maxDiff.toExponential(2)}, tokens ${dq.parted < 0 ? "identical" : `part at step ${dq.parted}`})`);

// Bad input.
const edit = (name, fn) => {
  const d = path.join(work, `cv_bad_${name}`);
  fs.rmSync(d, { recursive: true, force: true });
  fs.cpSync(p.mlx, d, { recursive: true });
  const cfgPath = path.join(d, "config.json");
  const cfg = JSON.parse(fs.readFileSync(cfgPath, "utf8"));
  fn(cfg.quantization);
  delete cfg.quantization_config;
  fs.writeFileSync(cfgPath, JSON.stringify(cfg));
  return d;
};
const corrupt = path.join(work, "cv_bad_scales");
must(py, [path.join(root, "tests/e2e/lib/mlx_checkpoint.py"), p.hf, corrupt, path.join(work, "cv_bad_ref"), "--family", c.family, ...c.mlx,
  "--corrupt-scales"]);
const bad = [
  ["bits=3", edit("bits3", (q) => { q.bits = 3; }), /bits=3/],
  ["group_size=48", edit("g48", (q) => { q.group_size = 48; }), /group_size=48/],
  ["mode=mxfp4", edit("mode", (q) => { q.mode = "mxfp4"; }), /mode "mxfp4"/],
  ["scales of the wrong shape", corrupt, /scales have shape/],
];
for (const [label, dir, re] of bad) {
  for (const cmd of [["inspect", dir], ["run", "-m", dir, "--tokens", "1", "-n", "1"], ["convert", dir, "-o", path.join(work, "bad.gguf")]]) {
    const r = run(oxinfer, cmd);
    const errLines = r.stderr.split("\n").filter((l) => /error/.test(l));
    if (r.status !== 1 || !re.test(r.stderr) || errLines.length !== 1)
      failures.push(`bad input (${label}) ${cmd[0]}: exit ${r.status}, stderr ${JSON.stringify(r.stderr.slice(0, 300))}`);
  }
}
report.push(`bad input: ${bad.length} cases × inspect/run/convert [${((Date.now() - t0) / 1000).toFixed(1)} s total]`);
finish(report, failures, "mlx_convert");
