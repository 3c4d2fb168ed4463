# Sourced by the multimodal e2e tests (mtmd_oracle, server_images), with SRC, OXINFER, OXI_GEN,
# NLC_DIR, SHARED, WORK and PY set: skips without Pillow or node-llama-cpp, finds or builds
# llama-mtmd-cli into $MTMD (scripts/build_llama_mtmd.sh, cached), sets t0, and writes the
# synthetic Qwen 3.5 model with a vision tower ($WORK/q35v, f32, real tokenizer and template) and
# its GGUF pair ($WORK/m.gguf + $WORK/mmproj.gguf, converted by us).
. "$SRC/tests/e2e/lib/mtmd_ref.sh"

node "$SRC/tools/gen/extract_tokenizer.mjs" "$WORK/tok" >/dev/null || { echo "FAIL - tokenizer extraction"; exit 1; }
"$OXI_GEN" qwen35 --vision --out "$WORK/q35v" --seed 21 --dtype f32 --tokenizer-dir "$WORK/tok" \
  --chat-template "$SHARED/testdata/templates/Qwen3.5-4B.jinja" 2>/dev/null || { echo "FAIL - oxi-gen --vision"; exit 1; }
"$OXINFER" convert "$WORK/q35v" -o "$WORK/m.gguf" --mmproj "$WORK/mmproj.gguf" --type f32 2>/dev/null ||
  { echo "FAIL - convert --mmproj"; exit 1; }
