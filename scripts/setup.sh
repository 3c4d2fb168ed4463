#!/usr/bin/env bash
# Installs everything oxinfer needs to build and test, from Debian packages and npm only.
# Idempotent; run as root (or with sudo available). Then builds the release preset.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

PKGS=(
  build-essential cmake ninja-build pkg-config git
  clang libclang-rt-14-dev          # fuzzers (libFuzzer), second compiler
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcpp-httplib-dev libcli11-dev libpcre2-dev libutf8proc-dev libhwy-dev
  libcurl4-openssl-dev
  libstb-dev libwebp-dev            # image input: stb_image (PNG/JPEG/GIF/BMP…) and libwebp
  libsndfile1-dev libsamplerate0-dev  # audio input: WAV/FLAC/Ogg/MP3 decoding, resampling to 16 kHz
  python3-pil                       # test reference: Pillow's decoders and BICUBIC resize (HF's)
  python3-numpy                     # test reference: MLX checkpoints written by numpy (tests/e2e/mlx_oracle)
  emscripten                        # wasm32 build of the core, tests run under node
  chromium                          # the browser build's tests (headless, via npm playwright-core)
  g++-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user   # NEON kernels: cross build + qemu tests
  libvulkan1 mesa-vulkan-drivers    # the Vulkan device's tests (lavapipe); dlopen'ed, not linked
  vulkan-tools                      # vulkaninfo: the device names --list-devices is checked against
  glslc glslang-tools libvulkan-dev # the Vulkan device's shaders (GLSL → SPIR-V) and headers; optional
  nodejs npm python3
)
missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  # nodejs/npm may come from NodeSource on these machines; never replace a working node.
  if command -v node >/dev/null && command -v npm >/dev/null; then
    missing=("${missing[@]/nodejs}"); missing=("${missing[@]/npm}")
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends ${missing[@]} >/dev/null
fi

# Reference implementations for tests: llama.cpp (node-llama-cpp), real tokenizers, Jinja, OpenAI.
# `npm install` (not `npm ci`): the lock lists only the platform packages this registry serves,
# which `npm ci` rejects as out of sync; `npm install` honours the lock and leaves it unchanged.
(cd tools/node && npm install --no-audit --no-fund --loglevel=error)

cmake --preset release >/dev/null
cmake --build --preset release -j"$(nproc)"
echo "setup done: build/release/apps/cli/oxinfer"
