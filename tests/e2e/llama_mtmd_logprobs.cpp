// llama.cpp's side of the media log-probability oracle (tests/e2e/media_logprobs.test.sh), written
// against llama.cpp's public C API (llama.h) and its multimodal library (mtmd.h, mtmd-helper.h).
// llama-mtmd-cli prints only text, and node-llama-cpp has no mtmd binding, so this small driver is
// the route to llama.cpp's numbers with images and audio in the prompt. Built by the test from the
// llama.cpp source and static libraries scripts/build_llama_mtmd.sh caches.
//
//   llama_mtmd_logprobs MODEL.gguf MMPROJ.gguf PROMPT N K FA MEDIA...
//
// PROMPT is used as is (no chat template), tokenized with BOS and special tokens parsed, with one
// "<__media__>" marker per MEDIA file (image or audio). The chunks are evaluated as llama-mtmd-cli
// does (mtmd_helper_eval_chunks: text chunks causal, media chunks as the projector asks, e.g. the
// non-causal image batch of Gemma 4), then N greedy tokens are generated. FA: on|off|auto (flash
// attention of the text model and the towers). One JSON line per generated token on stdout:
//   {"id": ID, "logprob": LP, "top": [[ID, LP], ...K]}   (log-softmax of the raw logits)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "llama.h"
#include "mtmd-helper.h"
#include "mtmd.h"

static void quiet(ggml_log_level level, const char* text, void*) {
  if (level >= GGML_LOG_LEVEL_ERROR) std::fputs(text, stderr);
}

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: %s MODEL MMPROJ PROMPT N K on|off|auto MEDIA...\n", argv[0]);
    return 2;
  }
  const char* model_path = argv[1];
  const char* mmproj_path = argv[2];
  const std::string prompt = argv[3];
  const int n_gen = std::atoi(argv[4]), top_k = std::atoi(argv[5]);
  const std::string fa = argv[6];
  const llama_flash_attn_type fa_type = fa == "on"    ? LLAMA_FLASH_ATTN_TYPE_ENABLED
                                        : fa == "off" ? LLAMA_FLASH_ATTN_TYPE_DISABLED
                                                      : LLAMA_FLASH_ATTN_TYPE_AUTO;
  llama_log_set(quiet, nullptr);
  mtmd_helper_log_set(quiet, nullptr);
  llama_backend_init();

  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  mp.progress_callback = [](float, void*) { return true; };  // no progress dots
  llama_model* model = llama_model_load_from_file(model_path, mp);
  if (!model) return std::fprintf(stderr, "cannot load %s\n", model_path), 1;
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 4096;
  cp.n_batch = 2048;
  cp.n_ubatch = 512;
  cp.n_threads = cp.n_threads_batch = 2;
  cp.flash_attn_type = fa_type;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) return std::fprintf(stderr, "cannot create a context\n"), 1;

  mtmd_context_params mparams = mtmd_context_params_default();
  mparams.use_gpu = false;
  mparams.n_threads = 2;
  mparams.print_timings = false;
  mparams.warmup = false;
  mparams.flash_attn_type = fa_type;
  mtmd_context* mctx = mtmd_init_from_file(mmproj_path, model, mparams);
  if (!mctx) return std::fprintf(stderr, "cannot load %s\n", mmproj_path), 1;

  std::vector<mtmd_bitmap*> bitmaps;
  for (int i = 7; i < argc; ++i) {
    mtmd_helper_bitmap_wrapper w = mtmd_helper_bitmap_init_from_file(mctx, argv[i], false, mtmd_helper_init_opt_default());
    if (!w.bitmap) return std::fprintf(stderr, "cannot read %s\n", argv[i]), 1;
    bitmaps.push_back(w.bitmap);
  }
  mtmd_input_chunks* chunks = mtmd_input_chunks_init();
  mtmd_input_text text{prompt.c_str(), prompt.size(), /*add_special=*/true, /*parse_special=*/true};
  if (mtmd_tokenize(mctx, chunks, &text, const_cast<const mtmd_bitmap**>(bitmaps.data()), bitmaps.size()) != 0)
    return std::fprintf(stderr, "mtmd_tokenize failed (one <__media__> marker per file?)\n"), 1;
  if (std::getenv("LLAMA_MTMD_LOGPROBS_SHOW")) {  // the prompt's chunks, on stderr
    for (size_t i = 0; i < mtmd_input_chunks_size(chunks); ++i) {
      const mtmd_input_chunk* c = mtmd_input_chunks_get(chunks, i);
      size_t n = 0;
      if (mtmd_input_chunk_get_type(c) == MTMD_INPUT_CHUNK_TYPE_TEXT) {
        const llama_token* t = mtmd_input_chunk_get_tokens_text(c, &n);
        for (size_t j = 0; j < n; ++j) std::fprintf(stderr, "%d ", t[j]);
      } else {
        std::fprintf(stderr, "[media %zu] ", mtmd_input_chunk_get_n_tokens(c));
      }
    }
    std::fprintf(stderr, "\n");
  }
  llama_pos n_past = 0;
  if (mtmd_helper_eval_chunks(mctx, ctx, chunks, 0, 0, cp.n_batch, true, &n_past) != 0)
    return std::fprintf(stderr, "evaluating the prompt failed\n"), 1;

  const llama_vocab* vocab = llama_model_get_vocab(model);
  const int n_vocab = llama_vocab_n_tokens(vocab);
  std::vector<std::pair<double, int>> lp(static_cast<size_t>(n_vocab));
  for (int step = 0; step < n_gen; ++step) {
    const float* logits = llama_get_logits_ith(ctx, -1);
    double mx = -INFINITY;
    for (int i = 0; i < n_vocab; ++i) mx = std::max(mx, static_cast<double>(logits[i]));
    double sum = 0;
    for (int i = 0; i < n_vocab; ++i) sum += std::exp(static_cast<double>(logits[i]) - mx);
    const double lse = mx + std::log(sum);
    for (int i = 0; i < n_vocab; ++i) lp[static_cast<size_t>(i)] = {static_cast<double>(logits[i]) - lse, i};
    std::partial_sort(lp.begin(), lp.begin() + top_k, lp.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    llama_token tok = lp[0].second;
    std::printf("{\"id\":%d,\"logprob\":%.9g,\"top\":[", tok, lp[0].first);
    for (int k = 0; k < top_k; ++k) std::printf("%s[%d,%.9g]", k ? "," : "", lp[static_cast<size_t>(k)].second, lp[static_cast<size_t>(k)].first);
    std::printf("]}\n");
    if (llama_vocab_is_eog(vocab, tok)) break;
    llama_batch b = llama_batch_get_one(&tok, 1);
    if (llama_decode(ctx, b) != 0) return std::fprintf(stderr, "decode failed\n"), 1;
  }
  std::fflush(stdout);
  mtmd_input_chunks_free(chunks);
  for (mtmd_bitmap* b : bitmaps) mtmd_bitmap_free(b);
  mtmd_free(mctx);
  llama_free(ctx);
  llama_model_free(model);
  return 0;
}
