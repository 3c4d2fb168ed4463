#!/usr/bin/env python3
"""llama.cpp's built-in chat template renderer as the reference for `--chat-template NAME`.

Calls llama_chat_apply_template(name, msgs, n, add_ass, buf, len) in node-llama-cpp's bundled
libllama through ctypes (no model needed: a built-in name selects the renderer) and compares its
bytes with `oxinfer chat --template-only --chat-template NAME` for every name and conversation.
usage: llama_chat_builtin.py OXINFER WORK_DIR NAME...
"""
import ctypes as C
import json
import os
import subprocess
import sys

LIB_DIR = os.environ.get("NLC_BIN_DIR", os.path.join(os.environ.get("NLC_DIR", "tools/node"),
                                                     "node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"))


class Msg(C.Structure):
    _fields_ = [("role", C.c_char_p), ("content", C.c_char_p)]


def load():
    for dep in ("libggml-base.so", "libggml.v0.5.0.so"):
        p = os.path.join(LIB_DIR, dep)
        if os.path.exists(p):
            C.CDLL(p, mode=C.RTLD_GLOBAL)
    lib = C.CDLL(os.path.join(LIB_DIR, "libllama.v0.5.0.so"), mode=C.RTLD_GLOBAL)
    lib.llama_chat_apply_template.argtypes = [C.c_char_p, C.POINTER(Msg), C.c_size_t, C.c_bool, C.c_char_p, C.c_int32]
    lib.llama_chat_apply_template.restype = C.c_int32
    lib.llama_chat_builtin_templates.argtypes = [C.POINTER(C.c_char_p), C.c_size_t]
    lib.llama_chat_builtin_templates.restype = C.c_int32
    return lib


def llama_render(lib, name, msgs, add_ass):
    arr = (Msg * len(msgs))(*[Msg(m["role"].encode(), m["content"].encode()) for m in msgs])
    size = 1 << 16
    buf = C.create_string_buffer(size)
    n = lib.llama_chat_apply_template(name.encode(), arr, len(msgs), add_ass, buf, size)
    if n < 0:
        raise RuntimeError(f"llama.cpp does not know the template '{name}'")
    assert n < size
    return buf.raw[:n]


def conv(*pairs):
    return [{"role": r, "content": c} for r, c in pairs]


# system / user / assistant, multi-turn, whitespace at the ends (some renderers trim), system only,
# no system, a conversation ending in an assistant turn, two system messages, non-ASCII text.
CONVERSATIONS = {
    "basic": conv(("system", "You are terse."), ("user", "Hi there"), ("assistant", "Hello!"), ("user", "2+2?")),
    "no_system": conv(("user", "A"), ("assistant", "B"), ("user", "C")),
    "one_user": conv(("user", "What is the capital of France?")),
    "whitespace": conv(("system", "  sys pad \n"), ("user", " hi  \n"), ("assistant", "\n ok \n"), ("user", "q ")),
    "system_only": conv(("system", "S")),
    "assistant_last": conv(("system", "S"), ("user", "U"), ("assistant", "A")),
    "two_systems": conv(("system", "S1"), ("system", "S2"), ("user", "U")),
    "long_multi_turn": conv(("system", "Be helpful.\nAnswer briefly."), ("user", "Name a color."), ("assistant", "Blue."),
                            ("user", "Another?"), ("assistant", "Green."), ("user", "Ünïcödé — 日本語 ✓")),
}


def main():
    oxinfer, work, names = sys.argv[1], sys.argv[2], sys.argv[3:]
    os.makedirs(work, exist_ok=True)
    lib = load()
    fails = checked = 0
    for cname, msgs in CONVERSATIONS.items():
        path = os.path.join(work, f"{cname}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(msgs, f, ensure_ascii=False)
        for name in names:
            for add in (True, False):
                want = llama_render(lib, name, msgs, add)
                cmd = [oxinfer, "chat", "--template-only", "--chat-template", name, "--messages", path]
                if not add:
                    cmd.append("--no-generation-prompt")
                got = subprocess.run(cmd, capture_output=True)
                checked += 1
                if got.returncode != 0 or got.stdout != want:
                    fails += 1
                    print(f"FAIL {name} {cname} add_generation_prompt={add}\n  llama.cpp: {want!r}\n  oxinfer:   {got.stdout!r}"
                          f" {got.stderr.decode(errors='replace').strip()}")
    print(f"{checked - fails}/{checked} renders equal llama.cpp's ({len(names)} names x {len(CONVERSATIONS)} conversations x 2)")
    sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
