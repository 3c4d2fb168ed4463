#!/usr/bin/env bash
# The device seam through the CLI: `oxinfer run --device cpu-ref` (and OXI_DEVICE=cpu-ref, and
# --device vulkan where a Vulkan driver is present: the whole model on it, and -ngl 0) give the same greedy tokens as --device none on synthetic Qwen 3.5 and Gemma 4 models (f32 weights, so
# the two paths differ only in summation order), and an unknown or malformed device is a clear
# error, exit 1. Also --device cpu (= none), vulkan:N and --list-devices.
# (tests/backend checks in-process that the prefill really ran on the device.)
set -u
SRC="$(cd "$(dirname "$0")/../.." && pwd)"
OXINFER="${OXINFER:-$SRC/build/release/apps/cli/oxinfer}"
OXI_GEN="${OXI_GEN:-$SRC/build/release/tools/gen/oxi-gen}"
export NLC_DIR="${NLC_DIR:-$SRC/tools/node}"
WORK="${OXI_WORK_DIR:-$(mktemp -d)}/device_cli"
rm -rf "$WORK" && mkdir -p "$WORK"

fails=0
ok() { echo "ok   - $1"; }
bad() { echo "FAIL - $1"; fails=$((fails + 1)); }

node "$SRC/tools/gen/extract_tokenizer.mjs" "$WORK/tok" >/dev/null || { echo "FAIL - tokenizer extraction"; exit 1; }
"$OXI_GEN" qwen35 --out "$WORK/q35" --seed 5 --dtype f32 --hidden 64 --layers 4 --ffn 128 \
  --tokenizer-dir "$WORK/tok" >/dev/null || { echo "FAIL - oxi-gen"; exit 1; }
M="$WORK/q35"
PROMPT=$(seq -s, 100 137)  # 38 prompt tokens: prefill goes to the device

ids() {
  "$OXINFER" run -m "$M" --tokens "$PROMPT" -n 12 --temp 0 --json "$@" 2>"$WORK/err" |
    python3 -c 'import json,sys; print(",".join(str(json.loads(l)["id"]) for l in sys.stdin if "\"id\"" in l))'
}
cpu=$(ids --device none)
if grep -q "^oxinfer: device: none (CPU)" "$WORK/err"; then ok "start-up line: no device"
else bad "no start-up line for none: $(cat "$WORK/err")"; fi
ref=$(ids --device cpu-ref)
if grep -q "^oxinfer: device: cpu-ref (" "$WORK/err"; then ok "start-up line names the device"
else bad "no start-up line for cpu-ref: $(cat "$WORK/err")"; fi
env_ref=$(OXI_DEVICE=cpu-ref ids)
cpu_alias=$(ids --device cpu)  # llama.cpp's spelling of none
if [ "$cpu_alias" = "$cpu" ] && grep -q "^oxinfer: device: none (CPU)" "$WORK/err"; then ok "--device cpu: the CPU, same greedy tokens"
else bad "--device cpu: '$cpu_alias' vs '$cpu' ($(cat "$WORK/err"))"; fi
# --list-devices (llama.cpp's): the CPU and each Vulkan device, exit 0, no model needed; with
# vulkaninfo installed, the same device names it lists.
if "$OXINFER" --list-devices >"$WORK/list" 2>&1 && head -1 "$WORK/list" | grep -q "^Available devices:" && grep -q "^  cpu " "$WORK/list" &&
   "$OXINFER" run --list-devices | cmp -s - "$WORK/list"; then ok "--list-devices: $(grep -c '^  ' "$WORK/list") devices, exit 0"
else bad "--list-devices: $(cat "$WORK/list")"; fi
if command -v vulkaninfo >/dev/null; then
  want=$(vulkaninfo --summary 2>/dev/null | sed -n 's/^[[:space:]]*deviceName[[:space:]]*= //p' | sort)
  got=$(python3 -c 'import re,sys; [print(re.sub(r", [^,]*, Vulkan [0-9.]+(, [0-9]+ MiB)?$", "", l.split("  ", 2)[2].rstrip("\n"))) for l in open(sys.argv[1]) if l.startswith("  vulkan:")]' "$WORK/list" | sort)
  if [ "$want" = "$got" ]; then ok "--list-devices: vulkaninfo's device names"; else bad "--list-devices names '$got' vs vulkaninfo '$want'"; fi
fi
auto=$(ids --device auto)
n=$(echo "$cpu" | tr ',' '\n' | grep -c .)
if [ "$n" = 12 ]; then ok "12 greedy tokens on the CPU"; else bad "CPU run gave '$cpu'"; fi
if [ "$ref" = "$cpu" ]; then ok "--device cpu-ref: same greedy tokens"; else bad "--device cpu-ref: '$ref' vs '$cpu'"; fi
if [ "$env_ref" = "$cpu" ]; then ok "OXI_DEVICE=cpu-ref: same greedy tokens"; else bad "OXI_DEVICE=cpu-ref: '$env_ref' vs '$cpu'"; fi
if [ "$auto" = "$cpu" ]; then ok "--device auto: same greedy tokens"; else bad "--device auto: '$auto' vs '$cpu'"; fi
# The Vulkan device (lavapipe in CI): the whole model on it by default (weights, KV cache and
# recurrent states in its memory), and with -ngl 0 only the prefill matmuls on its shaders; f32
# weights, so only the summation order differs. Skipped where no Vulkan driver is present.
# The device keeps an f32 KV cache: the CPU reference does too (OXI_KV_F32=1; its default f16 cache
# rounds K and V, which these random models can amplify into other tokens).
vk=$(ids --device vulkan)
if grep -q "is not available" "$WORK/err"; then ok "--device vulkan: skipped ($(tail -1 "$WORK/err"))"
else
  grep -q "^oxinfer: offload: the whole model on vulkan" "$WORK/err"; whole=$?
  cpu32=$(OXI_KV_F32=1 ids --device none)
  if [ $whole = 0 ] && [ -n "$vk" ] && [ "$vk" = "$cpu32" ]; then ok "--device vulkan: the whole model on the device, same greedy tokens"
  else bad "--device vulkan: '$vk' vs '$cpu32' ($(cat "$WORK/err"))"; fi
  # bench names where the pass ran
  bd=$("$OXINFER" bench -m "$M" -p 8 -n 2 -r 1 -o json --device vulkan 2>/dev/null | python3 -c 'import json,sys; print(",".join(sorted({r["device"] for r in json.load(sys.stdin)})))')
  if [ "$bd" = "vulkan" ]; then ok "bench --device vulkan: JSON device vulkan"; else bad "bench --device vulkan: device '$bd'"; fi
  bd0=$("$OXINFER" bench -m "$M" -p 8 -n 2 -r 1 -o json --device vulkan -ngl 0 2>/dev/null | python3 -c 'import json,sys; print(",".join(sorted({r["device"] for r in json.load(sys.stdin)})))')
  if [ "$bd0" = "cpu" ]; then ok "bench --device vulkan -ngl 0: JSON device cpu"; else bad "bench -ngl 0: device '$bd0'"; fi
  # vulkan:N names the loader's device N, as --list-devices lists them (lavapipe: one, vulkan:0)
  vkn=$(ids --device vulkan:0)
  if [ "$vkn" = "$vk" ] && grep -q "^oxinfer: device: vulkan (" "$WORK/err"; then ok "--device vulkan:0: the same device and tokens"
  else bad "--device vulkan:0: '$vkn' vs '$vk' ($(cat "$WORK/err"))"; fi
  nvk=$("$OXINFER" --list-devices | grep -c "^  vulkan:[0-9]")
  "$OXINFER" run -m "$M" --tokens 1,2 -n 1 --device "vulkan:$nvk" >/dev/null 2>"$WORK/err"
  rc=$?
  if [ $rc = 1 ] && grep -q "no Vulkan device $nvk ($nvk found" "$WORK/err"; then ok "--device vulkan:$nvk (past the list): error, exit 1"
  else bad "--device vulkan:$nvk: rc=$rc, stderr: $(cat "$WORK/err")"; fi
  vk0=$(OXI_DEVICE_MIN_FLOPS=0 ids --device vulkan -ngl 0)  # every prefill matmul, however small
  if [ "$vk0" = "$cpu" ] && grep -q "^oxinfer: offload: -ngl 0" "$WORK/err"; then ok "--device vulkan -ngl 0: prefill offload, same greedy tokens"
  else bad "--device vulkan -ngl 0: '$vk0' vs '$cpu' ($(cat "$WORK/err"))"; fi
fi

# Gemma 4 (E2B-like: per-layer embeddings, shared KV; 26B-like: MoE expert slices), f32.
if node "$SRC/tools/gen/extract_gemma4_tokenizer.mjs" "$WORK/gtok" >/dev/null 2>&1; then
  for shape in e2b 26b; do
    if "$OXI_GEN" gemma4 --shape $shape --dtype f32 --out "$WORK/g4_$shape" --seed 4 --tokenizer-dir "$WORK/gtok" >/dev/null 2>&1; then
      M="$WORK/g4_$shape"
      g_cpu=$(ids --device none)
      g_ref=$(ids --device cpu-ref)
      if [ -n "$g_cpu" ] && [ "$g_ref" = "$g_cpu" ]; then ok "gemma4 $shape: cpu-ref gives the CPU's greedy tokens"
      else bad "gemma4 $shape: '$g_ref' vs '$g_cpu'"; fi
      # The whole model on Vulkan: its forward uses the tanh GELU, one f32 product order and an f32
      # KV cache, so it is compared with the CPU forward using the same (not ggml's table, orders
      # and f16 cache).
      g_vk=$(ids --device vulkan)
      if grep -q "is not available" "$WORK/err"; then ok "gemma4 $shape: vulkan skipped"
      else
        g_same=$(OXI_GEMMA4_EXACT_GELU=1 OXI_GEMMA4_GGML_MM=0 OXI_KV_F32=1 ids --device none)
        if [ -n "$g_same" ] && [ "$g_vk" = "$g_same" ]; then ok "gemma4 $shape: the whole model on vulkan gives the CPU's greedy tokens"
        else bad "gemma4 $shape vulkan: '$g_vk' vs '$g_same' ($(tail -3 "$WORK/err"))"; fi
      fi
    else
      bad "oxi-gen gemma4 $shape"
    fi
  done
  M="$WORK/q35"
else
  bad "gemma4 tokenizer extraction"
fi

"$OXINFER" run -m "$M" --tokens 1,2 -n 1 --device no-such-gpu >/dev/null 2>"$WORK/err"
rc=$?
if [ $rc = 1 ] && grep -q "unknown device 'no-such-gpu'" "$WORK/err"; then ok "unknown device: error, exit 1"
else bad "unknown device: rc=$rc, stderr: $(cat "$WORK/err")"; fi
OXI_DEVICE=cpu-ref OXI_DEVICE_MIN_TOKENS=x "$OXINFER" run -m "$M" --tokens 1,2 -n 1 >/dev/null 2>"$WORK/err"
rc=$?
if [ $rc = 1 ] && grep -q "invalid OXI_DEVICE_MIN_TOKENS=x" "$WORK/err"; then ok "bad size rule env: error, exit 1"
else bad "bad size rule env: rc=$rc, stderr: $(cat "$WORK/err")"; fi

[ $fails = 0 ] && echo "all passed" || echo "$fails failed"
exit $((fails > 0))
