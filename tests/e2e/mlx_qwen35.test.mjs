// MLX checkpoints of Qwen 3.5 run in place against llama.cpp (docs/format.md "MLX checkpoints";
// the setup in tests/e2e/lib/mlx_case.mjs): oxinfer run on the MLX directory gives the greedy
// tokens llama.cpp gives on numpy's dequantisation of it (f32 GGUF), top-5 logprobs within 1e-3.
//   a: dense, tied, 4 bits, groups of 64, bf16 scales — under each kernel set (scalar, avx2,
//      auto = AVX-512 where the host has it; a set the host lacks falls back to the best it has)
//   c: dense, untied, 8 bits, groups of 128, f32 scales, a 70-token prompt (multi-token tiles)
// llama.cpp with flash attention off (the path oxinfer reproduces for Qwen 3.5, docs/qwen35.md).
import { prepare, oxiGreedy, diff, judge, note, finish, skipIfMissing, qwenPrompt } from "./lib/mlx_case.mjs";

skipIfMissing();
const cases = [
  { name: "q4g64", family: "qwen35", gen: ["qwen35", "--hidden", "128", "--layers", "4", "--hk", "2", "--hv", "4"],
    mlx: ["--bits", "4", "--group", "64", "--scale-dtype", "bf16"], prompt: qwenPrompt(20, 3), flash: "off",
    isas: ["scalar", "avx2", "auto"] },
  { name: "q8g128", family: "qwen35", gen: ["qwen35", "--hidden", "128", "--layers", "4", "--hk", "2", "--hv", "4", "--untied"],
    mlx: ["--bits", "8", "--group", "128", "--scale-dtype", "f32"], prompt: qwenPrompt(70, 9), flash: "off", isas: ["auto"] },
];
const failures = [], report = [];
for (const c of cases) {
  const t0 = Date.now();
  const p = prepare(c);
  const line = [`${c.name} (${c.mlx.join(" ")})`];
  for (const isa of c.isas) {
    const d = diff(oxiGreedy(p.mlx, c.prompt, { OXI_ISA: isa }), p.want);
    line.push(`${isa}: Δ ${d.maxDiff.toExponential(2)}${note(d)}`);
    failures.push(...judge(`${c.name} in place OXI_ISA=${isa}`, d, 1e-3));
  }
  report.push(`${line.join("; ")} [${((Date.now() - t0) / 1000).toFixed(1)} s]`);
}
finish(report, failures, "mlx_qwen35");
