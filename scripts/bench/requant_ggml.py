#!/usr/bin/env python3
"""Bench files of the very-low-bit types that llama.cpp's quantizer refuses without an importance
matrix (IQ2_XXS, IQ2_XS, IQ2_S, IQ1_S, IQ1_M), which shared/oracle/quantize_llama.py cannot pass
through llama_model_quantize. Takes a file llama.cpp's quantizer made (TEMPLATE, e.g.
kern-q08b-IQ3_S.gguf: its recipe chose the type of every tensor) and writes OUT with every tensor
of the template's type FROM re-quantised to TYPE from the bf16 source (SRC, same tensor names) by
ggml's own quantiser (ggml_quantize_chunk of node-llama-cpp's libggml, the function llama.cpp's
quantizer calls) with a uniform importance matrix (all ones, as tests/kernels/gen_ggml_vectors.py);
every other tensor and all metadata are copied from the template byte for byte.

    NLC_DIR=tools/node /usr/bin/python3 scripts/bench/requant_ggml.py SRC.gguf TEMPLATE.gguf OUT.gguf \\
        IQ2_XXS [--from IQ3_S] [--threads 2]
    /usr/bin/python3 scripts/bench/requant_ggml.py --list FILE.gguf    # tensor types and sizes
"""
import argparse
import ctypes as C
import os
import struct
import sys
import threading
import time

import numpy as np

# ggml_type ids (ggml.h)
GGML = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q5_0": 6, "Q5_1": 7, "Q8_0": 8, "Q2_K": 10, "Q3_K": 11,
        "Q4_K": 12, "Q5_K": 13, "Q6_K": 14, "IQ2_XXS": 16, "IQ2_XS": 17, "IQ3_XXS": 18, "IQ1_S": 19,
        "IQ4_NL": 20, "IQ3_S": 21, "IQ2_S": 22, "IQ4_XS": 23, "IQ1_M": 29, "BF16": 30, "MXFP4": 39}
NAME = {v: k for k, v in GGML.items()}
# (block elements, block bytes)
BLOCK = {0: (1, 4), 1: (1, 2), 30: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
         10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 16: (256, 66),
         17: (256, 74), 18: (256, 98), 19: (256, 50), 20: (32, 18), 21: (256, 110), 22: (256, 82),
         23: (256, 136), 29: (256, 56), 39: (32, 17)}


class Reader:
    """GGUF v3: the KV section kept as raw bytes, tensor infos parsed."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            b = f.read(16 << 20)  # header + KV + tensor infos fit easily
        self.b = b
        self.p = 0
        magic = self._n(4)
        if magic != b"GGUF":
            sys.exit(f"{path}: not a GGUF file")
        self.version, self.n_tensors, self.n_kv = struct.unpack("<IQQ", self._n(20))
        kv0 = self.p
        self.alignment = 32
        for _ in range(self.n_kv):
            key = self._str()
            t = self._u32()
            v = self._val(t)
            if key == "general.alignment":
                self.alignment = v
        self.kv_raw = b[kv0:self.p]
        self.tensors = []
        for _ in range(self.n_tensors):
            name = self._str()
            nd = self._u32()
            dims = struct.unpack(f"<{nd}Q", self._n(8 * nd))
            t = self._u32()
            (off,) = struct.unpack("<Q", self._n(8))
            self.tensors.append({"name": name, "dims": dims, "type": t, "offset": off})
        self.data_start = (self.p + self.alignment - 1) // self.alignment * self.alignment

    def _n(self, n):
        v = self.b[self.p:self.p + n]
        self.p += n
        return v

    def _u32(self):
        return struct.unpack("<I", self._n(4))[0]

    def _str(self):
        (n,) = struct.unpack("<Q", self._n(8))
        return self._n(n).decode()

    def _val(self, t):
        fmt = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
        if t in fmt:
            s = struct.calcsize(fmt[t])
            return struct.unpack("<" + fmt[t], self._n(s))[0]
        if t == 8:
            return self._str()
        if t == 9:
            et = self._u32()
            (n,) = struct.unpack("<Q", self._n(8))
            return [self._val(et) for _ in range(n)]
        sys.exit(f"{self.path}: unknown GGUF value type {t}")

    def nbytes(self, ti):
        be, bb = BLOCK[ti["type"]]
        n = 1
        for d in ti["dims"]:
            n *= d
        return n // be * bb

    def read(self, ti):
        with open(self.path, "rb") as f:
            f.seek(self.data_start + ti["offset"])
            return f.read(self.nbytes(ti))


def load_ggml(nlc_dir):
    lib = os.path.join(nlc_dir, "node_modules/@node-llama-cpp/linux-x64/bins/linux-x64")
    base = C.CDLL(os.path.join(lib, "libggml-base.so"), mode=C.RTLD_GLOBAL)
    base.ggml_quantize_chunk.restype = C.c_size_t
    base.ggml_quantize_chunk.argtypes = [C.c_int, C.c_void_p, C.c_void_p, C.c_int64, C.c_int64, C.c_int64, C.c_void_p]
    base.ggml_quantize_init.argtypes = [C.c_int]
    return base


def quantize(base, t, src, rows, cols, threads):
    """ggml_quantize_chunk over row ranges in `threads` threads (ctypes releases the GIL)."""
    be, bb = BLOCK[t]
    rb = cols // be * bb
    out = (C.c_uint8 * (rb * rows))()
    ones = np.ones(cols, dtype=np.float32)
    base.ggml_quantize_init(t)  # the IQ2/IQ1 grids' search tables, once, before the threads
    step = (rows + threads - 1) // threads

    def run(r0, r1):
        if r0 < r1:
            base.ggml_quantize_chunk(t, src[r0:r1].ctypes.data, C.addressof(out) + r0 * rb, 0, r1 - r0, cols,
                                     ones.ctypes.data)

    ts = [threading.Thread(target=run, args=(i * step, min(rows, (i + 1) * step))) for i in range(threads)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    return bytes(out)


def to_f32(r, ti):
    raw = r.read(ti)
    if ti["type"] == 30:
        return (np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)
    if ti["type"] == 1:
        return np.frombuffer(raw, dtype=np.float16).astype(np.float32)
    if ti["type"] == 0:
        return np.frombuffer(raw, dtype=np.float32).copy()
    sys.exit(f"{r.path}: {ti['name']} is {NAME.get(ti['type'])}, need F32/F16/BF16 as the source")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--list", metavar="FILE")
    ap.add_argument("src", nargs="?")
    ap.add_argument("template", nargs="?")
    ap.add_argument("out", nargs="?")
    ap.add_argument("type", nargs="?", choices=sorted(GGML))
    ap.add_argument("--from", dest="from_type", default="IQ3_S", choices=sorted(GGML))
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    if a.list:
        r = Reader(a.list)
        tot = {}
        for ti in r.tensors:
            k = NAME.get(ti["type"], str(ti["type"]))
            tot[k] = tot.get(k, 0) + r.nbytes(ti)
        for k, v in sorted(tot.items(), key=lambda kv: -kv[1]):
            print(f"{k:8s} {v / 2**20:8.1f} MiB")
        return
    if not (a.src and a.template and a.out and a.type):
        ap.error("SRC TEMPLATE OUT TYPE needed")
    src, tpl = Reader(a.src), Reader(a.template)
    base = load_ggml(os.environ.get("NLC_DIR", "tools/node"))
    by_name = {ti["name"]: ti for ti in src.tensors}
    t_new, t_from = GGML[a.type], GGML[a.from_type]
    infos, blobs, off = [], [], 0
    t0 = time.time()
    for ti in tpl.tensors:
        t = ti["type"]
        if t == t_from:
            s = by_name.get(ti["name"])
            if s is None or s["dims"] != ti["dims"]:
                sys.exit(f"{a.src}: no tensor {ti['name']} of shape {ti['dims']}")
            cols, rows = ti["dims"][0], int(np.prod(ti["dims"][1:]))
            blob = quantize(base, t_new, to_f32(src, s).reshape(rows, cols), rows, cols, a.threads)
            t = t_new
            print(f"{ti['name']}: {a.from_type} -> {a.type} ({time.time() - t0:.0f} s)", file=sys.stderr)
        else:
            blob = tpl.read(ti)
        infos.append((ti["name"], ti["dims"], t, off))
        blobs.append(blob)
        off = (off + len(blob) + tpl.alignment - 1) // tpl.alignment * tpl.alignment
    with open(a.out + ".tmp", "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", tpl.version, len(infos), tpl.n_kv) + tpl.kv_raw)
        for name, dims, t, o in infos:
            nb = name.encode()
            f.write(struct.pack("<Q", len(nb)) + nb + struct.pack("<I", len(dims)) +
                    struct.pack(f"<{len(dims)}Q", *dims) + struct.pack("<IQ", t, o))
        pos = f.tell()
        f.write(b"\0" * ((pos + tpl.alignment - 1) // tpl.alignment * tpl.alignment - pos))
        for (_, _, _, o), blob in zip(infos, blobs):
            f.write(blob)
            pad = (len(blob) + tpl.alignment - 1) // tpl.alignment * tpl.alignment - len(blob)
            f.write(b"\0" * pad)
    os.replace(a.out + ".tmp", a.out)
    print(f'{{"ok": true, "out": "{a.out}", "type": "{a.type}", "seconds": {time.time() - t0:.1f}, '
          f'"bytes": {os.path.getsize(a.out)}}}')


if __name__ == "__main__":
    main()
