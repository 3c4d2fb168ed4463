#!/usr/bin/env python3
"""An MLX-style (mlx-community) checkpoint from an HF checkpoint, with numpy only: the independent
reference for oxinfer's MLX reader (docs/format.md, "MLX checkpoints").

  mlx_checkpoint.py HF_DIR MLX_DIR REF_DIR --family qwen35|gemma4 [--bits 4] [--group 64]
                    [--scale-dtype bf16|f16|f32] [--router-8bit] [--corrupt-scales] [--no-ref]

MLX_DIR gets what mlx-lm's convert writes: mlx.core.quantize's affine groups (documented arithmetic,
per group of G along the last axis: scale = (max - min) / (2^bits - 1), bias = min,
q = round((w - bias) / scale) clipped to [0, 2^bits - 1]; codes packed 32/bits per uint32, the first
in the lowest bits; scales and biases in the source float type), under mlx-lm's sanitised names and
layouts (Qwen 3.5: language_model.model.*, conv1d [C, K, 1], +1 on the (1 + w) norms, MoE experts as
switch_mlp.*, MTP and vision tower dropped; Gemma 4: language_model.*, per-layer embedding split
per layer), config.json with "quantization" (and per-module overrides: --router-8bit quantises the
MoE router and shared-expert gate at 8 bits, groups of 64, as mlx-lm's Qwen 3.5 predicate does).

REF_DIR gets the HF checkpoint again with every quantised weight replaced by its numpy dequantisation
(scale * q + bias in float32, two roundings) and the shifted norms by float32(w + 1) - 1: the weights
oxinfer must be running when it reads MLX_DIR, in a form llama.cpp can be given (via a f32 GGUF).
--corrupt-scales drops the last column of one scales tensor (a bad-input case).
"""
import argparse
import json
import os
import shutil
import struct
import sys

import numpy as np

DT = {"F32": np.float32, "F16": np.float16, "BF16": np.uint16, "I64": np.int64, "I32": np.int32, "U32": np.uint32,
      "U8": np.uint8, "I8": np.int8, "BOOL": np.bool_}


def read_st(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        base = 8 + n
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        a = np.frombuffer(raw[base + b: base + e].tobytes(), dtype=DT[info["dtype"]]).reshape(info["shape"])
        out[name] = (info["dtype"], a)
    return out


def write_st(path, tensors):
    header, blobs, off = {}, [], 0
    for name, (dt, a) in tensors.items():
        b = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": dt, "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def to_f32(dt, a):
    if dt == "BF16":
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float32)


def from_f32(dt, a):
    """float32 → the storage type (bf16: round to nearest even, as mlx's astype)."""
    a = np.asarray(a, dtype=np.float32)
    if dt == "BF16":
        u = a.view(np.uint32).astype(np.uint64)
        return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    return a.astype(np.float16 if dt == "F16" else np.float32)


def quantize(w, bits, group, sdt):
    """w: float32 [..., n] → (codes uint32 [..., n·bits/32], scales, biases [..., n/group] in sdt, dequantised f32)."""
    shape = w.shape
    g = w.reshape(-1, group).astype(np.float32)
    lo, hi = g.min(axis=1), g.max(axis=1)
    n_bins = np.float32(2 ** bits - 1)
    scale = ((hi - lo) / n_bins).astype(np.float32)
    # Stored in the source float type; the codes are chosen against the stored values.
    s_st, b_st = from_f32(sdt, scale), from_f32(sdt, lo)
    s, b = to_f32(sdt, s_st), to_f32(sdt, b_st)
    safe = np.where(s == 0, np.float32(1), s)
    q = np.clip(np.round((g - b[:, None]) / safe[:, None]), 0, 2 ** bits - 1).astype(np.uint32)
    q = np.where(s[:, None] == 0, np.uint32(0), q)
    deq = (s[:, None] * q.astype(np.float32)).astype(np.float32) + b[:, None]  # two roundings
    per = 32 // bits
    qq = q.reshape(-1, per)
    words = np.zeros(qq.shape[0], dtype=np.uint32)
    for i in range(per):
        words |= qq[:, i] << np.uint32(i * bits)
    lead = shape[:-1]
    return (words.reshape(*lead, shape[-1] * bits // 32), s_st.reshape(*lead, shape[-1] // group),
            b_st.reshape(*lead, shape[-1] // group), deq.reshape(shape).astype(np.float32))


def load_hf(d):
    idx = os.path.join(d, "model.safetensors.index.json")
    files = sorted(set(json.load(open(idx))["weight_map"].values())) if os.path.exists(idx) else ["model.safetensors"]
    t = {}
    for f in files:
        t.update(read_st(os.path.join(d, f)))
    return t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("hf")
    ap.add_argument("mlx")
    ap.add_argument("ref")
    ap.add_argument("--family", required=True, choices=["qwen35", "gemma4"])
    ap.add_argument("--bits", type=int, default=4)
    ap.add_argument("--group", type=int, default=64)
    ap.add_argument("--scale-dtype", default="bf16", choices=["bf16", "f16", "f32"])
    ap.add_argument("--router-8bit", action="store_true")
    ap.add_argument("--corrupt-scales", action="store_true")
    ap.add_argument("--no-ref", action="store_true", help="write only MLX_DIR (large models, e.g. for bench)")
    a = ap.parse_args()
    sdt = {"bf16": "BF16", "f16": "F16", "f32": "F32"}[a.scale_dtype]
    config = json.load(open(os.path.join(a.hf, "config.json")))
    tc = config.get("text_config", config)
    tied = config.get("tie_word_embeddings", tc.get("tie_word_embeddings", False))
    src = load_hf(a.hf)
    mlx, ref, overrides = {}, {}, {}
    corrupted = False

    def put_quant(mlx_base, hf_name, dt, w32, bits, group):
        nonlocal corrupted
        codes, s, b, deq = quantize(w32, bits, group, sdt)
        if a.corrupt_scales and not corrupted:
            s = s[..., :-1]
            corrupted = True
        mlx[mlx_base + ".weight"] = ("U32", codes)
        mlx[mlx_base + ".scales"] = (sdt, s)
        mlx[mlx_base + ".biases"] = (sdt, b)
        if (bits, group) != (a.bits, a.group):
            overrides[mlx_base] = {"group_size": group, "bits": bits}
        return deq

    for name, (dt, arr) in src.items():
        if name.startswith("mtp.") or ".visual." in name or name.startswith("model.visual") or "vision_tower" in name \
                or "embed_vision" in name or "audio" in name:
            continue  # dropped by mlx-lm (the reference keeps only what the text model reads)
        if a.family == "qwen35":
            mname = name.replace("model.language_model.", "language_model.model.", 1)
            if name == "lm_head.weight":
                if tied:
                    continue
                mname = "language_model.lm_head.weight"
        else:
            mname = name[len("model."):] if name.startswith("model.") else name
            mname = mname.replace("language_model.model.", "language_model.", 1)
        w = to_f32(dt, arr)
        is_float = dt in ("F32", "F16", "BF16")
        shift = a.family == "qwen35" and w.ndim == 1 and (
            name.endswith(".input_layernorm.weight") or name.endswith(".post_attention_layernorm.weight")
            or name == "model.language_model.norm.weight" or name.endswith(".q_norm.weight") or name.endswith(".k_norm.weight"))
        if shift:
            w1 = (w + np.float32(1)).astype(np.float32)
            mlx[mname] = ("F32", w1) if dt == "F32" else (dt, from_f32(dt, w1))
            ref[name] = ("F32", (to_f32(mlx[mname][0], mlx[mname][1]) - np.float32(1)).astype(np.float32))
            continue
        if a.family == "qwen35" and name.endswith("conv1d.weight"):
            mlx[mname] = (dt, np.moveaxis(arr, 2, 1))  # [C, 1, K] → [C, K, 1]
            ref[name] = (dt, arr)
            continue
        if a.family == "qwen35" and name.endswith("experts.gate_up_proj"):
            I = arr.shape[1] // 2
            pre = mname[: -len("experts.gate_up_proj")] + "switch_mlp."
            dg = put_quant(pre + "gate_proj", name, dt, w[:, :I, :], a.bits, a.group)
            du = put_quant(pre + "up_proj", name, dt, w[:, I:, :], a.bits, a.group)
            ref[name] = ("F32", np.concatenate([dg, du], axis=1))
            continue
        if a.family == "qwen35" and name.endswith("experts.down_proj"):
            pre = mname[: -len("experts.down_proj")] + "switch_mlp."
            ref[name] = ("F32", put_quant(pre + "down_proj", name, dt, w, a.bits, a.group))
            continue
        if a.family == "gemma4" and name.endswith("embed_tokens_per_layer.weight"):
            L = tc["num_hidden_layers"]
            P = w.shape[1] // L
            if P % a.group:  # too narrow to quantise (mlx-lm's predicate): split only
                for i in range(L):
                    mlx[mname[: -len(".weight")] + f".{i}.weight"] = (dt, np.ascontiguousarray(arr[:, i * P:(i + 1) * P]))
                ref[name] = (dt, arr)
                continue
            parts = [put_quant(mname[: -len(".weight")] + f".{i}", name, dt, w[:, i * P:(i + 1) * P], a.bits, a.group)
                     for i in range(L)]
            ref[name] = ("F32", np.concatenate(parts, axis=1))
            continue
        linear = is_float and name.endswith(".weight") and w.ndim == 2 and w.shape[-1] % a.group == 0 \
            and "norm" not in name and "conv" not in name
        if linear:
            bits, group = a.bits, a.group
            if a.router_8bit and (name.endswith("mlp.gate.weight") or name.endswith("shared_expert_gate.weight")):
                bits, group = 8, 64
            ref[name] = ("F32", put_quant(mname[: -len(".weight")], name, dt, w, bits, group))
            continue
        mlx[mname] = (dt, arr)
        ref[name] = (dt, arr)

    for d in (a.mlx,) if a.no_ref else (a.mlx, a.ref):
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        for f in os.listdir(a.hf):
            if not f.startswith("model.safetensors") and f != "config.json":
                p = os.path.join(a.hf, f)
                if os.path.isfile(p):
                    shutil.copy(p, os.path.join(d, f))
    write_st(os.path.join(a.mlx, "model.safetensors"), mlx)
    if not a.no_ref:
        write_st(os.path.join(a.ref, "model.safetensors"), ref)
    q = {"group_size": a.group, "bits": a.bits, "mode": "affine", **overrides}
    json.dump({**config, "quantization": q, "quantization_config": q}, open(os.path.join(a.mlx, "config.json"), "w"), indent=1)
    if not a.no_ref:
        json.dump(config, open(os.path.join(a.ref, "config.json"), "w"), indent=1)
    print(f"mlx_checkpoint: {sum(1 for k in mlx if k.endswith('.scales'))} quantised tensors "
          f"({a.bits} bits, groups of {a.group}, {sdt} scales, {len(overrides)} overrides)")


if __name__ == "__main__":
    sys.exit(main())
