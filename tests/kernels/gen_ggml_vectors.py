#!/usr/bin/env python3
"""Writes tests/kernels/data/ggml_vectors.bin: llama.cpp's own quantisation, dequantisation and
dot products (libggml from node-llama-cpp, through ctypes) on deterministic inputs, so the kernel
tests check our block layouts and numerics against ggml's bytes, not against our own reading.

    NLC_DIR=tools/node /usr/bin/python3 tests/kernels/gen_ggml_vectors.py

File: magic 'OXGV', u32 count; per record: u32 ggml type, u32 rows, u32 cols, then
  rows*cols f32 input W, cols f32 activation x, ggml_quantize_chunk(W) bytes,
  rows*cols f32 ggml dequantised W, rows f32 ggml vec_dot(W row, x quantised to vec_dot_type).
"""
import ctypes as C
import math
import os
import struct

LIB = os.path.join(os.environ.get("NLC_DIR", "tools/node"), "node_modules/@node-llama-cpp/linux-x64/bins/linux-x64")
base = C.CDLL(os.path.join(LIB, "libggml-base.so"), mode=C.RTLD_GLOBAL)
cpu = C.CDLL(os.path.join(LIB, "libggml-cpu-haswell.so"), mode=C.RTLD_GLOBAL)  # AVX2 path


class TypeTraits(C.Structure):
    _fields_ = [("type_name", C.c_char_p), ("blck_size", C.c_int64), ("blck_size_interleave", C.c_int64),
                ("type_size", C.c_size_t), ("is_quantized", C.c_bool), ("to_float", C.c_void_p),
                ("from_float_ref", C.c_void_p)]


class TypeTraitsCpu(C.Structure):
    _fields_ = [("from_float", C.c_void_p), ("vec_dot", C.c_void_p), ("vec_dot_type", C.c_int),
                ("nrows", C.c_int64)]


base.ggml_get_type_traits.restype = C.POINTER(TypeTraits)
base.ggml_get_type_traits.argtypes = [C.c_int]
base.ggml_quantize_chunk.restype = C.c_size_t
base.ggml_quantize_chunk.argtypes = [C.c_int, C.c_void_p, C.c_void_p, C.c_int64, C.c_int64, C.c_int64, C.c_void_p]
base.ggml_row_size.restype = C.c_size_t
base.ggml_row_size.argtypes = [C.c_int, C.c_int64]
cpu.ggml_get_type_traits_cpu.restype = C.POINTER(TypeTraitsCpu)
cpu.ggml_get_type_traits_cpu.argtypes = [C.c_int]
cpu.ggml_cpu_init()

TO_FLOAT = C.CFUNCTYPE(None, C.c_void_p, C.c_void_p, C.c_int64)
FROM_FLOAT = C.CFUNCTYPE(None, C.c_void_p, C.c_void_p, C.c_int64)
VEC_DOT = C.CFUNCTYPE(None, C.c_int, C.c_void_p, C.c_size_t, C.c_void_p, C.c_size_t, C.c_void_p, C.c_size_t, C.c_int)

TYPES = {"F16": 1, "Q4_0": 2, "Q4_1": 3, "Q5_0": 6, "Q5_1": 7, "Q8_0": 8, "Q2_K": 10, "Q3_K": 11, "Q4_K": 12,
         "Q5_K": 13, "Q6_K": 14, "IQ4_NL": 20, "IQ4_XS": 23, "BF16": 30,
         # The codebook types and MXFP4 (dequantised by kernels/ref_iq.cpp): quantised by ggml with
         # a uniform importance matrix (IQ2_XXS/XS and IQ1_S/M refuse to quantise without one).
         "IQ2_XXS": 16, "IQ2_XS": 17, "IQ3_XXS": 18, "IQ1_S": 19, "IQ3_S": 21, "IQ2_S": 22, "IQ1_M": 29,
         "MXFP4": 39}
CODEBOOK = {16, 17, 18, 19, 21, 22, 29, 39}


def data(n, seed, scale):
    # Deterministic, heavy-ish tails: a sum of sines (no RNG dependence).
    return [scale * (math.sin(seed * 12.9898 + i * 78.233) * 43758.5453 % 1.0 - 0.5) *
            (1.0 + 3.0 * (i % 97 == 0)) for i in range(n)]


def random_blocks(t, rows, rb, seed):
    """Random bytes as blocks (every codebook index and sign pattern is a valid block), with the
    scale fields set to modest values so that no element is inf or NaN."""
    bs = base.ggml_get_type_traits(t).contents.type_size
    raw = bytearray(int(abs(v) * 1e6) & 255 for v in data(rows * rb, seed, 1.0))
    for off in range(0, len(raw), bs):
        f = 0.001 + 0.004 * raw[off + 1] / 255.0  # f16 super-scale
        h = struct.unpack("<H", struct.pack("<e", f))[0]
        if t == 39:  # MXFP4: E8M0 exponent byte
            raw[off] = 112 + raw[off] % 16
        elif t == 29:  # IQ1_M: the f16 lives in the top nibbles of the four scale u16
            for k in range(4):
                o = off + 48 + 2 * k + 1
                raw[o] = (raw[o] & 0x0F) | (((h >> (4 * k)) & 15) << 4)
        else:
            raw[off:off + 2] = struct.pack("<H", h)
    return raw


def main():
    out = bytearray(b"OXGV")
    recs = []
    for name, t in TYPES.items():
        shapes = [(3, 256), (5, 768)] + ([(2, 2048)] if t in CODEBOOK else [])
        for rows, cols in shapes:
            n = rows * cols
            w = (C.c_float * n)(*data(n, t * 7 + rows, 0.2))
            x = (C.c_float * cols)(*data(cols, t * 13 + rows, 2.0))
            rb = base.ggml_row_size(t, cols)
            q = (C.c_uint8 * (rb * rows))()
            if cols == 2048:  # random blocks (w is not their source: the test skips requantising)
                q[:] = random_blocks(t, rows, rb, t * 5 + 1)
                w = (C.c_float * n)()
            elif t in CODEBOOK:
                ones = (C.c_float * cols)(*([1.0] * cols))
                base.ggml_quantize_chunk(t, w, q, 0, rows, cols, ones)
            else:
                base.ggml_quantize_chunk(t, w, q, 0, rows, cols, None)
            deq = (C.c_float * n)()
            TO_FLOAT(base.ggml_get_type_traits(t).contents.to_float)(q, deq, n)
            ct = cpu.ggml_get_type_traits_cpu(t).contents
            vt = ct.vec_dot_type
            xq = (C.c_uint8 * base.ggml_row_size(vt, cols))()
            ff = cpu.ggml_get_type_traits_cpu(vt).contents.from_float if vt != t or True else None
            FROM_FLOAT(cpu.ggml_get_type_traits_cpu(vt).contents.from_float)(x, xq, cols)
            dots = (C.c_float * rows)()
            vd = VEC_DOT(ct.vec_dot)
            for r in range(rows):
                s = C.c_float()
                vd(cols, C.byref(s), 0, C.addressof(q) + r * rb, 0, xq, 0, 1)
                dots[r] = s.value
            rec = struct.pack("<III", t, rows, cols) + bytes(w) + bytes(x) + bytes(q) + bytes(deq) + bytes(dots)
            recs.append(rec)
            print(name, rows, cols, "row bytes", rb, "vec_dot_type", vt)
    out += struct.pack("<I", len(recs))
    for r in recs:
        out += r
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "ggml_vectors.bin")
    with open(path, "wb") as f:
        f.write(out)
    print("wrote", path, len(out), "bytes")


if __name__ == "__main__":
    main()
