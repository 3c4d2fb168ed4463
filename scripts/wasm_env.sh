# Sourced by the wasm build scripts: Debian emscripten 3.1.6's environment (see
# ../shared/spec/toolchain.md) and a writable copy of its frozen cache.
export NODE_PATH=/usr/share/nodejs  # emcc's acorn lives there
export EM_CACHE="${EM_CACHE:-$HOME/.cache/oxinfer-emscripten}"
if [ ! -d "$EM_CACHE" ]; then
  mkdir -p "$EM_CACHE"; cp -r /usr/share/emscripten/cache/. "$EM_CACHE"/ 2>/dev/null || true
fi
