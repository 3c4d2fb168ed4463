# Sourced by the multimodal e2e tests after mtmd_ref.sh (SRC, WORK, PY, MTMD, OXINFER, ok, bad set):
# llama.cpp's log-probabilities with images and audio in the prompt, the route llama-mtmd-cli
# (text only) and node-llama-cpp (no mtmd binding) do not give. Builds tests/e2e/llama_mtmd_logprobs.cpp
# once against the cached llama.cpp libraries (next to llama-mtmd-cli), then
#   logprob_case NAME PROMPT N FA MEDIA...
# runs it and `oxinfer run --no-chat --json --top-logprobs 5` on the same raw prompt (one
# "<__media__>" per file, BOS added by both) and compares the greedy steps: the same token ids, and
# every top-5 alternative llama.cpp gives present in ours with a log-probability within the
# tolerance. The towers' rows equal llama.cpp's within ~1e-6 normalised MSE, not bit for bit, and
# these random models amplify such rounding-level differences, so the tolerance is measured, not
# guessed: 1.5 × how far llama.cpp's own run with the other attention path (-fa on vs off, the
# same rows and weights, only the rounding differs) lies from its first, and at least
# LOGPROB_TOL (default 0.05: the rows' own differences move these logprobs more than the
# attention path's rounding does: up to 0.017 on the Gemma 4 image case on an Intel host, 0.035 on
# an AMD Zen 5 one; docs/multimodal.md).
LLDRV="$(dirname "$MTMD")/llama_mtmd_logprobs"
LLDRV_SRC="$SRC/tests/e2e/llama_mtmd_logprobs.cpp"
(
  flock 8
  if [ ! -x "$LLDRV" ] || [ "$LLDRV" -ot "$LLDRV_SRC" ]; then
    C="$(cd "$(dirname "$MTMD")/../.." && pwd)"; b="$C/build"
    g++ -std=c++17 -O2 -I"$C/src/include" -I"$C/src/ggml/include" -I"$C/src/tools/mtmd" "$LLDRV_SRC" -o "$LLDRV.tmp.$$" \
      "$b/tools/mtmd/libmtmd.a" "$b/src/libllama.a" "$b/vendor/hash/libvendor-hash.a" "$b/ggml/src/libggml.a" \
      "$b/ggml/src/libggml-cpu.a" "$b/ggml/src/libggml-base.a" -lpthread -ldl && mv "$LLDRV.tmp.$$" "$LLDRV"
  fi
) 8> "$(dirname "$MTMD")/.llama_mtmd_logprobs.lock"

logprob_case() {  # name, prompt, n, fa, media...
  local name=$1 prompt=$2 n=$3 fa=$4; shift 4
  local args=() f
  for f in "$@"; do case "$f" in *.wav|*.mp3|*.flac) args+=(--audio "$f") ;; *) args+=(--image "$f") ;; esac; done
  [ -x "$LLDRV" ] || { bad "logprobs ($name): llama_mtmd_logprobs did not build"; return; }
  local other=on; [ "$fa" = on ] && other=off
  # llama.cpp's runs, kept per (prompt, files, steps, attention path): a case on the other path
  # with the same prompt reuses both instead of running them again.
  local key mode; key=$(printf '%s\0' "$prompt" "$n" "$@" | sha1sum | cut -c1-12)
  for mode in "$fa" "$other"; do
    [ -s "$WORK/lp_ll_${key}_$mode.jsonl" ] && continue
    "$LLDRV" "$WORK/m.gguf" "$WORK/mmproj.gguf" "$prompt" "$n" 5 "$mode" "$@" > "$WORK/lp_ll_${key}_$mode.jsonl" 2> "$WORK/lp_ll_$name.err" ||
      { rm -f "$WORK/lp_ll_${key}_$mode.jsonl"; tail -3 "$WORK/lp_ll_$name.err"; bad "logprobs ($name): llama.cpp's driver"; return; }
  done
  "$OXINFER" run -m "$WORK/m.gguf" --mmproj "$WORK/mmproj.gguf" "${args[@]}" -p "$prompt" --no-chat -n "$n" --temp 0 -t 2 \
    -c 4096 -fa "$fa" --json --top-logprobs 5 > "$WORK/lp_ox_$name.jsonl" 2> "$WORK/lp_ox_$name.err" ||
    { tail -3 "$WORK/lp_ox_$name.err"; bad "logprobs ($name): oxinfer run --json"; return; }
  if $PY - "$WORK/lp_ll_${key}_$fa.jsonl" "$WORK/lp_ox_$name.jsonl" "${LOGPROB_TOL:-0.05}" "$WORK/lp_ll_${key}_$other.jsonl" <<'PYEOF'
import json, sys
ll = [json.loads(l) for l in open(sys.argv[1])]
ox = [json.loads(l) for l in open(sys.argv[2]) if '"top_logprobs"' in l]
llo = [json.loads(l) for l in open(sys.argv[4])]
spread = 0.0  # llama.cpp against itself, the other attention path, along the same greedy steps
for a, b in zip(ll, llo):
    if a["id"] != b["id"]:
        break
    other = dict((t, lp) for t, lp in b["top"])
    spread = max([spread] + [abs(other[t] - lp) for t, lp in a["top"] if t in other])
tol = max(float(sys.argv[3]), 1.5 * spread)
assert ll and len(ll) == len(ox), f"steps: llama.cpp {len(ll)}, oxinfer {len(ox)}"
worst = 0.0
for i, (a, b) in enumerate(zip(ll, ox)):
    assert a["id"] == b["id"], f"step {i}: llama.cpp {a['id']} ({a['logprob']}), oxinfer {b['id']} ({b['logprob']})"
    ours = {t["id"]: t["logprob"] for t in b["top_logprobs"]}
    floor = a["top"][-1][1] + tol
    for tid, lp in a["top"]:
        if tid in ours:
            worst = max(worst, abs(ours[tid] - lp))
            assert abs(ours[tid] - lp) <= tol, f"step {i}: token {tid}: llama.cpp {lp}, oxinfer {ours[tid]}"
        else:
            assert lp <= floor, f"step {i}: llama.cpp's alternative {tid} ({lp}) missing from ours"
print(f"{len(ll)} steps, max |Δ logprob| {worst:.2e}; llama.cpp -fa on vs off {spread:.2e}; tolerance {tol:.2e}")
PYEOF
  then ok "logprobs with media ($name, -fa $fa): llama.cpp's greedy ids, top-5 within its own on/off spread"
  else bad "logprobs with media ($name, -fa $fa) differ from llama.cpp's"; fi
}
