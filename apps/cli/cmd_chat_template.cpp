// oxinfer chat --template-only (-m MODEL | --chat-template-file F | --chat-template NAME) --messages FILE.json
//   [--tools FILE.json] [--no-generation-prompt] [--enable-thinking true|false]
//   [--bos-token S] [--eos-token S] [--chat-template-kwargs JSON]
// Prints the rendered prompt exactly (no trailing newline added).
#include <cstdio>
#include <fstream>
#include <sstream>

#include "args.h"
#include "chat/jinja.h"
#include "chat_template_cmd.h"
#include "core/error.h"
#include "core/json_limits.h"
#include "format/model_files.h"
#include "loader/loaded_model.h"

namespace oxi::cli {

namespace {

const char* kUsage =
    "usage: oxinfer chat --template-only (-m MODEL | --chat-template-file F | --chat-template NAME)\n"
    "         --messages FILE.json\n"
    "         [--tools FILE.json] [--no-generation-prompt] [--enable-thinking true|false]\n"
    "         [--bos-token S] [--eos-token S] [--chat-template-kwargs JSON]\n"
    "Renders the conversation with the chat template and prints the prompt exactly.\n"
    "Without --bos-token/--eos-token the model's own tokens are used (none with a file).\n";

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw_error(ErrorCode::kIo, path + ": cannot open");
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) throw_error(ErrorCode::kIo, path + ": read error");
  return ss.str();
}

nlohmann::ordered_json read_json(const std::string& path) {
  const std::string text = read_text(path);
  if (json_too_deep(text)) {
    throw_error(ErrorCode::kInvalidArgument, path + ": JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  }
  auto j = nlohmann::ordered_json::parse(text, nullptr, false);
  if (j.is_discarded()) throw_error(ErrorCode::kInvalidArgument, path + ": not valid JSON");
  return j;
}

}  // namespace

int cmd_chat_template_only(int argc, char** argv) {
  try {
    Args args(argc - 1, argv + 1, {"--template-only", "--no-generation-prompt", "-h", "--help", "--offline"});
    if (args.flag({"-h", "--help"})) {
      std::fputs(kUsage, stdout);
      return 0;
    }
    args.check_known({"--template-only", "-m", "--model", "-hf", "--hf-repo", "--hf-token", "--chat-template-file", "--chat-template",
                      "--messages", "--tools", "--enable-thinking", "--bos-token", "--eos-token",
                      "--chat-template-kwargs"});
    if (!args.positional().empty()) {
      throw_error(ErrorCode::kInvalidArgument, "unexpected argument '" + args.positional()[0] + "'");
    }
    const auto messages_path = args.get({"--messages"});
    if (!messages_path) {
      std::fputs(kUsage, stderr);
      return 2;
    }
    std::string source, bos, eos;
    if (auto f = args.get({"--chat-template-file"})) {
      source = read_text(*f);
    } else if (auto t = args.get({"--chat-template"})) {
      source = chat_template_source(*t);  // a built-in name (llama.cpp's), a file or Jinja source
    } else if (args.flag({"-m", "--model", "-hf", "--hf-repo"})) {
      // The model's template and BOS/EOS text from its files (no weights, no tokenizer).
      LoadRequest req;
      req.path = resolve_model_path(args);
      req.weights = false;
      req.tokenizer = false;
      req.require_chat_template = true;
      const std::unique_ptr<LoadedModel> m = load_model_bundle(req);
      source = m->chat_template;
      bos = m->bos_text;
      eos = m->eos_text;
    } else {
      throw_error(ErrorCode::kInvalidArgument, "no template: pass -m MODEL or --chat-template-file F");
    }
    if (auto b = args.get({"--bos-token"})) bos = *b;
    if (auto e = args.get({"--eos-token"})) eos = *e;

    nlohmann::ordered_json messages = read_json(*messages_path);
    if (!messages.is_array()) throw_error(ErrorCode::kInvalidArgument, *messages_path + ": expected a JSON array of messages");
    ChatRenderOptions opt;
    opt.add_generation_prompt = !args.flag({"--no-generation-prompt"});
    opt.bos_token = bos;
    opt.eos_token = eos;
    if (auto t = args.get({"--tools"})) {
      opt.tools = read_json(*t);
      if (!opt.tools.is_array()) throw_error(ErrorCode::kInvalidArgument, *t + ": expected a JSON array of tools");
    }
    if (auto th = args.get({"--enable-thinking"})) {
      if (*th == "true" || *th == "1") opt.enable_thinking = 1;
      else if (*th == "false" || *th == "0") opt.enable_thinking = 0;
      else throw_error(ErrorCode::kInvalidArgument, "invalid value for --enable-thinking: '" + *th + "' (true|false)");
    }
    if (auto kw = args.get({"--chat-template-kwargs"})) {
      auto j = json_too_deep(*kw) ? nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded)
                                  : nlohmann::ordered_json::parse(*kw, nullptr, false);
      if (j.is_discarded() || !j.is_object()) throw_error(ErrorCode::kInvalidArgument, "--chat-template-kwargs: expected a JSON object");
      opt.extra = j;
    }
    ChatTemplate tmpl(source);
    const std::string out = render_chat(tmpl, normalize_tool_call_arguments(messages), opt);
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
    return 0;
  } catch (const std::exception& e) {
    return report_error(e);
  }
}

}  // namespace oxi::cli
