// llama.cpp's side of the Gemma 4 assistant-drafter oracle (tests/e2e/gemma4_assistant.test.mjs),
// written against llama.cpp's public C API (llama.h) and its llama-ext.h extension (the h_nextn
// rows). Built by the test from node-llama-cpp's bundled llama.cpp source and its cached static
// libraries (scripts/build_llama_mtmd.sh).
//
//   llama_gemma4_draft TARGET.gguf ASSISTANT.gguf TOKENS K OUT.json
//
// Feeds TOKENS (comma-separated ids) to the target with every row's post-norm hidden state kept,
// takes the target's greedy token x_n at the prompt's end, then runs the assistant in a context
// whose ctx_other is the target's (it reads the target's KV cache): the first step on
// (x_n at position n, h_{n-1}), then K − 1 chained steps on (draft, the drafter's own h_nextn) at
// the same position n, as llama.cpp's speculative driver does for shared-memory drafters.
// Writes {"target_token", "first_logits", "drafts"}.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "llama.h"
#include "llama-ext.h"

static int argmax(const float* v, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (v[i] > v[best]) best = i;
  return best;
}

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s TARGET ASSISTANT TOKENS K OUT\n", argv[0]);
    return 2;
  }
  std::vector<llama_token> toks;
  for (const char* p = argv[3]; *p;) {
    char* end = nullptr;
    toks.push_back(static_cast<llama_token>(std::strtol(p, &end, 10)));
    p = *end == ',' ? end + 1 : end;
  }
  const int K = std::atoi(argv[4]);
  llama_backend_init();
  llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  llama_model* mt = llama_model_load_from_file(argv[1], mp);
  llama_model* md = llama_model_load_from_file(argv[2], mp);
  if (!mt || !md) {
    std::fprintf(stderr, "cannot load the models\n");
    return 1;
  }
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 512;
  cp.n_batch = 512;
  cp.n_ubatch = 512;
  cp.n_threads = 2;
  cp.n_threads_batch = 2;
  llama_context* ct = llama_init_from_model(mt, cp);
  if (!ct) return 1;
  llama_set_embeddings_nextn(ct, true, false);  // every row's h (unmasked)
  // The drafter's context before the target decodes anything: creating it resets the memory it
  // shares with the target (as llama.cpp's speculative setup does at start-up).
  llama_context_params dp = cp;
  dp.ctx_other = ct;
  llama_context* cd = llama_init_from_model(md, dp);
  if (!cd) return 1;
  llama_set_embeddings_nextn(cd, true, true);
  const int n = static_cast<int>(toks.size());
  if (llama_decode(ct, llama_batch_get_one(toks.data(), n)) != 0) return 1;
  const int V = llama_vocab_n_tokens(llama_model_get_vocab(mt));
  const llama_token x = argmax(llama_get_logits_ith(ct, -1), V);
  const int d = llama_model_n_embd_out(mt);
  std::vector<float> h(llama_get_embeddings_nextn_ith(ct, n - 1), llama_get_embeddings_nextn_ith(ct, n - 1) + d);

  llama_batch b = llama_batch_init(1, d, 1);  // allocates embd only: the drafter also takes a token
  std::vector<llama_token> tok_slot(1);
  b.token = tok_slot.data();
  std::string json = "{\"target_token\":" + std::to_string(x) + ",\"h\":[";
  for (int i = 0; i < d; ++i) json += (i ? "," : "") + std::to_string(h[static_cast<size_t>(i)]);
  json += "]";
  std::vector<llama_token> drafts;
  llama_token cur = x;
  for (int j = 0; j < K; ++j) {
    b.n_tokens = 1;
    b.token[0] = cur;
    b.pos[0] = n;
    b.n_seq_id[0] = 1;
    b.seq_id[0][0] = 0;
    b.logits[0] = 1;
    std::memcpy(b.embd, h.data(), sizeof(float) * static_cast<size_t>(d));
    if (llama_decode(cd, b) != 0) return 1;
    const float* lg = llama_get_logits_ith(cd, 0);
    if (j == 0) {
      json += ",\"first_logits\":[";
      for (int i = 0; i < V; ++i) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%s%.9g", i ? "," : "", static_cast<double>(lg[i]));
        json += buf;
      }
      json += "]";
    }
    cur = argmax(lg, V);
    drafts.push_back(cur);
    const float* hn = llama_get_embeddings_nextn_ith(cd, 0);
    h.assign(hn, hn + d);
  }
  json += ",\"drafts\":[";
  for (size_t i = 0; i < drafts.size(); ++i) json += (i ? "," : "") + std::to_string(drafts[i]);
  json += "]}\n";
  b.token = nullptr;  // ours, not llama_batch_init's
  llama_batch_free(b);
  FILE* f = std::fopen(argv[5], "w");
  if (!f) return 1;
  std::fputs(json.c_str(), f);
  std::fclose(f);
  llama_free(cd);
  llama_free(ct);
  llama_model_free(md);
  llama_model_free(mt);
  return 0;
}
