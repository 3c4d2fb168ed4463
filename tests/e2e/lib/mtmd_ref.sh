# Sourced by the multimodal e2e tests (directly or through vision_setup.sh), with SRC, NLC_DIR,
# WORK and PY set: skips without Pillow or node-llama-cpp, finds or builds llama-mtmd-cli into
# $MTMD (scripts/build_llama_mtmd.sh, cached under ~/.cache/oxinfer-llama) and sets t0.
$PY -c 'import PIL' 2>/dev/null || { echo "SKIP: python3-pil missing (scripts/setup.sh installs it)"; exit 0; }
[ -f "$NLC_DIR/node_modules/node-llama-cpp/llama/gitRelease.bundle" ] || { echo "SKIP: node-llama-cpp missing"; exit 0; }
t0=$(date +%s)
MTMD="$("$SRC/scripts/build_llama_mtmd.sh" 2> "$WORK/build.log")" || { tail -20 "$WORK/build.log"; echo "FAIL - building llama-mtmd-cli"; exit 1; }
echo "# llama-mtmd-cli ready in $(( $(date +%s) - t0 )) s: $MTMD"
