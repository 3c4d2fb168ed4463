// An MLX checkpoint of a Gemma 4 model in place against llama.cpp (docs/format.md "MLX
// checkpoints"; setup in tests/e2e/lib/mlx_case.mjs): E2B-shaped (per-layer embeddings split per
// layer, as mlx-lm stores them), 4 bits, groups of 32, bf16 scales. oxinfer reproduces ggml's f32
// summation order for Gemma 4's F32 weights (1e-6 from llama.cpp); MLX groups are summed in the
// kernel's own order, and this random model amplifies an order difference to ~1e-3..2e-2 in
// logprobs (llama.cpp's f16 KV rounding flips). So: tokens identical (up to a near-tie: llama.cpp's
// top1−top2 gap within 3e-2), logprobs within 3e-2 at llama.cpp's defaults; and the weights
// themselves exactly: with the MLX kernel off (rows dequantised, then the F32 path in ggml's
// order), f32 KV and no flash attention on both sides, the first step (the whole prompt through
// every weight) within 1e-5 of llama.cpp.
import { prepare, oxiGreedy, llamaGreedy, diff, judge, note, finish, skipIfMissing, gemmaPrompt, work } from "./lib/mlx_case.mjs";
import path from "node:path";

skipIfMissing();
const failures = [], report = [];
{
  const t0 = Date.now();
  const c = { name: "gemma4", family: "gemma4", gen: ["gemma4", "--shape", "e2b", "--window", "16"],
    mlx: ["--bits", "4", "--group", "32", "--scale-dtype", "bf16"], prompt: gemmaPrompt(12, 11) };
  const p = prepare(c);
  const d = diff(oxiGreedy(p.mlx, c.prompt), p.want);
  failures.push(...judge("gemma4 in place", d, 3e-2));
  const ref32 = llamaGreedy(p.refGguf, c.prompt, path.join(work, "gemma4_ref_f32kv.json"), { f32kv: true });
  const exact = diff(oxiGreedy(p.mlx, c.prompt, { OXI_KERNEL_OFF: "MLX_Q4_G32", OXI_KV_F32: "1", OXI_GEMMA4_ATTN: "3" }), ref32);
  if (!(exact.perStep[0] < 1e-5)) failures.push(`gemma4 weights (kernel off, f32): first step Δ ${exact.perStep[0]} >= 1e-5`);
  report.push(`gemma4 (${c.mlx.join(" ")}): Δ ${d.maxDiff.toExponential(2)}${note(d)}; kernel off, f32 KV: first step Δ ${exact.perStep[0].toExponential(2)} [${((Date.now() - t0) / 1000).toFixed(1)} s]`);
}
finish(report, failures, "mlx_gemma4");
