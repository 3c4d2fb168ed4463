// oxinfer quantize IN.gguf|HF_DIR OUT.gguf TYPE [--allow-requantize] [--pure] [-t N]
// llama-quantize's recipes (convert/quant_recipe.h); an HF folder is converted first.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <random>
#include <string>

#include "args.h"
#include "commands.h"
#include "convert/convert.h"
#include "convert/quant_recipe.h"
#include "core/error.h"
#include "format/hf.h"
#include "kernels/thread_pool.h"

namespace oxi::cli {

namespace {
const char* kHelp =
    "usage: oxinfer quantize IN.gguf|HF_DIR OUT.gguf TYPE [--allow-requantize] [--pure] [-t N]\n"
    "  Quantises like llama.cpp's llama-quantize (same per-tensor types, same bytes; no importance\n"
    "  matrix). TYPE (case-insensitive):\n"
    "    Q4_K_M  Q4_K, attn_v/attn_qkv and ffn_down of the 'more bits' layers Q6_K   (~4.9 bpw)\n"
    "    Q4_K_S  Q4_K, the first 4 attn_v-like and first 1/8 ffn_down Q5_K        (~4.6 bpw)\n"
    "    Q5_K_M  Q5_K, 'more bits' attn_v-like and ffn_down Q6_K                   (~5.7 bpw)\n"
    "    Q5_K_S  Q5_K throughout                                                   (~5.5 bpw)\n"
    "    Q6_K    Q6_K throughout                                                   (~6.6 bpw)\n"
    "    Q8_0    Q8_0 throughout                                                   (~8.5 bpw)\n"
    "    Q4_0    Q4_0 (output / tied embeddings Q6_K)                              (~4.5 bpw)\n"
    "    Q3_K_M  Q3_K; first 2 attn_v-like Q5_K, the rest Q4_K; attn_output Q4_K;\n"
    "            ffn_down Q5_K in the first 1/16 of layers, else Q4_K              (~3.9 bpw)\n"
    "    IQ4_XS  IQ4_XS; ffn_down of the first 1/8 layers Q5_K (attn_v Q5_K when GQA >= 4)\n"
    "    also: Q3_K_S Q3_K_L Q4_1 Q5_0 Q5_1 IQ4_NL F16 BF16 F32\n"
    "  Every recipe: norms, MoE routers, ssm conv kernels, Gemma's altup/laurel/per_layer_model_proj\n"
    "  and 1-D tensors keep their type; output.weight (or, tied, token_embd / per_layer_token_embd)\n"
    "  gets Q6_K (Q8_0 stays Q8_0); 8-expert models keep attention K/V at Q8_0; rows that do not\n"
    "  fit 256-blocks fall back (IQ4_XS->IQ4_NL, Q3_K->Q4_0, Q4_K->Q5_0, Q5_K->Q5_1, Q6_K->Q8_0,\n"
    "  then F16). general.file_type is set to llama.cpp's value for TYPE. See docs/cli.md.\n"
    "  HF_DIR: the checkpoint is converted first (as `oxinfer convert`, at its float width).\n"
    "  --allow-requantize  accept an already quantised input (its tensors are dequantised and\n"
    "                      quantised again; without it such an input is refused)\n"
    "  --pure              no mixed recipe: every quantisable tensor gets TYPE's base type\n"
    "  -t, --threads N     threads (default: all cores)\n"
    "  --quiet, --no-progress  no per-tensor progress lines\n"
    "  Progress ([i/n] tensor, types) goes to stderr. OUT is written to a temp file beside it and\n"
    "  renamed on success; on failure nothing is left behind.\n";

// Removes a file on scope exit (the intermediate GGUF of an HF input).
struct Unlinker {
  std::string path;
  ~Unlinker() {
    if (!path.empty()) ::unlink(path.c_str());
  }
};
}  // namespace

int cmd_quantize(int argc, char** argv) {
  try {
    Args args(argc - 1, argv + 1, {"-h", "--help", "--allow-requantize", "--pure", "--quiet", "--progress", "--no-progress"});
    if (args.flag({"-h", "--help"})) {
      std::fputs(kHelp, stdout);
      return 0;
    }
    args.check_known({"-t", "--threads"});
    const auto& pos = args.positional();
    if (pos.size() != 3) throw_error(ErrorCode::kInvalidArgument, "quantize takes IN OUT TYPE (see oxinfer quantize --help)");
    const std::string& in = pos[0];
    const std::string& out = pos[1];
    std::string names;
    for (const auto& f : quant_file_types()) names += std::string(names.empty() ? "" : ", ") + f.name;
    const auto ft = find_quant_file_type(pos[2]);
    if (!ft) throw_error(ErrorCode::kInvalidArgument, "unknown quantisation type '" + pos[2] + "' (expected one of " + names + ")");
    set_num_threads(static_cast<int>(args.get_int({"-t", "--threads"}, 0)));
    QuantizeOptions opt;
    opt.allow_requantize = args.flag({"--allow-requantize"});
    opt.pure = args.flag({"--pure"});
    // --progress / --no-progress: the progress switch the other commands take; --no-progress also
    // drops the per-tensor lines, as --quiet does.
    opt.progress = !args.flag({"--quiet"}) && !args.flag({"--no-progress"});

    std::error_code ec;
    if (!std::filesystem::exists(in, ec)) throw_error(ErrorCode::kIo, in + ": no such file or directory");
    if (std::filesystem::equivalent(in, out, ec)) throw_error(ErrorCode::kInvalidArgument, "quantize: OUT must differ from IN");
    std::string gguf = in;
    Unlinker tmp;
    if (std::filesystem::is_directory(in, ec)) {
      // HF checkpoint: convert to a GGUF at its float width beside OUT, quantise that, remove it.
      HfCheckpoint hf = read_hf_checkpoint(in);
      ConvertOptions copt;
      copt.out_type = checkpoint_float_type(hf);
      std::filesystem::path o(out);
      std::random_device rd;
      tmp.path = (o.has_parent_path() ? o.parent_path() : std::filesystem::path(".")) /
                 (".oxinfer-quantize-" + std::to_string(::getpid()) + "-" + std::to_string(rd()) + ".gguf");
      std::fprintf(stderr, "converting %s (%s) ...\n", in.c_str(), dtype_name(copt.out_type).c_str());
      convert_hf_to_gguf(hf, tmp.path, copt);
      gguf = tmp.path;
    }
    quantize_gguf(gguf, out, *ft, opt);
    std::fprintf(stderr, "wrote %s (%s)\n", out.c_str(), ft->name);
    return 0;
  } catch (const std::exception& e) {
    return report_error(e);
  }
}

}  // namespace oxi::cli
