// oxinfer convert HF_DIR -o OUT.gguf [--type f32|f16|bf16|q8_0|q4_0|q4_1|q4_k] [--mmproj MMPROJ.gguf]
//                 [--mtp MTP.gguf] [--no-mtp]
// Writes a GGUF that llama.cpp loads: per-architecture converters in models/<arch>/convert.cpp.
#include <cstdio>
#include <string>

#include "args.h"
#include "commands.h"
#include "core/error.h"
#include "format/hf.h"
#include "convert/convert.h"

namespace oxi::cli {

namespace {
const char* kHelp =
    "usage: oxinfer convert HF_DIR -o OUT.gguf [--type f32|f16|bf16|q8_0|q4_0|q4_1|q4_k] [--mmproj MMPROJ.gguf]\n"
    "                       [--mtp MTP.gguf] [--no-mtp]\n"
    "  HF_DIR may also be given as -m DIR or -hf org/name (a checkpoint in the HF cache).\n"
    "  --type: type of the 2-D weight matrices (default f32 where the checkpoint is f32,\n"
    "          else f16 for f16 checkpoints and bf16 for bf16 ones; q8_0 for an MLX 4/8-bit\n"
    "          checkpoint, whose groups are requantised: docs/format.md \"MLX checkpoints\",\n"
    "          f32 keeps their exact values); norms stay f32.\n"
    "          q8_0 / q4_0 / q4_1 / q4_k follow llama-quantize's per-tensor rule (routers, conv kernels\n"
    "          and Gemma's per_layer_model_proj keep the checkpoint's type; tied embeddings take\n"
    "          Q6_K under 4-bit): q8_0, q4_0 and q4_1 give the bytes llama-quantize Q8_0 / Q4_0 /\n"
    "          Q4_1 would; q4_k is Q4_K throughout (llama.cpp's Q4_K_S also bumps a few to Q5_K).\n"
    "          q4_1 of an MLX 4-bit checkpoint copies each group (codes, scale, bias) into Q4_1\n"
    "          blocks, no second rounding, for every 4-bit matrix the rule quantises (output /\n"
    "          tied embeddings too); a group whose scale or bias is not an f16 value is\n"
    "          requantised; the counts are printed.\n"
    "  --mmproj: also write the vision tower (and Gemma 4's audio tower, in the same file) as the\n"
    "          mmproj GGUF llama.cpp's mtmd tools load (Qwen 3.5: projector qwen3vl_merger; Gemma 4:\n"
    "          gemma4v + gemma4a; matrices f32 for --type f32, else f16; conv kernels always f32).\n"
    "  --mtp MTP.gguf: also write the MTP head alone (Qwen 3.5/3.6; as llama.cpp's converter with\n"
    "          --mtp: block n_layer beside token_embd / output_norm / output), the draft file that\n"
    "          run/serve/bench take as -md with --spec mtp.\n"
    "  --no-mtp: leave the MTP head out of OUT.gguf (llama.cpp's --no-mtp).\n";
}

int cmd_convert(int argc, char** argv) {
  try {
    Args args(argc - 1, argv + 1, {"-h", "--help", "--offline", "--no-mtp"});
    if (args.flag({"-h", "--help"})) {
      std::fputs(kHelp, stdout);
      return 0;
    }
    args.check_known({"-o", "--outfile", "--type", "--outtype", "-m", "--model", "-hf", "--hf-repo",
                      "--hf-token", "--mmproj", "--mtp"});
    std::string dir;
    if (!args.positional().empty()) {
      if (args.positional().size() > 1) throw_error(ErrorCode::kInvalidArgument, "convert takes one HF_DIR");
      dir = args.positional()[0];
    } else {
      dir = resolve_model_path(args);
    }
    const auto out = args.get({"-o", "--outfile"});
    if (!out) throw_error(ErrorCode::kInvalidArgument, "convert needs -o OUT.gguf");

    HfCheckpoint hf = read_hf_checkpoint(dir);
    ConvertOptions opt;
    if (auto t = args.get({"--type", "--outtype"})) {
      auto dt = dtype_from_name(*t);
      if (!dt || (*dt != DType::F32 && *dt != DType::F16 && *dt != DType::BF16 && *dt != DType::Q8_0 &&
                  *dt != DType::Q4_0 && *dt != DType::Q4_1 && *dt != DType::Q4_K)) {
        throw_error(ErrorCode::kInvalidArgument, "--type must be f32, f16, bf16, q8_0, q4_0, q4_1 or q4_k (got '" + *t + "')");
      }
      opt.out_type = *dt;
    } else {
      opt.out_type = default_convert_type(hf);  // the checkpoint's float width; Q8_0 for MLX 4/8-bit
    }
    if (args.flag({"--no-mtp"})) opt.mtp = ConvertOptions::Mtp::kNone;
    convert_hf_to_gguf(hf, *out, opt);
    std::fprintf(stderr, "wrote %s (%s)\n", out->c_str(), dtype_name(opt.out_type).c_str());
    if (auto mtp = args.get({"--mtp"})) {
      ConvertOptions mo = opt;
      mo.mtp = ConvertOptions::Mtp::kOnly;
      convert_hf_to_gguf(hf, *mtp, mo);
      std::fprintf(stderr, "wrote %s (MTP head only)\n", mtp->c_str());
    }
    if (auto mm = args.get({"--mmproj"})) {
      convert_hf_to_mmproj(hf, *mm, opt);
      std::fprintf(stderr, "wrote %s (mmproj)\n", mm->c_str());
    }
    return 0;
  } catch (const std::exception& e) {
    return report_error(e);
  }
}

}  // namespace oxi::cli
