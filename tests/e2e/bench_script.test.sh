#!/usr/bin/env bash
# End-to-end smoke test of scripts/bench.sh (oxinfer vs llama.cpp benchmark): `--smoke` builds a
# tiny Qwen 3.5 (oxi-gen -> oxinfer convert q8_0 / bf16 -> llama.cpp's quantizer q4_0), runs both
# tools on both files and writes the block into a copy of a doc. Checks: the raw results exist and
# are sane, the summary's medians and ratios match a recomputation from the raw JSON here, the
# hand-written text of the doc survives and the block is replaced (not duplicated) on a re-run,
# and bad arguments fail. The smoke run also takes the parallel path (oxinfer bench -npl 1,2 and
# llama_batched_bench.mjs): its raw results and summary are checked the same way, and its table
# stays out of the doc. Speeds are not judged (tiny model, shared machine).
set -u
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
export OXINFER="${OXINFER:-$SRC/build/release/apps/cli/oxinfer}"
export OXI_GEN="${OXI_GEN:-$SRC/build/release/tools/gen/oxi-gen}"
export NLC_DIR="${NLC_DIR:-$SRC/tools/node}"
export OXI_SHARED_DIR="${OXI_SHARED_DIR:-$SRC/../shared}"
WORK="${OXI_WORK_DIR:-$(mktemp -d)}/bench_script"
rm -rf "$WORK" && mkdir -p "$WORK"

fails=0
ok() { echo "ok   - $1"; }
bad() { echo "FAIL - $1"; fails=$((fails + 1)); }

cat > "$WORK/doc.md" <<'EOF'
# Benchmarks
Hand-written intro.
<!-- bench.sh:begin -->
old generated text
<!-- bench.sh:end -->
Hand-written outro.
EOF

if bash "$SRC/scripts/bench.sh" --smoke --models-dir "$WORK/models" --results-dir "$WORK/res" \
     --doc "$WORK/doc.md" > "$WORK/out.md" 2> "$WORK/err.log"; then
  ok "bench.sh --smoke exits 0"
else
  bad "bench.sh --smoke exits 0"; tail -30 "$WORK/err.log"
fi

python3 - "$WORK/res" "$WORK/doc.md" "$WORK/out.md" > "$WORK/check.log" 2>&1 <<'EOF'
import json, os, statistics, sys
rd, doc, out = sys.argv[1:]
S = json.load(open(os.path.join(rd, "summary.json")))
names = [s["name"] for s in S["files"]]
assert names == ["tiny-q8_0", "tiny-q4_0"], names
for s in S["files"]:
    n = s["name"]
    ox = json.load(open(os.path.join(rd, n + ".oxinfer.json")))
    lb = json.load(open(os.path.join(rd, n + ".llama_bench.json")))
    lc = json.load(open(os.path.join(rd, n + ".llama_c.json")))
    # both tools measured the same file at the same sizes
    assert [t["test"] for t in ox] == ["pp16", "tg4"], [t["test"] for t in ox]
    assert lb["model"] == s["file"] and lc["model"] == s["file"], (lb["model"], lc["model"])
    assert lb["pp"][0]["n"] == 16 and lb["tg"]["n"] == 4
    assert ox[0]["n_threads"] == 1 and lb["context"]["threads_used"] == 1 and lc["threads"] == 1
    want = {"q8_0": "Q8_0", "q4_0": "Q4_0"}[s["type"]]
    assert ox[0]["model_type"].endswith(" " + want), ox[0]["model_type"]
    assert lc["model_desc"].endswith(" " + want), lc["model_desc"]   # llama.cpp's own reading of the file
    # llama.cpp's harness: the three sizes are consistent and positive
    assert 0 < lc["vocab_load_ms"] and 0 < lc["load_ms"], lc
    assert lc["peak_rss_bytes"] >= lc["rss_after_load_bytes"] > lc["rss_start_bytes"] > 0, lc
    assert lc["peak_rss_bytes"] > os.path.getsize(s["file"]) // 2
    # summary = recomputation from the raw files
    ox_tg = statistics.median(ox[1]["samples_ts"])
    ll_pp = statistics.median(lb["pp"][0]["n"] / (ms / 1e3) for ms in lb["pp"][0]["runs_ms"])
    ll_tg = statistics.median(lb["tg"]["n"] / (ms / 1e3) for ms in lb["tg"]["runs_ms"])
    ox_pp = statistics.median(ox[0]["samples_ts"])
    r = s["ratios"]
    close = lambda a, b: abs(a - b) <= 1e-9 * max(abs(a), abs(b))
    assert close(r["pp"], ox_pp / ll_pp) and close(r["tg"], ox_tg / ll_tg), (r, ox_pp, ll_pp, ox_tg, ll_tg)
    assert close(r["rss"], ox[0]["peak_rss_bytes"] / lc["peak_rss_bytes"]), r
    rest = lc["load_ms"] - lc["vocab_load_ms"]
    ll_load = rest if rest > 0.1 * lc["load_ms"] else lc["load_ms"]
    assert close(r["load"], ox[0]["load_ms"] / ll_load), (r, lc["load_ms"], lc["vocab_load_ms"])
    bound = S["bandwidth_read_gbs"]["used"] * 1e9 / lb["decode_bytes_per_token"]
    assert close(r["bound"], ox_tg / bound), (r["bound"], ox_tg, bound)
    assert s["pass"]["pp"] == (r["pp"] >= 1.30) and s["pass"]["rss"] == (r["rss"] <= 1.10), s["pass"]
    assert 0 < lb["decode_bytes_per_token"] <= lb["file_bytes"]
bw = S["bandwidth_read_gbs"]
assert bw["before"] and bw["after"] and bw["used"] == statistics.median(bw["before"] + bw["after"]), bw
text = open(doc).read()
assert text.startswith("# Benchmarks\nHand-written intro.\n<!-- bench.sh:begin -->\n## "), text[:120]
assert text.endswith("<!-- bench.sh:end -->\nHand-written outro.\n"), text[-120:]
assert "old generated text" not in text and text.count("bench.sh:begin") == 1
block = open(os.path.join(rd, "bench.md")).read()
assert block in text and block == open(out).read()
assert "| tiny Qwen 3.5 (smoke) | Q4_0 | tg4 |" in block and "**Smoke run**" in block
# the parallel path: N = 1, 2 streams, prompt 8, 4 tokens each, on both files
P = json.load(open(os.path.join(rd, "parallel_summary.json")))
assert [s["name"] for s in P["files"]] == ["tiny-q8_0", "tiny-q4_0"], P["files"]
for s in P["files"]:
    n = s["name"]
    ox = json.load(open(os.path.join(rd, n + ".oxinfer_par.json")))
    lp = json.load(open(os.path.join(rd, n + ".llama_par.json")))
    assert [(t["test"], t["n_parallel"], t["n_prompt"], t["n_gen"]) for t in ox] == \
        [("tg4 x1", 1, 8, 4), ("tg4 x2", 2, 8, 4)], [t["test"] for t in ox]
    assert [(t["n_parallel"], t["n_prompt"], t["n_gen"]) for t in lp["tests"]] == [(1, 8, 4), (2, 8, 4)]
    assert lp["model"] == s["file"] and lp["threads"] == 1 and ox[0]["n_threads"] == 1
    # llama.cpp decoded every step of the N sequences as one batch
    assert all(b == 1 for t in lp["tests"] for b in t["batches_per_step"]), [t["batches_per_step"] for t in lp["tests"]]
    close = lambda a, b: abs(a - b) <= 1e-9 * max(abs(a), abs(b))
    for r, o, l in zip(s["rows"], ox, lp["tests"]):
        assert all(x > 0 for x in o["samples_ts"] + l["samples_ts"])
        assert close(r["ratio"], statistics.median(o["samples_ts"]) / statistics.median(l["samples_ts"])), r
    assert s["rows"][0]["oxinfer_scaling"] == 1.0 and "targets" not in s   # no N = 8 in a smoke run
pblock = open(os.path.join(rd, "parallel.md")).read()
assert "| tiny Qwen 3.5 (smoke) | Q4_0 | 2 |" in pblock and "**Smoke run**" in pblock
assert "bench.sh:parallel" not in text and pblock not in text   # smoke: parallel table not in the doc
print("checks passed")
EOF
if [ $? -eq 0 ]; then ok "results, summary and doc block"; else bad "results, summary and doc block"; cat "$WORK/check.log"; fi

# the report again on the same results: the block is replaced, not added
cp "$WORK/doc.md" "$WORK/doc1.md"
python3 "$SRC/scripts/bench/report.py" report "$WORK/res" --doc "$WORK/doc.md" > /dev/null 2>&1 &&
  cmp -s "$WORK/doc.md" "$WORK/doc1.md" && ok "re-run replaces the block" || bad "re-run replaces the block"
printf '<!-- bench.sh:begin -->\n<!-- bench.sh:begin -->\n<!-- bench.sh:end -->\n' > "$WORK/doc2.md"
python3 "$SRC/scripts/bench/report.py" report "$WORK/res" --doc "$WORK/doc2.md" > /dev/null 2> "$WORK/e.err"
[ $? -eq 1 ] && grep -q "expected one" "$WORK/e.err" && ok "doc with two begin markers -> error" ||
  bad "doc with two begin markers -> error"

expect_fail() {  # name, wanted exit code, args...
  local name="$1" want="$2"; shift 2
  bash "$SRC/scripts/bench.sh" "$@" > /dev/null 2> "$WORK/e.err"
  local got=$?
  if [ $got -eq "$want" ] && grep -q "bench.sh:" "$WORK/e.err"; then ok "$name"; else
    bad "$name (exit $got, want $want)"; cat "$WORK/e.err"
  fi
}
expect_fail "unknown model -> 2" 2 --models qwen9 --models-dir "$WORK/models"
expect_fail "unknown type -> 2" 2 --types q2_k --models-dir "$WORK/models"
expect_fail "-r 0 -> 2" 2 -r 0
expect_fail "unknown option -> 2" 2 --bogus
expect_fail "non-empty results dir -> 1" 1 --smoke --models-dir "$WORK/models" --results-dir "$WORK/res"
OXINFER="$WORK/nope" expect_fail "missing oxinfer -> 1" 1 --smoke

if [ $fails -gt 0 ]; then echo "FAIL ($fails)"; exit 1; fi
echo "PASS"
