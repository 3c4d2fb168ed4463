// `oxinfer serve`: OpenAI-compatible HTTP server over one model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace oxi::server {

struct ServerOptions {
  std::string model_path;
  std::string host = "127.0.0.1";
  int port = 8080;
  int n_slots = 4;          // -np: sequences served at once
  int n_ctx = 4096;         // -c: context per slot
  int n_threads = 0;        // -t
  int flash_attn = -1;      // -fa: -1 auto, 1 on, 0 off (oxi_model_params.flash_attn)
  int gpu_layers = -1;      // -ngl (oxi_model_params.n_gpu_layers)
  std::string cache_type_k, cache_type_v;  // -ctk / -ctv: f16 (""), f32, q8_0
  std::optional<std::string> chat_template;  // --chat-template: Jinja source (else the file / model's)
  std::string api_key;      // --api-key: required as "Authorization: Bearer KEY" on /v1/*
  int64_t cache_ram_mib = 2048;  // --cache-ram: prompt-cache budget
  size_t max_body_bytes = 8u << 20;  // larger request bodies → 413
  int max_tokens_cap = 32768;
  std::string chat_template_file;
  std::string alias;        // --alias: model id reported by /v1/models
  std::string quant;        // --quant: quantise at load ("" keeps the file's types)
  std::string mmproj;       // --mmproj: the vision tower (llama.cpp mmproj GGUF); "": the checkpoint's own, if any
  bool mmproj_from_repo = false;  // mmproj picked from the -hf repo: a tower that fails to load is skipped
  std::string draft_model;  // -md: a draft model GGUF (Qwen 3.5: MTP-only file); "": none
  bool llama_image_preproc = false;  // --image-preproc llama: Qwen 3.5 images resized as llama.cpp's mtmd does
  std::string media_dir;    // --media-dir: file:// image URLs are read only under it ("": refused)
  // --spec / --draft-max / --draft-min: speculative decoding defaults (docs/speculative.md);
  // requests may lower the draft length with llama-server's speculative.n_max / .n_min.
  int spec_mode = 1;        // OXI_SPEC_* (1: auto)
  int draft_max = 16;
  int draft_min = 0;
  bool webui = true;                // --no-webui: no chat page at / (docs/server.md "Web UI")
  bool slots_endpoint = true;       // --no-slots: GET /slots answers 501 (llama-server's switch)
  // --embeddings: POST /v1/embeddings, /embeddings answer (else 501, as llama-server); generation
  // stays available. --pooling: -1 the model's (GGUF <arch>.pooling_type, else none), else a
  // server::Pooling value (docs/server.md "Embeddings").
  bool embeddings = false;
  int pooling = -1;
  bool special_in_content = false;  // --special-in-content: user text may hold control tokens (unsafe)
  double shutdown_timeout_s = 10;
  // --cors-origin: origins allowed to call the API from a web page ("*": any); empty: no CORS
  // headers at all (docs/server.md "CORS").
  std::vector<std::string> cors_origins;  // --shutdown-timeout: running requests' grace after SIGINT/SIGTERM
};

// Blocks until the process is asked to stop (SIGINT/SIGTERM; docs/server.md "Shutdown"). Returns
// the exit code.
int run_server(const ServerOptions& options);

}  // namespace oxi::server
