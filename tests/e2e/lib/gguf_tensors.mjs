// GGUF tensor table (names, shapes, types, absolute byte ranges) and scalar metadata, enough to
// compare two files' tensors byte for byte. Independent of oxinfer's own reader.
import fs from "node:fs";

// ggml type id → [elements per block, bytes per block], and its name.
export const BLOCK = {
  0: [1, 4], 1: [1, 2], 2: [32, 18], 3: [32, 20], 6: [32, 22], 7: [32, 24], 8: [32, 34], 10: [256, 84], 11: [256, 110],
  12: [256, 144], 13: [256, 176], 14: [256, 210], 20: [32, 18], 23: [256, 136], 26: [1, 4], 30: [1, 2],
};
export const TYPE_NAME = {
  0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 6: "Q5_0", 7: "Q5_1", 8: "Q8_0", 10: "Q2_K", 11: "Q3_K", 12: "Q4_K", 13: "Q5_K",
  14: "Q6_K", 20: "IQ4_NL", 23: "IQ4_XS", 26: "I32", 30: "BF16",
};

// {fd, map: name → {name, ne, type, off (absolute), nbytes}, kv: key → scalar value (arrays: their length)}
export function ggufTensors(file) {
  const fd = fs.openSync(file, "r");
  const head = Buffer.alloc(Math.min(fs.fstatSync(fd).size, 64 << 20));
  fs.readSync(fd, head, 0, head.length, 0);
  let o = 0;
  const u32 = () => { const v = head.readUInt32LE(o); o += 4; return v; };
  const u64 = () => { const v = Number(head.readBigUInt64LE(o)); o += 8; return v; };
  const str = () => { const n = u64(); const s = head.toString("utf8", o, o + n); o += n; return s; };
  const SIZES = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
  const READ = { 0: (p) => head.readUInt8(p), 1: (p) => head.readInt8(p), 2: (p) => head.readUInt16LE(p), 3: (p) => head.readInt16LE(p),
    4: (p) => head.readUInt32LE(p), 5: (p) => head.readInt32LE(p), 6: (p) => head.readFloatLE(p), 7: (p) => head.readUInt8(p) !== 0,
    10: (p) => Number(head.readBigUInt64LE(p)), 11: (p) => Number(head.readBigInt64LE(p)), 12: (p) => head.readDoubleLE(p) };
  const value = (t) => {
    if (t === 8) return str();
    if (t === 9) { const et = u32(), n = u64(); for (let i = 0; i < n; i++) value(et); return n; }
    const v = READ[t](o);
    o += SIZES[t];
    return v;
  };
  if (head.toString("latin1", 0, 4) !== "GGUF") throw new Error(`${file}: not a GGUF`);
  o = 8;
  const nT = u64(), nKV = u64();
  const kv = new Map();
  for (let i = 0; i < nKV; i++) {
    const k = str(), t = u32();
    kv.set(k, value(t));
  }
  const align = kv.get("general.alignment") ?? 32;
  const tensors = [];
  for (let i = 0; i < nT; i++) {
    const name = str(), nd = u32();
    const ne = [];
    for (let j = 0; j < nd; j++) ne.push(u64());
    const type = u32(), off = u64();
    if (!BLOCK[type]) throw new Error(`${file}: tensor ${name} has type ${type} (not in this test's table)`);
    const n = ne.reduce((a, b) => a * b, 1);
    tensors.push({ name, ne, type, off, nbytes: (n / BLOCK[type][0]) * BLOCK[type][1] });
  }
  const base = Math.ceil(o / align) * align;
  const map = new Map();
  for (const t of tensors) map.set(t.name, { ...t, off: base + t.off });
  return { fd, map, kv };
}

// Tensor by tensor: names, types and bytes of `oursFile` against `refFile`.
// → {problems: [string], types: {TYPE: count in ref}, typeDiffs, byteDiffs}
export function compareTensors(label, oursFile, refFile) {
  const a = ggufTensors(oursFile), b = ggufTensors(refFile);
  const problems = [];
  const types = {};
  let typeDiffs = 0, byteDiffs = 0;
  try {
    for (const [name, tb] of b.map) {
      const ta = a.map.get(name);
      if (!ta) { problems.push(`${label}: ${name} missing in our file`); continue; }
      types[TYPE_NAME[tb.type]] = (types[TYPE_NAME[tb.type]] ?? 0) + 1;
      if (ta.type !== tb.type) {
        typeDiffs++;
        problems.push(`${label}: ${name} is ${TYPE_NAME[ta.type]} in ours, ${TYPE_NAME[tb.type]} in llama-quantize's`);
        continue;
      }
      const ba = Buffer.alloc(ta.nbytes), bb = Buffer.alloc(tb.nbytes);
      fs.readSync(a.fd, ba, 0, ba.length, ta.off);
      fs.readSync(b.fd, bb, 0, bb.length, tb.off);
      if (!ba.equals(bb)) {
        byteDiffs++;
        let first = 0;
        while (first < ba.length && ba[first] === bb[first]) first++;
        problems.push(`${label}: ${name} (${TYPE_NAME[tb.type]}) bytes differ (first at byte ${first} of ${ba.length})`);
      }
    }
    for (const name of a.map.keys()) if (!b.map.has(name)) problems.push(`${label}: ${name} only in our file`);
  } finally {
    fs.closeSync(a.fd);
    fs.closeSync(b.fd);
  }
  return { problems, types, typeDiffs, byteDiffs };
}
