#!/usr/bin/env node
// llama.cpp's pp / tg at depth (through node-llama-cpp, CPU only), the counterpart of
// `oxinfer bench -d D`: per repetition the sequence is cleared and D pseudo-random ids are
// evaluated first (not timed), then either N prompt ids in one evaluation (ppN, timed) or N greedy
// single-token decode steps (tgN, timed), as llama-bench's -d does. Optional KV cache types
// (llama.cpp's -ctk / -ctv: f16, f32, q8_0) and flash attention.
//
//   node scripts/bench/llama_depth_bench.mjs --model M.gguf [--threads 2] [--depth 4096] [--pp 128]
//        [--tg 32] [--reps 2] [--ctk f16] [--ctv f16] [--flash-attn auto|on|off] [--out file.json]
// Needs NLC_DIR (default tools/node of this repo). Prints one JSON object with the t/s per rep.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { loadNodeLlamaCpp, median, lcg, cpuModel, int } from "./llama_batched_bench.mjs";

function parseArgs(argv) {
    const o = { threads: 2, depth: 4096, pp: 128, tg: 32, reps: 2, ctk: "f16", ctv: "f16", flashAttn: "auto" };
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i], v = () => argv[++i];
        switch (a) {
            case "--model": o.model = v(); break;
            case "--threads": o.threads = int(a, v()); break;
            case "--depth": o.depth = int(a, v()); break;
            case "--pp": o.pp = int(a, v()); break;
            case "--tg": o.tg = int(a, v()); break;
            case "--reps": o.reps = int(a, v()); break;
            case "--ctk": o.ctk = v(); break;
            case "--ctv": o.ctv = v(); break;
            case "--flash-attn": o.flashAttn = v(); break;
            case "--out": o.out = v(); break;
            case "-h": case "--help":
                console.log(fs.readFileSync(fileURLToPath(import.meta.url), "utf8").split("\n").slice(1, 10)
                    .map((l) => l.replace(/^\/\/ ?/, "")).join("\n"));
                process.exit(0);
            default: throw new Error(`unknown argument ${a}`);
        }
    }
    if (!o.model) throw new Error("--model is required");
    return o;
}

const GGML_TYPE = { f32: "F32", f16: "F16", q8_0: "Q8_0" };

async function main() {
    const o = parseArgs(process.argv.slice(2));
    const { nlc, version } = await loadNodeLlamaCpp();
    const { getLlama, LlamaLogLevel } = nlc;
    const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.warn, maxThreads: o.threads });
    const model = await llama.loadModel({ modelPath: o.model, gpuLayers: 0 });
    const ctxSize = Math.ceil((o.depth + Math.max(o.pp, o.tg) + 64) / 256) * 256;
    const ctx = await model.createContext({ contextSize: ctxSize, batchSize: 512, threads: o.threads, sequences: 1,
        flashAttention: o.flashAttn === "on" ? true : o.flashAttn === "off" ? false : "auto",
        experimentalKvCacheKeyType: GGML_TYPE[o.ctk], experimentalKvCacheValueType: GGML_TYPE[o.ctv] });
    const seq = ctx.getSequence();
    const T = model.tokens;
    const nVocab = model.fileInfo?.metadata?.[model.fileInfo.metadata.general.architecture]?.vocab_size ?? 150000;
    const rnd = lcg(4242);
    const isSpecial = (t) => t === T.bos || t === T.eos || t === T.eot || model.isEogToken(t);
    const ids = (n) => {
        const out = [];
        while (out.length < n) { const t = rnd() % Math.min(Number(nVocab), 100000); if (!isSpecial(t)) out.push(t); }
        return out;
    };
    const depthIds = ids(o.depth), ppIds = ids(Math.max(1, o.pp)), filler = ids(1)[0];
    async function toDepth() {
        await seq.clearHistory();
        if (o.depth > 0) await seq.evaluateWithoutGeneratingNewTokens(depthIds);
    }
    async function pp() {
        await toDepth();
        const t0 = performance.now();
        await seq.evaluateWithoutGeneratingNewTokens(ppIds.slice(0, o.pp));
        return performance.now() - t0;
    }
    async function tg(n) {
        await toDepth();
        const t0 = performance.now();
        const it = seq.evaluate([filler], { temperature: 0, yieldEogToken: true });
        let r = await it.next(), count = 0;
        while (!r.done) {
            if (++count >= n) break;
            r = await it.next(model.isEogToken(r.value) ? filler : undefined);
        }
        const dt = performance.now() - t0;
        await it.return?.();
        return dt;
    }
    const res = { tool: "llama_depth_bench.mjs", date: new Date().toISOString(), model: path.resolve(o.model),
        node_llama_cpp: version, cpu: cpuModel(), threads: o.threads, depth: o.depth, ctx: ctx.contextSize,
        cache_type_k: o.ctk, cache_type_v: o.ctv, flash_attention: ctx.flashAttention, reps: o.reps };
    for (const [name, n, fn] of [["pp", o.pp, () => pp()], ["tg", o.tg, () => tg(o.tg)]]) {
        if (n <= 0) continue;
        const tps = [];
        for (let r = 0; r < o.reps; r++) tps.push(n / ((await fn()) / 1000));
        res[name] = { n, median_tps: +median(tps).toFixed(2), samples_tps: tps.map((x) => +x.toFixed(2)) };
    }
    await ctx.dispose();
    await model.dispose();
    await llama.dispose();
    return res;
}

main().then((r) => {
    const s = JSON.stringify(r, null, 1) + "\n";
    const i = process.argv.indexOf("--out");
    if (i > 0) fs.writeFileSync(process.argv[i + 1], s);
    process.stdout.write(s);
}).catch((e) => {
    process.stdout.write(JSON.stringify({ ok: false, error: String(e?.message ?? e) }, null, 1) + "\n");
    process.exitCode = 1;
});
