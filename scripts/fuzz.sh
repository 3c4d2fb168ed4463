#!/usr/bin/env bash
# Builds the libFuzzer targets (preset `fuzz`: clang + -fsanitize=fuzzer,address) and runs each one
# briefly, seeded from the committed corpus (tests/data). A crash, ASan report, leak, timeout or
# non-oxi exception fails the script; reproducers land in build/fuzz/artifacts/.
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET (default 20)]
set -euo pipefail
cd "$(dirname "$0")/.."
SECS="${1:-20}"
B=build/fuzz
cmake --preset fuzz >/dev/null
cmake --build "$B" -j"$(nproc)" --target oxi_fuzz_gguf oxi_fuzz_safetensors oxi_fuzz_hf_config

seed() {  # seed <dir> <files...>: copy seeds into a fresh corpus dir
  local d="$1"; shift
  rm -rf "$d"; mkdir -p "$d"
  for f in "$@"; do [ -f "$f" ] && cp "$f" "$d/" || true; done
}
C="$B/corpus"
seed "$C/gguf" tests/data/good/*.gguf tests/data/bad/gguf_*
seed "$C/safetensors" tests/data/good/*.safetensors tests/data/bad/st_*
mkdir -p "$C/hf_config"
rm -rf "$C/hf_config"; mkdir -p "$C/hf_config"
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

mkdir -p "$B/artifacts"
status=0
for t in gguf safetensors hf_config; do
  echo "== fuzz $t for ${SECS}s"
  if ! "$B/tests/fuzz/oxi_fuzz_$t" "$C/$t" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 \
      -max_len=65536 -artifact_prefix="$B/artifacts/${t}-" -print_final_stats=1 2>"$B/fuzz_$t.log"; then
    echo "FAIL: fuzz_$t found a problem (log: $B/fuzz_$t.log)"; tail -40 "$B/fuzz_$t.log"; status=1
  else
    grep -E "^stat::number_of_executed_units|^Done" "$B/fuzz_$t.log" | head -2 || true
  fi
done
exit "$status"
