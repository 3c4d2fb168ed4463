// oxinfer inspect --json on GGUF files written by llama.cpp, checked against node-llama-cpp's own
// GGUF reader (readGgufFileInfo): the llama.cpp vocab GGUFs in shared/testdata, and a K-quant file
// made by llama.cpp's quantizer (shared/oracle/quantize_llama.py) from a small F32 "llama" GGUF
// that this script writes itself, straight from the GGUF spec (independent of oxinfer's writer).
import fs from "node:fs";
import path from "node:path";
import { spawnSync } from "node:child_process";
import { pathToFileURL } from "node:url";

const OXINFER = process.env.OXINFER;
const NLC_DIR = process.env.NLC_DIR;
const SHARED = process.env.OXI_SHARED_DIR;
const WORK = process.env.OXI_WORK_DIR ?? "/tmp/oxi-inspect-e2e";
fs.mkdirSync(WORK, { recursive: true });

const nlc = await import(pathToFileURL(path.join(NLC_DIR, "node_modules/node-llama-cpp/dist/index.js")).href);

let failures = 0;
function check(cond, what) {
    if (!cond) {
        failures++;
        console.error(`FAIL: ${what}`);
    }
}

const GGML_TYPE_NAMES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 10: "Q2_K", 11: "Q3_K",
    12: "Q4_K", 13: "Q5_K", 14: "Q6_K", 15: "Q8_K", 16: "IQ2_XXS", 17: "IQ2_XS", 18: "IQ3_XXS", 19: "IQ1_S", 20: "IQ4_NL",
    21: "IQ3_S", 22: "IQ2_S", 23: "IQ4_XS", 24: "I8", 25: "I16", 26: "I32", 27: "I64", 28: "F64", 29: "IQ1_M", 30: "BF16", 34: "TQ1_0", 35: "TQ2_0", 39: "MXFP4"};

function inspect(file) {
    const r = spawnSync(OXINFER, ["inspect", file, "--json"], { encoding: "utf8", maxBuffer: 1 << 28 });
    if (r.status !== 0) throw new Error(`oxinfer inspect ${file} failed: ${r.stderr}`);
    return JSON.parse(r.stdout);
}

async function compare(file) {
    const ours = inspect(file);
    const ref = await nlc.readGgufFileInfo(file, { readTensorInfo: true });
    check(ours.format === "gguf", `${file}: format`);
    check(ours.gguf_version === ref.version, `${file}: version ${ours.gguf_version} vs ${ref.version}`);
    check(ours.architecture === ref.metadata.general.architecture, `${file}: architecture`);
    check(ours.tensor_count === Number(ref.totalTensorCount ?? ref.tensorCount), `${file}: tensor count`);
    const toks = ref.metadata.tokenizer?.ggml?.tokens;
    if (toks) check(ours.metadata["tokenizer.ggml.tokens"].count === toks.length, `${file}: token count`);
    const infos = ref.fullTensorInfo ?? ref.tensorInfo ?? [];
    const byName = new Map(ours.tensors.map((t) => [t.name, t]));
    let params = 0;
    for (const t of infos) {
        const o = byName.get(t.name);
        check(o != null, `${file}: tensor ${t.name} missing`);
        if (!o) continue;
        const dims = t.dimensions.map(Number).reverse();  // ggml ne[] is innermost first
        check(JSON.stringify(o.shape) === JSON.stringify(dims), `${file}: ${t.name} shape ${o.shape} vs ${dims}`);
        check(o.type === GGML_TYPE_NAMES[t.ggmlType], `${file}: ${t.name} type ${o.type} vs ${t.ggmlType}`);
        params += dims.reduce((a, b) => a * b, 1);
    }
    // Offsets: ours are absolute, node-llama-cpp's relative to the data section; the data section
    // start must be the same for all. Sizes: llama.cpp lays tensors out back to back, each padded
    // to the alignment, so the gap to the next tensor (or the file end) is our byte size, padded.
    const align = ours.alignment;
    const pad = (n) => Math.ceil(n / align) * align;
    const sorted = [...infos].sort((a, b) => Number(a.offset) - Number(b.offset));
    const fileSize = fs.statSync(file).size;
    let dataStart = null;
    sorted.forEach((t, i) => {
        const o = byName.get(t.name);
        if (!o) return;
        const start = o.offset - Number(t.offset);
        if (dataStart === null) dataStart = start;
        check(start === dataStart, `${file}: ${t.name} offset`);
        const next = i + 1 < sorted.length ? Number(sorted[i + 1].offset) : fileSize - dataStart;
        check(pad(o.bytes) === pad(next - Number(t.offset)), `${file}: ${t.name} bytes ${o.bytes} vs gap ${next - Number(t.offset)}`);
    });
    check(ours.parameters === params, `${file}: parameters ${ours.parameters} vs ${params}`);
    return ours;
}

// --- 1. llama.cpp's vocab GGUFs
for (const f of ["ggml-vocab-qwen35.gguf", "ggml-vocab-gemma-4.gguf"]) {
    const p = path.join(SHARED, "testdata/tokenizer", f);
    if (fs.existsSync(p)) await compare(p);
}

// --- 2. A tiny F32 llama GGUF written here, then quantised by llama.cpp to Q4_K_M.
function ggufBytes(kvs, tensors) {
    const parts = [];
    const u32 = (x) => { const b = Buffer.alloc(4); b.writeUInt32LE(x); parts.push(b); };
    const u64 = (x) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(x)); parts.push(b); };
    const f32 = (x) => { const b = Buffer.alloc(4); b.writeFloatLE(x); parts.push(b); };
    const str = (s) => { const b = Buffer.from(s, "utf8"); u64(b.length); parts.push(b); };
    parts.push(Buffer.from("GGUF"));
    u32(3); u64(tensors.length); u64(kvs.length);
    for (const [k, type, v] of kvs) {
        str(k); u32(type);
        if (type === 4) u32(v); else if (type === 6) f32(v); else if (type === 8) str(v);
        else if (type === 2) { const b = Buffer.alloc(2); b.writeUInt16LE(v); parts.push(b); }
        else if (type === 5) { const b = Buffer.alloc(4); b.writeInt32LE(v); parts.push(b); }
        else if (type === 9) { u32(8); u64(v.length); v.forEach(str); }
    }
    let off = 0;
    const datas = [];
    for (const t of tensors) {
        str(t.name); u32(t.ne.length); t.ne.forEach(u64); u32(0); u64(off);
        const n = t.ne.reduce((a, b) => a * b, 1);
        const d = Buffer.alloc(n * 4);
        for (let i = 0; i < n; i++) d.writeFloatLE(Math.sin(i * 0.37 + t.name.length) * 0.1, i * 4);
        datas.push(d);
        off += d.length; off = Math.ceil(off / 32) * 32;
    }
    let head = Buffer.concat(parts);
    head = Buffer.concat([head, Buffer.alloc((32 - (head.length % 32)) % 32)]);
    const out = [head];
    for (const d of datas) { out.push(d); out.push(Buffer.alloc((32 - (d.length % 32)) % 32)); }
    return Buffer.concat(out);
}

const E = 256, F = 512, V = 512;
const kvs = [
    ["general.architecture", 8, "llama"], ["general.name", 8, "oxi-tiny"],
    ["llama.context_length", 4, 256], ["llama.embedding_length", 4, E], ["llama.block_count", 4, 1],
    ["llama.feed_forward_length", 4, F], ["llama.attention.head_count", 4, 4], ["llama.attention.head_count_kv", 4, 4],
    ["llama.rope.dimension_count", 4, E / 4], ["llama.attention.layer_norm_rms_epsilon", 6, 1e-5],
    ["tokenizer.ggml.model", 8, "gpt2"],
    ["tokenizer.ggml.tokens", 9, Array.from({ length: V }, (_, i) => `t${i}`)],
];
const tensors = [
    { name: "token_embd.weight", ne: [E, V] }, { name: "output_norm.weight", ne: [E] }, { name: "output.weight", ne: [E, V] },
    { name: "blk.0.attn_norm.weight", ne: [E] }, { name: "blk.0.attn_q.weight", ne: [E, E] },
    { name: "blk.0.attn_k.weight", ne: [E, E] }, { name: "blk.0.attn_v.weight", ne: [E, E] },
    { name: "blk.0.attn_output.weight", ne: [E, E] }, { name: "blk.0.ffn_norm.weight", ne: [E] },
    { name: "blk.0.ffn_gate.weight", ne: [E, F] }, { name: "blk.0.ffn_up.weight", ne: [E, F] },
    { name: "blk.0.ffn_down.weight", ne: [F, E] },
];
const f32file = path.join(WORK, "tiny-f32.gguf");
fs.writeFileSync(f32file, ggufBytes(kvs, tensors));
const f32 = await compare(f32file);
check(f32.types.F32?.tensors === tensors.length, "f32 file: all F32");

// --- 3. The same model as a 2-part split GGUF (llama.cpp's naming and split.* keys); node-llama-cpp
// reads the parts together too.
{
    const p1 = path.join(WORK, "tiny-split-00001-of-00002.gguf"), p2 = path.join(WORK, "tiny-split-00002-of-00002.gguf");
    const split = (no) => [["split.no", 2, no], ["split.count", 2, 2], ["split.tensors.count", 5, tensors.length]];
    fs.writeFileSync(p1, ggufBytes([...kvs, ...split(0)], tensors.slice(0, 5)));
    fs.writeFileSync(p2, ggufBytes(split(1), tensors.slice(5)));
    const ours = inspect(p1);
    const ref = await nlc.readGgufFileInfo(p1, { readTensorInfo: true });
    const infos = ref.fullTensorInfo ?? ref.tensorInfo;
    check(ours.tensor_count === tensors.length && infos.length === tensors.length, `split: tensor count ${ours.tensor_count}`);
    check(ours.files.length === 2, "split: two files");
    const byName = new Map(ours.tensors.map((t) => [t.name, t]));
    for (const t of infos) {
        const o = byName.get(t.name);
        check(o && JSON.stringify(o.shape) === JSON.stringify(t.dimensions.map(Number).reverse()), `split: ${t.name} shape`);
    }
    check(byName.get(tensors[7].name)?.file === p2, "split: tensor in part 2");
    const r = spawnSync(OXINFER, ["inspect", p2], { encoding: "utf8" });
    check(r.status === 1 && r.stderr.includes("00001-of-00002"), "split: opening part 2 names part 1");
}

const quant = path.join(SHARED, "oracle/quantize_llama.py");
const qfile = path.join(WORK, "tiny-q4km.gguf");
if (fs.existsSync(quant)) {
    const quantize = (ftype, pure) => {
        const r = spawnSync("/usr/bin/python3", [quant, f32file, qfile, ftype, "--threads", "1", ...(pure ? ["--pure"] : [])],
            { env: { ...process.env, NLC_DIR }, encoding: "utf8" });
        if (r.status !== 0) throw new Error(`quantize ${ftype} failed: ${r.stderr.slice(-2000)}`);
    };
    quantize("Q4_K_M", false);
    const q = await compare(qfile);
    const kinds = Object.keys(q.types);
    check(kinds.includes("Q4_K") && kinds.includes("Q6_K"), `Q4_K_M file has Q4_K and Q6_K tensors (${kinds})`);
    // One file per base type (--pure): each type's block size/bytes facts are checked by compare().
    for (const [ftype, want] of [["Q4_0", "Q4_0"], ["Q4_1", "Q4_1"], ["Q5_0", "Q5_0"], ["Q5_1", "Q5_1"], ["Q8_0", "Q8_0"],
        ["Q2_K", "Q2_K"], ["Q3_K_M", "Q3_K"], ["Q5_K_M", "Q5_K"], ["Q6_K", "Q6_K"], ["IQ4_NL", "IQ4_NL"],
        ["IQ4_XS", "IQ4_XS"], ["IQ3_S", "IQ3_S"], ["F16", "F16"], ["BF16", "BF16"], ["TQ2_0", "TQ2_0"], ["TQ1_0", "TQ1_0"]]) {
        quantize(ftype, true);
        const r = await compare(qfile);
        check(r.types[want]?.tensors > 0, `${ftype}: has ${want} tensors (${Object.keys(r.types)})`);
    }
} else {
    console.log("skip: no quantize_llama.py");
}

if (failures) {
    console.error(`${failures} failure(s)`);
    process.exit(1);
}
console.log("inspect_gguf: ok");
