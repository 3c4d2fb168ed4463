#!/usr/bin/env bash
# wasm32 build of the portable core (format, tokenizer, kernels with the simd128 set) with Debian's
# emscripten 3.1.6; scripts/test.sh then runs its unit tests under node.
set -euo pipefail
cd "$(dirname "$0")/.."
export NODE_PATH=/usr/share/nodejs  # emcc's acorn lives there (see ../shared/spec/toolchain.md)
export EM_CACHE="${EM_CACHE:-$HOME/.cache/oxinfer-emscripten}"
if [ ! -d "$EM_CACHE" ]; then
  mkdir -p "$EM_CACHE"; cp -r /usr/share/emscripten/cache/. "$EM_CACHE"/ 2>/dev/null || true
fi
emcmake cmake -S . -B build/wasm -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/wasm -j"$(nproc)"
