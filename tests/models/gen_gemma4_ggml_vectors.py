#!/usr/bin/env python3
"""Writes tests/models/data/gemma4_ggml_vectors.bin: results of llama.cpp's own CPU ops (libggml
from node-llama-cpp, through ctypes) on deterministic inputs, for both x86 builds of ggml — the
AVX-512 one (sapphirerapids, 16 f32 lanes) and the AVX2 one (haswell, 8 lanes) — so that
tests/models/gemma4_ggml_test.cpp checks the bit-exact reproduction in src/models/gemma4/
ggml_numerics.cpp against ggml's numbers whatever the host.

    NLC_DIR=tools/node /usr/bin/python3 tests/models/gen_gemma4_ggml_vectors.py

Each build is run in a child process (both libraries export the same symbols). File: magic
'OXG4', u32 record count; per record: u32 kind, u32 lanes, u32 payload bytes, payload (all
little-endian, f32 unless said):
  1 dot_f32     u32 n; x[n]; y[n]; result
  2 dot_f16     u32 n; x[n] (f16 bits, u16); y[n] (f16 bits); result
  3 soft_max    u32 n; x[n]; ggml_soft_max(x)[n]
  4 mul_mat     u32 rows, cols, T; W[rows·cols]; x[T·cols]; y[T·rows]
  5 rope        u32 hd, heads, T, n_dims, has_ff; f32 base; i32 pos[T]; ff[n_dims/2] if has_ff;
                x[T·heads·hd]; out[T·heads·hd]
  6 flash_attn  u32 hd, H, Hkv, n_kv, T, p0, window, kv_f16; q[T·H·hd]; k, v [n_kv·Hkv·hd] (u16
                bits if kv_f16, else f32); out[T·H·hd]. Query t is at position p0 + t and sees
                the cells (= positions) max(0, p - window + 1) … p (window 0: all ≤ p).
  8 attention without flash attention: u32 hd, H, Hkv, T, p0, window, kv_f16; q[T·H·hd]; k, v
                [(p0+T)·Hkv·hd] as in 6; out[T·H·hd]. llama.cpp's graph: kq = mul_mat(K view of 256
                cells, permuted q), soft_max_ext(kq, f32 mask), mul_mat(transposed V, kq).
  9 flash_attn, one query over a view of n_view ≥ 512 cells (split among ggml's threads): u32 hd,
                H, n_view, p, lo, kv_f16, threads, 0; q[H·hd]; k, v [(p−lo+1)·hd] (one KV head,
                cells lo … p, the rest of the view masked); out[H·hd]
  7 gelu_table  u64 FNV-1a 64 of the ggml_table_gelu_f16 entries of finite |x| < 10 (u16 LE bytes)
"""
import ctypes as C
import math
import os
import struct
import subprocess
import sys

LIB = os.path.join(os.environ.get("NLC_DIR", "tools/node"), "node_modules/@node-llama-cpp/linux-x64/bins/linux-x64")
VARIANTS = {"sapphirerapids": 16, "haswell": 8}
F32, F16, I32 = 0, 1, 26


def data(n, seed, scale=1.0):
    # deterministic pseudo-random values in (-scale, scale) with an occasional large one
    out = []
    for i in range(n):
        u = math.sin(seed * 12.9898 + i * 78.233) * 43758.5453 % 1.0
        out.append(scale * (2.0 * u - 1.0) * (1.0 + 3.0 * (i % 53 == 7)))
    return out


def f16bits(v):
    return struct.unpack("<H", struct.pack("<e", v))[0]


def f16round(v):
    return struct.unpack("<e", struct.pack("<e", v))[0]


def causal_mask(T, p0, win, n_kv):
    # query t (position p0 + t) sees cells max(0, p - win + 1) … p (win 0: all ≤ p)
    mask = []
    for t in range(T):
        p = p0 + t
        lo = max(0, p - win + 1) if win else 0
        mask += [0.0 if lo <= c <= p else -math.inf for c in range(n_kv)]
    return mask


def child(variant):
    lanes = VARIANTS[variant]
    base = C.CDLL(os.path.join(LIB, "libggml-base.so"), mode=C.RTLD_GLOBAL)
    cpu = C.CDLL(os.path.join(LIB, f"libggml-cpu-{variant}.so"), mode=C.RTLD_GLOBAL)
    cpu.ggml_cpu_init()

    class IP(C.Structure):
        _fields_ = [("mem_size", C.c_size_t), ("mem_buffer", C.c_void_p), ("no_alloc", C.c_bool)]

    class TT(C.Structure):
        _fields_ = [("from_float", C.c_void_p), ("vec_dot", C.c_void_p), ("vec_dot_type", C.c_int), ("nrows", C.c_int64)]

    V = C.c_void_p
    base.ggml_init.restype = V
    base.ggml_init.argtypes = [IP]
    base.ggml_free.argtypes = [V]
    for f, n in (("ggml_new_tensor_1d", 1), ("ggml_new_tensor_2d", 2), ("ggml_new_tensor_3d", 3)):
        getattr(base, f).restype = V
        getattr(base, f).argtypes = [V, C.c_int] + [C.c_int64] * n
    base.ggml_get_data.restype = V
    base.ggml_get_data.argtypes = [V]
    base.ggml_new_graph.restype = V
    base.ggml_new_graph.argtypes = [V]
    base.ggml_build_forward_expand.argtypes = [V, V]
    cpu.ggml_graph_compute_with_ctx.argtypes = [V, V, C.c_int]
    base.ggml_soft_max.restype = V
    base.ggml_soft_max.argtypes = [V, V]
    base.ggml_mul_mat.restype = V
    base.ggml_mul_mat.argtypes = [V, V, V]
    base.ggml_rope_ext.restype = V
    base.ggml_rope_ext.argtypes = [V, V, V, V, C.c_int, C.c_int, C.c_int] + [C.c_float] * 6
    base.ggml_permute.restype = V
    base.ggml_permute.argtypes = [V, V, C.c_int, C.c_int, C.c_int, C.c_int]
    base.ggml_soft_max_ext.restype = V
    base.ggml_soft_max_ext.argtypes = [V, V, V, C.c_float, C.c_float]
    base.ggml_flash_attn_ext.restype = V
    base.ggml_flash_attn_ext.argtypes = [V, V, V, V, V, C.c_float, C.c_float, C.c_float]
    cpu.ggml_get_type_traits_cpu.restype = C.POINTER(TT)
    VD = C.CFUNCTYPE(None, C.c_int, C.c_void_p, C.c_size_t, C.c_void_p, C.c_size_t, C.c_void_p, C.c_size_t, C.c_int)

    def put(t, vals, typ=F32):
        p = base.ggml_get_data(t)
        if typ == F32:
            (C.c_float * len(vals)).from_address(p)[:] = vals
        elif typ == F16:
            (C.c_uint16 * len(vals)).from_address(p)[:] = [f16bits(v) for v in vals]
        else:
            (C.c_int32 * len(vals)).from_address(p)[:] = vals

    def get(t, n):
        return list((C.c_float * n).from_address(base.ggml_get_data(t)))

    def run(fn, nth=2):
        ctx = base.ggml_init(IP(64 << 20, None, False))
        try:
            t, n = fn(ctx)
            g = base.ggml_new_graph(ctx)
            base.ggml_build_forward_expand(g, t)
            cpu.ggml_graph_compute_with_ctx(ctx, g, nth)
            return get(t, n)
        finally:
            base.ggml_free(ctx)

    recs = []

    def rec(kind, payload):
        recs.append(struct.pack("<III", kind, lanes, len(payload)) + payload)

    f32s = lambda v: struct.pack(f"<{len(v)}f", *v)
    u16s = lambda v: struct.pack(f"<{len(v)}H", *v)

    vd32 = VD(cpu.ggml_get_type_traits_cpu(F32).contents.vec_dot)
    vd16 = VD(cpu.ggml_get_type_traits_cpu(F16).contents.vec_dot)
    for i, n in enumerate((8, 16, 40, 64, 72, 128, 200, 256)):
        x, y = data(n, 100 + i), data(n, 200 + i)
        xa, ya, s = (C.c_float * n)(*x), (C.c_float * n)(*y), C.c_float()
        vd32(n, C.byref(s), 0, xa, 0, ya, 0, 1)
        rec(1, struct.pack("<I", n) + bytes(xa) + bytes(ya) + struct.pack("<f", s.value))
        xh, yh = [f16bits(v) for v in x], [f16bits(v) for v in y]
        xb, yb = (C.c_uint16 * n)(*xh), (C.c_uint16 * n)(*yh)
        vd16(n, C.byref(s), 0, xb, 0, yb, 0, 1)
        rec(2, struct.pack("<I", n) + u16s(xh) + u16s(yh) + struct.pack("<f", s.value))

    for i, n in enumerate((8, 16, 64, 128, 100)):
        x = data(n, 300 + i, 6.0)
        if n == 64:
            x[5] = -math.inf  # a masked entry
        x = [struct.unpack("<f", struct.pack("<f", v))[0] for v in x]

        def sm(ctx, x=x, n=n):
            t = base.ggml_new_tensor_1d(ctx, F32, n)
            put(t, x)
            return base.ggml_soft_max(ctx, t), n
        rec(3, struct.pack("<I", n) + f32s(x) + f32s(run(sm)))

    for i, (rows, cols, T) in enumerate(((8, 64, 1), (8, 64, 5), (64, 8, 1), (64, 8, 3), (12, 48, 2), (12, 64, 7), (6, 64, 4), (8, 200, 2))):
        w, x = data(rows * cols, 400 + i, 0.3), data(T * cols, 500 + i)

        def mmf(ctx, w=w, x=x, rows=rows, cols=cols, T=T):
            a = base.ggml_new_tensor_2d(ctx, F32, cols, rows)
            b = base.ggml_new_tensor_2d(ctx, F32, cols, T)
            put(a, w)
            put(b, x)
            return base.ggml_mul_mat(ctx, a, b), rows * T
        y = run(mmf)
        rec(4, struct.pack("<III", rows, cols, T) + f32s([struct.unpack("<f", struct.pack("<f", v))[0] for v in w]) +
            f32s([struct.unpack("<f", struct.pack("<f", v))[0] for v in x]) + f32s(y))

    for i, (hd, heads, T, n_dims, use_ff, rbase, p0) in enumerate(((32, 2, 5, 32, False, 10000.0, 3), (64, 1, 4, 64, True, 1e6, 250),
                                                                    (64, 2, 3, 16, False, 10000.0, 1000))):
        x = data(T * heads * hd, 600 + i)
        pos = list(range(p0, p0 + T))
        ff = [1.0 if j < n_dims // 8 else 1e30 for j in range(n_dims // 2)] if use_ff else []

        def rp(ctx, x=x, pos=pos, ff=ff, hd=hd, heads=heads, T=T, n_dims=n_dims, rbase=rbase):
            t = base.ggml_new_tensor_3d(ctx, F32, hd, heads, T)
            pt = base.ggml_new_tensor_1d(ctx, I32, T)
            put(t, x)
            put(pt, pos, I32)
            ft = None
            if ff:
                ft = base.ggml_new_tensor_1d(ctx, F32, len(ff))
                put(ft, ff)
            return base.ggml_rope_ext(ctx, t, pt, ft, n_dims, 2, 0, rbase, 1.0, 0.0, 1.0, 32.0, 1.0), len(x)
        out = run(rp)
        rec(5, struct.pack("<IIIIIf", hd, heads, T, n_dims, int(use_ff), rbase) + struct.pack(f"<{T}i", *pos) +
            f32s(ff) + f32s([struct.unpack("<f", struct.pack("<f", v))[0] for v in x]) + f32s(out))

    # flash attention: decode and short prompts (vector kernel), 64+ rows (tiled kernel)
    cases = [  # hd, H, Hkv, n_kv, T, p0, window, kv_f16
        (32, 4, 1, 40, 1, 39, 16, True), (64, 2, 1, 40, 1, 39, 0, True), (256, 1, 1, 12, 1, 11, 0, True),
        (32, 2, 2, 30, 10, 20, 16, True), (64, 1, 1, 70, 1, 69, 0, True), (16, 1, 1, 100, 64, 36, 0, True),
        (16, 1, 1, 100, 64, 36, 16, True), (32, 2, 1, 40, 1, 39, 16, False), (16, 1, 1, 100, 66, 34, 0, False),
        # tiled with hd a multiple of 64 (the AVX-512 path of ggml_fa_avx512.cpp), windowed and not
        (64, 2, 1, 150, 70, 80, 0, True), (128, 2, 1, 140, 64, 76, 24, True), (64, 1, 1, 130, 65, 65, 0, False)]
    for i, (hd, H, Hkv, n_kv, T, p0, win, kv_f16) in enumerate(cases):
        q = data(T * H * hd, 700 + i, 0.5)
        k = data(n_kv * Hkv * hd, 800 + i, 0.5)
        v = data(n_kv * Hkv * hd, 900 + i)
        kv_t = F16 if kv_f16 else F32
        mask = causal_mask(T, p0, win, n_kv)

        def fa(ctx, q=q, k=k, v=v, mask=mask, hd=hd, H=H, Hkv=Hkv, n_kv=n_kv, T=T, kv_t=kv_t):
            qt = base.ggml_new_tensor_3d(ctx, F32, hd, T, H)
            kt = base.ggml_new_tensor_3d(ctx, kv_t, hd, n_kv, Hkv)
            vt = base.ggml_new_tensor_3d(ctx, kv_t, hd, n_kv, Hkv)
            mt = base.ggml_new_tensor_2d(ctx, F16, n_kv, T)
            # q given as [T][H][hd] → ggml layout [H][T][hd]
            put(qt, [q[(t * H + h) * hd + d] for h in range(H) for t in range(T) for d in range(hd)])
            put(kt, [k[(c * Hkv + h) * hd + d] for h in range(Hkv) for c in range(n_kv) for d in range(hd)], kv_t)
            put(vt, [v[(c * Hkv + h) * hd + d] for h in range(Hkv) for c in range(n_kv) for d in range(hd)], kv_t)
            put(mt, mask, F16)
            return base.ggml_flash_attn_ext(ctx, qt, kt, vt, mt, 1.0, 0.0, 0.0), T * H * hd  # out [hd, H, T]
        out = run(fa)
        cvt = (lambda vals: u16s([f16bits(x) for x in vals])) if kv_f16 else (lambda vals: f32s(vals))
        qf = [struct.unpack("<f", struct.pack("<f", x))[0] for x in q]
        rec(6, struct.pack("<8I", hd, H, Hkv, n_kv, T, p0, win, int(kv_f16)) + f32s(qf) + cvt(k) + cvt(v) + f32s(out))

    # one query over a view of 512+ cells: ggml splits the cells among its threads
    split_cases = [  # hd, H, n_view, p, lo, kv_f16, threads
        (16, 2, 512, 300, 285, True, 2), (64, 1, 512, 300, 230, True, 2), (16, 1, 768, 520, 200, True, 3),
        (16, 2, 512, 300, 150, True, 2), (16, 2, 512, 300, 150, False, 2)]
    for i, (hd, H, n_view, p, lo, kv_f16, nth) in enumerate(split_cases):
        n = p - lo + 1
        q = data(H * hd, 1300 + i, 0.5)
        k = data(n * hd, 1400 + i, 0.5)
        if i >= 3:  # larger keys in the last chunk: its maximum wins, so the merge rescales the first
            k = [x * (3.0 if lo + j // hd >= n_view // 2 else 1.0) for j, x in enumerate(k)]
        v = data(n * hd, 1500 + i)
        kv_t = F16 if kv_f16 else F32
        mask = [0.0 if lo <= c <= p else -math.inf for c in range(n_view)]

        def sp(ctx, q=q, k=k, v=v, mask=mask, hd=hd, H=H, n_view=n_view, lo=lo, n=n, kv_t=kv_t):
            qt = base.ggml_new_tensor_3d(ctx, F32, hd, 1, H)
            kt = base.ggml_new_tensor_3d(ctx, kv_t, hd, n_view, 1)
            vt = base.ggml_new_tensor_3d(ctx, kv_t, hd, n_view, 1)
            mt = base.ggml_new_tensor_2d(ctx, F16, n_view, 1)
            put(qt, q)
            rows = lambda x: [x[(c - lo) * hd + d] if lo <= c < lo + n else 0.0 for c in range(n_view) for d in range(hd)]
            put(kt, rows(k), kv_t)
            put(vt, rows(v), kv_t)
            put(mt, mask, F16)
            return base.ggml_flash_attn_ext(ctx, qt, kt, vt, mt, 1.0, 0.0, 0.0), H * hd
        out = run(sp, nth)
        cvt = (lambda vals: u16s([f16bits(x) for x in vals])) if kv_f16 else (lambda vals: f32s(vals))
        qf = [struct.unpack("<f", struct.pack("<f", x))[0] for x in q]
        rec(9, struct.pack("<8I", hd, H, n_view, p, lo, int(kv_f16), nth, 0) + f32s(qf) + cvt(k) + cvt(v) + f32s(out))

    # attention without flash attention, as llama.cpp builds it: kq = K·q over a 256-cell view,
    # soft_max_ext with an f32 mask, kqv = V·kq with V stored transposed
    nf_cases = [  # hd, H, Hkv, T, p0, window, kv_f16  (view of 256 cells)
        (32, 2, 1, 1, 39, 16, True), (64, 1, 1, 1, 40, 0, True), (32, 2, 1, 10, 20, 16, True), (32, 1, 1, 4, 60, 0, True),
        (32, 2, 1, 1, 39, 16, False), (64, 1, 1, 3, 40, 0, False), (32, 2, 1, 3, 40, 0, False)]
    n_kv = 256
    for i, (hd, H, Hkv, T, p0, win, kv_f16) in enumerate(nf_cases):
        used = p0 + T
        q = data(T * H * hd, 1000 + i, 0.5)
        k = data(used * Hkv * hd, 1100 + i, 0.5)
        v = data(used * Hkv * hd, 1200 + i)
        kv_t = F16 if kv_f16 else F32
        mask = causal_mask(T, p0, win, n_kv)
        kk = lambda c, h, d, k=k, Hkv=Hkv, hd=hd, used=used: k[(c * Hkv + h) * hd + d] if c < used else 0.0
        vv = lambda c, h, d, v=v, Hkv=Hkv, hd=hd, used=used: v[(c * Hkv + h) * hd + d] if c < used else 0.0

        def nf(ctx, q=q, mask=mask, hd=hd, H=H, Hkv=Hkv, T=T, kv_t=kv_t, kk=kk, vv=vv):
            qt = base.ggml_new_tensor_3d(ctx, F32, hd, H, T)
            kt = base.ggml_new_tensor_3d(ctx, kv_t, hd, n_kv, Hkv)
            vt = base.ggml_new_tensor_3d(ctx, kv_t, n_kv, hd, Hkv)  # transposed V cache
            mt = base.ggml_new_tensor_2d(ctx, F32, n_kv, T)
            put(qt, q)
            put(kt, [kk(c, h, d) for h in range(Hkv) for c in range(n_kv) for d in range(hd)], kv_t)
            put(vt, [vv(c, h, d) for h in range(Hkv) for d in range(hd) for c in range(n_kv)], kv_t)
            put(mt, mask)
            qp = base.ggml_permute(ctx, qt, 0, 2, 1, 3)
            kq = base.ggml_mul_mat(ctx, kt, qp)
            kq = base.ggml_soft_max_ext(ctx, kq, mt, 1.0, 0.0)
            return base.ggml_mul_mat(ctx, vt, kq), T * H * hd  # [hd, T, H]
        o = run(nf)
        out = [o[(h * T + t) * hd + d] for t in range(T) for h in range(H) for d in range(hd)]
        cvt = (lambda vals: u16s([f16bits(x) for x in vals])) if kv_f16 else (lambda vals: f32s(vals))
        qf = [struct.unpack("<f", struct.pack("<f", x))[0] for x in q]
        rec(8, struct.pack("<7I", hd, H, Hkv, T, p0, win, int(kv_f16)) + f32s(qf) + cvt(k) + cvt(v) + f32s(out))

    h = 0xcbf29ce484222325  # FNV-1a 64 over the entries ggml_gelu reads (finite |x| < 10), u16 LE bytes
    table = (C.c_uint16 * 65536).in_dll(cpu, "ggml_table_gelu_f16")
    for i in range(65536):
        x = struct.unpack("<e", struct.pack("<H", i))[0]
        if math.isfinite(x) and abs(x) < 10.0:
            for b in struct.pack("<H", table[i]):
                h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    rec(7, struct.pack("<Q", h))
    sys.stdout.buffer.write(struct.pack("<I", len(recs)) + b"".join(recs))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(sys.argv[2])
        return
    recs, count = b"", 0
    for variant in VARIANTS:
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", variant], check=True, capture_output=True).stdout
        count += struct.unpack("<I", out[:4])[0]
        recs += out[4:]
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "gemma4_ggml_vectors.bin")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(b"OXG4" + struct.pack("<I", count) + recs)
    print("wrote", path, count, "records", 8 + len(recs), "bytes")


if __name__ == "__main__":
    main()
