// libFuzzer target: the tokenizer. Input byte 0 even: the rest is split at the first NUL into a
// tokenizer.json and a text; the tokenizer is built from that JSON (throwing oxi::Error on a bad
// one is fine) and the text encoded. Byte 0 odd: the text alone, with the real Qwen 3.5 and
// Gemma 4 vocabularies (../shared/testdata/tokenizer; skipped when absent). Checked on every
// text: encode and decode never fail on any bytes, decode(ids) is valid to call on every result,
// and marked user text (chat prompts, issue 29 #11) encodes exactly as plain text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace {

const std::vector<oxi::TokenizerPtr>& real_vocabs() {
  static const std::vector<oxi::TokenizerPtr> v = [] {
    std::vector<oxi::TokenizerPtr> out;
    for (const char* f : {"ggml-vocab-qwen35.gguf", "ggml-vocab-gemma-4.gguf"}) {
      try {
        out.push_back(oxi::load_tokenizer(std::string(OXI_FUZZ_SHARED_DIR) + "/testdata/tokenizer/" + f));
      } catch (const oxi::Error&) {
      }
    }
    return out;
  }();
  return v;
}

void exercise(const oxi::Tokenizer& t, const std::string& text) {
  const auto ids = t.encode(text, true, true);
  (void)t.decode(ids);
  const auto plain = t.encode(text, false, false);
  (void)t.decode(plain, true);
  if (t.encode_marked(t.mark_user_text(text), false) != plain) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string in(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    for (const auto& t : real_vocabs()) exercise(*t, in);
    return 0;
  }
  const size_t nul = in.find('\0');
  try {
    oxi::Tokenizer t(oxi::tokenizer_data_from_json(in.substr(0, nul), "", "fuzz/tokenizer.json"));
    exercise(t, nul == std::string::npos ? std::string("Hello world <|im_end|>") : in.substr(nul + 1));
  } catch (const oxi::Error&) {
  }
  return 0;
}
