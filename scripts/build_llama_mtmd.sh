#!/usr/bin/env bash
# Build llama.cpp's multimodal reference tool (llama-mtmd-cli, CPU only, Release) from the llama.cpp
# source node-llama-cpp bundles (llama/gitRelease.bundle; revision named by llama.cpp.info.json), into a
# cache outside the tree, reused when present. A reference tool for the multimodal tests only.
#
#   scripts/build_llama_mtmd.sh            # prints the path of llama-mtmd-cli on stdout
#
# Environment: NLC_DIR (node-llama-cpp install, default tools/node), OXI_LLAMA_CACHE (default
# ${XDG_CACHE_HOME:-~/.cache}/oxinfer-llama), JOBS (default 2).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
NLC_DIR="${NLC_DIR:-$ROOT/tools/node}"
PKG="$NLC_DIR/node_modules/node-llama-cpp/llama"
BUNDLE="$PKG/gitRelease.bundle"
JOBS="${JOBS:-2}"
log() { echo "build_llama_mtmd: $*" >&2; }
die() { log "$*"; exit 1; }

[ -f "$BUNDLE" ] || die "no llama.cpp source bundle at $BUNDLE (scripts/setup.sh installs node-llama-cpp)"
TAG="$(sed -n 's/.*"tag": *"\([^"]*\)".*/\1/p' "$PKG/llama.cpp.info.json" 2>/dev/null || true)"
HEAD="$(git bundle list-heads "$BUNDLE" | awk '$2=="HEAD"{print $1; exit}')"
[ -n "$HEAD" ] || die "cannot read HEAD of $BUNDLE"
CACHE="${OXI_LLAMA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/oxinfer-llama}/${TAG:-untagged}-${HEAD:0:12}"
BIN="$CACHE/build/bin/llama-mtmd-cli"
if [ -x "$BIN" ] && [ -f "$CACHE/.done" ]; then echo "$BIN"; exit 0; fi

command -v cmake >/dev/null || die "cmake not found"
mkdir -p "$CACHE"
exec 9> "$CACHE/.lock"
flock 9   # one build at a time; a second caller waits, then finds the cache
if [ -x "$BIN" ] && [ -f "$CACHE/.done" ]; then echo "$BIN"; exit 0; fi

if [ ! -f "$CACHE/src/CMakeLists.txt" ]; then
  log "extracting $HEAD from $BUNDLE"
  rm -rf "$CACHE/src.tmp" && mkdir -p "$CACHE/src.tmp"
  git -C "$CACHE/src.tmp" init -q
  git -C "$CACHE/src.tmp" fetch -q "$BUNDLE" HEAD
  git -C "$CACHE/src.tmp" checkout -q FETCH_HEAD
  rm -rf "$CACHE/src" && mv "$CACHE/src.tmp" "$CACHE/src"
fi

GEN=()
command -v ninja >/dev/null && GEN=(-G Ninja)
log "configuring (CPU only, Release)"
cmake -S "$CACHE/src" -B "$CACHE/build" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF -DGGML_NATIVE=ON -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF \
  -DGGML_OPENMP=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TOOLS=ON \
  -DLLAMA_BUILD_COMMON=ON -DLLAMA_BUILD_UI=OFF >&2
log "building llama-mtmd-cli with -j$JOBS"
start=$(date +%s)
cmake --build "$CACHE/build" --target llama-mtmd-cli -j "$JOBS" >&2
log "built in $(( $(date +%s) - start )) s"
[ -x "$BIN" ] || die "build finished but $BIN is missing"
touch "$CACHE/.done"
echo "$BIN"
