#!/usr/bin/env node
// llama.cpp's aggregate generation throughput with N concurrent greedy streams (through
// node-llama-cpp, CPU only), the counterpart of `oxinfer bench -npl`: for each N, ONE context with
// N sequences; every sequence gets its own short prompt of pseudo-random ids (prefilled, not
// timed), then G decode steps in which every sequence evaluates one token and samples the next
// greedily. The N sequences' generators are advanced together (Promise.all), so node-llama-cpp
// queues all N one-token evaluations before it dispatches, and decodes them as one llama_batch
// (one llama_decode per step; `batches_per_step` in the output checks it).
// Aggregate t/s = N * G / seconds of the G decode steps.
//
//   node scripts/bench/llama_batched_bench.mjs --model M.gguf [--threads 2] [--npl 1,2,4,8,16]
//        [--pp 32] [--tg 128] [--reps 1] [--flash-attn auto|on|off] [--out file.json] [--verbose]
// Needs NLC_DIR (a directory with node_modules/node-llama-cpp; default tools/node of this repo).
// Prints one JSON object: per N the samples, median and min/max of aggregate t/s.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));

// The value of option a as a non-negative integer (throws naming the option otherwise).
export function int(a, v) {
    if (!/^[0-9]+$/.test(v ?? "")) throw new Error(`${a} needs a non-negative integer (got '${v}')`);
    return parseInt(v, 10);
}

function parseArgs(argv) {
    const o = { threads: 2, npl: [1, 2, 4, 8, 16], pp: 32, tg: 128, reps: 1, flashAttn: "auto", verbose: false };
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i], v = () => argv[++i];
        switch (a) {
            case "--model": o.model = v(); break;
            case "--threads": o.threads = int(a, v()); break;
            case "--npl": o.npl = (v() ?? "").split(",").map((x) => int(a, x)); break;
            case "--pp": o.pp = int(a, v()); break;
            case "--tg": o.tg = int(a, v()); break;
            case "--reps": o.reps = int(a, v()); break;
            case "--flash-attn": o.flashAttn = v(); break;
            case "--out": o.out = v(); break;
            case "--verbose": o.verbose = true; break;
            case "-h": case "--help":
                console.log(fs.readFileSync(fileURLToPath(import.meta.url), "utf8").split("\n").slice(1, 15)
                    .map((l) => l.replace(/^\/\/ ?/, "")).join("\n"));
                process.exit(0);
            default: throw new Error(`unknown argument ${a}`);
        }
    }
    if (!o.model) throw new Error("--model is required");
    if (o.npl.some((n) => n < 1)) throw new Error("--npl: every N must be >= 1");
    if (o.pp < 1 || o.tg < 1 || o.reps < 1) throw new Error("--pp, --tg and --reps must be >= 1");
    return o;
}

export async function loadNodeLlamaCpp() {
    const dir = process.env.NLC_DIR ?? path.join(HERE, "..", "..", "tools", "node");
    const pkgDir = path.join(dir, "node_modules", "node-llama-cpp");
    const entry = path.join(pkgDir, "dist", "index.js");
    if (!fs.existsSync(entry)) throw new Error(`node-llama-cpp not found at ${entry} (set NLC_DIR)`);
    const version = JSON.parse(fs.readFileSync(path.join(pkgDir, "package.json"), "utf8")).version;
    return { nlc: await import(pathToFileURL(entry).href), version };
}

export function median(xs) {
    const s = [...xs].sort((a, b) => a - b);
    return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

// 64-bit LCG, high bits (the generator oxinfer bench and llama_bench.mjs use for their ids)
export function lcg(seed) {
    let x = BigInt(seed) & 0xffffffffffffffffn;
    return () => { x = (x * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn; return Number(x >> 33n); };
}

export function cpuModel() {
    try {
        return /model name\s*:\s*(.*)/.exec(fs.readFileSync("/proc/cpuinfo", "utf8"))?.[1] ?? null;
    } catch { return null; }
}

async function main() {
    const o = parseArgs(process.argv.slice(2));
    const { nlc, version } = await loadNodeLlamaCpp();
    const { getLlama, LlamaLogLevel } = nlc;
    const logLines = [];
    const logger = (level, message) => {
        const m = String(message).replace(/\n$/, "");
        logLines.push(`[${level}] ${m}`);
        if (logLines.length > 2000) logLines.splice(0, logLines.length - 2000);
        if (o.verbose || level === "error" || level === "fatal") process.stderr.write(`[llama.cpp ${level}] ${m}\n`);
    };
    const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.info, logger, maxThreads: o.threads });
    const model = await llama.loadModel({ modelPath: o.model, gpuLayers: 0 });
    const embd = (model.fileInfo?.tensorInfo ?? []).find((t) => t.name === "token_embd.weight");
    const vocabLimit = Math.min(embd ? Number(embd.dimensions[1]) : 32000, 100000);
    const isSpecial = (t) => model.isEogToken(t) || t === model.tokens.bos || t === model.tokens.eos;
    const randTokens = (n, seed) => {
        const rnd = lcg(seed), out = [];
        while (out.length < n) { const t = rnd() % vocabLimit; if (!isSpecial(t)) out.push(t); }
        return out;
    };
    const filler = randTokens(1, 99)[0];

    const res = { tool: "llama_batched_bench.mjs", date: new Date().toISOString(), model: path.resolve(o.model),
        file_bytes: fs.statSync(o.model).size, model_type: model.typeDescription, node_llama_cpp: version,
        cpu: cpuModel(), threads: o.threads, n_prompt: o.pp, n_gen: o.tg, reps: o.reps, tests: [] };

    for (const n of o.npl) {
        // contextSize is per sequence in node-llama-cpp (the context gets n * contextSize cells)
        const perSeq = Math.ceil((o.pp + o.tg + 8) / 256) * 256;
        const ctx = await model.createContext({ sequences: n, contextSize: perSeq, batchSize: Math.max(512, n),
            threads: o.threads, flashAttention: o.flashAttn === "on" ? true : o.flashAttn === "off" ? false : "auto" });
        const seqs = Array.from({ length: n }, () => ctx.getSequence());
        const prompts = seqs.map((_, i) => randTokens(o.pp, 1000 + i));   // different ids per stream

        // count llama_decode calls: dispatchPendingBatch runs one per queued batch
        let dispatches = 0;
        const origDispatch = ctx.dispatchPendingBatch.bind(ctx);
        ctx.dispatchPendingBatch = (...a) => { dispatches++; return origDispatch(...a); };

        // one run: prefill prompt[0..pp-1) of every sequence (untimed), then `steps` decode steps
        // that start from each prompt's last id; returns { seconds, batchesPerStep }
        async function run(steps) {
            await Promise.all(seqs.map((s) => s.clearHistory()));
            await Promise.all(seqs.map((s, i) => o.pp > 1 ? s.evaluateWithoutGeneratingNewTokens(prompts[i].slice(0, -1)) : null));
            const gens = seqs.map((s, i) => s.evaluate([prompts[i].at(-1)], { temperature: 0, yieldEogToken: true }));
            const last = new Array(n).fill(undefined);
            const d0 = dispatches;
            const t0 = performance.now();
            for (let step = 0; step < steps; step++) {
                const rs = await Promise.all(gens.map((g, i) => g.next(last[i] !== undefined && model.isEogToken(last[i]) ? filler : undefined)));
                rs.forEach((r, i) => {
                    if (r.done) throw new Error(`sequence ${i} stopped after ${step} steps`);
                    last[i] = r.value;
                });
            }
            const seconds = (performance.now() - t0) / 1000;
            const batches = dispatches - d0;
            await Promise.all(gens.map((g) => g.return?.()));
            return { seconds, batchesPerStep: batches / steps };
        }

        await run(Math.min(4, o.tg));   // warm-up
        const samples = [], bps = [];
        for (let r = 0; r < o.reps; r++) {
            const { seconds, batchesPerStep } = await run(o.tg);
            samples.push(n * o.tg / seconds);
            bps.push(batchesPerStep);
        }
        res.tests.push({ n_parallel: n, test: `tg${o.tg} x${n}`, n_gen: o.tg, n_prompt: o.pp,
            median_ts: +median(samples).toFixed(3), min_ts: +Math.min(...samples).toFixed(3),
            max_ts: +Math.max(...samples).toFixed(3), samples_ts: samples.map((x) => +x.toFixed(3)),
            batches_per_step: bps.map((x) => +x.toFixed(3)),
            context: { sequences: n, context_size: ctx.contextSize, batch_size: ctx.batchSize,
                flash_attention: ctx.flashAttention, threads: ctx.currentThreads } });
        process.stderr.write(`llama_batched_bench: N=${n} tg${o.tg}: ${median(samples).toFixed(2)} t/s aggregate` +
            ` (${bps.map((x) => x.toFixed(2)).join(",")} batches/step)\n`);
        await ctx.dispose();
    }
    res.llama_cpp_warnings = logLines.filter((l) => /^\[(warn|error)\]/.test(l)).slice(0, 10);
    await model.dispose();
    await llama.dispose();
    return res;
}

// Run as a script (the helpers above are also imported by llama_depth_bench.mjs).
if (process.argv[1] && import.meta.url === pathToFileURL(path.resolve(process.argv[1])).href) main().then((r) => {
    const s = JSON.stringify(r, null, 1) + "\n";
    const i = process.argv.indexOf("--out");
    if (i > 0) fs.writeFileSync(process.argv[i + 1], s);
    process.stdout.write(s);
}).catch((e) => {
    process.stdout.write(JSON.stringify({ ok: false, error: String(e?.message ?? e), stack: e?.stack }, null, 1) + "\n");
    process.exitCode = 1;
});
