#!/usr/bin/env python3
"""Helper of scripts/bench.sh (standard library only).

    report.py bandwidth THREADS membw-*.json   -> median read GB/s at THREADS threads (stdout)
    report.py report RESULTS_DIR [--doc FILE]  -> RESULTS_DIR/summary.json + bench.md, and the
                                                  block between the markers in FILE replaced
    report.py parallel RESULTS_DIR [--doc FILE] -> RESULTS_DIR/parallel_summary.json + parallel.md
                                                  (N concurrent streams), and the block between
                                                  the bench.sh:parallel markers in FILE replaced

RESULTS_DIR holds what bench.sh wrote: run.txt, files.txt, membw-{before,after}-N.json,
loadavg-{start,end}.txt and per file NAME.oxinfer.json (`oxinfer bench -o json`),
NAME.llama_bench.json (llama_bench.mjs), NAME.llama_c.json (llama_cbench); for `parallel`:
parallel_files.txt, NAME.oxinfer_par.json (`oxinfer bench -npl`) and NAME.llama_par.json
(llama_batched_bench.mjs).
"""
import json
import os
import statistics
import sys

BEGIN = "<!-- bench.sh:begin -->"
END = "<!-- bench.sh:end -->"
PAR_BEGIN = "<!-- bench.sh:parallel:begin -->"
PAR_END = "<!-- bench.sh:parallel:end -->"
# the targets for N concurrent streams, at N = PAR_AT: oxinfer's aggregate ÷ its own
# single-stream (N = 1) aggregate, and ÷ llama.cpp's aggregate at the same N
PAR_AT = 8
PAR_TARGETS = {"scaling": 4.0, "vs_llama": 1.3}
LABEL = {"q08b": "Qwen3.5-0.8B-shaped", "e2b": "Gemma-4-E2B-shaped", "tiny": "tiny Qwen 3.5 (smoke)"}
TYPE = {"q8_0": "Q8_0", "q4_0": "Q4_0", "q4_k_m": "Q4_K_M"}
# the targets: (key, comparison, threshold)
TARGETS = {"pp": (">=", 1.30), "tg": (">=", 1.15), "bound": (">=", 0.85), "rss": ("<=", 1.10), "load": ("<=", 1.00),
           "cold": ("<=", 1.00)}


def die(msg):
    print(f"report.py: error: {msg}", file=sys.stderr)
    sys.exit(1)


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        die(f"cannot read {path}: {e}")


def membw_read_gbs(path, threads):
    res = load(path)["results"]
    row = next((r for r in res if r["threads"] == threads), res[-1])
    return row["read_gbs_median"]


def stats(samples):
    return {"median": statistics.median(samples), "sd": statistics.stdev(samples) if len(samples) > 1 else 0.0,
            "n": len(samples), "samples": samples}


def verdict(key, value):
    op, thr = TARGETS[key]
    return value >= thr if op == ">=" else value <= thr


def summarize_file(rd, name, path):
    fam, typ = name.split("-", 1)
    ox = load(os.path.join(rd, f"{name}.oxinfer.json"))
    lb = load(os.path.join(rd, f"{name}.llama_bench.json"))
    lc = load(os.path.join(rd, f"{name}.llama_c.json"))
    if not isinstance(ox, list) or not ox:
        die(f"{name}.oxinfer.json: expected oxinfer bench's JSON array")
    if lb.get("ok") is False or not lb.get("pp") or not lb.get("tg"):
        die(f"{name}.llama_bench.json: no results ({lb.get('error')})")
    if not lc.get("ok"):
        die(f"{name}.llama_c.json: no results ({lc.get('error')})")
    ox_pp = next(t for t in ox if t["n_prompt"] > 0)
    ox_tg = next(t for t in ox if t["n_gen"] > 0)
    lb_pp = lb["pp"][0]
    lb_tg = lb["tg"]
    s = {
        "name": name, "family": fam, "type": typ, "file": path, "file_bytes": lb["file_bytes"],
        "decode_bytes_per_token": lb["decode_bytes_per_token"],
        "oxinfer": {
            "model_type": ox_pp["model_type"], "isa": ox_pp["isa"], "threads": ox_pp["n_threads"],
            "pp": stats(ox_pp["samples_ts"]), "tg": stats(ox_tg["samples_ts"]),
            "load_ms": ox_pp["load_ms"], "peak_rss_bytes": ox_pp["peak_rss_bytes"],
        },
        "llama_cpp": {
            "model_type": lb.get("model_type"), "cpu_backend": lb.get("cpu_backend"),
            "threads": lb["context"]["threads_used"],
            "flash_attention": lb["context"].get("flash_attention_resolved"),
            "pp": stats([lb_pp["n"] / (ms / 1e3) for ms in lb_pp["runs_ms"]]),
            "tg": stats([lb_tg["n"] / (ms / 1e3) for ms in lb_tg["runs_ms"]]),
            "load_ms": lc["load_ms"], "vocab_load_ms": lc["vocab_load_ms"], "ctx_ms": lc["ctx_ms"],
            "peak_rss_bytes": lc["peak_rss_bytes"],
            "rss_after_load_bytes": lc["rss_after_load_bytes"],
            "c_harness": {"pp_tps": lc["pp"]["samples_ts"], "tg_tps": lc["tg"]["samples_ts"],
                          "cpu_backend": lc["cpu_backend"]},
        },
        "n_prompt": ox_pp["n_prompt"], "n_gen": ox_tg["n_gen"],
    }
    # cold start to the first token (oxinfer bench --cold-start, llama_cbench COLD_N), when both ran it
    if "cold_first_token_ms" in ox_pp and "cold_first_token_ms" in lc:
        s["oxinfer"]["cold"] = {k: ox_pp[k] for k in ("cold_prompt", "cold_tokenizer_ms", "cold_first_ms", "cold_first_token_ms")}
        s["llama_cpp"]["cold"] = {k: lc[k] for k in ("cold_prompt", "cold_first_ms", "cold_first_token_ms")}
    if lb_pp["n"] != s["n_prompt"] or lb_tg["n"] != s["n_gen"]:
        die(f"{name}: oxinfer and llama.cpp ran different sizes")
    return s


def fmt_tps(st):
    return f"{st['median']:.2f} ± {st['sd']:.2f}" if st["n"] > 1 else f"{st['median']:.2f}"


def mib(b):
    return f"{b / 1048576:.0f} MiB"


def run_remarks(run):
    """The run's --note and the smoke-run warning, as lines of the generated block."""
    out = []
    if run.get("note"):
        out += ["", f"Note: {run['note']}"]
    if run.get("smoke") == "1":
        out += ["", "**Smoke run** (tiny model, tiny sizes): checks that the script works; the numbers mean nothing."]
    return out


def plural(n, word):
    return f"{n} {word}" + ("" if int(n) == 1 else "s")


def yes(ok):
    return "yes" if ok else "**no**"


def cmd_report(rd, doc):
    run = read_run(rd)
    threads = int(run["threads"])
    bw = {}
    for phase in ("before", "after"):
        files = sorted(p for p in os.listdir(rd) if p.startswith(f"membw-{phase}-"))
        bw[phase] = [membw_read_gbs(os.path.join(rd, p), threads) for p in files]
    all_bw = bw["before"] + bw["after"]
    bw_gbs = statistics.median(all_bw)
    files = []
    with open(os.path.join(rd, "files.txt")) as f:
        for line in f:
            name, path = line.rstrip("\n").split(" ", 1)
            files.append(summarize_file(rd, name, path))
    skipped = []
    if os.path.exists(os.path.join(rd, "skipped.txt")):
        with open(os.path.join(rd, "skipped.txt")) as f:
            skipped = [line.split() for line in f if line.strip()]

    checks = []
    for s in files:
        o, l = s["oxinfer"], s["llama_cpp"]
        bound = bw_gbs * 1e9 / s["decode_bytes_per_token"]
        s["bound"] = {"read_gbs": bw_gbs, "tg_bound_tps": bound, "oxinfer_fraction": o["tg"]["median"] / bound,
                      "llama_cpp_fraction": l["tg"]["median"] / bound}
        s["ratios"] = {"pp": o["pp"]["median"] / l["pp"]["median"], "tg": o["tg"]["median"] / l["tg"]["median"],
                       "bound": s["bound"]["oxinfer_fraction"],
                       "rss": o["peak_rss_bytes"] / l["peak_rss_bytes"],
                       "load_vs_full": o["load_ms"] / l["load_ms"]}
        # oxinfer bench's load_ms has no tokenizer while llama.cpp always builds its vocabulary, so the
        # target is checked against llama.cpp's load less a vocab-only load (stricter: that also takes
        # the GGUF metadata parse off llama.cpp's side). Where the vocabulary is 90 % or more of the
        # load (tiny models) the difference is noise, and the full load is used, flagged.
        rest = l["load_ms"] - l["vocab_load_ms"]
        s["load_basis"] = "load less vocab" if rest > 0.1 * l["load_ms"] else "full load (vocab-dominated)"
        s["ratios"]["load"] = o["load_ms"] / (rest if rest > 0.1 * l["load_ms"] else l["load_ms"])
        if "cold" in o:
            s["ratios"]["cold"] = o["cold"]["cold_first_token_ms"] / l["cold"]["cold_first_token_ms"]
        s["pass"] = {k: verdict(k, v) for k, v in s["ratios"].items() if k in TARGETS}
        checks += [(s["name"], k, ok) for k, ok in s["pass"].items()]

    def loadavg(which):
        p = os.path.join(rd, f"loadavg-{which}.txt")
        return open(p).read().split()[0] if os.path.exists(p) else "?"

    summary = {"run": run, "bandwidth_read_gbs": {"before": bw["before"], "after": bw["after"], "used": bw_gbs},
               "loadavg": {"start": loadavg("start"), "end": loadavg("end")},
               "targets": {k: f"{op} {thr}" for k, (op, thr) in TARGETS.items()},
               "files": files, "skipped": skipped,
               "targets_met": sum(ok for _, _, ok in checks), "targets_checked": len(checks)}
    with open(os.path.join(rd, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")

    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    rd_abs = os.path.abspath(rd)
    rel = os.path.relpath(rd_abs, src) if rd_abs.startswith(src + os.sep) else rd_abs
    pp, tg = f"pp{run['pp']}", f"tg{run['tg']}"
    ox0, ll0 = files[0]["oxinfer"], files[0]["llama_cpp"]
    fa = sorted({{True: "on", False: "off"}.get(s["llama_cpp"]["flash_attention"], "?") for s in files})
    mem_gib = int(run.get("mem_total_kib", "0") or 0) / 1048576
    L = []
    L.append(f"## {run['date'][:10]} — oxinfer vs llama.cpp end to end (generated by scripts/bench.sh)")
    L.append("")
    L.append(f"Machine: {run['cpu']}, {run['logical_cpus']} logical CPUs, {mem_gib:.0f} GiB RAM, Linux "
             f"{run['kernel']}; load average {loadavg('start')} at the start, {loadavg('end')} at the end. "
             f"Commit `{run['commit']}`, {run['date']}.")
    L.append(f"oxinfer: isa {ox0['isa']}, {plural(ox0['threads'], 'thread')}. llama.cpp: node-llama-cpp {run['node_llama_cpp']} "
             f"(prebuilt CPU backend `{ll0['cpu_backend']}`, flash attention {'/'.join(fa)}), {plural(ll0['threads'], 'thread')}.")
    L.append(f"Method: {pp} and {tg}, {plural(run['reps'], 'repetition')} after one warm-up each, t/s = median ± sample sd "
             f"of the repetitions. Read bandwidth (membw.c, {plural(threads, 'thread')}): "
             + ", ".join(f"{x:.1f}" for x in bw["before"]) + " GB/s before, "
             + ", ".join(f"{x:.1f}" for x in bw["after"]) + f" after; the bound uses their median, {bw_gbs:.1f} GB/s. "
             f"Raw JSON: `{rel}/` (local, not committed).")
    L += run_remarks(run)
    L.append("")
    L.append(f"| model | type | test | oxinfer t/s | llama.cpp t/s | oxinfer ÷ llama.cpp | target | met |")
    L.append("|---|---|---|---:|---:|---:|---:|---|")
    for s in files:
        o, l = s["oxinfer"], s["llama_cpp"]
        m, t = LABEL.get(s["family"], s["family"]), TYPE.get(s["type"], s["type"])
        L.append(f"| {m} | {t} | {pp} | {fmt_tps(o['pp'])} | {fmt_tps(l['pp'])} | {s['ratios']['pp']:.2f}× | ≥ 1.30× | {yes(s['pass']['pp'])} |")
        L.append(f"| {m} | {t} | {tg} | {fmt_tps(o['tg'])} | {fmt_tps(l['tg'])} | {s['ratios']['tg']:.2f}× | ≥ 1.15× | {yes(s['pass']['tg'])} |")
    L.append("")
    L.append(f"Decode against the memory-bandwidth bound (bound = {bw_gbs:.1f} GB/s ÷ weight bytes read per token; "
             "target: oxinfer ≥ 85 % of it):")
    L.append("")
    L.append(f"| model | type | weight bytes / token | bound t/s | oxinfer {tg} | oxinfer % of bound | llama.cpp % of bound | met |")
    L.append("|---|---|---:|---:|---:|---:|---:|---|")
    for s in files:
        b = s["bound"]
        L.append(f"| {LABEL.get(s['family'], s['family'])} | {TYPE.get(s['type'], s['type'])} | "
                 f"{s['decode_bytes_per_token'] / 1e6:.0f} MB | {b['tg_bound_tps']:.1f} | {s['oxinfer']['tg']['median']:.2f} | "
                 f"{100 * b['oxinfer_fraction']:.0f} % | {100 * b['llama_cpp_fraction']:.0f} % | {yes(s['pass']['bound'])} |")
    L.append("")
    L.append("Peak RSS (VmHWM after the runs) and load time (model load, no context), each tool in its own process "
             "(llama.cpp: scripts/bench/llama_cbench, no node in the process). llama.cpp's load includes building its "
             "vocabulary (the part in brackets, from a vocab-only load) and oxinfer's has no tokenizer, so the load "
             "ratio is taken against llama.cpp's load less that part:")
    L.append("")
    L.append("| model | type | oxinfer peak RSS | llama.cpp peak RSS | ratio (≤ 1.10) | met | oxinfer load | llama.cpp load (vocab) | ratio (≤ 1.00) | met |")
    L.append("|---|---|---:|---:|---:|---|---:|---:|---:|---|")
    for s in files:
        o, l, r = s["oxinfer"], s["llama_cpp"], s["ratios"]
        L.append(f"| {LABEL.get(s['family'], s['family'])} | {TYPE.get(s['type'], s['type'])} | {mib(o['peak_rss_bytes'])} | "
                 f"{mib(l['peak_rss_bytes'])} | {r['rss']:.2f} | {yes(s['pass']['rss'])} | {o['load_ms']:.0f} ms | "
                 f"{l['load_ms']:.0f} ms ({l['vocab_load_ms']:.0f}) | {r['load']:.2f}{'' if s['load_basis'] == 'load less vocab' else ' ¹'} | "
                 f"{yes(s['pass']['load'])} |")
    if any(s["load_basis"] != "load less vocab" for s in files):
        L.append("")
        L.append("¹ llama.cpp's vocabulary took 90 % or more of its load, so the ratio is to its full load.")
    cold = [s for s in files if "cold" in s["oxinfer"]]
    if cold:
        L.append("")
        L.append("Cold start to the first token: a fresh process's load (weights and tokenizer; llama.cpp: model "
                 "load with its vocabulary, then its context), then the first work it does: a prompt of "
                 f"{cold[0]['oxinfer']['cold']['cold_prompt']} pseudo-random ids in one step and one decoded token, "
                 "one-time costs included (oxinfer's decode-weight packing, llama.cpp's repack at load). "
                 "`oxinfer bench --cold-start`, `llama_cbench ... COLD_N`; page cache warm:")
        L.append("")
        L.append("| model | type | oxinfer: load + tokenizer + first work | oxinfer total | llama.cpp: load + context + first work | llama.cpp total | ratio (≤ 1.00) | met |")
        L.append("|---|---|---:|---:|---:|---:|---:|---|")
        for s in cold:
            oc, lc_, l = s["oxinfer"]["cold"], s["llama_cpp"]["cold"], s["llama_cpp"]
            L.append(f"| {LABEL.get(s['family'], s['family'])} | {TYPE.get(s['type'], s['type'])} | "
                     f"{s['oxinfer']['load_ms']:.0f} + {oc['cold_tokenizer_ms']:.0f} + {oc['cold_first_ms']:.0f} ms | "
                     f"{oc['cold_first_token_ms']:.0f} ms | {l['load_ms']:.0f} + {l['ctx_ms']:.0f} + {lc_['cold_first_ms']:.0f} ms | "
                     f"{lc_['cold_first_token_ms']:.0f} ms | {s['ratios']['cold']:.2f} | {yes(s['pass']['cold'])} |")
    L.append("")
    missed = [f"{n} {k}" for n, k, ok in checks if not ok]
    L.append(f"Targets met: {summary['targets_met']} of {summary['targets_checked']}"
             + (f"; not met: {', '.join(missed)}." if missed else "."))
    if skipped:
        L.append(f"Not built, so not measured: {', '.join(' '.join(x) for x in skipped)}.")
    block = "\n".join(L) + "\n"
    with open(os.path.join(rd, "bench.md"), "w") as f:
        f.write(block)
    sys.stdout.write(block)

    if doc:
        write_block(doc, block, BEGIN, END)


def write_block(doc, block, begin, end):
    """Replaces the text between `begin` and `end` in `doc` with `block` (appends both when absent)."""
    text = open(doc).read() if os.path.exists(doc) else ""
    nb, ne = text.count(begin), text.count(end)
    wrapped = f"{begin}\n{block}{end}"
    if nb == 0 and ne == 0:
        text = text.rstrip("\n") + ("\n\n" if text else "") + wrapped + "\n"
    elif nb == 1 and ne == 1 and text.index(begin) < text.index(end):
        a, b = text.index(begin), text.index(end) + len(end)
        text = text[:a] + wrapped + text[b:]
    else:
        die(f"{doc}: expected one '{begin}' followed by one '{end}' (found {nb} and {ne})")
    tmp = doc + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, doc)


def read_run(rd):
    run = {}
    with open(os.path.join(rd, "run.txt")) as f:
        for line in f:
            k, _, v = line.rstrip("\n").partition("=")
            run[k] = v
    return run


def summarize_parallel(rd, name, path):
    fam, typ = name.split("-", 1)
    ox = load(os.path.join(rd, f"{name}.oxinfer_par.json"))
    ll = load(os.path.join(rd, f"{name}.llama_par.json"))
    if not isinstance(ox, list) or not ox or any("n_parallel" not in t for t in ox):
        die(f"{name}.oxinfer_par.json: expected `oxinfer bench -npl` JSON (objects with n_parallel)")
    if ll.get("ok") is False or not ll.get("tests"):
        die(f"{name}.llama_par.json: no results ({ll.get('error')})")
    oxn = {t["n_parallel"]: t for t in ox}
    lln = {t["n_parallel"]: t for t in ll["tests"]}
    if sorted(oxn) != sorted(lln):
        die(f"{name}: oxinfer and llama.cpp ran different stream counts ({sorted(oxn)} vs {sorted(lln)})")
    rows = []
    for n in sorted(oxn):
        o, l = oxn[n], lln[n]
        if (o["n_gen"], o["n_prompt"]) != (l["n_gen"], l["n_prompt"]):
            die(f"{name} N={n}: oxinfer and llama.cpp ran different sizes")
        rows.append({"n_parallel": n, "test": o["test"], "oxinfer": stats(o["samples_ts"]),
                     "llama_cpp": stats(l["samples_ts"]), "llama_cpp_batches_per_step": l.get("batches_per_step")})
    base_o = oxn.get(1) and statistics.median(oxn[1]["samples_ts"])
    base_l = lln.get(1) and statistics.median(lln[1]["samples_ts"])
    for r in rows:
        r["ratio"] = r["oxinfer"]["median"] / r["llama_cpp"]["median"]
        r["oxinfer_scaling"] = r["oxinfer"]["median"] / base_o if base_o else None
        r["llama_cpp_scaling"] = r["llama_cpp"]["median"] / base_l if base_l else None
    s = {"name": name, "family": fam, "type": typ, "file": path, "n_gen": ox[0]["n_gen"], "n_prompt": ox[0]["n_prompt"],
         "oxinfer": {"model_type": ox[0]["model_type"], "isa": ox[0]["isa"], "threads": ox[0]["n_threads"]},
         "llama_cpp": {"model_type": ll.get("model_type"), "threads": ll.get("threads")}, "rows": rows}
    at = next((r for r in rows if r["n_parallel"] == PAR_AT), None)
    if at is not None:
        s["targets"] = {"n_parallel": PAR_AT, "scaling": at["oxinfer_scaling"], "vs_llama": at["ratio"]}
        s["pass"] = {k: (s["targets"][k] is not None and s["targets"][k] >= thr) for k, thr in PAR_TARGETS.items()}
    return s


def cmd_parallel(rd, doc):
    run = read_run(rd)
    files = []
    with open(os.path.join(rd, "parallel_files.txt")) as f:
        for line in f:
            name, path = line.rstrip("\n").split(" ", 1)
            files.append(summarize_parallel(rd, name, path))

    def loadavg(which):
        p = os.path.join(rd, f"loadavg-{which}.txt")
        return open(p).read().split()[0] if os.path.exists(p) else "?"

    checks = [(s["name"], k, ok) for s in files for k, ok in s.get("pass", {}).items()]
    summary = {"run": run, "loadavg": {"start": loadavg("par-start"), "end": loadavg("par-end")},
               "targets": {"at_n_parallel": PAR_AT, **{k: f">= {v}" for k, v in PAR_TARGETS.items()}},
               "files": files, "targets_met": sum(ok for _, _, ok in checks), "targets_checked": len(checks)}
    with open(os.path.join(rd, "parallel_summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
        f.write("\n")

    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    rd_abs = os.path.abspath(rd)
    rel = os.path.relpath(rd_abs, src) if rd_abs.startswith(src + os.sep) else rd_abs
    mem_gib = int(run.get("mem_total_kib", "0") or 0) / 1048576
    o0 = files[0]["oxinfer"]
    L = []
    L.append(f"## {run['date'][:10]} — aggregate throughput, N concurrent streams (generated by scripts/bench.sh)")
    L.append("")
    L.append(f"Machine: {run['cpu']}, {run['logical_cpus']} logical CPUs, {mem_gib:.0f} GiB RAM, Linux {run['kernel']}; "
             f"load average {loadavg('par-start')} at the start, {loadavg('par-end')} at the end. Commit `{run['commit']}`, {run['date']}.")
    L.append(f"oxinfer: `oxinfer bench -npl {run['par_npl']} -p {run['par_pp']} -n {run['par_tg']}`, isa {o0['isa']}, "
             f"{plural(o0['threads'], 'thread')}: N sequences, one `forward_batch` per step carrying one token of each. "
             f"llama.cpp: node-llama-cpp {run['node_llama_cpp']} (scripts/bench/llama_batched_bench.mjs), one context with "
             f"N sequences, one batched decode per step, {plural(files[0]['llama_cpp']['threads'] or 0, 'thread')}.")
    L.append(f"Method: per N, every stream prefills its own {run['par_pp']} pseudo-random ids (not timed), then "
             f"{run['par_tg']} greedy decode steps; t/s = N × {run['par_tg']} ÷ seconds of the decode steps, median ± "
             f"sample sd of {plural(run['par_reps'], 'repetition')} after a warm-up. Raw JSON: `{rel}/` (local, not committed).")
    L += run_remarks(run)
    L.append("")
    L.append("| model | type | N | oxinfer t/s | llama.cpp t/s | oxinfer ÷ llama.cpp | oxinfer ÷ its N=1 | llama.cpp ÷ its N=1 |")
    L.append("|---|---|---:|---:|---:|---:|---:|---:|")
    fx = lambda x: "–" if x is None else f"{x:.2f}×"
    for s in files:
        m, t = LABEL.get(s["family"], s["family"]), TYPE.get(s["type"], s["type"])
        for r in s["rows"]:
            L.append(f"| {m} | {t} | {r['n_parallel']} | {fmt_tps(r['oxinfer'])} | {fmt_tps(r['llama_cpp'])} | "
                     f"{r['ratio']:.2f}× | {fx(r['oxinfer_scaling'])} | {fx(r['llama_cpp_scaling'])} |")
    L.append("")
    if checks:
        for s in files:
            if "targets" not in s:
                continue
            tg = s["targets"]
            L.append(f"- {LABEL.get(s['family'], s['family'])} {TYPE.get(s['type'], s['type'])}, N = {PAR_AT}: oxinfer "
                     f"{fx(tg['scaling'])} its single-stream aggregate (target ≥ {PAR_TARGETS['scaling']:.1f}×: "
                     f"{yes(s['pass']['scaling'])}), {tg['vs_llama']:.2f}× llama.cpp's aggregate (target ≥ "
                     f"{PAR_TARGETS['vs_llama']:.1f}×: {yes(s['pass']['vs_llama'])}).")
        L.append("")
        L.append(f"Targets met: {summary['targets_met']} of {summary['targets_checked']}.")
    else:
        L.append(f"No N = {PAR_AT} in this run, so the targets (N = {PAR_AT}: ≥ {PAR_TARGETS['scaling']:.0f}× oxinfer's "
                 f"N = 1, ≥ {PAR_TARGETS['vs_llama']}× llama.cpp) were not checked.")
    block = "\n".join(L) + "\n"
    with open(os.path.join(rd, "parallel.md"), "w") as f:
        f.write(block)
    sys.stdout.write(block)
    if doc:
        write_block(doc, block, PAR_BEGIN, PAR_END)


def main(argv):
    if len(argv) >= 3 and argv[0] == "bandwidth":
        threads = int(argv[1])
        print(f"{statistics.median(membw_read_gbs(p, threads) for p in argv[2:]):.2f}")
    elif len(argv) in (2, 4) and argv[0] == "report" and (len(argv) == 2 or argv[2] == "--doc"):
        cmd_report(argv[1], argv[3] if len(argv) == 4 else None)
    elif len(argv) in (2, 4) and argv[0] == "parallel" and (len(argv) == 2 or argv[2] == "--doc"):
        cmd_parallel(argv[1], argv[3] if len(argv) == 4 else None)
    else:
        print(__doc__, file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv[1:])
