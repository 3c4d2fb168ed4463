#!/usr/bin/env bash
# The test command: builds the release preset, runs every test (unit, end-to-end against llama.cpp
# and the real tokenizers), then builds the wasm32 core and runs its unit tests under node, the
# browser build in headless Chromium, then
# cross-builds the kernels for aarch64 and runs their tests under qemu-user (every NEON set), and
# runs each libFuzzer target briefly (scripts/fuzz.sh: 30 s each; hours with --long, by hand).
# Usage: scripts/test.sh [--no-wasm] [--no-aarch64] [--no-fuzz]
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="$(nproc)"
WASM=1 AARCH64=1 FUZZ=1
for a in "$@"; do
  case "$a" in
    --no-wasm) WASM=0 ;;
    --no-aarch64) AARCH64=0 ;;
    --no-fuzz) FUZZ=0 ;;
    *) echo "usage: scripts/test.sh [--no-wasm] [--no-aarch64] [--no-fuzz]" >&2; exit 2 ;;
  esac
done

cmake --preset release >/dev/null
cmake --build --preset release -j"$JOBS"
# llama.cpp's multimodal reference (llama-mtmd-cli) for e2e_mtmd_oracle: built once, then cached in
# ~/.cache/oxinfer-llama (about 8 min of 2 quiet cores the first time; 0 s after).
if [ -f tools/node/node_modules/node-llama-cpp/llama/gitRelease.bundle ]; then
  JOBS="$JOBS" scripts/build_llama_mtmd.sh >/dev/null
fi
ctest --preset release -j"$JOBS" --timeout 1200

if [ "$WASM" = 1 ]; then
  scripts/build_wasm.sh
  ctest --test-dir build/wasm --output-on-failure -j"$JOBS" --timeout 600
  # The browser build in headless Chromium against the native CLI (docs/web.md).
  scripts/build_web.sh
  OXI_WORK_DIR=build/web-test node tests/web/web.test.mjs
fi

if [ "$AARCH64" = 1 ]; then
  scripts/build_aarch64.sh
fi

if [ "$FUZZ" = 1 ]; then
  scripts/fuzz.sh 30
fi
