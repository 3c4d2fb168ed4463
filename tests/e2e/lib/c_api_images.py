# Images through the C API (python/oxinfer.py over liboxinfer.so): the prompt rendered by the
# model's template with llama-mtmd-cli's <__media__> markers (one per image, before the text as
# llama-mtmd-cli places them when the prompt has none), text pieces fed with Context.prefill,
# images with Context.prefill_image (oxi_context_prefill_image), the last piece to generate;
# the greedy text must equal llama-mtmd-cli's answer for the same command line. Audio files (.wav,
# .flac, .ogg, .mp3) go in with Context.prefill_audio (oxi_context_prefill_audio) instead.
# Usage: c_api_images.py MODEL MMPROJ REFERENCE_OUT PROMPT MEDIA...   (OXINFER_LIB, sys.path: python/;
# OXI_CAPI_N: tokens to generate, 24 unless set — llama-mtmd-cli's -n; OXI_CAPI_PREPROC: the
# model's image_preproc, "hf" or "llama"; OXI_CAPI_ENTRIES: the media entries expected in all)
import os
import re
import sys

import oxinfer

model_path, mmproj, ref_path, prompt, images = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
MARK = "<__media__>"
m = oxinfer.Model(model_path, n_threads=2, mmproj=mmproj or None, image_preproc=os.environ.get("OXI_CAPI_PREPROC"))
ctx = m.context(4096)
content = prompt if MARK in prompt else MARK * len(images) + prompt
# enable_thinking on, as llama-mtmd-cli --jinja renders.
text = m.chat_render([{"role": "user", "content": content}], enable_thinking=True)
pieces = text.split(MARK)
assert len(pieces) == len(images) + 1, f"{len(pieces) - 1} markers for {len(images)} images"
entries = 0
for i, img in enumerate(images):
    ctx.prefill(m.tokenize(pieces[i], add_special=(i == 0), parse_special=True))
    data = open(img, "rb").read()
    entries += ctx.prefill_audio(data) if img.lower().endswith((".wav", ".flac", ".ogg", ".mp3")) else ctx.prefill_image(data)
g = ctx.generate(m.tokenize(pieces[-1], add_special=False, parse_special=True), max_tokens=int(os.environ.get("OXI_CAPI_N", "24")), temperature=0.0,
                 spec="none", reuse_prefix=False)
fix = lambda s: re.sub("\ufffd+", "\ufffd", s).strip()
ref = open(ref_path, encoding="utf-8", errors="replace").read()
assert "@@RESPONSE@@" in ref, "no response marker in llama-mtmd-cli's output"
ref = ref.split("@@RESPONSE@@", 1)[1]
print("llama.cpp:", repr(fix(ref)))
print("C API:    ", repr(fix(g.text)), f"({entries} media entries)")
want_entries = os.environ.get("OXI_CAPI_ENTRIES")
if want_entries and int(want_entries) != entries:
    print(f"media entries: {entries}, expected {want_entries}")
    sys.exit(1)
sys.exit(0 if fix(ref) == fix(g.text) and fix(ref) else 1)
