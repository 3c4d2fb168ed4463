// oxinfer serve: OpenAI-compatible HTTP server (src/server).
#include <cstdio>
#include <cstdlib>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <filesystem>
#include <tuple>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"
#include "backend/backend.h"
#include "core/byte_source.h"
#include "core/error.h"
#include "kernels/thread_pool.h"
#include "server/embeddings.h"
#include "server/server.h"

namespace oxi::cli {

namespace {
const char* kHelp =
    "usage: oxinfer serve -m MODEL [options]\n"
    "endpoints: OpenAI /v1/chat/completions, /v1/completions, /v1/responses, /v1/models; Anthropic\n"
    "  /v1/messages; ollama /api/chat, /api/generate, /api/tags, /api/show (docs/server.md)\n"
    "  -m, --model PATH      .gguf file or HF checkpoint directory (or -hf org/name[:quant])\n"
    "  --host H              address to listen on (default 127.0.0.1)\n"
    "  --port P              port (default 8080)\n"
    "  -np, --parallel N     sequences served at once (default 4)\n"
    "  -c, --ctx-size N      context per sequence (default 4096)\n"
    "  -t, --threads N       CPU threads (default: all)\n"
    "  --api-key K           require 'Authorization: Bearer K' on /v1/* endpoints (visible in ps:\n"
    "                        prefer --api-key-file or env OXI_API_KEY)\n"
    "  --api-key-file F      the API key is the first line of file F\n"
    "  --cache-ram MiB       prompt-cache budget (default 2048; 0 disables checkpoints)\n"
    "  --spec MODE           speculative decoding: auto (default: the MTP head where the model has\n"
    "                        one, else prompt lookup, while it pays), none,\n"
    "                        ngram, mtp (the model's MTP head; Qwen 3.5/3.6 files that carry one),\n"
    "                        draft (-md's Gemma 4 assistant drafter);\n"
    "                        --draft-max N (0..16) / --draft-min N; requests may lower them with\n"
    "                        speculative.n_max / speculative.n_min\n"
    "  -md, --model-draft F  Qwen 3.5/3.6: an MTP-only GGUF (convert --mtp) whose head drafts;\n"
    "                        Gemma 4: an assistant drafter's GGUF (--spec draft)\n"
    "  --chat-template-file F  use this Jinja template instead of the model's\n"
    "  --chat-template T     a llama.cpp built-in template name (chatml, llama3, gemma, mistral-v7,\n"
    "                        phi4, deepseek3, command-r, …; an unknown name lists them all), a file\n"
    "                        or Jinja source\n"
    "  --alias NAME          model id reported by /v1/models\n"
    "  --mmproj FILE         the vision / audio towers (llama.cpp mmproj GGUF; Qwen 3.5, Gemma 4): chat\n"
    "                        messages may carry image_url parts (data: URLs) and, with Gemma 4 E2B/E4B's\n"
    "                        audio tower, input_audio parts (base64 WAV/FLAC/Ogg/MP3, 10 min per\n"
    "                        request); an HF checkpoint's own towers need none;\n"
    "                        with -hf the repo's mmproj file is used unless --no-mmproj\n"
    "  --media-dir DIR       also read file:// image URLs, only for files under DIR (default: refused;\n"
    "                        http(s) image URLs are never fetched)\n"
    "  --image-preproc M     Qwen 3.5 images: hf (default: the HF image processor's resize) or llama\n"
    "                        (llama.cpp mtmd's: aspect kept, padded; llama-server's tokens)\n"
    "  --max-body-bytes N    larger request bodies get 413 (default 8 MiB; 1 or more)\n"
    "  --special-in-content  special-token text in messages becomes control tokens (unsafe: lets a\n"
    "                        message forge turns; by default it stays text)\n"
    "  --shutdown-timeout S  after SIGINT/SIGTERM, running requests get S seconds to finish before\n"
    "                        they are cut (default 10; a second signal exits at once)\n"
    "  --cors-origin O       allow web pages from origin O (e.g. http://localhost:3000; repeatable or\n"
    "                        comma-separated; * for any) to call the API; default: no CORS headers\n"
    "  --no-webui            no chat web UI at / (default: on, served without the API key; the\n"
    "                        page asks for the key for its API calls; --webui accepted)\n"
    "  --no-slots            GET /slots answers 501 (default: on; --slots accepted)\n"
    "  --embeddings          serve POST /v1/embeddings and /embeddings (pooled final hidden states;\n"
    "                        without it they answer 501); chat and completions stay available\n"
    "  --pooling P           none|mean|cls|last: how /v1/embeddings pools a sequence's hidden states\n"
    "                        (default: the GGUF's <arch>.pooling_type, an HF directory's\n"
    "                        sentence-transformers 1_Pooling/config.json, else none, as llama.cpp;\n"
    "                        none is refused by /v1/embeddings, /embeddings then gives per-token rows;\n"
    "                        ollama's /api/embed, /api/embeddings, served without --embeddings,\n"
    "                        take the last token's row then). rank / --reranking: not offered (no\n"
    "                        reranker checkpoints for Qwen 3.5 or Gemma 4; /v1/rerank answers 501)\n"
    "  --isa NAME            kernel set: scalar|avx2|avx512|avx512-amx|auto (default: env OXI_ISA, else best)\n"
    "  --device D            device backend: none|cpu|auto|vulkan|vulkan:N (default: env OXI_DEVICE, else auto)\n"
    "  --list-devices        print the devices --device can name, then exit\n"
    "  --quant TYPE          q8_0|q4_0|q4_k: quantise f32/f16/bf16 weights at load (see oxinfer run --help)\n";

// --api-key K, else the first line of --api-key-file F, else env OXI_API_KEY ("" : no key). The
// file and the variable keep the key out of the process list (argv is world-readable in /proc).
std::string api_key_from(const Args& args) {
  if (args.has("--api-key") && args.has("--api-key-file")) usage_error("give --api-key or --api-key-file, not both");
  if (auto k = args.get({"--api-key"})) return *k;
  if (auto f = args.get({"--api-key-file"})) {
    std::string key = read_text_file(*f, 1 << 16);
    key = key.substr(0, key.find('\n'));
    while (!key.empty() && (key.back() == '\r' || key.back() == ' ' || key.back() == '\t')) key.pop_back();
    if (key.empty()) throw_error(ErrorCode::kInvalidArgument, *f + ": the API key file is empty");
    return key;
  }
  const char* env = std::getenv("OXI_API_KEY");
  return env ? env : "";
}
}  // namespace

int cmd_serve(int argc, char** argv) {
  try {
    Args args(argc - 1, argv + 1, with_compat_flags({"-h", "--help", "--offline", "--special-in-content", "--slots", "--no-slots", "--no-mmproj",
                                                        "--webui", "--no-webui", "--embeddings", "--embedding",
                                                        "--reranking", "--rerank"}));
    if (args.flag({"-h", "--help"})) {
      std::fputs(kHelp, stdout);
      std::fputs(kCacheTypeHelp, stdout);
      return 0;
    }
    if (list_devices_if_asked(args)) return 0;
    std::vector<std::string> known = {"-m", "--model", "-hf", "--hf-repo", "--hf-token", "--host", "--port", "-np",
                                      "--parallel", "-c", "--ctx-size", "-t", "--threads", "--api-key", "--api-key-file",
                                      "--cache-ram", "--chat-template-file", "--alias", "--max-body-bytes",
                                      "--shutdown-timeout", "--cors-origin", "--isa", "--device", "--quant",
                                      "--mmproj", "--media-dir", "--image-preproc", "--pooling", "-md", "--model-draft", "-hfd", "--hf-repo-draft"};
    known.insert(known.end(), kSpecOptions.begin(), kSpecOptions.end());
    known.insert(known.end(), kCompatOptions.begin(), kCompatOptions.end());
    args.check_known(known);
    if (!args.positional().empty()) throw_error(ErrorCode::kInvalidArgument, "unexpected argument '" + args.positional()[0] + "'");
    server::ServerOptions o;
    const ModelPaths paths = model_paths_from_args(args, true);
    o.model_path = paths.model;
    o.host = args.get_or({"--host"}, o.host);
    o.port = static_cast<int>(args.get_int({"--port"}, o.port));
    o.n_slots = static_cast<int>(args.get_int({"-np", "--parallel"}, o.n_slots));
    o.n_ctx = static_cast<int>(args.get_int({"-c", "--ctx-size"}, o.n_ctx));
    o.n_threads = static_cast<int>(args.get_int({"-t", "--threads"}, 0));
    o.api_key = api_key_from(args);
    o.cache_ram_mib = args.get_int({"--cache-ram"}, o.cache_ram_mib);
    o.chat_template_file = args.get_or({"--chat-template-file"}, "");
    if (std::string t = apply_compat_options(args); !t.empty() && o.chat_template_file.empty()) o.chat_template = t;
    o.flash_attn = flash_attn_from_args(args);
    o.gpu_layers = gpu_layers_from_args(args);
    std::tie(o.cache_type_k, o.cache_type_v) = cache_types_from_args(args);
    o.alias = args.get_or({"--alias"}, "");
    o.quant = quant_from_args(args);
    o.mmproj = paths.mmproj;
    o.mmproj_from_repo = !o.mmproj.empty() && !args.get({"--mmproj"});
    o.draft_model = paths.draft;
    o.media_dir = args.get_or({"--media-dir"}, "");
    o.llama_image_preproc = llama_image_preproc_from_args(args);
    if (!o.media_dir.empty() && !std::filesystem::is_directory(o.media_dir)) usage_error("--media-dir: '" + o.media_dir + "' is not a directory");
    const SpecArgs spec = spec_from_args(args);
    o.spec_mode = spec.mode;
    o.draft_max = spec.draft_max;
    o.draft_min = spec.draft_min;
    o.special_in_content = args.flag({"--special-in-content"});
    o.webui = !args.flag({"--no-webui"});  // --webui: the default, accepted as llama-server's
    o.slots_endpoint = !args.flag({"--no-slots"});  // --slots: the default, accepted as llama-server's
    o.embeddings = args.flag({"--embeddings", "--embedding"});  // llama-server spells both
    if (args.flag({"--reranking", "--rerank"})) usage_error(std::string("--reranking: ") + server::kNoRerankReason);
    if (auto p = args.get({"--pooling"})) {
      const auto pooling = server::pooling_from_name(*p);
      if (!pooling) {
        usage_error("invalid value for --pooling: '" + *p + "' (none, mean, cls or last)" +
                    (*p == "rank" ? std::string("; ") + server::kNoRerankReason : std::string()));
      }
      o.pooling = static_cast<int>(*pooling);
    }
    o.shutdown_timeout_s = args.get_float({"--shutdown-timeout"}, o.shutdown_timeout_s);
    if (!(o.shutdown_timeout_s >= 0 && o.shutdown_timeout_s <= 86400)) usage_error("--shutdown-timeout must be 0..86400 seconds");
    const long long max_body = args.get_int({"--max-body-bytes"}, static_cast<long long>(o.max_body_bytes));
    if (max_body < 1) usage_error("--max-body-bytes must be at least 1");  // -1 is not "unlimited"
    o.max_body_bytes = static_cast<size_t>(max_body);
    for (const std::string& v : args.get_all("--cors-origin")) {
      size_t from = 0;
      for (;;) {
        const size_t comma = v.find(',', from);
        std::string origin = v.substr(from, comma == std::string::npos ? std::string::npos : comma - from);
        while (!origin.empty() && origin.front() == ' ') origin.erase(0, 1);
        while (!origin.empty() && (origin.back() == ' ' || origin.back() == '/')) origin.pop_back();
        if (origin.empty()) usage_error("--cors-origin needs an origin such as http://localhost:3000, or *");
        if (origin != "*" && origin.find("://") == std::string::npos) {
          usage_error("--cors-origin: '" + origin + "' is not an origin (scheme://host[:port]) or *");
        }
        o.cors_origins.push_back(origin);
        if (comma == std::string::npos) break;
        from = comma + 1;
      }
    }
    if (o.port < 0 || o.port > 65535) throw_error(ErrorCode::kInvalidArgument, "--port must be 0..65535");
    if (o.n_slots < 1 || o.n_slots > 256) throw_error(ErrorCode::kInvalidArgument, "-np must be 1..256");
    if (o.n_threads < 0 || o.n_threads > 1024) throw_error(ErrorCode::kInvalidArgument, "-t must be 0..1024");
    if (o.n_ctx < 16) throw_error(ErrorCode::kInvalidArgument, "-c must be at least 16");
    apply_isa_from_args(args);
    // The server sets the same thread count when it loads; set here so the start-up line is true.
    if (o.n_threads > 0) set_num_threads(o.n_threads);
    backend::init(args.get_or({"--device"}, ""));  // before the load: the engine keeps this choice
    log_kernels(o.gpu_layers);
    lock_memory_if_asked(args);  // MCL_FUTURE: the model and caches mapped by the load are locked too
    // glibc gives threads that allocate at the same time arenas of their own (up to 8 per core)
    // and seldom returns what is freed in them; with 64 request threads the soak test's RSS crept
    // up ~2.6 KB per request (docs/server.md). Four arenas keep allocation contention low for the
    // slots and bound that. MALLOC_ARENA_MAX, when set, wins.
#if defined(__GLIBC__)
    if (!std::getenv("MALLOC_ARENA_MAX")) mallopt(M_ARENA_MAX, 4);
#endif
    return server::run_server(o);
  } catch (const std::exception& e) {
    return report_error(e);
  }
}

}  // namespace oxi::cli
