// Model-recommended sampling defaults from HF generation_config.json and GGUF general.sampling.*.
#include <gtest/gtest.h>

#include "format/model_files.h"
#include "runtime/session.h"

namespace oxi {
namespace {

ModelFiles hf_files(const nlohmann::json& gen) {
  ModelFiles f;
  f.kind = ModelFileKind::kHf;
  f.hf.emplace();
  f.hf->generation_config = gen;
  return f;
}

GgufValue f32(double v) {
  GgufValue x;
  x.type = GgufType::FLOAT32;
  x.scalar = v;
  return x;
}

GgufValue u32(uint64_t v) {
  GgufValue x;
  x.type = GgufType::UINT32;
  x.scalar = v;
  return x;
}

TEST(SamplingDefaults, FromGenerationConfig) {
  // Qwen 3.5's card: temperature 1.0, top-k 20, top-p 0.95, presence penalty 1.5.
  const auto f = hf_files({{"temperature", 1.0}, {"top_k", 20}, {"top_p", 0.95},
                           {"presence_penalty", 1.5}, {"do_sample", true}});
  const SamplingParams p = model_sampling_defaults(f, SamplingParams{});
  EXPECT_FLOAT_EQ(p.temperature, 1.0f);
  EXPECT_EQ(p.top_k, 20);
  EXPECT_FLOAT_EQ(p.top_p, 0.95f);
  EXPECT_FLOAT_EQ(p.presence_penalty, 1.5f);
  EXPECT_FLOAT_EQ(p.min_p, 0.05f);  // absent: llama.cpp's default kept
  EXPECT_FLOAT_EQ(p.repeat_penalty, 1.0f);
}

TEST(SamplingDefaults, DoSampleFalseIsGreedyAndJunkIsIgnored) {
  const auto f = hf_files({{"do_sample", false}, {"top_k", "many"}, {"repetition_penalty", -2.0}});
  const SamplingParams p = model_sampling_defaults(f, SamplingParams{});
  EXPECT_TRUE(p.is_greedy());
  EXPECT_EQ(p.top_k, 40);
  EXPECT_FLOAT_EQ(p.repeat_penalty, 1.0f);
  const auto empty = hf_files(nlohmann::json::object());
  const SamplingParams q = model_sampling_defaults(empty, SamplingParams{});
  EXPECT_FLOAT_EQ(q.temperature, 0.8f);
  EXPECT_EQ(q.top_k, 40);
  EXPECT_FLOAT_EQ(q.top_p, 0.95f);
  // A non-object generation config is ignored too.
  const auto arr = hf_files(nlohmann::json::array());
  EXPECT_FLOAT_EQ(model_sampling_defaults(arr, SamplingParams{}).temperature, 0.8f);
}

TEST(SamplingDefaults, FromGgufMetadata) {
  ModelFiles f;
  f.kind = ModelFileKind::kGguf;
  f.gguf.emplace();
  f.gguf->metadata.set("general.sampling.temp", f32(0.6));
  f.gguf->metadata.set("general.sampling.top_k", u32(64));
  f.gguf->metadata.set("general.sampling.top_p", f32(0.9));
  f.gguf->metadata.set("general.sampling.min_p", f32(0.0));
  f.gguf->metadata.set("general.sampling.penalty_repeat", f32(1.1));
  f.gguf->metadata.set("general.sampling.penalty_last_n", u32(128));
  const SamplingParams p = model_sampling_defaults(f, SamplingParams{});
  EXPECT_NEAR(p.temperature, 0.6f, 1e-6);
  EXPECT_EQ(p.top_k, 64);
  EXPECT_NEAR(p.top_p, 0.9f, 1e-6);
  EXPECT_FLOAT_EQ(p.min_p, 0.0f);
  EXPECT_NEAR(p.repeat_penalty, 1.1f, 1e-6);
  EXPECT_EQ(p.penalty_last_n, 128);
  // A string where a number belongs is ignored.
  ModelFiles g;
  g.kind = ModelFileKind::kGguf;
  g.gguf.emplace();
  GgufValue s;
  s.type = GgufType::STRING;
  s.scalar = std::string("hot");
  g.gguf->metadata.set("general.sampling.temp", s);
  EXPECT_FLOAT_EQ(model_sampling_defaults(g, SamplingParams{}).temperature, 0.8f);
}

}  // namespace
}  // namespace oxi
