// An MLX checkpoint of a Qwen 3.5 MoE in place against llama.cpp (docs/format.md "MLX checkpoints";
// setup in tests/e2e/lib/mlx_case.mjs): 8 experts (mlx-lm's switch_mlp layout), untied, 4 bits,
// groups of 32, f16 scales, the router and shared-expert gate at 8 bits / groups of 64 (per-module
// config overrides, as mlx-lm's Qwen 3.5 predicate writes them): tokens identical, logprobs
// within 1e-3 of llama.cpp on numpy's dequantisation.
import { prepare, oxiGreedy, diff, judge, note, finish, skipIfMissing, qwenPrompt } from "./lib/mlx_case.mjs";

skipIfMissing();
const failures = [], report = [];
{
  const t0 = Date.now();
  const c = { name: "moe", family: "qwen35", gen: ["qwen35", "--moe", "--experts", "8", "--top-k", "2", "--hidden", "128", "--layers", "4",
    "--hk", "2", "--hv", "4", "--expert-ffn", "64", "--shared-ffn", "96", "--untied"],
  mlx: ["--bits", "4", "--group", "32", "--scale-dtype", "f16", "--router-8bit"], prompt: qwenPrompt(12, 5), flash: "off" };
  const p = prepare(c);
  const d = diff(oxiGreedy(p.mlx, c.prompt), p.want);
  failures.push(...judge("moe in place", d, 1e-3));
  report.push(`moe (${c.mlx.join(" ")}): Δ ${d.maxDiff.toExponential(2)}${note(d)} [${((Date.now() - t0) / 1000).toFixed(1)} s]`);
}
finish(report, failures, "mlx_moe");
