#!/usr/bin/env node
// llama.cpp (node-llama-cpp, CPU) greedy decode with a chosen KV-cache type and attention path,
// for checks that need settings the shared oracle (../shared/oracle/llama_oracle.mjs) does not
// expose. Output JSON has the oracle's shape: prompt_tokens, generated_tokens, steps[{step, token,
// top1_top2_gap, top[{token, logit, logprob}]}], min_top1_top2_gap, optional prompt_topk, settings.
// Logprobs are the exact log-softmax over the full vocabulary (double), argmax ties → smallest id.
//
//   node llama_greedy.mjs --model M.gguf --tokens 2,10,20 [--n 32] [--top-k 5] [--threads 2]
//        [--kv-type f16|f32] [--ctk f16|f32|q8_0] [--ctv f16|f32|q8_0] [--flash-attn on|off|auto]
//        [--all-logits] [--out FILE]
//   --ctk / --ctv set K's and V's cache types apart (llama.cpp's -ctk / -ctv; default --kv-type).
//   --prompt-file F instead of --tokens: the prompt is F's text, tokenized by llama.cpp (special
//   tokens parsed, nothing added). Output `text` too: the generated tokens up to the first
//   end-of-generation token, detokenized by llama.cpp.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

function parse(argv) {
  const o = { n: 32, topK: 5, threads: 2, kvType: "f16", flashAttn: "auto", allLogits: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    switch (a) {
      case "--model": o.model = v(); break;
      case "--tokens": o.tokens = v().split(",").filter(Boolean).map(Number); break;
      case "--prompt-file": o.promptFile = v(); break;
      case "--n": o.n = Number(v()); break;
      case "--top-k": o.topK = Number(v()); break;
      case "--threads": o.threads = Number(v()); break;
      case "--kv-type": o.kvType = v(); break;
      case "--ctk": o.ctk = v(); break;
      case "--ctv": o.ctv = v(); break;
      case "--flash-attn": o.flashAttn = v(); break;
      case "--all-logits": o.allLogits = true; break;
      case "--out": o.out = v(); break;
      default: throw new Error(`unknown argument ${a}`);
    }
  }
  if (!o.model || !(o.tokens?.length || o.promptFile)) throw new Error("--model and --tokens (or --prompt-file) are required");
  if (o.tokens && o.tokens.some((t) => !Number.isInteger(t) || t < 0)) throw new Error("--tokens must be non-negative integers");
  if (!["f16", "f32"].includes(o.kvType)) throw new Error("--kv-type must be f16 or f32");
  o.ctk ??= o.kvType;
  o.ctv ??= o.kvType;
  if (![o.ctk, o.ctv].every((t) => ["f16", "f32", "q8_0"].includes(t))) throw new Error("--ctk / --ctv must be f16, f32 or q8_0");
  if (!["on", "off", "auto"].includes(o.flashAttn)) throw new Error("--flash-attn must be on, off or auto");
  if (!(o.n >= 1) || !(o.topK >= 2)) throw new Error("--n must be ≥ 1 and --top-k ≥ 2");
  return o;
}

function top(logits, k) {
  // logits: Map token → logit (node-llama-cpp returns it sorted by logit, descending)
  const e = [...logits.entries()];
  const max = e[0][1];
  let sum = 0;
  for (const [, l] of e) sum += Math.exp(l - max);
  const lse = max + Math.log(sum);
  let argmax = e[0][0];
  for (const [t, l] of e) if (l === max && t < argmax) argmax = t;
  return { argmax, gap: e[0][1] - e[1][1], top: e.slice(0, k).map(([token, logit]) => ({ token, logit, logprob: logit - lse })) };
}

async function main() {
  const o = parse(process.argv.slice(2));
  const dir = process.env.NLC_DIR ?? process.cwd();
  const entry = path.join(dir, "node_modules", "node-llama-cpp", "dist", "index.js");
  if (!fs.existsSync(entry)) throw new Error(`node-llama-cpp not found at ${entry} (set NLC_DIR)`);
  const { getLlama, LlamaLogLevel } = await import(pathToFileURL(entry).href);
  const logs = [];
  const llama = await getLlama({ gpu: false, build: "never", maxThreads: o.threads, logLevel: LlamaLogLevel.info,
    logger: (level, m) => { logs.push(`[${level}] ${m}`); } });
  const model = await llama.loadModel({ modelPath: o.model, gpuLayers: 0 });
  if (o.promptFile) o.tokens = [...model.tokenize(fs.readFileSync(o.promptFile, "utf8"), true)];
  const kvK = o.ctk.toUpperCase(), kvV = o.ctv.toUpperCase();
  const ctxSize = Math.max(512, Math.ceil((o.tokens.length + o.n + 1) / 256) * 256);
  const flash = o.flashAttn === "on" ? true : o.flashAttn === "off" ? false : "auto";
  const context = await model.createContext({ contextSize: ctxSize, batchSize: Math.min(512, ctxSize), threads: o.threads, sequences: 1,
    flashAttention: flash, seed: 0, experimentalKvCacheKeyType: kvK, experimentalKvCacheValueType: kvV });
  const result = { tool: "llama_greedy.mjs", model: path.resolve(o.model), prompt_tokens: o.tokens,
    settings: { kv_type: o.kvType, kv_type_k: context.kvCacheKeyType, kv_type_v: context.kvCacheValueType,
      flash_attention: context.flashAttention, ctx: context.contextSize, batch: context.batchSize, threads: o.threads } };
  try {
    const seq = context.getSequence();
    const gen = { generateNext: { logits: true } };
    const last = o.tokens.length - 1;
    const out = await seq.controlledEvaluate(o.tokens.map((t, i) => (o.allLogits || i === last ? [t, gen] : t)));
    if (o.allLogits) result.prompt_topk = o.tokens.map((t, i) => ({ pos: i, token: t, top: top(out[i].next.logits, o.topK).top }));
    let logits = out[last].next.logits;
    const steps = [], generated = [];
    for (let i = 0; i < o.n; i++) {
      const s = top(logits, o.topK);
      steps.push({ step: i, token: s.argmax, top1_top2_gap: s.gap, top: s.top });
      generated.push(s.argmax);
      if (i === o.n - 1) break;
      const r = await seq.controlledEvaluate([[s.argmax, gen]]);
      logits = r[0].next.logits;
    }
    result.generated_tokens = generated;
    const end = generated.findIndex((t) => model.isEogToken(t));
    result.text = model.detokenize(end < 0 ? generated : generated.slice(0, end));
    result.steps = steps;
    result.min_top1_top2_gap = Math.min(...steps.map((s) => s.top1_top2_gap));
    const fa = logs.map((l) => /Flash Attention (enabled|disabled)/i.exec(l)).filter(Boolean).pop();
    result.settings.flash_attention_resolved = fa ? fa[1].toLowerCase() === "enabled" : null;
    const kvLine = logs.filter((l) => /KV self size|K \(f|V \(f/.test(l)).slice(-2);
    result.settings.kv_log = kvLine;
    result.ok = true;
  } finally {
    await context.dispose();
    await model.dispose();
    await llama.dispose();
  }
  return result;
}

main().then((r) => {
  const s = JSON.stringify(r, null, 1) + "\n";
  const i = process.argv.indexOf("--out");
  if (i > 0) fs.writeFileSync(process.argv[i + 1], s); else process.stdout.write(s);
}).catch((e) => {
  process.stderr.write(`llama_greedy: ${e?.stack ?? e}\n`);
  process.exitCode = 1;
});
