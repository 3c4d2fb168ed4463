// `oxinfer quantize` vs llama.cpp's own quantizer (libllama llama_model_quantize through
// shared/oracle/quantize_llama.py) on the same bf16 GGUF: for each of the nine recipes the issue
// names (Q4_K_M Q4_K_S Q5_K_M Q5_K_S Q6_K Q8_0 Q4_0 Q3_K_M IQ4_XS) on a Qwen 3.5 0.8B-shaped model
// (24 layers, hybrid: 3 Gated-DeltaNet blocks per attention block, tied embeddings, MTP block) and a
// Gemma 4 E2B-shaped one (35 layers, 4 sliding : 1 global, the last 20 sharing KV, per-layer
// embeddings of 35 × 8 = 280 columns: no block fits, F16), plus Q4_K_M on a Qwen 3.5 MoE (8
// experts: the Q8_0 attention rule, ffn_down layers read from names). The layer counts are the real
// models' (the recipes' "more bits" layers depend on them); widths are small:
//   * every tensor has the type llama.cpp gave it, and the same bytes;
//   * general.file_type is llama.cpp's.
// Small widths (hidden 256; Qwen ffn 352 so ffn_down rows take the 32-block fallbacks) keep it
// bounded; the two quantisers run side by side, one thread each.
// Also: `--allow-requantize` (Q8_0 → Q4_K_M) equals llama.cpp's requantisation of the same file;
// without the flag it is refused (exit 1, names the flag) and leaves nothing behind; an unknown
// TYPE exits 1 naming the accepted ones; an HF folder as IN converts first (same bytes as the
// GGUF route); llama.cpp (node-llama-cpp) loads our Q4_K_M file and generates.
// QUANTIZE_RECIPES=a,b runs a subset of the recipes ("edge": the hard-rows case).
import { run, must } from "./proc.mjs";
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { compareTensors, ggufTensors } from "./lib/gguf_tensors.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const work = process.env.OXI_WORK_DIR ?? fs.mkdtempSync(path.join(os.tmpdir(), "quantizee2e-"));
const gen = process.env.OXI_GEN ?? path.join(root, "build/release/tools/gen/oxi-gen");
const oxinfer = process.env.OXINFER ?? path.join(root, "build/release/apps/cli/oxinfer");
const nlc = process.env.NLC_DIR ?? path.join(root, "tools/node");
const shared = process.env.OXI_SHARED_DIR ?? path.join(root, "..", "shared");
const quantizeLlama = path.join(shared, "oracle", "quantize_llama.py");
fs.mkdirSync(work, { recursive: true });

const RECIPES = ["Q4_K_M", "Q4_K_S", "Q5_K_M", "Q5_K_S", "Q6_K", "Q8_0", "Q4_0", "Q3_K_M", "IQ4_XS"];
const FTYPE = { Q4_0: 2, Q8_0: 7, Q3_K_M: 12, Q4_K_S: 14, Q4_K_M: 15, Q5_K_S: 16, Q5_K_M: 17, Q6_K: 18, IQ4_XS: 30 };
const only = process.env.QUANTIZE_RECIPES ? new Set(process.env.QUANTIZE_RECIPES.split(",")) : null;

const cases = [
  { name: "qwen08", family: "qwen35", recipes: RECIPES, args: ["--hidden", "256", "--layers", "24", "--heads", "8", "--kv-heads", "2",
    "--head-dim", "64", "--hk", "2", "--hv", "4", "--dk", "64", "--dv", "64", "--ffn", "352", "--tied", "--mtp"] },
  { name: "gemma_e2b", family: "gemma4", recipes: RECIPES, args: ["--shape", "e2b", "--hidden", "256", "--layers", "35", "--kv-shared", "20",
    "--ple", "8", "--ffn", "256", "--full-every", "5", "--window", "16"] },
  { name: "qwen_moe", family: "qwen35", recipes: ["Q4_K_M"], args: ["--moe", "--experts", "8", "--top-k", "2", "--hidden", "256",
    "--layers", "4", "--heads", "4", "--kv-heads", "2", "--head-dim", "64", "--hk", "2", "--hv", "4", "--dk", "64", "--dv", "64",
    "--expert-ffn", "128", "--shared-ffn", "256", "--untied"] },
];

function tokenizerFor(family) {
  const dir = path.join(work, `tokenizer-${family}`);
  if (!fs.existsSync(path.join(dir, "tokenizer.json"))) {
    const script = family === "gemma4" ? "extract_gemma4_tokenizer.mjs" : "extract_tokenizer.mjs";
    must("node", [path.join(root, "tools/gen", script), dir], { env: { ...process.env, NLC_DIR: nlc, OXI_SHARED_DIR: shared } });
  }
  const template = path.join(shared, "testdata/templates", family === "gemma4" ? "google-gemma-4-31B-it.jinja" : "Qwen3.5-4B.jinja");
  return { dir, template };
}

// Runs a command to completion without blocking the other one (the two quantisers in parallel).
function spawnP(cmd, args, env = process.env) {
  return new Promise((resolve, reject) => {
    const p = spawn(cmd, args, { env, stdio: ["ignore", "pipe", "pipe"] });
    let out = "", err = "";
    p.stdout.on("data", (d) => (out += d));
    p.stderr.on("data", (d) => (err += d));
    p.on("error", reject);
    p.on("close", (status) => (status === 0 ? resolve({ out, err }) : reject(new Error(`${cmd} ${args.join(" ")} failed (${status}):\n${out}\n${err.slice(-4000)}`))));
  });
}
const llamaEnv = { ...process.env, NLC_DIR: nlc };
const ours = (inp, out, t, extra = []) => spawnP(oxinfer, ["quantize", inp, out, t, "-t", "1", "--quiet", ...extra]);
const theirs = (inp, out, t, extra = []) => spawnP("/usr/bin/python3", [quantizeLlama, inp, out, t, "--threads", "1", ...extra], llamaEnv);

// Copy of a bf16 GGUF whose first rows of three matrices are hard cases for the quantisers' scale
// searches: zeros, constants, 1e-20 noise, ±7 spikes over zeros or 1e-3, one-signed rows, integers,
// heavy tails, half-zero rows, ±1e-8 — and row 4 gaussian with σ = `big` (3e4 overflows Q4_1's f16 d).
function edgeRows(src, dst, big) {
  const buf = fs.readFileSync(src);
  const g = ggufTensors(src);
  fs.closeSync(g.fd);
  let seed = 5;
  const rnd = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
  const gauss = (s) => s * Math.sqrt(-2 * Math.log(rnd() + 1e-12)) * Math.cos(2 * Math.PI * rnd());
  const f = new Float32Array(1), u = new Uint32Array(f.buffer);
  for (const name of ["blk.0.ffn_gate.weight", "blk.0.ffn_up.weight", "blk.1.ffn_gate.weight"]) {
    const t = g.map.get(name);
    if (t.type !== 30) throw new Error(`${name} is not bf16`);
    const cols = t.ne[0];
    const rows = [(i) => 0, (i) => 0.37, (i) => -2.5, (i) => gauss(1e-20), (i) => gauss(big), (i) => (i % 64 === 5 ? 7 : 0),
      (i) => (i % 64 === 5 ? -7 : 1e-3), (i) => Math.abs(gauss(1)), (i) => -Math.abs(gauss(1)), (i) => Math.round(gauss(2)),
      (i) => 0.01 * Math.tan(Math.PI * (rnd() - 0.5)), (i) => (i < cols / 2 ? 0 : gauss(1)), (i) => 1e-8 * ((i % 3) - 1)];
    rows.forEach((fn, r) => {
      for (let i = 0; i < cols; i++) {
        f[0] = fn(i);
        buf.writeUInt16LE(u[0] >>> 16, t.off + 2 * (r * cols + i));
      }
    });
  }
  fs.writeFileSync(dst, buf);
}

// llama.cpp's requantisation (allow_requantize = true): the oracle's parameter struct and library
// loading, with that one field set.
const REQUANT_PY = `
import importlib.util, sys, ctypes as C, os
spec = importlib.util.spec_from_file_location("ql", sys.argv[1]); ql = importlib.util.module_from_spec(spec); spec.loader.exec_module(ql)
d = ql.LIB_DIR_DEFAULT
for dep in ("libggml-base.so", "libggml.v0.5.0.so"):
    if os.path.exists(os.path.join(d, dep)): C.CDLL(os.path.join(d, dep), mode=C.RTLD_GLOBAL)
lib = C.CDLL(os.path.join(d, "libllama.v0.5.0.so"), mode=C.RTLD_GLOBAL)
lib.llama_model_quantize_default_params.restype = ql.QuantizeParams
lib.llama_model_quantize.argtypes = [C.c_char_p, C.c_char_p, C.POINTER(ql.QuantizeParams)]
lib.llama_model_quantize.restype = C.c_uint32
lib.llama_backend_init()
p = lib.llama_model_quantize_default_params(); p.nthread = 1; p.ftype = ql.FTYPES[sys.argv[4]]; p.allow_requantize = True
sys.exit(lib.llama_model_quantize(sys.argv[2].encode(), sys.argv[3].encode(), C.byref(p)))
`;

const failures = [];
const report = [];
const t0 = Date.now();
for (const c of cases) {
  const f = (s) => path.join(work, `${c.name}.${s}`);
  const hf = f("hf");
  fs.rmSync(hf, { recursive: true, force: true });
  const tk = tokenizerFor(c.family);
  must(gen, [c.family, "--out", hf, "--seed", "31", "--dtype", "bf16", "--tokenizer-dir", tk.dir, "--chat-template", tk.template, ...c.args]);
  must(oxinfer, ["convert", hf, "-o", f("bf16.gguf"), "--type", "bf16"]);
  for (const t of c.recipes) {
    if (only && !only.has(t)) continue;
    const t1 = Date.now();
    await Promise.all([ours(f("bf16.gguf"), f(`ours.${t}.gguf`), t), theirs(f("bf16.gguf"), f(`llama.${t}.gguf`), t)]);
    const r = compareTensors(`${c.name} ${t}`, f(`ours.${t}.gguf`), f(`llama.${t}.gguf`));
    failures.push(...r.problems);
    const ftOurs = ggufTensors(f(`ours.${t}.gguf`)), ftRef = ggufTensors(f(`llama.${t}.gguf`));
    fs.closeSync(ftOurs.fd);
    fs.closeSync(ftRef.fd);
    const a = ftOurs.kv.get("general.file_type"), b = ftRef.kv.get("general.file_type");
    if (a !== b || a !== FTYPE[t]) failures.push(`${c.name} ${t}: general.file_type ${a}, llama.cpp's ${b}, expected ${FTYPE[t]}`);
    report.push({ case: c.name, recipe: t, types: r.types, type_diffs: r.typeDiffs, byte_diffs: r.byteDiffs,
      seconds: +((Date.now() - t1) / 1000).toFixed(1) });
    fs.rmSync(f(`ours.${t}.gguf`), { force: true });
    if (!(c.name === "qwen08" && t === "Q4_K_M") && !(c.name === "qwen08" && t === "Q8_0")) fs.rmSync(f(`llama.${t}.gguf`), { force: true });
  }
}

// Requantisation, refusals, HF input and llama.cpp loading our file, on the 0.8B-shaped model.
const f = (s) => path.join(work, `qwen08.${s}`);
if (!only || only.has("edge")) {
  // Hard rows, every quantiser on its own (--pure): same bytes as llama.cpp's.
  edgeRows(f("bf16.gguf"), f("edge.gguf"), 3e3);
  for (const t of ["Q3_K_S", "Q4_K_S", "Q5_K_S", "Q6_K", "IQ4_XS", "IQ4_NL", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"]) {
    await Promise.all([ours(f("edge.gguf"), f("edge.ours.gguf"), t, ["--pure"]), theirs(f("edge.gguf"), f("edge.llama.gguf"), t, ["--pure"])]);
    const r = compareTensors(`hard rows ${t} --pure`, f("edge.ours.gguf"), f("edge.llama.gguf"));
    failures.push(...r.problems);
    report.push({ case: "qwen08 hard rows", recipe: `${t} --pure`, types: r.types, type_diffs: r.typeDiffs, byte_diffs: r.byteDiffs });
  }
  // A scale beyond f16: llama.cpp refuses ("quantized data validation failed"); so do we, leaving nothing.
  edgeRows(f("bf16.gguf"), f("edge.gguf"), 3e4);
  const dir = path.join(work, "overflow");
  fs.rmSync(dir, { recursive: true, force: true });
  fs.mkdirSync(dir);
  const r = run(oxinfer, ["quantize", f("edge.gguf"), path.join(dir, "x.gguf"), "Q4_1", "--pure"]);
  const l = run("/usr/bin/python3", [quantizeLlama, f("edge.gguf"), path.join(work, "overflow.llama.gguf"), "Q4_1", "--pure"], { env: llamaEnv });
  if (l.status === 0) failures.push("llama.cpp accepted the Q4_1 overflow case (the test's premise is wrong)");
  if (r.status !== 1 || !r.stderr.includes("validation failed")) failures.push(`Q4_1 overflow: exit ${r.status}, stderr ${r.stderr.trim()}`);
  if (fs.readdirSync(dir).length) failures.push(`Q4_1 overflow left ${fs.readdirSync(dir).join(", ")} behind`);
  for (const x of ["edge.gguf", "edge.ours.gguf", "edge.llama.gguf"]) fs.rmSync(f(x), { force: true });
}
if (fs.existsSync(f("llama.Q8_0.gguf"))) {
  // without --allow-requantize: refused, clear message, no output and no temp file beside it
  const outDir = path.join(work, "refused");
  fs.rmSync(outDir, { recursive: true, force: true });
  fs.mkdirSync(outDir);
  const r = run(oxinfer, ["quantize", f("llama.Q8_0.gguf"), path.join(outDir, "x.gguf"), "Q4_K_M"]);
  if (r.status !== 1 || !/requantiz/i.test(r.stderr) || !r.stderr.includes("--allow-requantize"))
    failures.push(`requantize without the flag: exit ${r.status}, stderr ${r.stderr.trim()}`);
  if (fs.readdirSync(outDir).length) failures.push(`refused requantize left ${fs.readdirSync(outDir).join(", ")} behind`);
  // with it: the same tensors as llama.cpp's requantisation of the same Q8_0 file
  await Promise.all([ours(f("llama.Q8_0.gguf"), f("requant.ours.gguf"), "Q4_K_M", ["--allow-requantize"]),
    spawnP("/usr/bin/python3", ["-c", REQUANT_PY, quantizeLlama, f("llama.Q8_0.gguf"), f("requant.llama.gguf"), "Q4_K_M"], llamaEnv)]);
  const q = compareTensors("requantize Q8_0 → Q4_K_M", f("requant.ours.gguf"), f("requant.llama.gguf"));
  failures.push(...q.problems);
  report.push({ case: "qwen08", recipe: "Q8_0 → Q4_K_M --allow-requantize", types: q.types, type_diffs: q.typeDiffs, byte_diffs: q.byteDiffs });
}
{
  // unknown TYPE: exit 1 naming the accepted types, nothing written
  const out = path.join(work, "bad-type.gguf");
  const r = run(oxinfer, ["quantize", f("bf16.gguf"), out, "Q4_K_X"]);
  if (r.status !== 1 || !r.stderr.includes("Q4_K_X") || !r.stderr.includes("Q4_K_M") || !r.stderr.includes("IQ4_XS"))
    failures.push(`bad type: exit ${r.status}, stderr ${r.stderr.trim()}`);
  if (fs.existsSync(out)) failures.push("bad type left an output file");
  // a corrupt input: exit 1, no output or temp file left behind
  const bad = path.join(work, "corrupt.gguf");
  const badDir = path.join(work, "corrupt-out");
  fs.rmSync(badDir, { recursive: true, force: true });
  fs.mkdirSync(badDir);
  const bytes = fs.readFileSync(f("bf16.gguf"));
  fs.writeFileSync(bad, bytes.subarray(0, bytes.length >> 1));
  const r2 = run(oxinfer, ["quantize", bad, path.join(badDir, "x.gguf"), "Q4_K_M"]);
  if (r2.status !== 1 || !r2.stderr.includes("error")) failures.push(`truncated input: exit ${r2.status}, stderr ${r2.stderr.trim()}`);
  if (fs.readdirSync(badDir).length) failures.push(`truncated input left ${fs.readdirSync(badDir).join(", ")} behind`);
  fs.rmSync(bad, { force: true });
}
if (fs.existsSync(f("llama.Q4_K_M.gguf"))) {
  // HF folder as IN: converted, then quantised — the same tensors as the GGUF route
  const hfDir = path.join(work, "hf-out");
  fs.rmSync(hfDir, { recursive: true, force: true });
  fs.mkdirSync(hfDir);
  const r = must(oxinfer, ["quantize", f("hf"), path.join(hfDir, "q.gguf"), "q4_k_m", "-t", "2"]);
  if (!/\[\s*1\/\s*\d+\]/.test(r.stderr)) failures.push("quantize printed no [i/n] progress lines");
  const h = compareTensors("HF input Q4_K_M", path.join(hfDir, "q.gguf"), f("llama.Q4_K_M.gguf"));
  failures.push(...h.problems);
  if (fs.readdirSync(hfDir).length !== 1) failures.push(`HF input left ${fs.readdirSync(hfDir).join(", ")} (the intermediate GGUF must go)`);
  // llama.cpp loads our file and generates
  must(oxinfer, ["quantize", f("bf16.gguf"), f("ours.Q4_K_M.gguf"), "Q4_K_M", "--quiet"]);
  const out = path.join(work, "llama_gen.json");
  const g = run("node", [path.join(shared, "oracle", "llama_oracle.mjs"), "--model", f("ours.Q4_K_M.gguf"), "--tokens", "1,2,3,4",
    "--n", "4", "--top-k", "2", "--no-bos", "--threads", "2", "--fast-lse", "--flash-attn", "off", "--out", out], { env: llamaEnv });
  const j = fs.existsSync(out) ? JSON.parse(fs.readFileSync(out, "utf8")) : null;
  if (g.status !== 0 || !j || j.ok === false || (j.generated_tokens ?? []).length !== 4)
    failures.push(`llama.cpp did not load/generate from our Q4_K_M file: ${JSON.stringify(j?.error) ?? g.stderr.slice(-2000)}`);
}

console.log(JSON.stringify({ seconds: +((Date.now() - t0) / 1000).toFixed(1), report }, null, 1));
if (failures.length) {
  console.error(`${failures.length} problem(s):\n` + failures.slice(0, 60).join("\n"));
  process.exit(1);
}
console.log("quantize_oracle: ok");
