#!/usr/bin/env bash
# wasm32 build of the portable core (format, tokenizer, kernels with the simd128 set) with Debian's
# emscripten 3.1.6; scripts/test.sh then runs its unit tests under node.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/wasm_env.sh
emcmake cmake -S . -B build/wasm -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/wasm -j"$(nproc)"
