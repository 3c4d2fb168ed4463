#!/usr/bin/env python3
"""Writes the hand-made seed corpora of the fuzz targets into tests/fuzz/corpus/<target>/ (kept in
the repo; scripts/fuzz.sh adds more seeds from tests/data and ../shared at run time). Everything
here is synthetic: tiny tokenizers, request bodies, model outputs and Jinja snippets.
Usage: tests/fuzz/make_seeds.py"""
import json, os, re

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


# ---- jinja: template NUL messages JSON ----
JINJA = {
    "loop": "{% for m in messages %}<{{ m.role }}>{{ m.content | trim }}</{{ m.role }}>{% endfor %}"
            "{% if add_generation_prompt %}<assistant>{% endif %}",
    "macro": "{% macro f(x, y=2) %}{{ x ~ y }}{% endmacro %}{{ f(1) }}{{ f('a', y=[1,2]|length) }}",
    "ns": "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}",
    "filters": "{{ messages | map(attribute='role') | join(',') | upper }}{{ 'a b c'.split(' ') | reverse | list }}"
               "{{ tools | tojson(indent=2) }}{{ '%d' % 3 }}{{ range(0, 10, 3) | list }}",
    "strings": "{{ messages[1].content.startswith('Hi') }}{{ messages[1].content[1:-1] }}"
               "{{ messages[1].content.split('<|im_end|>')[0].rstrip() }}{{ 'x' * 3 }}{{ [1, 2] + [3] }}",
    "tools": "{% if tools %}{% for t in tools %}{{ t.function.name }}{{ t.function.parameters | tojson }}{% endfor %}"
             "{% endif %}{% for m in messages %}{% if m.tool_calls %}{% for c in m.tool_calls %}"
             "{{ c.function.name }}{% for k, v in c.function.arguments | items %}{{ k }}={{ v }}{% endfor %}"
             "{% endfor %}{% endif %}{% endfor %}",
    "errors": "{{ raise_exception('bad') if messages | length > 9 }}{% if x is defined %}{{ x.y.z }}{% endif %}"
              "{{ messages[-1]['content'] is string }}{{ none is none }}{{ 1 // 0 if false }}",
    "whitespace": "{%- for m in messages -%}\n  {{- m.content -}}\n{%- endfor %}\n{#- comment -#}{% raw %}{{ x }}{% endraw %}",
}
msgs = json.dumps([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "<think>a</think>b"}])
for name, t in JINJA.items():
    put("jinja", name, t + "\0" + msgs)

# ---- request: byte 0 picks the endpoint (mod 13: 0 chat, 1 completion, 2 tokenize, 3 detokenize, 4 content type; 5.. below) ----
tools = [{"type": "function", "function": {"name": "get_weather", "description": "d",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
REQ = [
    (0, {"model": "m", "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}],
         "max_tokens": 8, "temperature": 0.7, "top_p": 0.9, "stop": ["\n"], "stream": True,
         "stream_options": {"include_usage": True}, "seed": 1}),
    (0, {"messages": [{"role": "user", "content": [{"type": "text", "text": "a"}]},
                      {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function",
                       "function": {"name": "get_weather", "arguments": "{\"city\":\"P\"}"}}]},
                      {"role": "tool", "content": "20C", "tool_call_id": "c"}],
         "tools": tools, "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
         "logprobs": True, "top_logprobs": 3}),
    (0, {"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema",
         "json_schema": {"schema": {"type": "object"}}}, "chat_template_kwargs": {"enable_thinking": False},
         "reasoning_effort": "none", "max_completion_tokens": 2}),
    (1, {"prompt": "Once", "max_tokens": 3, "echo": True, "logprobs": 2}),
    (1, {"prompt": [1, 2, 3], "n": 1}),
    (2, {"content": "hi <|im_end|>", "add_special": True, "parse_special": False, "with_pieces": True}),
    (3, {"tokens": [0, 5, 2147483647]}),
]
for i, (ep, body) in enumerate(REQ):
    put("request", f"seed{i}", bytes([ep]) + json.dumps(body).encode())
# Other dialects: 5/6 Anthropic messages / count_tokens, 7/8 ollama chat / generate, 9 ollama
# embed (137 = 9 + 128: the legacy /api/embeddings), 10 Responses, 11/12 OpenAI / llama-server embeddings.
atools = [{"name": "get_weather", "description": "d", "input_schema": tools[0]["function"]["parameters"]}]
DIALECTS = [
    (5, {"model": "m", "max_tokens": 16, "system": [{"type": "text", "text": "s"}], "stop_sequences": ["x"],
         "messages": [{"role": "user", "content": "hi"},
                      {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "get_weather", "input": {"city": "P"}}]},
                      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": "20C"}]}],
         "tools": atools, "tool_choice": {"type": "any"}, "thinking": {"type": "enabled", "budget_tokens": 1024}, "stream": True}),
    (6, {"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "count"}]}]}),
    (7, {"model": "m", "messages": [{"role": "user", "content": "hi"}], "format": {"type": "object"}, "stream": False,
         "options": {"temperature": 0, "num_predict": 4, "repeat_last_n": 8, "stop": ["\n"]},
         "tools": tools, "think": False}),
    (8, {"model": "m", "prompt": "Once", "system": "s", "raw": False, "format": "json", "options": {"seed": 3}}),
    (9, {"model": "m", "input": ["a", "b"], "truncate": False, "dimensions": 8, "options": {"num_ctx": 64}, "keep_alive": "5m"}),
    (137, {"model": "m", "prompt": "hello", "keep_alive": 0}),
    (10, {"model": "m", "instructions": "s", "max_output_tokens": 16, "reasoning": {"effort": "low"},
          "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
                    {"type": "function_call", "call_id": "c", "name": "get_weather", "arguments": "{\"city\":\"P\"}"},
                    {"type": "function_call_output", "call_id": "c", "output": "20C"}],
          "tools": [{"type": "function", "name": "get_weather", "parameters": tools[0]["function"]["parameters"]}],
          "text": {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}}}, "stream": True}),
    (11, {"model": "m", "input": ["a", [1, 2, 3]], "encoding_format": "base64", "dimensions": 64}),
    (12, {"content": "hello", "embd_normalize": 1}),
]
for ep, body in DIALECTS:
    put("request", f"dialect{ep}", bytes([ep]) + json.dumps(body).encode())
put("request", "ctype", b"\x04application/json; charset=utf-8")
put("request", "deep", b"\x00" + b'{"messages":' + b"[" * 600 + b"]" * 600 + b"}")

# ---- tokenizer: byte 0 even = tokenizer.json NUL text; odd = text for the real vocabularies ----
def gpt2_bytes():  # GPT-2's printable stand-in for every byte (byte-level BPE alphabet)
    keep = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    m, n = {}, 0
    for b in range(256):
        if b in keep:
            m[b] = chr(b)
        else:
            m[b] = chr(256 + n)
            n += 1
    return m

pre = open(os.path.join(SRC, "src/tokenizer/pretokenize.cpp"), encoding="utf-8").read()
regex = re.search(r'kQwen2SplitRegex =\s*((?:"(?:[^"\\]|\\.)*"\s*)+);', pre).group(1)
regex = "".join(json.loads(p) for p in re.findall(r'"(?:[^"\\]|\\.)*"', regex))
bm = gpt2_bytes()
vocab = {bm[b]: b for b in range(256)}
merges = [("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"), (bm[32], "w"), ("o", "r"), (bm[32] + "w", "or")]
for a, b in merges:
    vocab.setdefault(a + b, len(vocab))
added = [{"id": len(vocab), "content": "<|im_end|>", "special": True}, {"id": len(vocab) + 1, "content": "<think>", "special": False}]
byte_level = {"normalizer": {"type": "NFC"},
              "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                  {"type": "Split", "pattern": {"Regex": regex}, "behavior": "Isolated", "invert": False},
                  {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
              "model": {"type": "BPE", "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]},
              "added_tokens": added}
spm_vocab = {f"<0x{b:02X}>": b for b in range(256)}
for p in ["\u2581", "h", "e", "l", "o", "he", "ll", "hell", "hello", "\u2581w", "or", "\u2581wor"]:
    spm_vocab.setdefault(p, len(spm_vocab))
spm = {"normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"},
       "model": {"type": "BPE", "vocab": spm_vocab, "byte_fallback": True,
                 "merges": [["h", "e"], ["l", "l"], ["he", "ll"], ["hell", "o"], ["\u2581", "w"], ["o", "r"], ["\u2581w", "or"]]},
       "added_tokens": [{"id": len(spm_vocab), "content": "<turn|>", "special": True}]}
text = "hello world<|im_end|> <think>caf\u00e9 \u00e9\u0301 12345 \U0001F600\n\n\t x\xef\xbf\xbe"
for name, tj in [("bytelevel", byte_level), ("spm", spm)]:
    put("tokenizer", name, b"\x00" + json.dumps(tj).encode() + b"\0" + text.encode("utf-8", "surrogatepass"))
for i, t in enumerate(["Hello <|im_start|>user\n<|im_end|>", "<|turn>model\n<turn|> \u2581\u2581x",
                       "\xf0\x9f\x98\x80 don't 123 \r\n\u00c5\u0301", "\ufdd0<|im_end|>\ufdd0\ufdd0"]):
    put("tokenizer", f"text{i}", b"\x01" + t.encode("utf-8", "surrogateescape"))

# ---- chat_parser: byte 0 = format (0 plain, 1 Qwen 3.5, 2 Gemma 4) | 4 reasoning | 8 tools; byte 1 = chunk ----
OUT = [
    (1 | 4, "let me think</think>\n\nThe answer is 4.<|im_end|>"),
    (1 | 8, "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n"
            "</parameter>\n</function>\n</tool_call>"),
    (1 | 8, "Sure.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call><|im_end|>"),
    (1, "<think>\nhmm\n</think>\n\ntext <tool_call>\n<function=x>\n<parameter=a"),
    (2 | 8, "<|channel>thought\nplan<channel|>Done.<|tool_call>call:get_weather{city:<|\"|>Oslo<|\"|>,days:2}<tool_call|><turn|>"),
    (2, "plain answer with <|\"|> quote and <|tool_call>call:broken{"),
    (0, "anything <think> goes"),
]
for i, (fmt, text) in enumerate(OUT):
    put("chat_parser", f"seed{i}", bytes([fmt, 3]) + text.encode())
