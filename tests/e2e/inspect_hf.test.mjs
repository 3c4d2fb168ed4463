// oxinfer inspect --json on a synthetic HF checkpoint (oxi-gen, 2 shards), checked against the
// safetensors headers parsed here directly (JSON after a u64 length), also through an HF-cache-style
// snapshot made of symlinks into blobs/, and on one shard alone.
import fs from "node:fs";
import path from "node:path";
import { spawnSync } from "node:child_process";

const OXINFER = process.env.OXINFER, OXI_GEN = process.env.OXI_GEN;
const WORK = process.env.OXI_WORK_DIR ?? "/tmp/oxi-inspect-hf";
let failures = 0;
const check = (c, what) => { if (!c) { failures++; console.error(`FAIL: ${what}`); } };
const run = (cmd, args) => {
    const r = spawnSync(cmd, args, { encoding: "utf8", maxBuffer: 1 << 26 });
    if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")}: exit ${r.status}: ${r.stderr}`);
    return r.stdout;
};

fs.rmSync(WORK, { recursive: true, force: true });
const dir = path.join(WORK, "ckpt");
run(OXI_GEN, ["qwen35", "--out", dir, "--shards", "2", "--vocab", "1024"]);

const sizes = { F64: 8, F32: 4, F16: 2, BF16: 2, I64: 8, I32: 4, I16: 2, I8: 1, U8: 1, BOOL: 1 };
function refHeaders(files) {
    const tensors = new Map();
    for (const f of files) {
        const buf = fs.readFileSync(f);
        const n = Number(buf.readBigUInt64LE(0));
        const h = JSON.parse(buf.subarray(8, 8 + n).toString("utf8"));
        for (const [name, t] of Object.entries(h)) {
            if (name === "__metadata__") continue;
            tensors.set(name, { ...t, file: f, start: 8 + n + t.data_offsets[0] });
        }
    }
    return tensors;
}

function compare(ours, ref, label) {
    check(ours.tensor_count === ref.size, `${label}: tensor count ${ours.tensor_count} vs ${ref.size}`);
    let params = 0, bytes = 0;
    const byName = new Map(ours.tensors.map((t) => [t.name, t]));
    for (const [name, t] of ref) {
        const n = t.shape.reduce((a, b) => a * b, 1);
        params += n;
        bytes += n * sizes[t.dtype];
        const o = byName.get(name);
        check(o != null, `${label}: ${name} missing`);
        if (!o) continue;
        check(JSON.stringify(o.shape) === JSON.stringify(t.shape), `${label}: ${name} shape`);
        check(o.type === t.dtype, `${label}: ${name} type ${o.type} vs ${t.dtype}`);
        check(o.offset === t.start, `${label}: ${name} offset ${o.offset} vs ${t.start}`);
        check(o.bytes === t.data_offsets[1] - t.data_offsets[0], `${label}: ${name} bytes`);
    }
    check(ours.parameters === params, `${label}: parameters ${ours.parameters} vs ${params}`);
    check(ours.tensor_bytes === bytes, `${label}: bytes ${ours.tensor_bytes} vs ${bytes}`);
}

const shards = fs.readdirSync(dir).filter((f) => f.endsWith(".safetensors")).sort().map((f) => path.join(dir, f));
check(shards.length === 2, "two shards");
const config = JSON.parse(fs.readFileSync(path.join(dir, "config.json"), "utf8"));
const ours = JSON.parse(run(OXINFER, ["inspect", dir, "--json"]));
check(ours.format === "hf", "format hf");
check(ours.architecture === config.model_type, `architecture ${ours.architecture} vs ${config.model_type}`);
const canon = (v) => Array.isArray(v) ? v.map(canon) : v && typeof v === "object"
    ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, canon(v[k])])) : v;
check(JSON.stringify(canon(ours.config)) === JSON.stringify(canon(config)), "config echoed");
check(ours.files.length === 2, "files");
compare(ours, refHeaders(shards), "checkpoint");

// -m spelling, and the text output's first lines.
const text = run(OXINFER, ["inspect", "-m", dir]);
check(text.includes(`architecture:  ${config.model_type}`), "text architecture line");

// HF cache layout: snapshots/<rev>/* are symlinks into blobs/.
const cache = path.join(WORK, "models--org--tiny");
fs.mkdirSync(path.join(cache, "blobs"), { recursive: true });
const snap = path.join(cache, "snapshots", "0123abcd");
fs.mkdirSync(snap, { recursive: true });
for (const f of fs.readdirSync(dir)) {
    fs.copyFileSync(path.join(dir, f), path.join(cache, "blobs", "blob-" + f));
    fs.symlinkSync(path.join("..", "..", "blobs", "blob-" + f), path.join(snap, f));
}
const cached = JSON.parse(run(OXINFER, ["inspect", snap, "--json"]));
check(cached.tensor_count === ours.tensor_count && cached.parameters === ours.parameters, "snapshot dir");

// One shard on its own.
const one = JSON.parse(run(OXINFER, ["inspect", shards[1], "--json"]));
check(one.format === "safetensors", "lone shard format");
compare(one, refHeaders([shards[1]]), "shard 2");

if (failures) { console.error(`${failures} failure(s)`); process.exit(1); }
console.log("inspect_hf: ok");
