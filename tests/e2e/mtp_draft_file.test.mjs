// The MTP head as its own GGUF (issue 27: "an MTP-only sibling GGUF"). llama.cpp's converter can
// publish a Qwen 3.5 checkpoint as two files: the model without its MTP block (--no-mtp) and the
// head alone (--mtp, named mtp-*.gguf: block n_layer's tensors beside token_embd / output_norm /
// output, block_count = n_layer + 1, nextn_predict_layers = 1), which llama.cpp loads as the draft
// model of --spec-type draft-mtp. oxinfer writes both (`convert --no-mtp --mtp F`) and reads the
// head file with -md. Checked here on a synthetic Qwen 3.5 (oxi-gen, untied output, f32):
// - the files against llama.cpp's rules, read by node-llama-cpp's own GGUF reader: metadata keys,
//   the tensor set, each tensor's shape, type and bytes equal to the one-file conversion's;
// - llama.cpp (node-llama-cpp) runs the --no-mtp file with the one-file model's greedy tokens;
// - `oxinfer run -m NO_MTP -md MTP --spec mtp` drafts every step (--draft-min = --draft-max) and
//   gives llama.cpp's greedy tokens, with the draft counts of the one-file model;
// - -hf with --spec mtp fetches the repo's mtp-*.gguf beside the model, -hfd names it (fake Hub);
// - refusals: -md with a file that has no MTP block, a head of another model's shape, a missing file.
import { spawn } from "node:child_process";
import { run, must } from "./proc.mjs";
import { runJsonSteps } from "./lib/run_json.mjs";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..", "..");
const work = process.env.OXI_WORK_DIR ?? fs.mkdtempSync(path.join(os.tmpdir(), "mtpfile-"));
const gen = process.env.OXI_GEN ?? path.join(root, "build/release/tools/gen/oxi-gen");
const oxinfer = process.env.OXINFER ?? path.join(root, "build/release/apps/cli/oxinfer");
const nlcDir = process.env.NLC_DIR ?? path.join(root, "tools/node");
const shared = process.env.OXI_SHARED_DIR ?? path.join(root, "..", "shared");
fs.rmSync(work, { recursive: true, force: true });
fs.mkdirSync(work, { recursive: true });
const nlc = await import(pathToFileURL(path.join(nlcDir, "node_modules/node-llama-cpp/dist/index.js")).href);

let failures = 0;
function check(cond, what) {
  console.log(`${cond ? "ok  " : "FAIL"} ${what}`);
  if (!cond) failures++;
}

const tokDir = path.join(work, "tok");
must("node", [path.join(root, "tools/gen/extract_tokenizer.mjs"), tokDir], { env: { ...process.env, NLC_DIR: nlcDir } });
const template = path.join(shared, "testdata/templates/Qwen3.5-4B.jinja");
function makeModel(name, extra) {
  const hf = path.join(work, name);
  must(gen, ["qwen35", "--out", hf, "--seed", "21", "--tokenizer-dir", tokDir, "--chat-template", template, "--dtype", "f32",
    "--layers", "4", "--hk", "2", "--hv", "4", "--untied", "--mtp", ...extra]);
  return hf;
}
const L = 4;
const hf = makeModel("hf", ["--hidden", "96"]);
const full = path.join(work, "full.gguf"), noMtp = path.join(work, "model.gguf"), mtp = path.join(work, "mtp-model.gguf");
must(oxinfer, ["convert", hf, "-o", full, "--type", "f32"]);
must(oxinfer, ["convert", hf, "-o", noMtp, "--type", "f32", "--no-mtp", "--mtp", mtp]);

// ---- the files, read by node-llama-cpp ----
async function info(file) {
  const r = await nlc.readGgufFileInfo(file, { readTensorInfo: true });
  const tensors = new Map((r.fullTensorInfo ?? r.tensorInfo).map((t) => [t.name, t]));
  return { r, tensors, arch: r.metadata.general.architecture, meta: r.metadata[r.metadata.general.architecture] };
}
const F = await info(full), T = await info(noMtp), M = await info(mtp);
const blk = `blk.${L}.`;
check(F.meta.block_count === L + 1 && F.meta.nextn_predict_layers === 1, "one-file model: block_count n_layer + 1, nextn_predict_layers 1");
check(T.meta.block_count === L && T.meta.nextn_predict_layers === undefined, "--no-mtp: block_count n_layer, no nextn_predict_layers");
check(M.meta.block_count === L + 1 && M.meta.nextn_predict_layers === 1, "--mtp: block_count n_layer + 1, nextn_predict_layers 1");
const fullNames = [...F.tensors.keys()];
const wantT = fullNames.filter((n) => !n.startsWith(blk)).sort();
const wantM = fullNames.filter((n) => n.startsWith(blk) || ["token_embd.weight", "output_norm.weight", "output.weight"].includes(n)).sort();
check(wantM.some((n) => n === `${blk}nextn.eh_proj.weight`) && wantM.includes("output.weight"), "the one-file model has the head and an output matrix");
check(JSON.stringify([...T.tensors.keys()].sort()) === JSON.stringify(wantT), `--no-mtp: every tensor but ${blk}* (${wantT.length})`);
check(JSON.stringify([...M.tensors.keys()].sort()) === JSON.stringify(wantM), `--mtp: ${blk}* + token_embd, output_norm, output (${wantM.length})`);
// Bytes: the same tensor data as the one-file conversion (f32 file: 4 bytes per element; the
// reader's fileOffset is absolute).
function bytesOf(I, file, name) {
  const t = I.tensors.get(name);
  const n = 4 * t.dimensions.map(Number).reduce((x, y) => x * y, 1);
  const buf = Buffer.alloc(n);
  const fd = fs.openSync(file, "r");
  try {
    fs.readSync(fd, buf, 0, n, Number(t.fileOffset));
  } finally {
    fs.closeSync(fd);
  }
  return buf;
}
const same = (A, fa, B, fb, n) => bytesOf(A, fa, n).equals(bytesOf(B, fb, n));
const allF32 = [...M.tensors.values(), ...T.tensors.values()].every((t) => t.ggmlType === 0);
check(allF32, "f32 conversion: every tensor F32");
if (allF32) {
  check(wantM.every((n) => same(M, mtp, F, full, n)), "--mtp tensors: bytes equal to the one-file model's");
  check(wantT.every((n) => same(T, noMtp, F, full, n)), "--no-mtp tensors: bytes equal to the one-file model's");
}

// ---- llama.cpp runs the --no-mtp file as the one-file model ----
const toks = [9707, 11, 1246, 525, 498, 3351, 30, 358, 1079, 7373, 264, 1273, 13];
function llama(gguf, out) {
  must("node", [path.join(root, "tests/e2e/llama_greedy.mjs"), "--model", gguf, "--tokens", toks.join(","), "--n", "24",
    "--top-k", "5", "--threads", "2", "--flash-attn", "off", "--out", out], { env: { ...process.env, NLC_DIR: nlcDir } });
  return JSON.parse(fs.readFileSync(out, "utf8")).generated_tokens;
}
const refFull = llama(full, path.join(work, "llama_full.json"));
const refNoMtp = llama(noMtp, path.join(work, "llama_nomtp.json"));
check(refNoMtp.length === 24 && JSON.stringify(refNoMtp) === JSON.stringify(refFull), "llama.cpp: the --no-mtp file gives the one-file model's greedy tokens");

// ---- oxinfer with -md: forced drafts (3 per step) ----
function ours(args, env = process.env) {
  const r = must(oxinfer, ["run", ...args, "--tokens", toks.join(","), "-n", "24", "--temp", "0", "--json", "--top-logprobs", "1",
    "--ignore-eos", "-t", "2", "--spec", "mtp", "--draft-min", "3", "--draft-max", "3"], { env });
  const m = /speculative: (\d+) of (\d+) drafts accepted in (\d+) verify steps/.exec(r.stderr);
  return { tokens: runJsonSteps(r.stdout).generated_tokens, spec: m ? m.slice(1).join("/") : "none", stderr: r.stderr };
}
const a = ours(["-m", full]);
const b = ours(["-m", noMtp, "-md", mtp]);
console.log(`     one file: ${a.spec}; -md: ${b.spec} (accepted/drafted/verify steps)`);
check(JSON.stringify(b.tokens) === JSON.stringify(refFull), "-m NO_MTP -md MTP --spec mtp: llama.cpp's greedy tokens");
// Random weights accept next to nothing, so this shows the head runs from the -md file at every
// step (its tensors' bytes are checked equal above), not that its drafts are good.
check(a.spec !== "none" && a.spec === b.spec, "-md drafts every step with the same counts as the one-file model's head");
const c = ours(["-m", hf, "-md", mtp]);
check(JSON.stringify(c.tokens) === JSON.stringify(refFull) && c.spec === a.spec, "-m HF_DIR -md MTP: the same tokens and drafts");

// ---- from the Hub (tests/hub/fake_hub.py): -hf with --spec mtp fetches the repo's mtp-*.gguf
// beside the model (as llama.cpp's downloader does for draft-mtp); -hfd names the head's repo ----
const repos = path.join(work, "repos");
fs.mkdirSync(path.join(repos, "o", "qwen"), { recursive: true });
fs.copyFileSync(noMtp, path.join(repos, "o", "qwen", "qwen-F32.gguf"));
fs.copyFileSync(mtp, path.join(repos, "o", "qwen", "mtp-qwen-F32.gguf"));
const hubProc = spawn("python3", [path.join(root, "tests/hub/fake_hub.py"), "serve", repos, "--idle", "120"], { stdio: ["ignore", "pipe", "inherit"] });
try {
  const port = await new Promise((resolve, reject) => {
    let buf = "";
    const t = setTimeout(() => reject(new Error("fake hub did not start")), 10000);
    hubProc.stdout.on("data", (d) => {
      buf += d;
      const m = buf.match(/PORT (\d+)/);
      if (m) {
        clearTimeout(t);
        resolve(Number(m[1]));
      }
    });
  });
  const cache = path.join(work, "hf-cache");
  const env = { ...process.env, HF_HUB_CACHE: cache, HF_ENDPOINT: `http://127.0.0.1:${port}`, HF_TOKEN: "", HF_HUB_OFFLINE: "" };
  const listed = () => fs.existsSync(cache) ? fs.readdirSync(cache, { recursive: true }).map(String).filter((f) => f.endsWith(".gguf")) : [];
  must(oxinfer, ["run", "-hf", "o/qwen:F32", "--tokens", toks.join(","), "-n", "4", "--spec", "none", "-t", "2"], { env });
  check(listed().some((f) => f.endsWith("qwen-F32.gguf")) && !listed().some((f) => f.includes("mtp-")), "-hf without --spec mtp: the model only, no MTP file fetched");
  const h = ours(["-hf", "o/qwen:F32"], env);
  check(/MTP head from the repo/.test(h.stderr) && listed().some((f) => f.endsWith("mtp-qwen-F32.gguf")), "-hf with --spec mtp: the repo's mtp-qwen-F32.gguf fetched and used");
  check(JSON.stringify(h.tokens) === JSON.stringify(refFull) && h.spec === a.spec, "-hf --spec mtp: llama.cpp's tokens, the one-file model's draft counts");
  const hd = ours(["-hf", "o/qwen:F32", "-hfd", "o/qwen:F32"], env);
  check(JSON.stringify(hd.tokens) === JSON.stringify(refFull) && hd.spec === a.spec, "-hfd org/name: the MTP head from the Hub");
} finally {
  hubProc.kill();
}

// ---- refusals ----
function refused(args, re, what) {
  const r = run(oxinfer, ["run", ...args, "--tokens", "1,2,3", "-n", "2", "--spec", "mtp"]);
  check(r.status === 1 && re.test(r.stderr), `${what} → exit 1 (${r.status}: ${r.stderr.trim().split("\n").pop()})`);
}
refused(["-m", noMtp, "-md", noMtp], /not an MTP file/, "-md with a file without an MTP block");
const other = makeModel("other", ["--hidden", "64"]);
const otherMtp = path.join(work, "mtp-other.gguf");
must(oxinfer, ["convert", other, "-o", path.join(work, "other.gguf"), "--type", "f32", "--no-mtp", "--mtp", otherMtp]);
refused(["-m", noMtp, "-md", otherMtp], /does not fit the model/, "-md with another model's head");
refused(["-m", noMtp, "-md", path.join(work, "missing.gguf")], /no such file or directory|cannot open/, "-md with a missing file");
const r = run(oxinfer, ["run", "-m", noMtp, "--tokens", "1,2,3", "-n", "2", "--spec", "mtp"]);
check(r.status !== 0 && /not available/.test(r.stderr), "--spec mtp on the --no-mtp file without -md is refused");

if (failures) {
  console.error(`${failures} check(s) failed`);
  process.exit(1);
}
console.log("mtp draft file: all checks passed");
