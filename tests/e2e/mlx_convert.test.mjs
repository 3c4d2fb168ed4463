// `oxinfer convert` of an MLX checkpoint, and bad MLX input (docs/format.md "MLX checkpoints";
// setup in tests/e2e/lib/mlx_case.mjs: Qwen 3.5 dense, 4 bits, groups of 64, bf16 scales).
//  - convert --type f32 → llama.cpp: the same logprobs as numpy's dequantisation (the reference
//    f32 GGUF) to 1e-5 — the converted values are numpy's;
//  - convert with no --type (Q8_0 for MLX checkpoints) → llama.cpp: the same logprobs (1e-5) and
//    tokens as llama.cpp's own quantizer (llama_model_quantize, Q8_0) applied to the reference;
//    the distance of that Q8_0 file from the f32 reference is reported;
//  - convert --type q4_1 (the MLX groups copied into Q4_1 blocks, convert/mlx_q4_1.h), for this
//    model and a second one with groups of 32 and f16 scales: every group exact (the count convert
//    prints), every Q4_1 tensor dequantised here (q·d + m in f32, from the block layout) equal bit
//    for bit to numpy's dequantisation (the reference GGUF's f32 tensor of the same name), every
//    other tensor equal to the reference's; and (this model) llama.cpp on the Q4_1 file against
//    oxinfer in place on the MLX directory: tokens identical (up to a near-tie), Δ < 0.3. The
//    weights being numpy's bit for bit, that distance is llama.cpp's: it rounds the activations to
//    Q8_1 for Q4_1 weights, which this random model amplifies (Q8_0's own noise above is 0.34);
//  - convert --type q4_1 of the plain HF reference: byte for byte llama-quantize's Q4_1 of it;
//  - bits=3, group_size=48, mode=mxfp4 and a scales tensor of the wrong shape: inspect, run and
//    convert each exit 1 with one error line naming the problem.
import { prepare, llamaGreedy, oxiGreedy, diff, judge, finish, skipIfMissing, qwenPrompt, work, oxinfer, py, root, shared, nlc } from "./lib/mlx_case.mjs";
import { ggufTensors, compareTensors, TYPE_NAME } from "./lib/gguf_tensors.mjs";
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

// --type q4_1: the MLX groups copied. `exactness` dequantises each Q4_1 block of `file` (f16 d at
// byte 0, f16 m at 2, byte 4 + j: input j in its low nibble, input j + 16 in its high one; value
// q·d + m in f32) and compares it bit for bit with the f32 tensor of the same name in `refFile`
// (numpy's dequantisation of the MLX weights); tensors of other types must equal the reference's.
const f16 = (h) => {
  const e = (h >> 10) & 31, m = h & 1023, s = h & 0x8000 ? -1 : 1;
  return e === 0 ? s * m * 2 ** -24 : e === 31 ? (m ? NaN : s * Infinity) : s * (1 + m / 1024) * 2 ** (e - 15);
};
function exactness(file, refFile) {
  const a = ggufTensors(file), b = ggufTensors(refFile);
  const out = { q41: 0, other: 0, bad: [] };
  try {
    for (const [name, t] of a.map) {
      const r = b.map.get(name);
      if (!r) { out.bad.push(`${name} not in the reference`); continue; }
      const buf = Buffer.alloc(t.nbytes), rb = Buffer.alloc(r.nbytes);
      fs.readSync(a.fd, buf, 0, buf.length, t.off);
      fs.readSync(b.fd, rb, 0, rb.length, r.off);
      if (t.type !== 3) {
        out.other++;
        if (t.type !== r.type || !buf.equals(rb)) out.bad.push(`${name} (${TYPE_NAME[t.type]}) differs from the reference`);
        continue;
      }
      out.q41++;
      if (r.type !== 0) { out.bad.push(`${name}: reference is ${TYPE_NAME[r.type]}, not F32`); continue; }
      const ref = new Float32Array(rb.buffer, rb.byteOffset, rb.length / 4);
      let diffs = 0, first = -1;
      for (let k = 0; k < buf.length / 20; k++) {
        const o = 20 * k, d = f16(buf.readUInt16LE(o)), m = f16(buf.readUInt16LE(o + 2));
        for (let j = 0; j < 32; j++) {
          const q = j < 16 ? buf[o + 4 + j] & 15 : buf[o + 4 + j - 16] >> 4;
          const v = Math.fround(Math.fround(q * d) + m);  // f32 product, f32 sum (double rounding is exact here)
          if (!Object.is(v, ref[32 * k + j]) && !(v === 0 && ref[32 * k + j] === 0)) { diffs++; if (first < 0) first = 32 * k + j; }
        }
      }
      if (diffs) out.bad.push(`${name}: ${diffs} values differ from numpy's (first at ${first})`);
    }
  } finally {
    fs.closeSync(a.fd);
    fs.closeSync(b.fd);
  }
  return out;
}
const t1 = Date.now();
const q41cases = [[c, p], (() => {
  const c2 = { name: "c2", family: "qwen35", gen: ["qwen35", "--hidden", "128", "--layers", "4", "--hk", "2", "--hv", "4"],
    mlx: ["--bits", "4", "--group", "32", "--scale-dtype", "f16"], prompt: qwenPrompt(20, 5), flash: "off" };
  return [c2, prepare({ ...c2, noWant: true })];  // exactness only (llama.cpp runs cost ~30 s each)
})()];
for (const [cc, pp] of q41cases) {
  const label = `q4_1 (${cc.mlx.join(" ")})`;
  const out = path.join(work, `${cc.name}_mlx.q4_1.gguf`);
  const r = must(oxinfer, ["convert", pp.mlx, "-o", out, "--type", "q4_1"]);
  const m = /Q4_1 from MLX 4-bit groups: (\d+) exact .* (\d+) requantised/.exec(r.stderr);
  if (!m || Number(m[2]) !== 0 || !(Number(m[1]) > 0)) failures.push(`${label}: counts ${m ? `${m[1]} exact, ${m[2]} requantised` : `missing (${r.stderr.trim()})`}`);
  const ex = exactness(out, pp.refGguf);
  if (ex.q41 < 10 || ex.bad.length) failures.push(`${label}: ${ex.q41} Q4_1 tensors; ${ex.bad.slice(0, 5).join("; ")}`);
  report.push(`${label}: ${m?.[1]} groups exact, ${m?.[2]} requantised; ${ex.q41} Q4_1 tensors equal numpy's values bit for bit, ` +
    `${ex.other} others equal`);
  if (!pp.want) continue;
  const llama = llamaGreedy(out, cc.prompt, path.join(work, `${cc.name}_mlx_q4_1.json`), { flash: "off" });
  const inplace = oxiGreedy(pp.mlx, cc.prompt);
  const dIn = diff(inplace, llama), dRef = diff(llama, pp.want);
  failures.push(...judge(`${label}: llama.cpp on the Q4_1 file vs oxinfer in place`, dIn, 0.3));
  report.push(`${label}: llama.cpp on it vs oxinfer in place: Δ ${dIn.maxDiff.toExponential(2)} (tokens ${dIn.parted < 0 ? "identical" : `part at step ${dIn.parted}`}),` +
    ` vs the f32 reference in llama.cpp: Δ ${dRef.maxDiff.toExponential(2)} (tokens ${dRef.parted < 0 ? "identical" : `part at step ${dRef.parted}`})`);
}
// Plain HF checkpoint: --type q4_1 is llama-quantize's Q4_1 recipe, byte for byte.
const hfQ41 = path.join(work, "cv_ref.q4_1.gguf"), refQ41 = path.join(work, "cv_ref.llama_q4_1.gguf");
must(oxinfer, ["convert", p.ref, "-o", hfQ41, "--type", "q4_1"]);
must(py, [path.join(shared, "oracle", "quantize_llama.py"), p.refGguf, refQ41, "Q4_1", "--threads", "2"], { env: { ...process.env, NLC_DIR: nlc } });
const cmp = compareTensors("HF convert --type q4_1 vs llama-quantize Q4_1", hfQ41, refQ41);
failures.push(...cmp.problems.slice(0, 8));
report.push(`HF convert --type q4_1 vs llama-quantize Q4_1: ${JSON.stringify(cmp.types)}, ${cmp.byteDiffs} tensors differ` +
  ` [q4_1 checks ${((Date.now() - t1) / 1000).toFixed(1)} s]`);

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
