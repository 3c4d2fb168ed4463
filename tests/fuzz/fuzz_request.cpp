// libFuzzer target: the server's request parsing and validation (src/server/request.cpp) on
// hostile bodies: parse_body, then every endpoint's parser. The first byte picks the endpoint,
// the rest is the body. Must return or throw RequestError (a 4xx); any other exception (a 500),
// crash, ASan report or hang is a finding. A chat request's tools then go through the forced
// tool-call constraint of both families (server/forced_tool.h: the Gemma grammar built from the
// schemas), which may refuse with oxi::Error (the server's 400) and must then take a few bytes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "server/forced_tool.h"
#include "server/request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string body(reinterpret_cast<const char*>(data) + 1, size - 1);
  oxi::server::Limits limits;
  try {
    switch (data[0] % 5) {
      case 0: {
        const auto r = oxi::server::parse_chat_request(oxi::server::parse_body(body), limits);
        oxi::server::check_model(r, "m");
        (void)r.messages.dump();  // the server renders and dumps what passed validation
        (void)r.tools.dump();
        if (!r.tools.empty()) {
          for (const auto f : {oxi::ChatFormat::kGemma4, oxi::ChatFormat::kQwen35}) {
            try {
              auto c = oxi::forced_tool_constraint(r.tools, "required", f, "");
              for (const char* p : {"<|tool_call>call:", "<tool_call>\n{\"name\": \"", "x", "{"}) (void)c->advance(p);
              (void)c->complete();
            } catch (const oxi::Error&) {
            }
          }
        }
        break;
      }
      case 1: (void)oxi::server::parse_completion_request(oxi::server::parse_body(body), limits); break;
      case 2: (void)oxi::server::parse_tokenize_request(oxi::server::parse_body(body)); break;
      case 3: (void)oxi::server::parse_detokenize_request(oxi::server::parse_body(body)); break;
      default: oxi::server::check_content_type(body); break;
    }
  } catch (const oxi::server::RequestError& e) {
    if (e.status() < 400 || e.status() > 499) __builtin_trap();
  }
  return 0;
}
