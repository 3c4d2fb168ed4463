#!/usr/bin/env bash
# The browser build (docs/web.md): the engine compiled to wasm twice — single-threaded in
# build/wasm and with pthreads in build/wasm-mt — plus the JS module, worker and chat page from
# web/, gathered in build/web/: a static folder any server sending COOP/COEP headers can host
# (`node build/web/serve.mjs` is one).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/wasm_env.sh
emcmake cmake -S . -B build/wasm -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/wasm -j"$(nproc)" --target oxinfer_engine
emcmake cmake -S . -B build/wasm-mt -G Ninja -DCMAKE_BUILD_TYPE=Release -DOXI_WASM_THREADS=ON \
  -DOXI_BUILD_TESTS=OFF >/dev/null
cmake --build build/wasm-mt -j"$(nproc)" --target oxinfer_engine

out=build/web
rm -rf "$out" && mkdir -p "$out"
cp build/wasm/web/oxinfer-engine-st.mjs build/wasm/web/oxinfer-engine-st.wasm "$out"/
cp build/wasm-mt/web/oxinfer-engine-mt.mjs build/wasm-mt/web/oxinfer-engine-mt.wasm "$out"/
cp build/wasm-mt/web/oxinfer-engine-mt.worker.js "$out"/
cp web/*.mjs web/*.html web/*.css "$out"/
echo "browser build: $out (serve it with: node $out/serve.mjs)"
