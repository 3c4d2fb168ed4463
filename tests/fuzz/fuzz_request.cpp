// libFuzzer target: the server's request parsing and validation on hostile bodies: parse_body,
// then every endpoint's parser — the OpenAI ones (src/server/request.cpp) and the other dialects'
// (anthropic_request.cpp, ollama_request.cpp, responses_request.cpp, embeddings_request.cpp). The
// first byte picks the endpoint, the rest is the body. Must return or throw RequestError (a 4xx);
// any other exception (a 500), crash, ASan report or hang is a finding. A chat request's tools
// (any dialect's, as translated) then go through the forced tool-call constraint of both families
// (server/forced_tool.h: the Gemma grammar built from the schemas), which may refuse with
// oxi::Error (the server's 400) and must then take a few bytes; the messages are dumped as the
// server dumps what passed validation.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "server/dialects.h"
#include "server/embeddings.h"
#include "server/forced_tool.h"
#include "server/request.h"

namespace {

// What the server does with a chat request that passed validation: dump its messages and tools,
// and build the forced tool-call constraint from its tools.
void use_chat(const oxi::server::ChatRequest& r) {
  (void)r.messages.dump();
  (void)r.tools.dump();
  if (r.tools.empty()) return;
  for (const auto f : {oxi::ChatFormat::kGemma4, oxi::ChatFormat::kQwen35}) {
    try {
      auto c = oxi::forced_tool_constraint(r.tools, "required", f, "");
      for (const char* p : {"<|tool_call>call:", "<tool_call>\n{\"name\": \"", "x", "{"}) (void)c->advance(p);
      (void)c->complete();
    } catch (const oxi::Error&) {
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  oxi::server::Limits limits;
  namespace sv = oxi::server;
  try {
    switch (data[0] % 13) {
      case 0: {
        const auto r = sv::parse_chat_request(sv::parse_body(body), limits);
        sv::check_model(r, "m");
        use_chat(r);
        break;
      }
      case 1: (void)sv::parse_completion_request(sv::parse_body(body), limits); break;
      case 2: (void)sv::parse_tokenize_request(sv::parse_body(body)); break;
      case 3: (void)sv::parse_detokenize_request(sv::parse_body(body)); break;
      case 4: sv::check_content_type(body); break;
      case 5: use_chat(sv::parse_anthropic_request(sv::parse_body(body), limits).chat); break;
      case 6: use_chat(sv::parse_anthropic_request(sv::parse_body(body), limits, /*count_only=*/true).chat); break;
      case 7: use_chat(sv::parse_ollama_request(sv::parse_body(body), limits, /*generate=*/false).chat); break;
      case 8: use_chat(sv::parse_ollama_request(sv::parse_body(body), limits, /*generate=*/true).chat); break;
      case 9: (void)sv::parse_ollama_embed_request(sv::parse_body(body), data[0] & 0x80); break;
      case 10: {
        const auto r = sv::parse_responses_request(sv::parse_body(body), limits);
        (void)r.echo.dump();
        use_chat(r.chat);
        break;
      }
      case 11: (void)sv::parse_embeddings_request(sv::parse_body(body), /*oai=*/true); break;
      default: (void)sv::parse_embeddings_request(sv::parse_body(body), /*oai=*/false); break;
    }
  } catch (const sv::RequestError& e) {
    if (e.status() < 400 || e.status() > 499) __builtin_trap();
  }
  return 0;
}
