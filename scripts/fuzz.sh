#!/usr/bin/env bash
# Builds the libFuzzer targets (preset `fuzz`: Debian's clang + -fsanitize=fuzzer,address) and runs
# each one, seeded from the committed corpora (tests/data, tests/fuzz/corpus made by
# tests/fuzz/make_seeds.py) and from ../shared's real templates and vocabularies. A crash, ASan
# report, leak, timeout or non-oxi exception fails the script; reproducers land in
# build/fuzz/artifacts/, per-target logs in build/fuzz/fuzz_<target>.log.
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET (default 30)] [TARGET...]
#        scripts/fuzz.sh --long [HOURS_PER_TARGET (default 2)] [TARGET...]
#   --long keeps its working corpus in build/fuzz/corpus-long/ between runs, starts from the corpus
#   kept in the repo (tests/fuzz/corpus-long/TARGET) and at the end merges into it the inputs that
#   add coverage (libFuzzer -merge=1: a minimised set; commit it).
# Targets: gguf safetensors hf_config jinja request tokenizer chat_parser (default: all).
# Not part of scripts/test.sh: about 4 minutes in the short mode (docs/design.md "Fuzzing").
set -euo pipefail
cd "$(dirname "$0")/.."
LONG=0
if [ "${1:-}" = "--long" ]; then LONG=1; shift; fi
if [ "$LONG" = 1 ]; then SECS=$(( ${1:-2} * 3600 )); else SECS="${1:-30}"; fi
[ $# -gt 0 ] && shift
ALL="gguf safetensors hf_config jinja request tokenizer chat_parser"
TARGETS="${*:-$ALL}"
B=build/fuzz
SHARED=../shared/testdata
cmake --preset fuzz >/dev/null
cmake --build "$B" -j"$(nproc)" --target $(for t in $TARGETS; do printf 'oxi_fuzz_%s ' "$t"; done)

seed() {  # seed <dir> <files...>: copy seeds into the corpus dir (fresh unless --long)
  local d="$1"; shift
  [ "$LONG" = 1 ] || rm -rf "$d"
  mkdir -p "$d"
  for f in "$@"; do [ -f "$f" ] && cp "$f" "$d/" || true; done
}
C="$B/corpus"; [ "$LONG" = 1 ] && C="$B/corpus-long"
seed "$C/gguf" tests/data/good/*.gguf tests/data/bad/gguf_*
seed "$C/safetensors" tests/data/good/*.safetensors tests/data/bad/st_*
seed "$C/hf_config"
# HF seeds: config.json NUL tokenizer_config.json NUL index NUL weights
i=0
for d in tests/data/bad/hf_*; do
  i=$((i + 1))
  {
    cat "$d/config.json" 2>/dev/null || true; printf '\0'
    cat "$d/tokenizer_config.json" 2>/dev/null || true; printf '\0'
    cat "$d/model.safetensors.index.json" 2>/dev/null || true; printf '\0'
    cat "$d/model.safetensors" "$d/s1.safetensors" 2>/dev/null || true
  } >"$C/hf_config/seed$i"
done
{ printf '{"model_type":"m","text_config":{"hidden_size":4}}\0{"chat_template":"x"}\0\0'
  cat tests/data/good/independent.safetensors; } >"$C/hf_config/good"
for t in jinja request tokenizer chat_parser; do seed "$C/$t" tests/fuzz/corpus/"$t"/*; done
if [ "$LONG" = 1 ]; then
  for t in $TARGETS; do seed "$C/$t" tests/fuzz/corpus-long/"$t"/*; done
fi
# The real chat templates (with the default conversation) as Jinja seeds, when ../shared is there.
for f in "$SHARED"/templates/*.jinja; do [ -f "$f" ] && cp "$f" "$C/jinja/" || true; done

mkdir -p "$B/artifacts"
status=0
for t in $TARGETS; do
  echo "== fuzz $t for ${SECS}s"
  if ! "$B/tests/fuzz/oxi_fuzz_$t" "$C/$t" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 \
      -max_len=65536 -artifact_prefix="$B/artifacts/${t}-" -print_final_stats=1 2>"$B/fuzz_$t.log"; then
    echo "FAIL: fuzz_$t found a problem (log: $B/fuzz_$t.log)"; tail -40 "$B/fuzz_$t.log"; status=1
  else
    grep -E "^stat::number_of_executed_units|^Done" "$B/fuzz_$t.log" | head -2 || true
  fi
  if [ "$LONG" = 1 ]; then  # the repo's long-run corpus gains what adds coverage
    mkdir -p tests/fuzz/corpus-long/"$t"
    "$B/tests/fuzz/oxi_fuzz_$t" -merge=1 -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      tests/fuzz/corpus-long/"$t" "$C/$t" 2>>"$B/fuzz_$t.log" || true
    echo "   corpus kept in tests/fuzz/corpus-long/$t: $(ls tests/fuzz/corpus-long/"$t" | wc -l) inputs"
  fi
done
exit "$status"
