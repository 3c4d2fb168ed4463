#!/usr/bin/env bash
# End-to-end tests of `oxinfer bench` (the JSON contract in README's CLI reference, the markdown
# rows, comma lists, --isa) and of the --isa start-up line of `run`, on a tiny synthetic Qwen 3.5
# GGUF (oxi-gen + oxinfer convert). Also: bad arguments fail with `error:` and exit 1 / 2.
set -u
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
OXINFER="${OXINFER:-$SRC/build/release/apps/cli/oxinfer}"
OXI_GEN="${OXI_GEN:-$SRC/build/release/tools/gen/oxi-gen}"
export NLC_DIR="${NLC_DIR:-$SRC/tools/node}"
WORK="${OXI_WORK_DIR:-$(mktemp -d)}/bench_cli"
rm -rf "$WORK" && mkdir -p "$WORK"

fails=0
ok() { echo "ok   - $1"; }
bad() { echo "FAIL - $1"; fails=$((fails + 1)); }
check() { if eval "$2"; then ok "$1"; else bad "$1"; fi; }

# ---- model: 4 layers (3 GDN + 1 attention), d=64, f32 GGUF ----
node "$SRC/tools/gen/extract_tokenizer.mjs" "$WORK/tok" >/dev/null || { echo "FAIL - tokenizer extraction"; exit 1; }
"$OXI_GEN" qwen35 --out "$WORK/q35" --seed 5 --tokenizer-dir "$WORK/tok" --hidden 64 --layers 4 \
  --heads 2 --kv-heads 1 --dtype f32 >/dev/null || { echo "FAIL - oxi-gen"; exit 1; }
"$OXINFER" convert "$WORK/q35" -o "$WORK/m.gguf" --type f32 >/dev/null 2>&1 || { echo "FAIL - convert"; exit 1; }
M="$WORK/m.gguf"
# Reference facts about the file, read independently of the bench code (python's own GGUF walk).
NBYTES=$(python3 - "$M" <<'EOF'
import struct, sys
f = open(sys.argv[1], "rb")
def u(fmt): return struct.unpack("<" + fmt, f.read(struct.calcsize(fmt)))[0]
assert f.read(4) == b"GGUF"; u("I"); nt = u("Q"); nkv = u("Q")
def s(): return f.read(u("Q"))
SZ = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
def val(t):
    if t == 8: s()
    elif t == 9:
        et = u("I"); n = u("Q")
        for _ in range(n): val(et)
    else: f.read(SZ[t])
for _ in range(nkv): s(); val(u("I"))
total = 0
for _ in range(nt):
    s(); nd = u("I"); dims = [u("Q") for _ in range(nd)]; t = u("I"); u("Q")
    assert t == 0, "expected an all-f32 file"
    n = 1
    for d in dims: n *= d
    total += 4 * n
print(total)
EOF
)
check "reference: tensor bytes read from the file" "[ -n '$NBYTES' ] && [ '$NBYTES' -gt 0 ]"

# ---- 1. JSON contract ----
"$OXINFER" bench -m "$M" -p 16 -n 4 -r 2 -t 1 -o json > "$WORK/b.json" 2> "$WORK/b.err"
check "json: exit 0" "[ $? -eq 0 ]"
python3 - "$WORK/b.json" "$M" "$NBYTES" > "$WORK/b.py" 2>&1 <<'EOF'
import json, sys
res = json.load(open(sys.argv[1]))
path, nbytes = sys.argv[2], int(sys.argv[3])
assert isinstance(res, list) and len(res) == 2, f"{len(res)} objects, expected 2"
need = ["model_filename", "model_type", "model_size", "model_n_params", "isa", "n_threads", "n_prompt",
        "n_gen", "test", "avg_ts", "stddev_ts", "samples_ts", "load_ms", "peak_rss_bytes"]
for o in res:
    missing = [k for k in need if k not in o]
    assert not missing, f"missing fields {missing}"
    assert o["model_filename"] == path
    assert o["model_type"].startswith("qwen35 ") and o["model_type"].endswith(" F32"), o["model_type"]
    assert o["model_size"] == nbytes, (o["model_size"], nbytes)
    assert o["model_n_params"] == nbytes // 4, o["model_n_params"]
    assert o["n_threads"] == 1 and o["isa"] in ("scalar", "avx2", "avx512", "avx512-amx")
    assert len(o["samples_ts"]) == 2 and all(x > 0 for x in o["samples_ts"])
    avg = sum(o["samples_ts"]) / 2
    assert abs(o["avg_ts"] - avg) <= 1e-9 * avg, (o["avg_ts"], avg)
    sd = abs(o["samples_ts"][0] - o["samples_ts"][1]) / 2 ** 0.5   # sample sd of two values
    assert abs(o["stddev_ts"] - sd) <= 1e-6 * max(sd, 1.0), (o["stddev_ts"], sd)
    assert o["load_ms"] > 0 and o["peak_rss_bytes"] > nbytes // 2
pp, tg = res
assert (pp["test"], pp["n_prompt"], pp["n_gen"]) == ("pp16", 16, 0), pp["test"]
assert (tg["test"], tg["n_prompt"], tg["n_gen"]) == ("tg4", 0, 4), tg["test"]
EOF
check "json: one object per test with the documented fields and consistent stats" "[ -s '$WORK/b.json' ] && [ ! -s '$WORK/b.py' ]" || cat "$WORK/b.py"
check "json: start-up line names the kernels on stderr" "grep -q '^oxinfer: isa ' '$WORK/b.err'"

# ---- 2. markdown rows, comma lists, --isa ----
"$OXINFER" bench -m "$M" -p 8,16 -n 2 -r 1 -t 1 --isa scalar > "$WORK/b.md" 2> "$WORK/bmd.err"
check "md: exit 0" "[ $? -eq 0 ]"
check "md: header + separator + 3 rows" "[ \$(grep -c '^|' '$WORK/b.md') -eq 5 ]"
check "md: header names the columns" "head -1 '$WORK/b.md' | grep -q 'model.*size.*params.*isa.*threads.*test.*t/s'"
for t in pp8 pp16 tg2; do
  check "md: row $t (scalar, 1 thread, t/s ± sd)" "grep -Eq '^\| qwen35 .* F32 +\| .* GiB \| .* B \| scalar +\| +1 \| +$t \| +[0-9.]+ ± [0-9.]+ \|$' '$WORK/b.md'"
done
check "md: --isa scalar in the start-up line" "grep -q '^oxinfer: isa scalar ' '$WORK/bmd.err'"

# ---- 2b. -npl: N concurrent streams, one batched forward per step ----
"$OXINFER" bench -m "$M" -npl 1,3 -p 5 -n 3 -r 2 -t 1 -o json > "$WORK/p.json" 2> "$WORK/p.err"
check "npl json: exit 0" "[ $? -eq 0 ]"
python3 - "$WORK/p.json" > "$WORK/p.py" 2>&1 <<'EOF'
import json, sys
res = json.load(open(sys.argv[1]))
assert [(o["test"], o["n_parallel"], o["n_prompt"], o["n_gen"]) for o in res] == [("tg3 x1", 1, 5, 3), ("tg3 x3", 3, 5, 3)], res
for o in res:
    assert len(o["samples_ts"]) == 2 and len(o["samples_ns"]) == 2
    # aggregate t/s = N streams x n tokens / seconds of the decode steps
    for ts, ns in zip(o["samples_ts"], o["samples_ns"]):
        want = o["n_parallel"] * o["n_gen"] / (ns / 1e9)
        assert abs(ts - want) <= 1e-3 * want, (ts, want)
EOF
check "npl json: tgN xK tests, n_parallel, aggregate t/s" "[ -s '$WORK/p.json' ] && [ ! -s '$WORK/p.py' ]" || cat "$WORK/p.py"
"$OXINFER" bench -m "$M" -npl 2 -n 2 -r 1 -t 1 > "$WORK/p.md" 2> /dev/null
check "npl md: row 'tg2 x2'" "grep -Eq '^\| qwen35 .* \| +tg2 x2 \| +[0-9.]+ ± [0-9.]+ \|$' '$WORK/p.md'"
check "json: pp/tg tests have n_parallel 1" "python3 -c 'import json,sys; assert all(o[\"n_parallel\"] == 1 for o in json.load(open(sys.argv[1])))' '$WORK/b.json'"

# ---- 2c. -d: pp / tg after D tokens already in the context (llama-bench's n_depth) ----
"$OXINFER" bench -m "$M" -d 0,40 -p 8 -n 3 -r 2 -t 1 -o json > "$WORK/d.json" 2> "$WORK/d.err"
check "depth json: exit 0" "[ $? -eq 0 ]"
python3 - "$WORK/d.json" > "$WORK/d.py" 2>&1 <<'EOF2'
import json, sys
res = json.load(open(sys.argv[1]))
# llama-bench's order and spelling: per depth, pp then tg; "ppN @ dD" past depth 0
assert [(o["test"], o["n_prompt"], o["n_gen"], o["n_depth"]) for o in res] == [
    ("pp8", 8, 0, 0), ("tg3", 0, 3, 0), ("pp8 @ d40", 8, 0, 40), ("tg3 @ d40", 0, 3, 40)], res
for o in res:
    assert o["n_parallel"] == 1 and len(o["samples_ts"]) == 2
    # t/s counts only the timed tokens (the depth fill is not timed)
    n = o["n_prompt"] or o["n_gen"]
    for ts, ns in zip(o["samples_ts"], o["samples_ns"]):
        assert abs(ts - n / (ns / 1e9)) <= 1e-3 * ts, (ts, ns)
EOF2
check "depth json: ppN / tgN per depth, n_depth, t/s of the timed tokens only" "[ -s '$WORK/d.json' ] && [ ! -s '$WORK/d.py' ]" || cat "$WORK/d.py"
check "json: tests without -d have n_depth 0" "python3 -c 'import json,sys; assert all(o[\"n_depth\"] == 0 for o in json.load(open(sys.argv[1])))' '$WORK/b.json'"
"$OXINFER" bench -m "$M" --n-depth 20 -p 4 -n 2 -r 1 -t 1 > "$WORK/d.md" 2> /dev/null
check "depth md: rows 'pp4 @ d20' and 'tg2 @ d20'" "grep -Eq '^\| qwen35 .* \| +pp4 @ d20 \| +[0-9.]+ ± [0-9.]+ \|$' '$WORK/d.md' && grep -Eq '^\| qwen35 .* \| +tg2 @ d20 \| +[0-9.]+ ± [0-9.]+ \|$' '$WORK/d.md'"

# ---- 3. run --isa: start-up line on stderr, stdout stays JSON ----
"$OXINFER" run -m "$M" --tokens 1,2,3 -n 2 --temp 0 --json --isa scalar > "$WORK/r.out" 2> "$WORK/r.err"
check "run --isa scalar: exit 0, start-up line on stderr" "[ $? -eq 0 ] && grep -q '^oxinfer: isa scalar ' '$WORK/r.err'"
check "run --json: stdout is only JSON lines" "python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' '$WORK/r.out' && ! grep -q 'isa' '$WORK/r.out'"

# ---- 4. bad input: exit code, `error:` line, nothing on stdout ----
expect_fail() {  # name, wanted exit code, args...
  local name=$1 want=$2
  shift 2
  "$OXINFER" "$@" > "$WORK/e.out" 2> "$WORK/e.err"
  local got=$?
  if [ $got -eq $want ] && [ ! -s "$WORK/e.out" ] && grep -q '^error: ' "$WORK/e.err"; then ok "$name"; else
    bad "$name (exit $got, want $want)"; cat "$WORK/e.err"
  fi
}
expect_fail "missing file -> 1" 1 bench -m "$WORK/nope.gguf" -p 8 -n 0 -r 1
expect_fail "not a model -> 1" 1 bench -m "$WORK/b.json" -p 8 -n 0 -r 1
expect_fail "-r 0 -> 2" 2 bench -m "$M" -r 0
expect_fail "-p abc -> 2" 2 bench -m "$M" -p abc
expect_fail "-p 16,x -> 2" 2 bench -m "$M" -p 16,x
expect_fail "-n -1 -> 2" 2 bench -m "$M" -n -1
expect_fail "-p 0 -n 0 -> 2" 2 bench -m "$M" -p 0 -n 0
expect_fail "-o xml -> 2" 2 bench -m "$M" -o xml
expect_fail "--isa bogus -> 2" 2 bench -m "$M" --isa bogus
expect_fail "unknown option -> 2" 2 bench -m "$M" --bogus 1
expect_fail "no model -> 2" 2 bench -p 8
expect_fail "-npl 0 -> 2" 2 bench -m "$M" -npl 0
expect_fail "-npl x -> 2" 2 bench -m "$M" -npl 2,x
expect_fail "-npl with two -p sizes -> 2" 2 bench -m "$M" -npl 2 -p 8,16
expect_fail "run --isa bogus -> 2" 2 run -m "$M" --tokens 1 --isa bogus
expect_fail "-d -1 -> 2" 2 bench -m "$M" -d -1
expect_fail "-d 8,x -> 2" 2 bench -m "$M" -d 8,x
expect_fail "-d with -npl -> 2" 2 bench -m "$M" -d 8 -npl 2
expect_fail "-d with --verify -> 2" 2 bench -m "$M" -d 8 --verify 2
# the synthetic file's n_ctx_train is 262144 (oxi-gen): depth + prompt past it is refused
expect_fail "-d past the training context -> 1" 1 bench -m "$M" -d 262140 -p 8 -n 0 -r 1
check "-d past the context: the error names n_ctx_train" "grep -q 'n_ctx_train' '$WORK/e.err'"

if [ $fails -gt 0 ]; then echo "FAIL ($fails)"; exit 1; fi
echo "PASS"
