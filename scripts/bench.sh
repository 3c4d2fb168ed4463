#!/usr/bin/env bash
# oxinfer vs llama.cpp (node-llama-cpp's prebuilt libllama) on the same synthetic GGUF files, same
# machine, same run; writes raw JSON + a markdown table, and the table into docs/benchmarks.md
# (between the bench.sh markers; the rest of the file is kept). Method: docs/benchmarks.md.
#
#   scripts/bench.sh [options]
#     --models LIST      model shapes: q08b (Qwen3.5-0.8B-shaped), e2b (Gemma-4-E2B-shaped),
#                        tiny (a 4-layer Qwen 3.5, for trying the script) (default q08b,e2b)
#     --types LIST       q8_0,q4_0,q4_k_m (default all three)
#     --models-dir DIR   where the synthetic models are built or reused
#                        (default ${XDG_CACHE_HOME:-~/.cache}/oxinfer-bench; /work/bench-models holds them here)
#     --results-dir DIR  raw JSON, logs and bench.md (default bench/results/<UTC date-time>,
#                        a local folder git ignores: raw runs are not committed)
#     --doc FILE         markdown file to update (default docs/benchmarks.md); --no-doc: leave it
#     -p N  -n N  -t N  -r N   prompt tokens, generated tokens, threads, repetitions (512 128 2 5)
#     --build-dir DIR    oxinfer build (default build/release: apps/cli/oxinfer, tools/gen/oxi-gen)
#     --note TEXT        a line added to the generated block (e.g. "preliminary: busy machine")
#     --parallel         aggregate generation throughput instead: N concurrent greedy streams, each
#                        with its own -p-token prompt (default 32), -n tokens each (default 128), for
#                        N in --npl, -r repetitions (default 3); defaults to --models q08b --types
#                        q4_0,q4_k_m; table into the bench.sh:parallel block of --doc
#     --npl LIST         stream counts for --parallel (default 1,2,4,8,16)
#     --smoke            tiny model, q8_0 + q4_0, -p 16 -n 4 -t 1 -r 1, small bandwidth probe, then
#                        the parallel path (--npl 1,2, prompt 8, 4 tokens; its table only in the
#                        results dir), results in a temp dir unless --results-dir, no doc unless
#                        --doc (the e2e smoke test); with --parallel: only the parallel part
# Environment: NLC_DIR (node-llama-cpp install, default tools/node), OXI_SHARED_DIR (default ../shared,
# for oracle/llama_bench.mjs, quantize_llama.py, membw.c), OXINFER and OXI_GEN (binaries, default
# from --build-dir), CC (default cc).
# Per file, in one run: `oxinfer bench -o json`, `llama_bench.mjs` (llama.cpp t/s through node) and
# scripts/bench/llama_cbench (llama.cpp's load time and peak RSS without node in the process); the
# order of oxinfer and llama.cpp alternates from file to file. Bandwidth (membw.c) before and after.
# --parallel, per file: `oxinfer bench -npl LIST -o json` and scripts/bench/llama_batched_bench.mjs
# (node-llama-cpp: one context with N sequences, one batched decode per step), order alternating.
set -euo pipefail

SRC="$(cd "$(dirname "$0")/.." && pwd)"
MODELS="q08b,e2b"
TYPES="q8_0,q4_0,q4_k_m"
MODELS_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/oxinfer-bench"
RESULTS_DIR=""
DOC="$SRC/docs/benchmarks.md"
DOC_SET=0
NO_DOC=0
PP=512 TG=128 THREADS=2 REPS=5
BUILD="$SRC/build/release"
SMOKE=0
NOTE=""
MEMBW_MIB=1024 MEMBW_REPS=9 MEMBW_RUNS=3
PARALLEL=0 NPL="1,2,4,8,16"
MODELS_SET=0 TYPES_SET=0 PP_SET=0 TG_SET=0 REPS_SET=0

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "bench.sh: error: $*" >&2; exit 1; }
need_val() { [ $# -ge 2 ] && [ -n "$2" ] || { echo "bench.sh: $1 needs a value" >&2; exit 2; }; }
posint() { [[ "$2" =~ ^[1-9][0-9]*$ ]] || { echo "bench.sh: $1 must be a positive integer (got '$2')" >&2; exit 2; }; }

while [ $# -gt 0 ]; do
  case "$1" in
    --models) need_val "$@"; MODELS="$2"; MODELS_SET=1; shift 2 ;;
    --types) need_val "$@"; TYPES="$2"; TYPES_SET=1; shift 2 ;;
    --models-dir) need_val "$@"; MODELS_DIR="$2"; shift 2 ;;
    --results-dir) need_val "$@"; RESULTS_DIR="$2"; shift 2 ;;
    --doc) need_val "$@"; DOC="$2"; DOC_SET=1; shift 2 ;;
    --no-doc) NO_DOC=1; shift ;;
    -p) need_val "$@"; posint -p "$2"; PP="$2"; PP_SET=1; shift 2 ;;
    -n) need_val "$@"; posint -n "$2"; TG="$2"; TG_SET=1; shift 2 ;;
    -t) need_val "$@"; posint -t "$2"; THREADS="$2"; shift 2 ;;
    -r) need_val "$@"; posint -r "$2"; REPS="$2"; REPS_SET=1; shift 2 ;;
    --parallel) PARALLEL=1; shift ;;
    --npl) need_val "$@"
      [[ "$2" =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || { echo "bench.sh: --npl must be a comma list of positive integers (got '$2')" >&2; exit 2; }
      NPL="$2"; shift 2 ;;
    --build-dir) need_val "$@"; BUILD="$2"; shift 2 ;;
    --note) need_val "$@"; NOTE="$2"; shift 2 ;;
    --smoke) SMOKE=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "bench.sh: unknown option '$1'" >&2; usage >&2; exit 2 ;;
  esac
done

# the parallel part's sizes (--parallel: from -p -n -r with their own defaults; --smoke: tiny)
PAR_PP=32 PAR_TG=128 PAR_REPS=3 PAR_NPL="$NPL"
if [ "$PARALLEL" = 1 ]; then
  [ "$MODELS_SET" = 1 ] || MODELS=q08b
  [ "$TYPES_SET" = 1 ] || TYPES=q4_0,q4_k_m
  [ "$PP_SET" = 1 ] && PAR_PP="$PP"
  [ "$TG_SET" = 1 ] && PAR_TG="$TG"
  [ "$REPS_SET" = 1 ] && PAR_REPS="$REPS"
fi
if [ "$SMOKE" = 1 ]; then
  # one thread: spinning thread pools crawl when a busy machine deschedules one of their threads
  MODELS=tiny TYPES=q8_0,q4_0 PP=16 TG=4 THREADS=1 REPS=1 MEMBW_MIB=256 MEMBW_REPS=3 MEMBW_RUNS=1
  PAR_PP=8 PAR_TG=4 PAR_REPS=1 PAR_NPL=1,2
  [ "$DOC_SET" = 1 ] || NO_DOC=1
fi
# what runs: the single-stream comparison (default, --smoke) and/or the parallel one
RUN_SINGLE=1 RUN_PAR=0
[ "$PARALLEL" = 1 ] && RUN_SINGLE=0 RUN_PAR=1
[ "$SMOKE" = 1 ] && RUN_PAR=1

NLC_DIR="${NLC_DIR:-$SRC/tools/node}"
SHARED="${OXI_SHARED_DIR:-$SRC/../shared}"
ORACLE="$SHARED/oracle"
OXINFER="${OXINFER:-$BUILD/apps/cli/oxinfer}"
OXI_GEN="${OXI_GEN:-$BUILD/tools/gen/oxi-gen}"
BINS="$NLC_DIR/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64"
BUNDLE="$NLC_DIR/node_modules/node-llama-cpp/llama/gitRelease.bundle"
PY=/usr/bin/python3
[ -x "$PY" ] || PY=python3
export NLC_DIR

[ -x "$OXINFER" ] || die "no oxinfer at $OXINFER (build: cmake --preset release && cmake --build --preset release)"
[ -x "$OXI_GEN" ] || die "no oxi-gen at $OXI_GEN (part of the release build)"
[ -f "$SRC/scripts/bench/llama_batched_bench.mjs" ] || die "no scripts/bench/llama_batched_bench.mjs"
for f in llama_bench.mjs quantize_llama.py membw.c; do
  [ -f "$ORACLE/$f" ] || die "no $ORACLE/$f (set OXI_SHARED_DIR to the shared checkout)"
done
[ -f "$BINS/libllama.v0.5.0.so" ] || die "no node-llama-cpp binaries in $BINS (set NLC_DIR; scripts/setup.sh installs them)"
[ -f "$BUNDLE" ] || die "no llama.cpp source bundle at $BUNDLE (needed for llama.h)"
command -v node >/dev/null || die "node not found"
CC="${CC:-cc}"
command -v "$CC" >/dev/null || die "no C compiler ($CC)"

IFS=, read -r -a MODEL_LIST <<< "$MODELS"
IFS=, read -r -a TYPE_LIST <<< "$TYPES"
for m in "${MODEL_LIST[@]}"; do
  case "$m" in q08b|e2b|tiny) ;; *) echo "bench.sh: unknown model '$m' (q08b, e2b, tiny)" >&2; exit 2 ;; esac
done
for t in "${TYPE_LIST[@]}"; do
  case "$t" in q8_0|q4_0|q4_k_m) ;; *) echo "bench.sh: unknown type '$t' (q8_0, q4_0, q4_k_m)" >&2; exit 2 ;; esac
done

STAMP="$(date -u +%Y%m%d-%H%M%S)"
TMP="$(mktemp -d "${TMPDIR:-/tmp}/oxi-bench.XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
if [ -z "$RESULTS_DIR" ]; then
  if [ "$SMOKE" = 1 ]; then RESULTS_DIR="$TMP/results"; else RESULTS_DIR="$SRC/bench/results/$STAMP"; fi
fi
if [ -d "$RESULTS_DIR" ] && [ -n "$(ls -A "$RESULTS_DIR")" ]; then
  die "results dir $RESULTS_DIR is not empty (give a new one)"
fi
mkdir -p "$RESULTS_DIR" "$MODELS_DIR"
RESULTS_DIR="$(cd "$RESULTS_DIR" && pwd)"
MODELS_DIR="$(cd "$MODELS_DIR" && pwd)"
log() { echo "[bench $(date -u +%H:%M:%S)] $*" >&2; }

# ---------- tools: membw and llama_cbench, compiled into the temp dir (single-stream part) ----------
if [ "$RUN_SINGLE" = 1 ]; then
  log "compiling membw.c and llama_cbench.c into $TMP"
  "$CC" -O3 -march=native -fopenmp "$ORACLE/membw.c" -o "$TMP/membw" 2> "$TMP/membw.cc.log" ||
    { cat "$TMP/membw.cc.log" >&2; die "membw.c did not compile"; }
  mkdir -p "$TMP/llama-src"
  # llama.h and the ggml headers of exactly the llama.cpp revision node-llama-cpp's binaries were built from
  git -C "$TMP/llama-src" init -q && git -C "$TMP/llama-src" fetch -q "$BUNDLE" HEAD 2> "$TMP/git.log" &&
    git -C "$TMP/llama-src" archive FETCH_HEAD include/llama.h ggml/include | tar -x -C "$TMP/llama-src" ||
    { cat "$TMP/git.log" >&2; die "could not read llama.h from $BUNDLE"; }
  "$CC" -O2 -std=c11 -Wall -I"$TMP/llama-src/include" -I"$TMP/llama-src/ggml/include" \
    "$SRC/scripts/bench/llama_cbench.c" -o "$TMP/llama_cbench" -L"$BINS" -l:libllama.v0.5.0.so \
    -l:libggml.v0.5.0.so -l:libggml-base.so -Wl,-rpath,"$BINS" 2> "$TMP/cbench.cc.log" ||
    { cat "$TMP/cbench.cc.log" >&2; die "llama_cbench.c did not compile"; }
fi

# ---------- models ----------
# family -> oxi-gen arguments (the real shapes), tokenizer extractor, label
gen_args() {
  case "$1" in
    q08b) echo "qwen35 --hidden 1024 --layers 24 --interval 4 --heads 8 --kv-heads 2 --head-dim 256 --hk 16 --hv 16 --dk 128 --dv 128 --ffn 3584 --tied --vocab 248320 --dtype bf16" ;;
    e2b) echo "gemma4 --shape e2b --hidden 1536 --layers 35 --heads 8 --kv-heads 1 --global-kv-heads 1 --head-dim 256 --global-head-dim 512 --ffn 6144 --kv-shared 20 --ple 256 --full-every 5 --vocab 262144 --window 512 --dtype bf16" ;;
    tiny) echo "qwen35 --hidden 256 --layers 4 --heads 2 --kv-heads 1 --head-dim 64 --ffn 512 --tied --dtype bf16" ;;
  esac
}
tok_dir() { case "$1" in e2b) echo "$MODELS_DIR/tok-g" ;; *) echo "$MODELS_DIR/tok-q" ;; esac; }
tok_script() { case "$1" in e2b) echo "$SRC/tools/gen/extract_gemma4_tokenizer.mjs" ;; *) echo "$SRC/tools/gen/extract_tokenizer.mjs" ;; esac; }

# build_model FAMILY TYPE -> prints the GGUF path; reuses what exists, writes new files atomically
build_model() {
  local fam="$1" type="$2" hf="$MODELS_DIR/$1-hf" bf16="$MODELS_DIR/$1-bf16.gguf" out="$MODELS_DIR/$1-$2.gguf"
  local tok; tok="$(tok_dir "$fam")"
  [ -s "$out" ] && { echo "$out"; return 0; }
  if [ ! -s "$tok/tokenizer.json" ]; then
    log "$fam: extracting tokenizer into $tok"
    rm -rf "$tok.tmp" && node "$(tok_script "$fam")" "$tok.tmp" >&2 && rm -rf "$tok" && mv "$tok.tmp" "$tok" || return 1
  fi
  if [ ! -s "$hf/config.json" ]; then
    log "$fam: oxi-gen $(gen_args "$fam")"
    # shellcheck disable=SC2046
    rm -rf "$hf.tmp" && "$OXI_GEN" $(gen_args "$fam") --tokenizer-dir "$tok" --out "$hf.tmp" >&2 &&
      rm -rf "$hf" && mv "$hf.tmp" "$hf" || return 1
  fi
  case "$type" in
    q8_0)
      log "$fam: oxinfer convert --type q8_0"
      "$OXINFER" convert "$hf" -o "$out.tmp" --type q8_0 >&2 && mv "$out.tmp" "$out" || return 1 ;;
    q4_0|q4_k_m)
      if [ ! -s "$bf16" ]; then
        log "$fam: oxinfer convert --type bf16"
        "$OXINFER" convert "$hf" -o "$bf16.tmp" --type bf16 >&2 && mv "$bf16.tmp" "$bf16" || return 1
      fi
      local ft="${type^^}"
      log "$fam: llama_model_quantize $ft (quantize_llama.py)"
      "$PY" "$ORACLE/quantize_llama.py" "$bf16" "$out.tmp" "$ft" --threads "$THREADS" \
        --lib-dir "$BINS" > "$TMP/quantize.log" 2>&1 && mv "$out.tmp" "$out" ||
        { tail -5 "$TMP/quantize.log" >&2; rm -f "$out.tmp"; return 1; } ;;
  esac
  echo "$out"
}

FILES=()
: > "$RESULTS_DIR/skipped.txt"
for fam in "${MODEL_LIST[@]}"; do
  for type in "${TYPE_LIST[@]}"; do
    if f="$(build_model "$fam" "$type")"; then
      FILES+=("$fam:$type:$f")
    else
      log "WARNING: $fam $type could not be built; skipped (see the messages above)"
      echo "$fam $type" >> "$RESULTS_DIR/skipped.txt"
    fi
  done
done
[ ${#FILES[@]} -gt 0 ] || die "no model file to benchmark"

# ---------- run.txt: what ran where ----------
{
  echo "commit=$(git -C "$SRC" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$SRC" diff --quiet HEAD 2>/dev/null || echo -dirty)"
  echo "cpu=$(sed -n 's/^model name\s*:\s*//p' /proc/cpuinfo | head -1)"
  echo "logical_cpus=$(nproc --all)"
  echo "mem_total_kib=$(sed -n 's/^MemTotal:\s*\([0-9]*\).*/\1/p' /proc/meminfo)"
  echo "kernel=$(uname -r)"
  echo "node_llama_cpp=$(node -p "require('$NLC_DIR/node_modules/node-llama-cpp/package.json').version" 2>/dev/null || echo unknown)"
  echo "date=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "pp=$PP"; echo "tg=$TG"; echo "threads=$THREADS"; echo "reps=$REPS"
  echo "single=$RUN_SINGLE"; echo "parallel=$RUN_PAR"
  echo "par_npl=$PAR_NPL"; echo "par_pp=$PAR_PP"; echo "par_tg=$PAR_TG"; echo "par_reps=$PAR_REPS"
  echo "smoke=$SMOKE"
  echo "note=${NOTE//$'\n'/ }"
} > "$RESULTS_DIR/run.txt"
DOC_ARGS=()
[ "$NO_DOC" = 1 ] || DOC_ARGS=(--doc "$DOC")

# ---------- single stream: pp / tg, load time, peak RSS, bandwidth ----------
if [ "$RUN_SINGLE" = 1 ]; then
  membw() {  # membw -> $RESULTS_DIR/membw-$1-N.json
    local i
    for i in $(seq 1 "$MEMBW_RUNS"); do
      OMP_NUM_THREADS="$THREADS" "$TMP/membw" "$MEMBW_MIB" "$MEMBW_REPS" > "$RESULTS_DIR/membw-$1-$i.json"
    done
  }
  log "memory bandwidth ($MEMBW_RUNS x membw $MEMBW_MIB MiB x $MEMBW_REPS, $THREADS threads)"
  cat /proc/loadavg > "$RESULTS_DIR/loadavg-start.txt"
  membw before
  BW="$("$PY" "$SRC/scripts/bench/report.py" bandwidth "$THREADS" "$RESULTS_DIR"/membw-before-*.json)"
  log "read bandwidth $BW GB/s"

  i=0
  for entry in "${FILES[@]}"; do
    fam="${entry%%:*}"; rest="${entry#*:}"; type="${rest%%:*}"; f="${rest#*:}"
    name="$fam-$type"
    cat "$f" > /dev/null   # page cache warm for whichever runs first
    run_oxinfer() {
      log "$name: oxinfer bench -p $PP -n $TG -t $THREADS -r $REPS"
      "$OXINFER" bench -m "$f" -p "$PP" -n "$TG" -t "$THREADS" -r "$REPS" -o json --cold-start \
        > "$RESULTS_DIR/$name.oxinfer.json" 2> "$RESULTS_DIR/$name.oxinfer.log" ||
        { cat "$RESULTS_DIR/$name.oxinfer.log" >&2; die "oxinfer bench failed on $f"; }
    }
    run_llama() {
      log "$name: llama_bench.mjs --pp $PP --tg $TG --threads $THREADS --reps $REPS"
      node "$ORACLE/llama_bench.mjs" --model "$f" --threads "$THREADS" --pp "$PP" --tg "$TG" --reps "$REPS" \
        --bw-gbs "$BW" --no-c --out "$RESULTS_DIR/$name.llama_bench.json" > /dev/null 2> "$RESULTS_DIR/$name.llama_bench.log" ||
        { cat "$RESULTS_DIR/$name.llama_bench.log" >&2; die "llama_bench.mjs failed on $f"; }
      log "$name: llama_cbench (load time, cold start, peak RSS; 1 repetition)"
      NLC_BIN_DIR="$BINS" "$TMP/llama_cbench" "$f" "$THREADS" "$PP" "$TG" 1 -1 64 \
        > "$RESULTS_DIR/$name.llama_c.json" 2> "$RESULTS_DIR/$name.llama_c.log" ||
        { cat "$RESULTS_DIR/$name.llama_c.log" >&2; die "llama_cbench failed on $f"; }
    }
    if [ $((i % 2)) -eq 0 ]; then run_oxinfer; run_llama; else run_llama; run_oxinfer; fi
    echo "$name $f" >> "$RESULTS_DIR/files.txt"
    i=$((i + 1))
  done

  log "memory bandwidth again"
  membw after
  cat /proc/loadavg > "$RESULTS_DIR/loadavg-end.txt"
  "$PY" "$SRC/scripts/bench/report.py" report "$RESULTS_DIR" "${DOC_ARGS[@]}"
  log "results in $RESULTS_DIR$([ "$NO_DOC" = 1 ] || echo "; table written into $DOC")"
fi

# ---------- N concurrent streams: aggregate generation throughput ----------
if [ "$RUN_PAR" = 1 ]; then
  [ -f "$RESULTS_DIR/loadavg-start.txt" ] || cat /proc/loadavg > "$RESULTS_DIR/loadavg-start.txt"
  cat /proc/loadavg > "$RESULTS_DIR/loadavg-par-start.txt"
  i=0
  for entry in "${FILES[@]}"; do
    fam="${entry%%:*}"; rest="${entry#*:}"; type="${rest%%:*}"; f="${rest#*:}"
    name="$fam-$type"
    cat "$f" > /dev/null
    par_oxinfer() {
      log "$name: oxinfer bench -npl $PAR_NPL -p $PAR_PP -n $PAR_TG -t $THREADS -r $PAR_REPS"
      "$OXINFER" bench -m "$f" -npl "$PAR_NPL" -p "$PAR_PP" -n "$PAR_TG" -t "$THREADS" -r "$PAR_REPS" -o json \
        > "$RESULTS_DIR/$name.oxinfer_par.json" 2> "$RESULTS_DIR/$name.oxinfer_par.log" ||
        { cat "$RESULTS_DIR/$name.oxinfer_par.log" >&2; die "oxinfer bench -npl failed on $f"; }
    }
    par_llama() {
      log "$name: llama_batched_bench.mjs --npl $PAR_NPL --pp $PAR_PP --tg $PAR_TG --threads $THREADS --reps $PAR_REPS"
      node "$SRC/scripts/bench/llama_batched_bench.mjs" --model "$f" --threads "$THREADS" --npl "$PAR_NPL" \
        --pp "$PAR_PP" --tg "$PAR_TG" --reps "$PAR_REPS" --out "$RESULTS_DIR/$name.llama_par.json" \
        > /dev/null 2> "$RESULTS_DIR/$name.llama_par.log" ||
        { cat "$RESULTS_DIR/$name.llama_par.log" >&2; die "llama_batched_bench.mjs failed on $f"; }
    }
    if [ $((i % 2)) -eq 0 ]; then par_oxinfer; par_llama; else par_llama; par_oxinfer; fi
    echo "$name $f" >> "$RESULTS_DIR/parallel_files.txt"
    i=$((i + 1))
  done
  cat /proc/loadavg > "$RESULTS_DIR/loadavg-par-end.txt"
  if [ "$RUN_SINGLE" = 1 ]; then
    # after the single-stream table (stdout): the parallel table only into the results dir
    "$PY" "$SRC/scripts/bench/report.py" parallel "$RESULTS_DIR" > /dev/null
    log "parallel table in $RESULTS_DIR/parallel.md"
  else
    "$PY" "$SRC/scripts/bench/report.py" parallel "$RESULTS_DIR" "${DOC_ARGS[@]}"
    log "results in $RESULTS_DIR$([ "$NO_DOC" = 1 ] || echo "; table written into $DOC")"
  fi
fi
