#!/usr/bin/env python3
"""Reference chat-template renderer: Python jinja2 configured the way Hugging Face transformers
configures it (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols,
raise_exception, a tojson that keeps non-ASCII). Used by the chat tests to produce expected
output at test time.

usage: render_ref.py TEMPLATE (MESSAGES.json | --messages MESSAGES.json) [--tools T.json] [--no-generation-prompt]
                     [--enable-thinking true|false] [--bos-token S] [--eos-token S]
Prints the prompt exactly; on a template error prints "ERROR: msg" to stderr and exits 3.
"""
import json
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def make_env():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def render(template, msgs, tools, add_gen, bos, eos, kwargs):
    return template.render(messages=msgs, tools=tools or None, documents=None, add_generation_prompt=add_gen,
                           bos_token=bos, eos_token=eos, **kwargs)


def batch(tmpl_path, cases_path):
    """Renders every case of CASES.json with every variant (generation prompt on/off x
    enable_thinking unset/true/false); prints a JSON list of {name, add_generation_prompt,
    enable_thinking, output | error}."""
    src = open(tmpl_path, encoding="utf-8", newline="").read()
    template = make_env().from_string(src)
    results = []
    for case in json.load(open(cases_path, encoding="utf-8")):
        for add_gen in (True, False):
            for think in (None, True, False):
                kwargs = {} if think is None else {"enable_thinking": think}
                r = {"name": case["name"], "add_generation_prompt": add_gen,
                     "enable_thinking": "unset" if think is None else think}
                try:
                    r["output"] = render(template, case["messages"], case.get("tools"), add_gen, "<bos>", "<eos>", kwargs)
                except Exception as e:  # noqa: BLE001
                    r["error"] = "%s: %s" % (type(e).__name__, e)
                results.append(r)
    sys.stdout.write(json.dumps(results, ensure_ascii=True))
    return 0


def snippets(path):
    """Renders each {template, context} of a JSON list; prints a JSON list of {output | error}."""
    env = make_env()
    results = []
    for case in json.load(open(path, encoding="utf-8")):
        try:
            results.append({"output": env.from_string(case["template"]).render(**case.get("context", {}))})
        except Exception as e:  # noqa: BLE001
            results.append({"error": "%s: %s" % (type(e).__name__, e)})
    sys.stdout.write(json.dumps(results, ensure_ascii=True))
    return 0


def main(argv):
    if argv and argv[0] == "--snippets":
        return snippets(argv[1])
    if argv and argv[0] == "--batch":
        return batch(argv[1], argv[2])
    # Positional TEMPLATE MESSAGES, or TEMPLATE --messages MESSAGES (the CLI's spelling).
    tmpl_path = argv[0]
    rest = argv[1:]
    if "--messages" in rest:
        k = rest.index("--messages")
        msgs_path = rest[k + 1]
        rest = rest[:k] + rest[k + 2:]
    else:
        msgs_path, rest = rest[0], rest[1:]
    tools = None
    add_gen = True
    kwargs = {}
    bos, eos = "", ""
    i = 0
    while i < len(rest):
        a = rest[i]
        if a == "--tools":
            tools = json.load(open(rest[i + 1], encoding="utf-8"))
            i += 2
        elif a == "--no-generation-prompt":
            add_gen = False
            i += 1
        elif a == "--enable-thinking":
            kwargs["enable_thinking"] = rest[i + 1] == "true"
            i += 2
        elif a == "--bos-token":
            bos = rest[i + 1]
            i += 2
        elif a == "--eos-token":
            eos = rest[i + 1]
            i += 2
        else:
            raise SystemExit("unknown option " + a)
    src = open(tmpl_path, encoding="utf-8", newline="").read()
    msgs = json.load(open(msgs_path, encoding="utf-8"))
    try:
        out = render(make_env().from_string(src), msgs, tools, add_gen, bos, eos, kwargs)
    except Exception as e:  # noqa: BLE001
        sys.stderr.write("ERROR: %s: %s\n" % (type(e).__name__, e))
        return 3
    sys.stdout.buffer.write(out.encode("utf-8", "surrogateescape"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
