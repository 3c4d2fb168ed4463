#!/usr/bin/env bash
# aarch64 cross build of the kernel layer (Debian g++-aarch64-linux-gnu) and its tests run under
# qemu-aarch64: once on a CPU without dotprod (cortex-a53: "neon" only) and once on qemu's "max"
# CPU (dotprod + i8mm), so every NEON set is checked against the scalar reference.
# Usage: scripts/build_aarch64.sh [--no-test]
set -euo pipefail
cd "$(dirname "$0")/.."
B=build/aarch64
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
cmake -S cmake/kernels_only -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/aarch64-linux-gnu.cmake" "${launcher[@]}" >/dev/null
cmake --build "$B" -j"$(nproc)" --target oxi_kernels_tests
[ "${1:-}" = "--no-test" ] && exit 0

# The dotprod/i8mm objects must not export COMDATs the linker could pick for generic code.
syms="$(aarch64-linux-gnu-nm -C "$B"/kernels/CMakeFiles/oxi_kernels.dir/arm/neon_{dotprod,i8mm}.cpp.o)"
if grep ' [WVu] ' <<<"$syms"; then
  echo "error: weak symbols in a +dotprod/+i8mm object (see docs/kernels.md)" >&2
  exit 1
fi
export QEMU_LD_PREFIX=/usr/aarch64-linux-gnu
# The thread-pool stress test is not about the ISA and is slow under emulation.
filter='-ThreadPool.EverySlotRunsOnceUnderStress'
for cpu in cortex-a53 max; do
  echo "== qemu-aarch64 -cpu $cpu"
  QEMU_CPU=$cpu qemu-aarch64 "$B/oxi_kernels_tests" --gtest_filter="$filter" --gtest_brief=1
done
