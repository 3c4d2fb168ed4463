// MLX checkpoints read as their HF originals (format/mlx.h). Expected bytes come from the layout
// facts (mx.quantize: 32/bits codes per little-endian uint32, first code lowest; our block: f32
// scale, f32 bias, the group's code bytes), written out by hand here.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "format/hf.h"
#include "format/safetensors.h"
#include "test_util.h"

namespace oxi {
namespace {

namespace fs = std::filesystem;
using test::throws_clean;

struct Dir {
  fs::path path;
  explicit Dir(const std::string& name) : path(fs::path(::testing::TempDir()) / ("oxi_mlx_" + name)) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  void write(const std::string& name, const std::string& text) const { std::ofstream(path / name, std::ios::binary) << text; }
};

template <class T>
std::vector<uint8_t> bytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

// One quantised module: rows × in inputs, `bits`, groups of g; word i of row r = base + r·16 + i;
// bf16 scales 1.0 (0x3F80) and biases −0.5 (0xBF00).
void add_quant(SafetensorsWriter& w, const std::string& p, int64_t rows, int64_t in, int bits, int g, uint32_t base) {
  const int64_t words = in * bits / 32;
  std::vector<uint32_t> q(static_cast<size_t>(rows * words));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < words; ++i) q[static_cast<size_t>(r * words + i)] = base + static_cast<uint32_t>(r * 16 + i) * 0x01010101u;
  w.add_tensor(p + ".weight", DType::U32, {rows, words}, bytes(q));
  w.add_tensor(p + ".scales", DType::BF16, {rows, in / g}, bytes(std::vector<uint16_t>(static_cast<size_t>(rows * in / g), 0x3F80)));
  w.add_tensor(p + ".biases", DType::BF16, {rows, in / g}, bytes(std::vector<uint16_t>(static_cast<size_t>(rows * in / g), 0xBF00)));
}

// The expected block of a group: scale 1, bias −0.5, then `code_bytes` bytes of the words.
std::vector<uint8_t> block(const uint8_t* codes, size_t code_bytes) {
  std::vector<uint8_t> b(8 + code_bytes);
  const float s = 1.0f, bias = -0.5f;
  std::memcpy(b.data(), &s, 4);
  std::memcpy(b.data() + 4, &bias, 4);
  std::memcpy(b.data() + 8, codes, code_bytes);
  return b;
}

TEST(Mlx, Gemma4LayoutOverridesAndPerLayerTables) {
  Dir d("gemma4");
  d.write("config.json", R"({"model_type":"gemma4","quantization":{"group_size":32,"bits":4,
    "language_model.layers.0.mlp.gate_proj":{"group_size":64,"bits":8}}})");
  SafetensorsWriter w;
  add_quant(w, "language_model.embed_tokens_per_layer.0", 2, 32, 4, 32, 0x10000000u);
  add_quant(w, "language_model.embed_tokens_per_layer.1", 2, 32, 4, 32, 0x20000000u);
  add_quant(w, "language_model.layers.0.mlp.gate_proj", 1, 64, 8, 64, 0x30000000u);
  w.add_tensor("language_model.norm.weight", DType::F32, {2}, bytes(std::vector<float>{1.5f, 2.0f}));
  w.write((d.path / "model.safetensors").string());
  const HfCheckpoint ck = read_hf_checkpoint(d.path.string());
  EXPECT_EQ(ck.tensors.size(), 3u);

  // Per-layer tables [2, 32] ×2 → [2, 64]: row v = table 0's row v, then table 1's.
  const TensorInfo& ple = ck.tensors.get("model.language_model.embed_tokens_per_layer.weight");
  EXPECT_EQ(ple.dtype, DType::MLX_Q4_G32);
  EXPECT_EQ(ple.shape, (std::vector<int64_t>{2, 64}));
  ASSERT_EQ(ple.nbytes, 2u * 2u * (8u + 16u));
  for (int v = 0; v < 2; ++v) {
    for (int l = 0; l < 2; ++l) {
      std::vector<uint32_t> words(4);
      for (int i = 0; i < 4; ++i) words[static_cast<size_t>(i)] = (l ? 0x20000000u : 0x10000000u) + static_cast<uint32_t>(v * 16 + i) * 0x01010101u;
      const auto want = block(reinterpret_cast<const uint8_t*>(words.data()), 16);
      EXPECT_EQ(0, std::memcmp(ple.data() + (v * 2 + l) * 24, want.data(), 24)) << "row " << v << " table " << l;
    }
  }
  // The per-module override: 8 bits, groups of 64.
  const TensorInfo& gp = ck.tensors.get("model.language_model.layers.0.mlp.gate_proj.weight");
  EXPECT_EQ(gp.dtype, DType::MLX_Q8_G64);
  EXPECT_EQ(gp.shape, (std::vector<int64_t>{1, 64}));
  // Gemma 4 norms are plain weights: kept as stored.
  const TensorInfo& n = ck.tensors.get("model.language_model.norm.weight");
  float v0;
  std::memcpy(&v0, n.data(), 4);
  EXPECT_EQ(v0, 1.5f);
}

TEST(Mlx, Qwen35SanitizeUndone) {
  Dir d("qwen35");
  d.write("config.json", R"({"model_type":"qwen3_5","quantization":{"group_size":64,"bits":4}})");
  SafetensorsWriter w;
  w.add_tensor("language_model.model.layers.0.linear_attn.conv1d.weight", DType::F32, {4, 3, 1}, std::vector<uint8_t>(48, 0));
  w.add_tensor("language_model.model.layers.0.input_layernorm.weight", DType::BF16, {2},
               bytes(std::vector<uint16_t>{0x3FC0, 0x3F40}));  // 1.5, 0.75 (mlx-lm's 1 + w)
  w.add_tensor("language_model.model.layers.0.linear_attn.norm.weight", DType::F32, {2}, bytes(std::vector<float>{1.5f, 0.75f}));
  add_quant(w, "language_model.lm_head", 1, 64, 4, 64, 0);
  add_quant(w, "language_model.model.layers.0.mlp.switch_mlp.gate_proj", 2, 64, 4, 64, 0x01000000u);  // [E=2, I=1, 64] below
  add_quant(w, "language_model.model.layers.0.mlp.switch_mlp.up_proj", 2, 64, 4, 64, 0x02000000u);
  w.write((d.path / "model.safetensors").string());
  // Re-shape the switch_mlp tensors to [E, I, d] as mlx-lm writes them.
  {
    SafetensorsFile f = read_safetensors((d.path / "model.safetensors").string());
    SafetensorsWriter w2;
    for (const auto& [name, t] : f.tensors.all()) {
      std::vector<int64_t> shape = t.shape;
      if (name.find("switch_mlp") != std::string::npos) shape.insert(shape.begin() + 1, 1);
      w2.add_tensor(name, t.dtype, shape, std::vector<uint8_t>(t.data(), t.data() + t.nbytes));
    }
    w2.write((d.path / "model2.safetensors").string());
  }
  fs::rename(d.path / "model2.safetensors", d.path / "model.safetensors");
  const HfCheckpoint ck = read_hf_checkpoint(d.path.string());
  EXPECT_EQ(ck.tensors.get("model.language_model.layers.0.linear_attn.conv1d.weight").shape, (std::vector<int64_t>{4, 1, 3}));
  const TensorInfo& ln = ck.tensors.get("model.language_model.layers.0.input_layernorm.weight");
  ASSERT_EQ(ln.dtype, DType::F32);
  float v[2];
  std::memcpy(v, ln.data(), 8);
  EXPECT_EQ(v[0], 0.5f);
  EXPECT_EQ(v[1], -0.25f);
  float lin[2];
  std::memcpy(lin, ck.tensors.get("model.language_model.layers.0.linear_attn.norm.weight").data(), 8);
  EXPECT_EQ(lin[0], 1.5f);  // not a (1 + w) norm: as stored
  EXPECT_EQ(ck.tensors.get("lm_head.weight").dtype, DType::MLX_Q4_G64);
  // experts.gate_up_proj [E, 2I, d]: expert e = gate row e, then up row e.
  const TensorInfo& gu = ck.tensors.get("model.language_model.layers.0.mlp.experts.gate_up_proj");
  EXPECT_EQ(gu.shape, (std::vector<int64_t>{2, 2, 64}));
  for (int e = 0; e < 2; ++e) {
    uint32_t first_gate, first_up;
    std::memcpy(&first_gate, gu.data() + (2 * e) * 40 + 8, 4);
    std::memcpy(&first_up, gu.data() + (2 * e + 1) * 40 + 8, 4);
    EXPECT_EQ(first_gate, 0x01000000u + static_cast<uint32_t>(e * 16) * 0x01010101u) << e;
    EXPECT_EQ(first_up, 0x02000000u + static_cast<uint32_t>(e * 16) * 0x01010101u) << e;
  }
}

TEST(Mlx, BadInputIsAClearError) {
  auto expect_error = [](const std::string& name, const std::string& config, bool wrong_scales, const std::string& needle) {
    Dir d(name);
    d.write("config.json", config);
    SafetensorsWriter w;
    add_quant(w, "language_model.model.layers.0.mlp.up_proj", 2, 64, 4, wrong_scales ? 32 : 64, 0);
    w.write((d.path / "model.safetensors").string());
    std::string msg;
    EXPECT_TRUE(throws_clean([&] { read_hf_checkpoint(d.path.string()); }, &msg)) << name;
    EXPECT_NE(msg.find(needle), std::string::npos) << name << ": " << msg;
  };
  expect_error("bits3", R"({"model_type":"qwen3_5","quantization":{"group_size":64,"bits":3}})", false, "bits=3");
  expect_error("g48", R"({"model_type":"qwen3_5","quantization":{"group_size":48,"bits":4}})", false, "group_size=48");
  expect_error("mode", R"({"model_type":"qwen3_5","quantization":{"group_size":64,"bits":4,"mode":"nvfp4"}})", false, "mode");
  expect_error("shape", R"({"model_type":"qwen3_5","quantization":{"group_size":64,"bits":4}})", true, "scales have shape");
  expect_error("noconfig", R"({"model_type":"qwen3_5"})", false, "quantization");
  // A U32 weight without scales.
  Dir d("u32");
  d.write("config.json", R"({"model_type":"qwen3_5","quantization":{"group_size":64,"bits":4}})");
  SafetensorsWriter w;
  w.add_tensor("language_model.model.x.weight", DType::U32, {1, 8}, std::vector<uint8_t>(32, 0));
  w.write((d.path / "model.safetensors").string());
  std::string msg;
  EXPECT_TRUE(throws_clean([&] { read_hf_checkpoint(d.path.string()); }, &msg));
  EXPECT_NE(msg.find("no .scales"), std::string::npos) << msg;
}

}  // namespace
}  // namespace oxi
