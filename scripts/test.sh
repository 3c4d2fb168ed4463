#!/usr/bin/env bash
# The test command: builds the release preset, runs every test (unit, end-to-end against llama.cpp
# and the real tokenizers), then builds the wasm32 core and runs its unit tests under node.
# Usage: scripts/test.sh [--no-wasm]
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="$(nproc)"

cmake --preset release >/dev/null
cmake --build --preset release -j"$JOBS"
ctest --preset release -j"$JOBS" --timeout 1200

if [ "${1:-}" != "--no-wasm" ]; then
  scripts/build_wasm.sh
  ctest --test-dir build/wasm --output-on-failure -j"$JOBS" --timeout 600
fi
