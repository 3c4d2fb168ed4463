#!/usr/bin/env python3
"""Writes the model-file test corpus, straight from the format specs with struct + json (no
oxinfer code involved):

  bad/   one malformed input per case: GGUF files, safetensors files, HF checkpoint directories.
         Every one must be rejected with a clean one-line error (tests/format/corpus_test.cpp,
         tests/e2e/inspect_bad.test.sh).
  good/  files from this independent writer that must load (independent.safetensors,
         independent.gguf) with the values listed in good/expected.json.

Run from anywhere: python3 tests/data/make_corpus.py  (rewrites bad/ and good/ in place).
"""
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
BAD = os.path.join(HERE, "bad")
GOOD = os.path.join(HERE, "good")

# ---------------------------------------------------------------- GGUF pieces (little-endian)
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)


def s(x):
    b = x if isinstance(x, bytes) else x.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, typ, payload):
    return s(key) + struct.pack("<I", typ) + payload


def kv_str(key, val):
    return kv(key, STR, s(val))


def kv_u32(key, val):
    return kv(key, U32, struct.pack("<I", val))


def tinfo(name, ne, typ, off):
    return s(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne) + struct.pack("<IQ", typ, off)


def pad(b, a=32):
    return b + b"\0" * ((a - len(b) % a) % a)


def gguf(kvs, infos, data=b"", version=3, n_kv=None, n_t=None, align=32):
    h = b"GGUF" + struct.pack("<IQQ", version, len(infos) if n_t is None else n_t, len(kvs) if n_kv is None else n_kv)
    h += b"".join(kvs) + b"".join(infos)
    return pad(h, align) + data


ARCH = kv_str("general.architecture", "corpus")
F32_2x4 = struct.pack("<8f", *range(8))


def good_gguf():
    return gguf([ARCH], [tinfo("w", [4, 2], 0, 0)], F32_2x4)


def write(name, data):
    with open(os.path.join(BAD, name), "wb") as f:
        f.write(data)


def gguf_cases():
    g = good_gguf()
    hdr_end = len(g) - 32
    write("gguf_empty.gguf", b"")
    write("gguf_bad_magic.gguf", b"GGUX" + g[4:])
    write("gguf_text.gguf", b"hello, this is not a model\n")
    write("gguf_version1.gguf", gguf([ARCH], [], version=1))
    write("gguf_version99.gguf", gguf([ARCH], [], version=99))
    write("gguf_bigendian.gguf", b"GGUF" + struct.pack(">IQQ", 3, 0, 1) + g[24:])
    write("gguf_trunc_counts.gguf", g[:14])
    write("gguf_trunc_key.gguf", g[:24 + 12])
    write("gguf_trunc_value.gguf", g[:24 + 8 + 20 + 4 + 10])
    write("gguf_trunc_tensor_info.gguf", g[:hdr_end - 40])
    write("gguf_trunc_data.gguf", g[:-5])
    write("gguf_huge_kv_count.gguf", gguf([ARCH], [], n_kv=1 << 62))
    write("gguf_huge_tensor_count.gguf", gguf([ARCH], [], n_t=(1 << 64) - 1))
    write("gguf_huge_string_len.gguf", gguf([struct.pack("<Q", 1 << 60) + b"abc"], []))
    write("gguf_huge_value_string.gguf", gguf([kv("k", STR, struct.pack("<Q", (1 << 64) - 1))], []))
    write("gguf_huge_array_len.gguf", gguf([kv("k", ARR, struct.pack("<IQ", U32, 1 << 61))], []))
    write("gguf_huge_string_array.gguf", gguf([kv("k", ARR, struct.pack("<IQ", STR, 1 << 40) + s("x"))], []))
    write("gguf_bad_value_type.gguf", gguf([kv("k", 13, b"\0" * 8)], []))
    write("gguf_bad_array_type.gguf", gguf([kv("k", ARR, struct.pack("<IQ", 77, 1) + b"\0" * 8)], []))
    deep = struct.pack("<IQ", ARR, 1) * 200 + struct.pack("<IQ", U8, 0)
    write("gguf_nested_too_deep.gguf", gguf([kv("k", ARR, deep)], []))
    write("gguf_dup_key.gguf", gguf([ARCH, ARCH], []))
    write("gguf_empty_key.gguf", gguf([kv_str("", "x")], []))
    write("gguf_key_bad_utf8.gguf", gguf([kv_str(b"general.\xff\xfe", "x")], []))
    write("gguf_key_overlong_utf8.gguf", gguf([kv_str(b"k\xc0\xaf", "x")], []))
    write("gguf_tensor_bad_utf8.gguf", gguf([ARCH], [tinfo(b"w\xed\xa0\x80", [4, 2], 0, 0)], F32_2x4))
    write("gguf_tensor_empty_name.gguf", gguf([ARCH], [tinfo("", [4, 2], 0, 0)], F32_2x4))
    write("gguf_dup_tensor.gguf", gguf([ARCH], [tinfo("w", [4], 0, 0), tinfo("w", [4], 0, 32)], pad(F32_2x4[:16]) + F32_2x4[:16]))
    write("gguf_five_dims.gguf", gguf([ARCH], [tinfo("w", [1, 1, 1, 1, 8], 0, 0)], F32_2x4))
    write("gguf_huge_dims_count.gguf", gguf([ARCH], [tinfo("w", [], 0, 0)[:-8].replace(struct.pack("<I", 0), struct.pack("<I", 0xFFFFFFFF), 1) + struct.pack("<Q", 0)], F32_2x4))
    write("gguf_negative_dim.gguf", gguf([ARCH], [tinfo("w", [(1 << 64) - 4, 1], 0, 0)], F32_2x4))
    write("gguf_dim_overflow.gguf", gguf([ARCH], [tinfo("w", [1 << 32, 1 << 32, 1 << 32], 0, 0)], F32_2x4))
    write("gguf_size_overflow.gguf", gguf([ARCH], [tinfo("w", [1 << 62, 1], 0, 0)], F32_2x4))
    write("gguf_removed_type.gguf", gguf([ARCH], [tinfo("w", [32, 1], 4, 0)], b"\0" * 32))
    write("gguf_unknown_type.gguf", gguf([ARCH], [tinfo("w", [4, 2], 1000, 0)], F32_2x4))
    write("gguf_misaligned_offset.gguf", gguf([ARCH], [tinfo("w", [2], 0, 4)], F32_2x4))
    write("gguf_overlap.gguf", gguf([ARCH], [tinfo("a", [8], 0, 0), tinfo("b", [8], 0, 0)], F32_2x4))
    write("gguf_overlap_partial.gguf", gguf([ARCH], [tinfo("a", [16], 0, 0), tinfo("b", [8], 0, 32)], F32_2x4 * 3))
    write("gguf_offset_outside.gguf", gguf([ARCH], [tinfo("w", [8], 0, 1 << 40)], F32_2x4))
    write("gguf_offset_wraps.gguf", gguf([ARCH], [tinfo("w", [8], 0, (1 << 64) - 32)], F32_2x4))
    write("gguf_size_outside.gguf", gguf([ARCH], [tinfo("w", [9], 0, 0)], F32_2x4))
    write("gguf_q4k_row_not_block.gguf", gguf([ARCH], [tinfo("w", [100, 1], 12, 0)], b"\0" * 256))
    write("gguf_q8_row_not_block.gguf", gguf([ARCH], [tinfo("w", [33, 2], 8, 0)], b"\0" * 256))
    write("gguf_alignment_3.gguf", gguf([ARCH, kv_u32("general.alignment", 3)], []))
    write("gguf_alignment_0.gguf", gguf([ARCH, kv_u32("general.alignment", 0)], []))
    write("gguf_alignment_string.gguf", gguf([ARCH, kv_str("general.alignment", "32")], []))
    write("gguf_alignment_huge.gguf", gguf([ARCH, kv_u32("general.alignment", 1 << 31)], []))
    write("gguf_split_count_bad.gguf", gguf([ARCH, kv("split.count", U16, struct.pack("<H", 3))], []))
    # split.count says 2 but only part 1 exists (named as a split)
    write("gguf_split_missing-00001-of-00002.gguf",
          gguf([ARCH, kv("split.no", U16, struct.pack("<H", 0)), kv("split.count", U16, struct.pack("<H", 2))], []))
    write("gguf_split_count_type.gguf", gguf([ARCH, kv_str("split.count", "2")], []))
    write("gguf_arch_not_string.gguf", gguf([kv_u32("general.architecture", 5)], []))


# ---------------------------------------------------------------- safetensors
def st(header, data=b"", raw_header=None):
    h = raw_header if raw_header is not None else json.dumps(header, separators=(",", ":")).encode()
    return struct.pack("<Q", len(h)) + h + data


def st_cases():
    t = lambda dt, shape, b, e: {"dtype": dt, "shape": shape, "data_offsets": [b, e]}
    d16 = bytes(range(16))
    write("st_empty.safetensors", b"")
    write("st_short.safetensors", b"\x02\0\0")
    write("st_header_len_huge.safetensors", struct.pack("<Q", (1 << 64) - 1) + b"{}")
    write("st_header_len_over_100mib.safetensors", struct.pack("<Q", 100 * 1024 * 1024 + 1) + b"{}" + b" " * 64)
    write("st_header_len_past_end.safetensors", struct.pack("<Q", 4096) + b"{}")
    write("st_bad_json.safetensors", st(None, d16, b'{"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]'))
    write("st_not_object.safetensors", st([1, 2, 3]))
    write("st_bad_utf8.safetensors", st(None, d16, b'{"w\xff": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}'))
    write("st_unknown_dtype.safetensors", st({"w": t("F17", [4], 0, 16)}, d16))
    write("st_dtype_not_string.safetensors", st({"w": t(4, [4], 0, 16)}, d16))
    write("st_shape_negative.safetensors", st({"w": t("F32", [-4], 0, 16)}, d16))
    write("st_shape_float.safetensors", st({"w": t("F32", [4.0], 0, 16)}, d16))
    write("st_shape_string.safetensors", st({"w": t("F32", "4", 0, 16)}, d16))
    write("st_shape_overflow.safetensors", st({"w": t("F32", [1 << 32, 1 << 32, 1 << 32], 0, 16)}, d16))
    write("st_size_mismatch.safetensors", st({"w": t("F32", [3], 0, 16)}, d16))
    write("st_offset_outside.safetensors", st({"w": t("F32", [4], 1 << 40, (1 << 40) + 16)}, d16))
    write("st_offset_huge.safetensors", st(None, d16, b'{"w":{"dtype":"F32","shape":[4],"data_offsets":[0,99999999999999999999999]}}'))
    write("st_offsets_reversed.safetensors", st({"w": t("F32", [0], 16, 0)}, d16))
    write("st_offsets_short.safetensors", st({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0]}}, d16))
    write("st_missing_offsets.safetensors", st({"w": {"dtype": "F32", "shape": [4]}}, d16))
    write("st_overlap.safetensors", st({"a": t("F32", [2], 0, 8), "b": t("F32", [2], 4, 12)}, d16))
    write("st_dup_tensor.safetensors", st(None, d16, b'{"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                                                  b'"w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}}'))
    write("st_metadata_nonstring.safetensors", st({"__metadata__": {"format": 1}}))
    write("st_metadata_not_object.safetensors", st({"__metadata__": "pt"}))
    write("st_entry_not_object.safetensors", st({"w": [1, 2]}, d16))
    write("st_deep_json.safetensors", st(None, b"", b'{"a":' + b"[" * 5000 + b"]" * 5000 + b"}"))


# ---------------------------------------------------------------- HF checkpoint directories
def st_good(names):
    hdr, data = {}, b""
    for n in names:
        hdr[n] = {"dtype": "F32", "shape": [2], "data_offsets": [len(data), len(data) + 8]}
        data += struct.pack("<2f", 1.0, 2.0)
    h = json.dumps(hdr).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data


def hf_dir(name, files):
    d = os.path.join(BAD, name)
    os.makedirs(d)
    for fn, content in files.items():
        with open(os.path.join(d, fn), "wb") as f:
            f.write(content if isinstance(content, bytes) else content.encode())


def hf_cases():
    w = st_good(["a"])
    cfg = '{"model_type": "m"}'
    hf_dir("hf_no_config", {"model.safetensors": w})
    hf_dir("hf_config_bad_json", {"config.json": '{"model_type": ', "model.safetensors": w})
    hf_dir("hf_config_array", {"config.json": "[1, 2]", "model.safetensors": w})
    hf_dir("hf_config_empty", {"config.json": "", "model.safetensors": w})
    hf_dir("hf_config_bad_utf8", {"config.json": b'{"model_type": "\xff"}', "model.safetensors": w})
    hf_dir("hf_text_config_number", {"config.json": '{"text_config": 3}', "model.safetensors": w})
    hf_dir("hf_model_type_number", {"config.json": '{"model_type": 3}', "model.safetensors": w})
    hf_dir("hf_architectures_string", {"config.json": '{"architectures": "X"}', "model.safetensors": w})
    hf_dir("hf_no_weights", {"config.json": cfg})
    hf_dir("hf_bad_weights", {"config.json": cfg, "model.safetensors": b"\x10\0\0\0\0\0\0\0{not json}"})
    hf_dir("hf_generation_config_bad", {"config.json": cfg, "generation_config.json": "[]", "model.safetensors": w})
    hf_dir("hf_tokenizer_config_bad", {"config.json": cfg, "tokenizer_config.json": "{,}", "model.safetensors": w})
    hf_dir("hf_chat_template_number", {"config.json": cfg, "tokenizer_config.json": '{"chat_template": 5}', "model.safetensors": w})
    hf_dir("hf_index_bad_json", {"config.json": cfg, "model.safetensors.index.json": "{"})
    hf_dir("hf_index_no_weight_map", {"config.json": cfg, "model.safetensors.index.json": '{"metadata": {}}'})
    hf_dir("hf_index_weight_map_list", {"config.json": cfg, "model.safetensors.index.json": '{"weight_map": []}'})
    hf_dir("hf_index_value_number", {"config.json": cfg, "model.safetensors.index.json": '{"weight_map": {"a": 1}}'})
    hf_dir("hf_index_missing_shard", {"config.json": cfg, "model.safetensors.index.json": '{"weight_map": {"a": "nope.safetensors"}}'})
    hf_dir("hf_index_path_traversal", {"config.json": cfg, "model.safetensors.index.json": '{"weight_map": {"a": "../../etc/passwd"}}'})
    hf_dir("hf_index_absolute_path", {"config.json": cfg, "model.safetensors.index.json": '{"weight_map": {"a": "/etc/passwd"}}'})
    hf_dir("hf_index_tensor_absent", {"config.json": cfg, "s1.safetensors": w,
                                      "model.safetensors.index.json": '{"weight_map": {"a": "s1.safetensors", "b": "s1.safetensors"}}'})
    hf_dir("hf_index_dup_across_shards", {"config.json": cfg, "s1.safetensors": w, "s2.safetensors": w,
                                          "model.safetensors.index.json": '{"weight_map": {"a": "s1.safetensors", "b": "s2.safetensors"}}'})
    hf_dir("hf_index_wrong_shard", {"config.json": cfg, "s1.safetensors": st_good(["a"]), "s2.safetensors": st_good(["b"]),
                                    "model.safetensors.index.json": '{"weight_map": {"a": "s2.safetensors", "b": "s1.safetensors"}}'})


# ---------------------------------------------------------------- good files
def good_cases():
    # safetensors with a header padded by spaces, two dtypes, __metadata__, a scalar.
    hdr = {"__metadata__": {"format": "pt", "writer": "make_corpus.py"},
           "emb": {"dtype": "BF16", "shape": [3, 2], "data_offsets": [0, 12]},
           "scale": {"dtype": "F32", "shape": [], "data_offsets": [12, 16]},
           "ids": {"dtype": "I64", "shape": [2], "data_offsets": [16, 32]}}
    h = json.dumps(hdr).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    bf16 = lambda x: struct.pack("<I", struct.unpack("<I", struct.pack("<f", x))[0])[2:]
    data = b"".join(bf16(x) for x in [1.0, -2.0, 0.5, 3.0, 0.25, -0.125]) + struct.pack("<f", 7.5) + struct.pack("<2q", -1, 1 << 40)
    with open(os.path.join(GOOD, "independent.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + data)
    # GGUF v3 with alignment 64, every scalar type, a string array, a nested array, and tensors of
    # three types (F32, Q8_0, F16), one tensor at a non-zero padded offset.
    kvs = [kv_str("general.architecture", "corpus"), kv_u32("general.alignment", 64),
           kv("t.u8", U8, struct.pack("<B", 250)), kv("t.i8", I8, struct.pack("<b", -5)),
           kv("t.u16", U16, struct.pack("<H", 65000)), kv("t.i16", I16, struct.pack("<h", -32000)),
           kv("t.i32", I32, struct.pack("<i", -7)), kv("t.f32", F32, struct.pack("<f", 0.25)),
           kv("t.bool", BOOL, b"\x01"), kv("t.u64", U64, struct.pack("<Q", 1 << 40)),
           kv("t.i64", I64, struct.pack("<q", -(1 << 40))), kv("t.f64", F64, struct.pack("<d", 2.5)),
           kv("t.strs", ARR, struct.pack("<IQ", STR, 3) + s("a") + s("é") + s("")),
           kv("t.nested", ARR, struct.pack("<IQ", ARR, 2) + struct.pack("<IQ", I32, 2) + struct.pack("<2i", 1, 2)
              + struct.pack("<IQ", I32, 1) + struct.pack("<i", 3))]
    q8 = struct.pack("<e", 0.5) + bytes(range(32))  # one Q8_0 block: f16 scale + 32 int8
    data = pad(F32_2x4, 64) + pad(q8, 64) + struct.pack("<4e", 1, 2, 3, 4)
    infos = [tinfo("f32", [4, 2], 0, 0), tinfo("q8", [32, 1], 8, 64), tinfo("f16", [2, 2], 1, 128)]
    with open(os.path.join(GOOD, "independent.gguf"), "wb") as f:
        f.write(gguf(kvs, infos, data, align=64))


def main():
    for d in (BAD, GOOD):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
    gguf_cases()
    st_cases()
    hf_cases()
    good_cases()
    print(f"wrote {len(os.listdir(BAD))} bad cases and {len(os.listdir(GOOD))} good files")


if __name__ == "__main__":
    main()
