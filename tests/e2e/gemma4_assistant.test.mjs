// Gemma 4's assistant drafter (issue 27; spec B.5) end to end on synthetic models (oxi-gen gemma4 +
// oxi-gen gemma4_assistant, the real 262,144-token vocabulary, random weights):
// - `oxinfer convert` writes the assistant as llama.cpp's gemma4-assistant GGUF: node-llama-cpp's
//   reader sees llama.cpp's keys (embedding_length_out = the target width, nextn_predict_layers =
//   block_count) and llama.cpp loads the file (with and without ordered embeddings);
// - the drafter's numerics against llama.cpp (independent reference): a small driver written
//   against llama.cpp's C API (llama_gemma4_draft.cpp, built from node-llama-cpp's bundled source
//   and its cached libraries) runs the assistant on the target's KV cache (ctx_other); our
//   drafter (oxi_models_tests' env-gated Gemma4.AssistantDumpForOracle) on the same GGUFs must give
//   the first step's logits within 0.05 and the same four chained greedy drafts, for prompts inside
//   and past the sliding window (16), on the E2B-like (PLE, KV sharing) and 26B-like (MoE, K = V)
//   targets;
// - `run -m TARGET -md ASSISTANT --spec draft` (drafts forced every step) gives the plain greedy
//   tokens and reports its draft counts; bench --spec none,draft runs;
// - serve -md --spec draft: the text of an undrafted request, draft counts in timings and /metrics;
// - refusals: the drafter as -m, -md with a file that is no assistant, --spec draft without -md
//   (run, and serve at start), a drafter for a target of another width.
import { run, must } from "./proc.mjs";
import { runJsonSteps } from "./lib/run_json.mjs";
import { startServer } from "./lib/server.mjs";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const work = process.env.OXI_WORK_DIR ?? fs.mkdtempSync(path.join(os.tmpdir(), "g4asst-"));
const gen = process.env.OXI_GEN ?? path.join(root, "build/release/tools/gen/oxi-gen");
const oxinfer = process.env.OXINFER ?? path.join(root, "build/release/apps/cli/oxinfer");
const modelsTests = process.env.OXI_MODELS_TESTS ?? path.join(root, "build/release/tests/oxi_models_tests");
const nlcDir = process.env.NLC_DIR ?? path.join(root, "tools/node");
const shared = process.env.OXI_SHARED_DIR ?? path.join(root, "..", "shared");
fs.mkdirSync(work, { recursive: true });
const nlc = await import(pathToFileURL(path.join(nlcDir, "node_modules/node-llama-cpp/dist/index.js")).href);

let failures = 0;
function check(cond, what) {
  console.log(`${cond ? "ok  " : "FAIL"} ${what}`);
  if (!cond) failures++;
}

const tokDir = path.join(work, "tokenizer");
if (!fs.existsSync(path.join(tokDir, "tokenizer.json")))
  must("node", [path.join(root, "tools/gen/extract_gemma4_tokenizer.mjs"), tokDir], { env: { ...process.env, NLC_DIR: nlcDir, OXI_SHARED_DIR: shared } });

// ---- llama.cpp's side: the driver, built against the cached llama.cpp libraries ----
const llamaBin = must("bash", [path.join(root, "scripts/build_llama_mtmd.sh")], { env: { ...process.env, NLC_DIR: nlcDir } }).stdout.trim();
const cache = path.resolve(path.dirname(llamaBin), "..", "..");
const driver = path.join(work, "llama_gemma4_draft");
const driverSrc = path.join(root, "tests/e2e/llama_gemma4_draft.cpp");
if (!fs.existsSync(driver) || fs.statSync(driver).mtimeMs < fs.statSync(driverSrc).mtimeMs) {
  const b = `${cache}/build`;
  must("g++", ["-std=c++17", "-O2", `-I${cache}/src/include`, `-I${cache}/src/ggml/include`, `-I${cache}/src/src`, driverSrc, "-o", driver,
    `${b}/src/libllama.a`, `${b}/ggml/src/libggml.a`, `${b}/ggml/src/libggml-cpu.a`, `${b}/ggml/src/libggml-base.a`, "-lpthread", "-ldl"]);
}

function prompt(n, seed) {
  const out = [2];  // <bos>
  let s = seed;
  for (let i = 1; i < n; ++i) {
    s = (s * 1103515245 + 12345) % 2147483648;
    out.push(300 + (s % 200000));
  }
  return out;
}

// (The 26B-like case checks one prompt, past the window, and skips bench: the test's time budget.)
const cases = [
  { name: "e2b", seed: 5, ordered: true, prompts: [10, 40], bench: true },
  { name: "26b", seed: 9, ordered: false, prompts: [40], bench: false },
];
for (const c of cases) {
  const hf = path.join(work, c.name), ahf = path.join(work, `${c.name}-assistant`);
  must(gen, ["gemma4", "--shape", c.name, "--out", hf, "--seed", String(c.seed), "--window", "16", "--tokenizer-dir", tokDir]);
  must(gen, ["gemma4_assistant", "--target", hf, "--out", ahf, "--seed", String(c.seed + 1), "--tokenizer-dir", tokDir,
    ...(c.ordered ? ["--ordered", "--centroids", "2048", "--centroid-top-k", "32"] : [])]);
  const target = path.join(work, `${c.name}.f32.gguf`), asst = path.join(work, `${c.name}-assistant.gguf`);
  must(oxinfer, ["convert", hf, "-o", target, "--type", "f32"]);
  must(oxinfer, ["convert", ahf, "-o", asst, "--type", "f32"]);

  // ---- the file, as llama.cpp reads it ----
  const info = await nlc.readGgufFileInfo(asst, { readTensorInfo: true });
  const meta = info.metadata["gemma4-assistant"] ?? {};
  const names = (info.fullTensorInfo ?? info.tensorInfo).map((t) => t.name);
  const tcfg = JSON.parse(fs.readFileSync(path.join(hf, "config.json"), "utf8")).text_config;
  check(info.metadata.general.architecture === "gemma4-assistant" && meta.block_count === 4 && meta.nextn_predict_layers === 4 &&
    meta.embedding_length_out === tcfg.hidden_size && meta.attention?.shared_kv_layers === 4,
    `${c.name}: gemma4-assistant keys (block_count 4 = nextn_predict_layers, embedding_length_out ${tcfg.hidden_size})`);
  check(names.includes("nextn.pre_projection.weight") && names.includes("nextn.post_projection.weight") && names.includes("token_embd.weight") &&
    !names.some((n) => n.includes("masked") || n.includes("attn_k")), `${c.name}: llama.cpp's tensor names, no K/V, no masked-embedding tensors`);
  const llama = await nlc.getLlama({ gpu: false, logLevel: "error" });
  let loaded = false;
  try {
    const m = await llama.loadModel({ modelPath: asst });
    loaded = true;
    await m.dispose();
  } catch (e) {
    console.log(`     llama.cpp: ${e.message}`);
  }
  check(loaded, `${c.name}: llama.cpp loads the assistant GGUF`);

  // ---- the drafter's numerics against llama.cpp ----
  for (const n of c.prompts) {
    const toks = prompt(n, c.seed * 100 + n).join(",");
    const lj = path.join(work, `${c.name}-${n}-llama.json`), oj = path.join(work, `${c.name}-${n}-ours.json`);
    must(driver, [target, asst, toks, "4", lj]);
    must(modelsTests, ["--gtest_filter=Gemma4.AssistantDumpForOracle"], {
      env: { ...process.env, OXI_G4A_TARGET: target, OXI_G4A_DRAFT: asst, OXI_G4A_TOKENS: toks, OXI_G4A_K: "4", OXI_G4A_OUT: oj } });
    const L = JSON.parse(fs.readFileSync(lj, "utf8")), O = JSON.parse(fs.readFileSync(oj, "utf8"));
    let diff = 0, scale = 0;
    for (let i = 0; i < L.first_logits.length; ++i) {
      diff = Math.max(diff, Math.abs(L.first_logits[i] - O.first_logits[i]));
      scale = Math.max(scale, Math.abs(L.first_logits[i]));
    }
    console.log(`     ${c.name} prompt ${n}: first-step logits max |diff| ${diff.toExponential(2)} (scale ${scale.toFixed(2)}); drafts llama.cpp ${L.drafts} ours ${O.drafts}`);
    check(L.target_token === O.target_token && O.first_logits.length === L.first_logits.length && diff < 0.05,
      `${c.name} prompt ${n} (${n > 16 ? "past" : "inside"} the window): first-step logits within 0.05 of llama.cpp's`);
    check(JSON.stringify(L.drafts) === JSON.stringify(O.drafts), `${c.name} prompt ${n}: the four chained greedy drafts are llama.cpp's`);
  }

  // ---- greedy with drafting == plain, counts reported; bench ----
  // f32 matrices in ggml's orders allow no exact verify steps (docs/speculative.md): the runs use
  // one summation order for every batch size (OXI_GEMMA4_GGML_MM=0), plain and drafted alike.
  const env = { ...process.env, OXI_GEMMA4_GGML_MM: "0" };
  const toks = prompt(40, c.seed).join(",");
  const gen1 = (args) => {
    const r = must(oxinfer, ["run", "-m", target, ...args, "--tokens", toks, "-n", "40", "--temp", "0", "--ignore-eos", "-t", "2", "--json",
      "--top-logprobs", "1"], { env });
    const m = /speculative: (\d+) of (\d+) drafts accepted in (\d+) verify steps/.exec(r.stderr);
    return { tokens: runJsonSteps(r.stdout).generated_tokens, spec: m };
  };
  const plain = gen1(["--spec", "none"]);
  const drafted = gen1(["-md", asst, "--spec", "draft", "--draft-min", "3", "--draft-max", "3"]);
  const auto = gen1(["-md", asst]);
  const tk = (r) => JSON.stringify(r.tokens);
  console.log(`     ${c.name}: --spec draft ${drafted.spec ? drafted.spec.slice(1).join("/") : "none"} (accepted/drafted/verify steps)`);
  check(plain.tokens.length === 40 && tk(drafted) === tk(plain) && drafted.spec && Number(drafted.spec[2]) > 30, `${c.name}: run --spec draft (3 drafts per step, past the window) gives the plain greedy tokens`);
  check(tk(auto) === tk(plain), `${c.name}: run -md (auto) gives the plain greedy tokens`);
  if (!c.bench) continue;
  // serve: a request that drafts (2 per step, forced) returns the text of one that does not
  // (speculative.n_max 0), with llama-server's draft counts in its timings and in /metrics.
  const srv = await startServer(oxinfer, target, ["-md", asst, "--spec", "draft", "--draft-min", "2", "--draft-max", "2",
    "--chat-template-file", path.join(shared, "testdata/templates/google-gemma-4-31B-it.jinja")], { env: { OXI_GEMMA4_GGML_MM: "0" } });
  try {
    const ask = async (nmax) => (await (await fetch(`${srv.base}/v1/completions`, { method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ prompt: "A prompt that runs past the sliding window of sixteen tokens, to see the drafter read the ring.",
        max_tokens: 24, temperature: 0, "speculative.n_max": nmax, "speculative.n_min": nmax }) })).json());
    const off = await ask(0), on = await ask(2);
    const metrics = await (await fetch(`${srv.base}/metrics`)).text();
    check(off.choices[0].text === on.choices[0].text && on.timings.draft_n > 0 && off.timings.draft_n === 0 &&
      /oxinfer_draft_tokens_total [1-9]/.test(metrics), `${c.name}: serve -md --spec draft: the undrafted text, ${on.timings.draft_n} drafts in timings and /metrics`);
  } finally {
    srv.proc.kill();
  }
  const b = must(oxinfer, ["bench", "-m", target, "-md", asst, "--spec", "none,draft", "--draft-max", "3", "-n", "16", "-r", "1", "-t", "2", "-o", "json"], { env });
  const rows = JSON.parse(b.stdout);
  check(rows.length === 2 && rows.every((r) => r.avg_ts > 0) && rows[1].spec === "draft",
    `${c.name}: bench --spec none,draft runs (${rows.map((r) => `${r.test} ${Number(r.avg_ts).toFixed(1)} t/s, ${r.n_accepted}/${r.n_drafted} drafts`).join("; ")})`);
}

// ---- refusals ----
const target = path.join(work, "e2b.f32.gguf"), asst = path.join(work, "e2b-assistant.gguf");
const base = ["--tokens", "2,300,400", "-n", "2", "-t", "2"];
const r1 = run(oxinfer, ["run", "-m", asst, ...base]);
check(r1.status === 1 && /assistant drafter is not a model of its own/.test(r1.stderr), "the drafter as -m: exit 1, says to pass it with -md");
const r2 = run(oxinfer, ["run", "-m", target, "-md", target, ...base]);
check(r2.status === 1 && /not a Gemma 4 assistant drafter/.test(r2.stderr), "-md with a file that is no assistant: exit 1");
const r3 = run(oxinfer, ["run", "-m", target, "--spec", "draft", ...base]);
check(r3.status === 1 && /needs a draft model/.test(r3.stderr), "--spec draft without -md: exit 1");
const r5 = run(oxinfer, ["serve", "-m", target, "--spec", "draft", "--port", "0", "-t", "2", "--chat-template-file",
  path.join(shared, "testdata/templates/google-gemma-4-31B-it.jinja")], { timeout: 60000 });
check(r5.status === 1 && /--spec draft: no draft model/.test(r5.stderr), "serve --spec draft without -md: refuses to start (exit 1)");
const wide = path.join(work, "wide");
must(gen, ["gemma4", "--shape", "31b", "--hidden", "96", "--out", wide, "--seed", "3", "--window", "16", "--tokenizer-dir", tokDir]);
const r4 = run(oxinfer, ["run", "-m", wide, "-md", asst, ...base]);
check(r4.status === 1 && /does not fit this model/.test(r4.stderr), `a drafter for another target: exit 1 naming the mismatch (${(r4.stderr.match(/does not fit[^\n]*/) ?? [""])[0]})`);

console.log(failures ? `${failures} check(s) failed` : "all checks passed");
process.exit(failures ? 1 : 0);
