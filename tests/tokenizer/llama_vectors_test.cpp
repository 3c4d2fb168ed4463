// llama.cpp's own tokenizer test vectors (test-tokenizer-0: inputs separated by
// "\n__ggml_vocab_test__\n", one line of ids per input, no BOS, special tokens not parsed), run on
// the vocab GGUFs llama.cpp wrote. Expected ids come from llama.cpp, not from us.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "core/byte_source.h"
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

namespace oxi {
namespace {

const std::string kDir = std::string(OXI_SHARED_DIR) + "/testdata/tokenizer/";

std::vector<std::string> split_inputs(const std::string& s) {
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  size_t i = 0;
  while (true) {
    const size_t j = s.find(sep, i);
    if (j == std::string::npos) break;
    out.push_back(s.substr(i, j - i));
    i = j + sep.size();
  }
  if (i < s.size()) out.push_back(s.substr(i));  // the last input may lack a separator
  return out;
}

std::vector<std::vector<int32_t>> read_outputs(const std::string& s) {
  std::vector<std::vector<int32_t>> out;
  std::istringstream in(s);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<int32_t> ids;
    int32_t v;
    while (ls >> v) ids.push_back(v);
    out.push_back(ids);
  }
  return out;
}

void run_vectors(const std::string& name) {
  const std::string path = kDir + name;
  const GgufFile g = read_gguf(path);
  const TokenizerPtr tok = load_tokenizer_gguf(g.metadata, path);
  const auto inputs = split_inputs(read_text_file(path + ".inp"));
  const auto outputs = read_outputs(read_text_file(path + ".out"));
  ASSERT_GE(inputs.size(), 10u);
  ASSERT_EQ(inputs.size(), outputs.size());
  int failures = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto ids = tok->encode(inputs[i], /*add_special=*/false, /*parse_special=*/false);
    EXPECT_EQ(ids, outputs[i]) << "input #" << i << ": '" << inputs[i] << "'";
    if (ids != outputs[i]) ++failures;
    // Decoding gives the input back (these vocabularies are lossless on these inputs).
    EXPECT_EQ(tok->decode(ids), inputs[i]) << "input #" << i;
  }
  EXPECT_EQ(failures, 0);
}

TEST(LlamaVectors, Qwen35) { run_vectors("ggml-vocab-qwen35.gguf"); }
TEST(LlamaVectors, Gemma4) { run_vectors("ggml-vocab-gemma-4.gguf"); }

TEST(LlamaVectors, Gemma4SpecFacts) {
  const std::string path = kDir + "ggml-vocab-gemma-4.gguf";
  const TokenizerPtr tok = load_tokenizer(path);
  EXPECT_EQ(tok->n_vocab(), 262144);
  EXPECT_EQ(tok->bos_id(), 2);
  EXPECT_EQ(tok->eos_id(), 1);
  EXPECT_TRUE(tok->add_bos());
  EXPECT_TRUE(tok->is_eog(106));  // <turn|>
  EXPECT_TRUE(tok->is_eog(1));    // <eos>
  EXPECT_TRUE(tok->is_eog(50));   // <|tool_response>
  EXPECT_FALSE(tok->is_eog(105));
  EXPECT_EQ(tok->find_token("<|turn>"), 105);
  EXPECT_EQ(tok->find_token("<|\"|>"), 52);
  // One <bos>, and special tokens parsed.
  EXPECT_EQ(tok->encode("<|turn>user\nHi<turn|>"),
            (std::vector<int32_t>{2, 105, tok->encode("user", false)[0], 107,
                                  tok->encode("Hi", false)[0], 106}));
  // Not parsed with parse_special = false: the text is tokenized as text.
  const auto plain = tok->encode("<|turn>", false, false);
  EXPECT_TRUE(plain.size() > 1);
  EXPECT_EQ(tok->decode(plain), "<|turn>");
  // USER_DEFINED tokens (<|channel>) are matched even without parse_special, as in llama.cpp.
  EXPECT_EQ(tok->encode("<|channel>", false, false), (std::vector<int32_t>{100}));
  EXPECT_EQ(tok->encode("Hello world", false), (std::vector<int32_t>{9259, 1902}));
  EXPECT_EQ(tok->encode("\t\n", false), (std::vector<int32_t>{255968, 107}));
}

TEST(LlamaVectors, Qwen35SpecFacts) {
  const std::string path = kDir + "ggml-vocab-qwen35.gguf";
  const TokenizerPtr tok = load_tokenizer(path);
  EXPECT_EQ(tok->n_vocab(), 151936);
  EXPECT_FALSE(tok->add_bos());
  EXPECT_TRUE(tok->is_eog(151643));
  EXPECT_EQ(tok->find_token("<|endoftext|>"), 151643);
  EXPECT_EQ(tok->encode("<|endoftext|>"), (std::vector<int32_t>{151643}));
  EXPECT_GT(tok->encode("<|endoftext|>", true, false).size(), 1u);
}

}  // namespace
}  // namespace oxi
