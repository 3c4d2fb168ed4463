// A node-run check of the wasm engine (no browser): greedy decoding through the public C API,
// one JSON line per token {"id","logprob"}. Used to compare wasm numerics with the native build
// (tests/web/web.test.mjs runs the browser module; this isolates the engine from the page).
//   node oxi-wasm-run.js MODEL.gguf IDS(1,2,3) N [spec none|auto] [isa scalar|simd128]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/isa.h"
#include "oxinfer.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: oxi-wasm-run MODEL IDS N [none|auto]\n");
    return 2;
  }
  if (argc > 5) oxi::set_isa(argv[5]);
  oxi_model* m = nullptr;
  oxi_model_params mp = oxi_model_default_params();
  mp.n_threads = 1;
  mp.device = "none";
  if (oxi_model_open(argv[1], &mp, &m) != OXI_OK) {
    std::fprintf(stderr, "%s\n", oxi_last_error());
    return 1;
  }
  std::vector<int32_t> ids;
  for (char* p = argv[2]; *p;) {
    ids.push_back(static_cast<int32_t>(std::strtol(p, &p, 10)));
    if (*p == ',') ++p;
  }
  oxi_context* ctx = nullptr;
  if (oxi_context_new(m, 4096, &ctx) != OXI_OK) return 1;
  oxi_generate_params p = oxi_generate_default_params();
  p.max_tokens = std::atoi(argv[3]);
  p.n_top_logprobs = 2;
  if (argc > 4 && std::strcmp(argv[4], "none") == 0) p.spec_mode = OXI_SPEC_NONE;
  auto cb = [](const oxi_token_event* e, void*) {
    std::printf("{\"id\":%d,\"logprob\":%.6f}\n", e->id, e->logprob);
    return 0;
  };
  oxi_generate_result res{};
  if (oxi_generate(ctx, ids.data(), ids.size(), &p, cb, nullptr, &res) != OXI_OK) {
    std::fprintf(stderr, "%s\n", oxi_last_error());
    return 1;
  }
  std::fprintf(stderr, "prompt %d tokens %.1f tok/s, generated %d tokens %.2f tok/s\n", res.n_prompt,
               res.n_prompt / std::max(res.prompt_seconds, 1e-9), res.n_generated,
               (res.n_generated - 1) / std::max(res.gen_seconds, 1e-9));
  oxi_context_free(ctx);
  oxi_model_free(m);
  return 0;
}
