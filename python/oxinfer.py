"""oxinfer from Python: a small ctypes binding over the C API (include/oxinfer.h, liboxinfer.so).

    import oxinfer
    model = oxinfer.Model("model.gguf", n_threads=2)
    ctx = model.context(n_ctx=4096)
    ids = model.tokenize("Hello")
    for piece in ctx.stream(ids, max_tokens=32):      # streamed text
        print(piece, end="", flush=True)
    out = ctx.generate(ids, max_tokens=32, temperature=0.7, seed=1)   # -> Generation
    reply = ctx.chat([{"role": "user", "content": "Hi"}], max_tokens=64)

The library is found through $OXINFER_LIB, else next to this file's repository build
(build/release/src/api/liboxinfer.so), else the system's library path. Pure Python, no
dependencies; tested with the system python3 (tests/e2e/python_bindings.test.sh).
"""

import ctypes
import ctypes.util
import json
import os
import queue
import threading

__all__ = ["Model", "Context", "Generation", "OxinferError", "load_library"]

SEED_RANDOM = 2**64 - 1
SPEC_NONE, SPEC_AUTO, SPEC_NGRAM, SPEC_MTP = 0, 1, 2, 3
_STOP_REASONS = {0: "eos", 1: "max_tokens", 2: "context_full", 3: "cancelled"}


class OxinferError(RuntimeError):
    """An oxi_status other than OK, with the library's one-line message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


class _ModelParams(ctypes.Structure):
    # Every field of oxi_model_params, in order: the struct comes back by value from
    # oxi_model_default_params, so a shorter definition would let the library write past it.
    _fields_ = [("n_threads", ctypes.c_int32), ("quant", ctypes.c_char_p),
                ("chat_template", ctypes.c_char_p), ("device", ctypes.c_char_p), ("flash_attn", ctypes.c_int32),
                ("n_gpu_layers", ctypes.c_int32), ("cache_type_k", ctypes.c_char_p), ("cache_type_v", ctypes.c_char_p),
                ("draft_model", ctypes.c_char_p), ("mmproj", ctypes.c_char_p),
                ("image_preproc", ctypes.c_char_p)]


class _ModelDesc(ctypes.Structure):
    _fields_ = [("arch", ctypes.c_char_p), ("name", ctypes.c_char_p), ("n_vocab", ctypes.c_int64),
                ("n_ctx_train", ctypes.c_int64), ("n_params", ctypes.c_uint64), ("bos_id", ctypes.c_int32),
                ("eos_id", ctypes.c_int32), ("n_tokens", ctypes.c_int64), ("has_chat_template", ctypes.c_int32)]


class _SamplingParams(ctypes.Structure):
    _fields_ = [("temperature", ctypes.c_float), ("top_k", ctypes.c_int32), ("top_p", ctypes.c_float),
                ("min_p", ctypes.c_float), ("repeat_penalty", ctypes.c_float),
                ("presence_penalty", ctypes.c_float), ("frequency_penalty", ctypes.c_float),
                ("penalty_last_n", ctypes.c_int32), ("seed", ctypes.c_uint64)]


class _TokenEvent(ctypes.Structure):
    _fields_ = [("id", ctypes.c_int32), ("text", ctypes.c_void_p), ("text_len", ctypes.c_size_t),
                ("logprob", ctypes.c_float), ("n_top", ctypes.c_int32),
                ("top_ids", ctypes.POINTER(ctypes.c_int32)), ("top_logprobs", ctypes.POINTER(ctypes.c_float)),
                ("is_eog", ctypes.c_int32)]


class _GenerateParams(ctypes.Structure):
    _fields_ = [("max_tokens", ctypes.c_int32), ("n_top_logprobs", ctypes.c_int32), ("sampling", _SamplingParams),
                ("cancel", ctypes.POINTER(ctypes.c_int)), ("ignore_eog", ctypes.c_int32),
                ("prefill_chunk", ctypes.c_int32), ("json_schema", ctypes.c_char_p), ("spec_mode", ctypes.c_int32),
                ("draft_max", ctypes.c_int32), ("draft_min", ctypes.c_int32), ("grammar", ctypes.c_char_p)]


class _GenerateResult(ctypes.Structure):
    _fields_ = [("n_prompt", ctypes.c_int32), ("n_generated", ctypes.c_int32), ("prompt_seconds", ctypes.c_double),
                ("gen_seconds", ctypes.c_double), ("stop_reason", ctypes.c_int32)]


_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(_TokenEvent), ctypes.c_void_p)
_lib = None


def load_library(path=None):
    """Loads liboxinfer.so (once) and declares the C signatures."""
    global _lib
    if _lib is not None:
        return _lib
    candidates = [path, os.environ.get("OXINFER_LIB"),
                  os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "release", "src", "api",
                               "liboxinfer.so"),
                  ctypes.util.find_library("oxinfer")]
    lib = None
    for c in candidates:
        if c and (os.path.exists(c) or c == candidates[-1]):
            lib = ctypes.CDLL(c)
            break
    if lib is None:
        raise OSError("liboxinfer.so not found: set OXINFER_LIB or build the release preset")
    P, I32, SZ = ctypes.POINTER, ctypes.c_int32, ctypes.c_size_t
    sigs = {
        "oxi_last_error": ([], ctypes.c_char_p),
        "oxi_version": ([], ctypes.c_char_p),
        "oxi_model_default_params": ([], _ModelParams),
        "oxi_model_open": ([ctypes.c_char_p, P(_ModelParams), P(ctypes.c_void_p)], ctypes.c_int),
        "oxi_model_free": ([ctypes.c_void_p], None),
        "oxi_model_describe": ([ctypes.c_void_p, P(_ModelDesc)], ctypes.c_int),
        "oxi_tokenize": ([ctypes.c_void_p, ctypes.c_char_p, SZ, ctypes.c_int, ctypes.c_int, P(I32), SZ, P(SZ)], ctypes.c_int),
        "oxi_detokenize": ([ctypes.c_void_p, P(I32), SZ, ctypes.c_char_p, SZ, P(SZ)], ctypes.c_int),
        "oxi_token_is_eog": ([ctypes.c_void_p, I32], ctypes.c_int),
        "oxi_chat_render": ([ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, SZ, P(SZ)], ctypes.c_int),
        "oxi_chat_tokenize": ([ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, P(I32), SZ, P(SZ)], ctypes.c_int),
        "oxi_sampling_default_params": ([], _SamplingParams),
        "oxi_model_sampling_defaults": ([ctypes.c_void_p], _SamplingParams),
        "oxi_context_new": ([ctypes.c_void_p, I32, P(ctypes.c_void_p)], ctypes.c_int),
        "oxi_context_free": ([ctypes.c_void_p], None),
        "oxi_context_reset": ([ctypes.c_void_p], ctypes.c_int),
        "oxi_context_n_past": ([ctypes.c_void_p], I32),
        "oxi_context_reuse_prefix": ([ctypes.c_void_p, P(I32), SZ, P(SZ)], ctypes.c_int),
        "oxi_context_prefill": ([ctypes.c_void_p, P(I32), SZ], ctypes.c_int),
        "oxi_context_prefill_image": ([ctypes.c_void_p, ctypes.c_char_p, SZ, P(I32)], ctypes.c_int),
        "oxi_context_prefill_audio": ([ctypes.c_void_p, ctypes.c_char_p, SZ, P(I32)], ctypes.c_int),
        "oxi_generate_default_params": ([], _GenerateParams),
        "oxi_generate": ([ctypes.c_void_p, P(I32), SZ, P(_GenerateParams), _CALLBACK, ctypes.c_void_p,
                          P(_GenerateResult)], ctypes.c_int),
    }
    for name, (args, res) in sigs.items():
        f = getattr(lib, name)
        f.argtypes, f.restype = args, res
    _lib = lib
    return lib


def _check(status):
    if status != 0:
        raise OxinferError(status, _lib.oxi_last_error().decode("utf-8", "replace"))


def _ids(seq):
    arr = (ctypes.c_int32 * len(seq))(*seq)
    return arr, len(seq)


class Generation:
    """What a generate() call returns: text, token ids, logprobs, stop reason and timings."""

    def __init__(self, text, tokens, logprobs, stop_reason, n_prompt, prompt_seconds, gen_seconds):
        self.text, self.tokens, self.logprobs = text, tokens, logprobs
        self.stop_reason, self.n_prompt = stop_reason, n_prompt
        self.prompt_seconds, self.gen_seconds = prompt_seconds, gen_seconds

    def __repr__(self):
        return f"Generation(text={self.text!r}, tokens={len(self.tokens)}, stop_reason={self.stop_reason!r})"


class _Handle:
    """An owned C object, freed by close() (also on garbage collection and `with` exit)."""

    _free = None  # the name of the C function that frees it

    def close(self):
        if getattr(self, "_h", None) and _lib is not None:
            getattr(_lib, self._free)(self._h)
            self._h = None

    __del__ = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class Model(_Handle):
    """A loaded model (a .gguf file or an HF checkpoint directory)."""

    _free = "oxi_model_free"

    def __init__(self, path, n_threads=0, chat_template=None, device="none", library=None, draft_model=None, mmproj=None,
                 image_preproc=None):
        load_library(library)
        p = _lib.oxi_model_default_params()
        p.n_threads = n_threads
        p.device = device.encode() if device else None
        if draft_model is not None:  # llama.cpp's -md: Qwen 3.5's MTP-only GGUF, for spec="mtp"
            p.draft_model = os.fsencode(draft_model)
        if mmproj is not None:  # llama.cpp's --mmproj: the vision tower for Context.prefill_image
            p.mmproj = os.fsencode(mmproj)
        if image_preproc is not None:  # the CLI's --image-preproc: "hf" (default) or "llama"
            p.image_preproc = image_preproc.encode()
        if chat_template is not None:
            p.chat_template = chat_template.encode()
        h = ctypes.c_void_p()
        _check(_lib.oxi_model_open(os.fsencode(path), ctypes.byref(p), ctypes.byref(h)))
        self._h = h
        d = _ModelDesc()
        _check(_lib.oxi_model_describe(h, ctypes.byref(d)))
        self.arch, self.name = d.arch.decode(), d.name.decode()
        self.n_vocab, self.n_ctx_train, self.n_params = d.n_vocab, d.n_ctx_train, d.n_params
        self.bos_id, self.eos_id, self.has_chat_template = d.bos_id, d.eos_id, bool(d.has_chat_template)

    def tokenize(self, text, add_special=True, parse_special=False):
        b = text.encode("utf-8")
        n = ctypes.c_size_t()
        _check(_lib.oxi_tokenize(self._h, b, len(b), int(add_special), int(parse_special), None, 0, ctypes.byref(n)))
        out = (ctypes.c_int32 * n.value)()
        _check(_lib.oxi_tokenize(self._h, b, len(b), int(add_special), int(parse_special), out, n.value, ctypes.byref(n)))
        return list(out)

    def detokenize(self, ids):
        arr, k = _ids(ids)
        n = ctypes.c_size_t()
        _check(_lib.oxi_detokenize(self._h, arr, k, None, 0, ctypes.byref(n)))
        buf = ctypes.create_string_buffer(n.value + 1)
        _check(_lib.oxi_detokenize(self._h, arr, k, buf, n.value + 1, ctypes.byref(n)))
        return buf.raw[: n.value].decode("utf-8", "replace")

    def chat_render(self, messages, **options):
        """The chat template's text for messages (a list of dicts); options are template variables
        (add_generation_prompt defaults to True)."""
        mj = json.dumps(messages).encode()
        oj = json.dumps({"add_generation_prompt": True, **options}).encode()
        n = ctypes.c_size_t()
        _check(_lib.oxi_chat_render(self._h, mj, oj, None, 0, ctypes.byref(n)))
        buf = ctypes.create_string_buffer(n.value + 1)
        _check(_lib.oxi_chat_render(self._h, mj, oj, buf, n.value + 1, ctypes.byref(n)))
        return buf.raw[:n.value].decode("utf-8")

    def chat_tokenize(self, messages, **options):
        """The conversation rendered with the model's chat template (add_generation_prompt by
        default), as token ids; options: enable_thinking, tools, add_generation_prompt."""
        options.setdefault("add_generation_prompt", True)
        m, o = json.dumps(messages).encode(), json.dumps(options).encode()
        n = ctypes.c_size_t()
        _check(_lib.oxi_chat_tokenize(self._h, m, o, None, 0, ctypes.byref(n)))
        out = (ctypes.c_int32 * n.value)()
        _check(_lib.oxi_chat_tokenize(self._h, m, o, out, n.value, ctypes.byref(n)))
        return list(out)

    def context(self, n_ctx=0):
        return Context(self, n_ctx)


class Context(_Handle):
    """One sequence on a model (KV cache, recurrent state). Use from one thread at a time."""

    _free = "oxi_context_free"

    def __init__(self, model, n_ctx=0):
        self.model = model
        h = ctypes.c_void_p()
        _check(_lib.oxi_context_new(model._h, n_ctx, ctypes.byref(h)))
        self._h = h

    def reset(self):
        _check(_lib.oxi_context_reset(self._h))

    @property
    def n_past(self):
        return _lib.oxi_context_n_past(self._h)

    def prefill(self, ids):
        """Appends prompt ids without sampling (a prompt interleaved with images)."""
        arr, k = _ids(list(ids))
        _check(_lib.oxi_context_prefill(self._h, arr, k))

    def prefill_image(self, data):
        """Appends one image (the bytes of a PNG/JPEG/WebP/GIF/BMP file) as the model's image
        tokens and the vision tower's rows; returns the entries it took. Afterwards call generate
        with reuse_prefix=False (the context holds image rows no id list can name)."""
        n = ctypes.c_int32()
        _check(_lib.oxi_context_prefill_image(self._h, bytes(data), len(data), ctypes.byref(n)))
        return n.value

    def prefill_audio(self, data):
        """Appends one audio clip (the bytes of a WAV/FLAC/Ogg/MP3 file; Gemma 4 E2B/E4B with an
        audio tower) as <|audio>, the audio tower's rows, <audio|>; returns the entries it took.
        Afterwards call generate with reuse_prefix=False, as after prefill_image."""
        n = ctypes.c_int32()
        _check(_lib.oxi_context_prefill_audio(self._h, bytes(data), len(data), ctypes.byref(n)))
        return n.value

    def generate(self, prompt, max_tokens=-1, temperature=0.0, top_k=0, top_p=1.0, min_p=0.0, seed=None,
                 top_logprobs=0, json_schema=None, spec="auto", on_token=None, reuse_prefix=True, grammar=None):
        """Appends prompt ids (a list of ints) and samples up to max_tokens. on_token(id, text) is
        called per token; returning True from it stops. json_schema: a dict (or None for free text);
        grammar: GBNF text (llama.cpp's syntax) the output must follow, or None.
        reuse_prefix keeps the longest prefix of prompt already in the context."""
        p = _lib.oxi_generate_default_params()
        p.max_tokens = max_tokens
        p.n_top_logprobs = top_logprobs
        s = p.sampling
        s.temperature, s.top_k, s.top_p, s.min_p = temperature, top_k, top_p, min_p
        s.seed = SEED_RANDOM if seed is None else seed
        schema = json.dumps(json_schema).encode() if json_schema is not None else None
        p.json_schema = schema
        grammar_bytes = grammar.encode() if grammar is not None else None
        p.grammar = grammar_bytes
        p.spec_mode = {"none": SPEC_NONE, "auto": SPEC_AUTO, "ngram": SPEC_NGRAM, "mtp": SPEC_MTP}[spec]
        ids = list(prompt)
        kept = 0
        if reuse_prefix:
            arr, k = _ids(ids)
            n = ctypes.c_size_t()
            _check(_lib.oxi_context_reuse_prefix(self._h, arr, k, ctypes.byref(n)))
            kept = n.value
        arr, k = _ids(ids[kept:])
        pieces, tokens, logprobs = [], [], []
        error = []

        def cb(ev_p, _user):
            ev = ev_p.contents
            text = ctypes.string_at(ev.text, ev.text_len).decode("utf-8", "replace") if ev.text_len else ""
            tokens.append(ev.id)
            logprobs.append(ev.logprob)
            if not ev.is_eog:
                pieces.append(text)
            if on_token is not None:
                try:
                    if on_token(ev.id, text):
                        return 1
                except BaseException as e:  # never unwind through C: stop, re-raise after
                    error.append(e)
                    return 1
            return 0

        res = _GenerateResult()
        st = _lib.oxi_generate(self._h, arr, k, ctypes.byref(p), _CALLBACK(cb), None, ctypes.byref(res))
        if error:
            raise error[0]
        if st not in (0, 6):  # 6: cancelled by the callback
            _check(st)
        return Generation("".join(pieces), tokens, logprobs, _STOP_REASONS.get(res.stop_reason, "?"),
                          res.n_prompt, res.prompt_seconds, res.gen_seconds)

    def stream(self, prompt, **kw):
        """Yields the text of each generated token as it is produced (generation runs in a thread)."""
        q = queue.Queue()
        stop = threading.Event()
        kw["on_token"] = lambda _id, text: (q.put(text), stop.is_set())[1]

        def run():
            try:
                self.generate(prompt, **kw)
                q.put(None)
            except BaseException as e:
                q.put(e)

        t = threading.Thread(target=run, daemon=True)
        t.start()
        try:
            while True:
                item = q.get()
                if item is None:
                    break
                if isinstance(item, BaseException):
                    raise item
                if item:
                    yield item
        finally:
            stop.set()
            t.join()

    def chat(self, messages, enable_thinking=None, **kw):
        """Renders messages with the model's chat template and generates the reply (text)."""
        opts = {} if enable_thinking is None else {"enable_thinking": bool(enable_thinking)}
        return self.generate(self.model.chat_tokenize(messages, **opts), **kw).text
