// oxinfer tokenize -m MODEL [--no-special] [--no-bos] [--no-parse-special] [--json] (TEXT | --file F)
// oxinfer tokenize -m MODEL --decode 1,2,3
// MODEL: a .gguf file, an HF checkpoint directory, or a tokenizer.json. Prints the ids separated by
// spaces (--json: exactly {"ids":[...]}), or with --decode the text of the ids.
// Errors: "error: <one line>" on stderr, exit 1 (2 for usage errors).
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "args.h"
#include "commands.h"
#include "core/byte_source.h"
#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace oxi::cli {

namespace {

const char* kHelp =
    "usage: oxinfer tokenize -m MODEL [--no-special] [--json] (TEXT | --file F)\n"
    "       oxinfer tokenize -m MODEL --decode 1,2,3\n"
    "\n"
    "MODEL is a .gguf file, a Hugging Face checkpoint directory, or a tokenizer.json\n"
    "(-hf org/name[:quant] also works).\n"
    "  --no-special        add no BOS/EOS and treat special-token text as plain text\n"
    "  --no-bos            add no BOS/EOS (special-token text is still matched)\n"
    "  --no-parse-special  treat special-token text as plain text\n"
    "  --json              print {\"ids\":[...]}\n"
    "  --file F            tokenize the bytes of file F\n"
    "  --decode IDS        print the text of comma-separated ids\n"
    "  --batch F           F holds one JSON string per line; prints one {\"ids\":[...]} line each\n";

std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find_first_of(", ", i);
    if (j == std::string::npos) j = s.size();
    if (j > i) {
      const std::string t = s.substr(i, j - i);
      char* end = nullptr;
      errno = 0;
      const long long v = std::strtoll(t.c_str(), &end, 10);
      if (errno || end != t.c_str() + t.size() || v < 0 || v > 0x7fffffff)
        throw_error(ErrorCode::kInvalidArgument, "invalid token id '" + t + "' in --decode");
      ids.push_back(static_cast<int32_t>(v));
    }
    i = j + 1;
  }
  return ids;
}

}  // namespace

int cmd_tokenize(int argc, char** argv) {
  try {
    Args args(argc - 1, argv + 1, {"--json", "--no-special", "--no-bos", "--no-parse-special", "-h", "--help",
                           "--offline"});
    if (args.flag({"-h", "--help"})) {
      std::fputs(kHelp, stdout);
      return 0;
    }
    args.check_known({"-m", "--model", "-hf", "--hf-repo", "--hf-token", "--file", "-f", "--decode", "--batch"});
    const bool decode = args.has("--decode");
    const auto file = args.get({"--file", "-f"});
    const auto batch = args.get({"--batch"});
    const auto& pos = args.positional();
    if (!decode && !file && !batch && pos.size() != 1) {
      std::fprintf(stderr, "error: give exactly one TEXT argument, --file F or --decode IDS\n\n%s", kHelp);
      return 2;
    }
    if ((decode || file || batch) && !pos.empty()) {
      std::fprintf(stderr, "error: unexpected argument '%s'\n\n%s", pos[0].c_str(), kHelp);
      return 2;
    }
    const TokenizerPtr tok = load_tokenizer(resolve_model_path(args));
    if (decode) {
      const std::string text = tok->decode(parse_ids(*args.get({"--decode"})));
      std::fwrite(text.data(), 1, text.size(), stdout);
      if (!args.flag({"--json"})) std::fputc('\n', stdout);
      return 0;
    }
    const bool no_special = args.flag({"--no-special"});
    const bool add_special = !no_special && !args.flag({"--no-bos"});
    const bool parse_special = !no_special && !args.flag({"--no-parse-special"});
    if (batch) {
      const std::string all = read_text_file(*batch);
      std::string out;
      size_t i = 0, line_no = 0;
      while (i < all.size()) {
        size_t j = all.find('\n', i);
        if (j == std::string::npos) j = all.size();
        ++line_no;
        const std::string line = all.substr(i, j - i);
        i = j + 1;
        if (line.empty()) continue;
        nlohmann::json v;
        try {
          v = nlohmann::json::parse(line);
        } catch (const std::exception&) {
          throw_error(ErrorCode::kInvalidArgument, *batch + ":" + std::to_string(line_no) + ": not a JSON string");
        }
        if (!v.is_string())
          throw_error(ErrorCode::kInvalidArgument, *batch + ":" + std::to_string(line_no) + ": not a JSON string");
        out += "{\"ids\":[";
        const std::vector<int32_t> ids = tok->encode(v.get<std::string>(), add_special, parse_special);
        for (size_t k = 0; k < ids.size(); ++k) {
          if (k) out += ',';
          out += std::to_string(ids[k]);
        }
        out += "]}\n";
      }
      std::fwrite(out.data(), 1, out.size(), stdout);
      return 0;
    }
    const std::string text = file ? read_text_file(*file) : pos[0];
    const std::vector<int32_t> ids = tok->encode(text, add_special, parse_special);
    std::string out;
    out.reserve(ids.size() * 7 + 16);
    const bool js = args.flag({"--json"});
    if (js) out += "{\"ids\":[";
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) out += js ? "," : " ";
      out += std::to_string(ids[i]);
    }
    if (js) out += "]}";
    out += '\n';
    std::fwrite(out.data(), 1, out.size(), stdout);
    return 0;
  } catch (const std::exception& e) {
    return report_error(e);
  }
}

}  // namespace oxi::cli
