// Embeddings helpers (server/embeddings.h): request shapes, pooling, llama.cpp's normalisations
// and the base64 encoding OpenAI clients decode. Expected values are worked out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "server/embeddings.h"
#include "server/request.h"

namespace oxi::server {
namespace {

using nlohmann::json;

int status_of(const json& body, bool oai) {
  try {
    parse_embeddings_request(body, oai);
    return 200;
  } catch (const RequestError& e) {
    return e.status();
  }
}

TEST(Embeddings, InputShapes) {
  auto r = parse_embeddings_request(json{{"input", "hi"}}, true);
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_TRUE(r.inputs[0].is_text);
  EXPECT_EQ(r.inputs[0].text, "hi");
  r = parse_embeddings_request(json{{"input", {"a", "b"}}}, true);
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_EQ(r.inputs[1].text, "b");
  r = parse_embeddings_request(json{{"input", {1, 2, 3}}}, true);  // one input of token ids
  ASSERT_EQ(r.inputs.size(), 1u);
  EXPECT_FALSE(r.inputs[0].is_text);
  EXPECT_EQ(r.inputs[0].ids, (std::vector<int32_t>{1, 2, 3}));
  r = parse_embeddings_request(json{{"input", {{1, 2}, {3}}}}, true);  // two
  ASSERT_EQ(r.inputs.size(), 2u);
  EXPECT_EQ(r.inputs[1].ids, (std::vector<int32_t>{3}));
  // llama-server's /embeddings also takes `content`; /v1/embeddings does not.
  r = parse_embeddings_request(json{{"content", "c"}}, false);
  EXPECT_EQ(r.inputs[0].text, "c");
  EXPECT_EQ(r.input_field, "content");
  EXPECT_EQ(status_of(json{{"content", "c"}}, true), 400);
  EXPECT_EQ(r.normalize, 2);
  EXPECT_FALSE(r.base64);
}

TEST(Embeddings, BadRequests) {
  EXPECT_EQ(status_of(json::object(), true), 400);
  EXPECT_EQ(status_of(json{{"input", json::array()}}, true), 400);
  EXPECT_EQ(status_of(json{{"input", 3}}, true), 400);
  EXPECT_EQ(status_of(json{{"input", {1, "a"}}}, true), 400);
  EXPECT_EQ(status_of(json{{"input", {1, -2}}}, true), 400);
  EXPECT_EQ(status_of(json{{"input", {1.5}}}, true), 400);
  EXPECT_EQ(status_of(json{{"input", {"a", 2}}}, true), 400);
  EXPECT_EQ(status_of(json{{"input", {"a", json::object()}}}, true), 400);
  EXPECT_EQ(status_of(json{{"input", "a"}, {"encoding_format", "int8"}}, true), 400);
  EXPECT_EQ(status_of(json{{"input", "a"}, {"encoding_format", "base64"}}, false), 400);
  EXPECT_EQ(status_of(json{{"input", "a"}, {"embd_normalize", "2"}}, true), 400);
  EXPECT_EQ(status_of(json{{"input", "a"}, {"dimensions", "8"}}, true), 400);
  EXPECT_EQ(status_of(json{{"input", "a"}, {"top_k", 3}}, true), 400);  // unknown: might change the result
  EXPECT_EQ(status_of(json{{"input", "a"}, {"user", "u"}, {"model", "m"}, {"top_k", nullptr}}, true), 200);
  EXPECT_EQ(status_of(json{{"input", json::array_t(kMaxEmbeddingInputs + 1, "x")}}, true), 400);
}

TEST(Embeddings, PoolingNames) {
  EXPECT_EQ(pooling_from_name("mean"), Pooling::kMean);
  EXPECT_EQ(pooling_from_name("cls"), Pooling::kCls);
  EXPECT_EQ(pooling_from_name("last"), Pooling::kLast);
  EXPECT_EQ(pooling_from_name("none"), Pooling::kNone);
  EXPECT_FALSE(pooling_from_name("rank"));
  EXPECT_EQ(pooling_from_gguf(1), Pooling::kMean);  // llama.cpp's LLAMA_POOLING_TYPE_* numbers
  EXPECT_EQ(pooling_from_gguf(3), Pooling::kLast);
  EXPECT_FALSE(pooling_from_gguf(4));  // rank
}

TEST(Embeddings, PoolsAcrossChunks) {
  // Three rows of 2, fed as 2 + 1.
  const std::vector<float> a = {1, 2, 3, 4}, b = {8, 0};
  auto pool = [&](Pooling p) {
    Pooler x(p, 2);
    x.add(a.data(), 2);
    x.add(b.data(), 1);
    EXPECT_EQ(x.rows(), 3u);
    return x.result();
  };
  EXPECT_EQ(pool(Pooling::kMean), (std::vector<float>{4, 2}));
  EXPECT_EQ(pool(Pooling::kCls), (std::vector<float>{1, 2}));
  EXPECT_EQ(pool(Pooling::kLast), (std::vector<float>{8, 0}));
  EXPECT_EQ(pool(Pooling::kNone), (std::vector<float>{1, 2, 3, 4, 8, 0}));
}

TEST(Embeddings, Normalisations) {
  auto norm = [](std::vector<float> v, int n) {
    normalize_embedding(v, n);
    return v;
  };
  EXPECT_EQ(norm({3, -4}, 2), (std::vector<float>{0.6f, -0.8f}));
  EXPECT_EQ(norm({3, -4}, -1), (std::vector<float>{3, -4}));
  EXPECT_EQ(norm({3, -1}, 1), (std::vector<float>{0.75f, -0.25f}));
  EXPECT_EQ(norm({2, -4}, 0), (std::vector<float>{16380, -32760}));
  const auto p3 = norm({1, 1}, 3);  // / 2^(1/3)
  EXPECT_NEAR(p3[0], 1.0 / std::cbrt(2.0), 1e-7);
  EXPECT_EQ(norm({0, 0}, 2), (std::vector<float>{0, 0}));
}

TEST(Embeddings, Base64LittleEndianF32) {
  // 1.0f = 0x3F800000 → bytes 00 00 80 3F; -2.0f = 0xC0000000 → 00 00 00 C0.
  EXPECT_EQ(base64_f32(std::vector<float>{1.0f}), "AACAPw==");
  EXPECT_EQ(base64_f32(std::vector<float>{1.0f, -2.0f}), "AACAPwAAAMA=");
  EXPECT_EQ(base64_f32(std::vector<float>{1.0f, -2.0f, 0.0f}), "AACAPwAAAMAAAAAA");
  EXPECT_EQ(base64_f32(std::vector<float>{}), "");
}

}  // namespace
}  // namespace oxi::server
