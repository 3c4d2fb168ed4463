// The committed corpus (tests/data/make_corpus.py): every bad/ case must be rejected with a clean,
// one-line oxi::Error naming the file; the good/ files (written by that independent Python writer)
// must load with the values the script put in them.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "core/half.h"
#include "format/gguf.h"
#include "format/model_files.h"
#include "format/safetensors.h"
#include "test_util.h"

namespace oxi {
namespace {

namespace fs = std::filesystem;
const std::string kData = OXI_TEST_DATA_DIR;

std::vector<fs::path> bad_cases() {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(kData + "/bad", ec)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(Corpus, EveryBadCaseThrowsCleanly) {
  const auto cases = bad_cases();
  ASSERT_GE(cases.size(), 90u) << "corpus missing: run tests/data/make_corpus.py";
  for (const auto& p : cases) {
    const std::string name = p.filename().string();
    std::string msg;
    auto load = [&] {
      if (name.rfind("st_", 0) == 0) {
        read_safetensors(p.string());
      } else {
        ModelFiles mf = open_model_files(p.string());
        (void)mf.architecture();
      }
    };
    EXPECT_TRUE(test::throws_clean(load, &msg)) << name;
    EXPECT_NE(msg.find(name), std::string::npos) << name << ": message does not name the file: " << msg;
  }
}

TEST(Corpus, IndependentSafetensors) {
  SafetensorsFile f = read_safetensors(kData + "/good/independent.safetensors");
  EXPECT_EQ(f.metadata.at("writer"), "make_corpus.py");
  ASSERT_EQ(f.tensors.size(), 3u);
  const TensorInfo& emb = f.tensors.get("emb");
  EXPECT_EQ(emb.dtype, DType::BF16);
  EXPECT_EQ(emb.shape, (std::vector<int64_t>{3, 2}));
  const float want[] = {1.0f, -2.0f, 0.5f, 3.0f, 0.25f, -0.125f};
  for (int i = 0; i < 6; ++i) {
    uint16_t h;
    std::memcpy(&h, emb.data() + 2 * i, 2);
    EXPECT_EQ(bf16_to_f32(h), want[i]);
  }
  const TensorInfo& scale = f.tensors.get("scale");
  EXPECT_TRUE(scale.shape.empty());
  EXPECT_EQ(scale.n_elements(), 1);
  float x;
  std::memcpy(&x, scale.data(), 4);
  EXPECT_EQ(x, 7.5f);
  int64_t ids[2];
  std::memcpy(ids, f.tensors.get("ids").data(), 16);
  EXPECT_EQ(ids[0], -1);
  EXPECT_EQ(ids[1], 1ll << 40);
}

TEST(Corpus, IndependentGguf) {
  GgufFile g = read_gguf(kData + "/good/independent.gguf");
  EXPECT_EQ(g.alignment, 64u);
  const auto& m = g.metadata;
  EXPECT_EQ(m.get_int("t.u8"), 250);
  EXPECT_EQ(m.get_int("t.i8"), -5);
  EXPECT_EQ(m.get_int("t.u16"), 65000);
  EXPECT_EQ(m.get_int("t.i16"), -32000);
  EXPECT_EQ(m.get_int("t.i32"), -7);
  EXPECT_EQ(m.get_float("t.f32"), 0.25);
  EXPECT_TRUE(m.get_bool("t.bool"));
  EXPECT_EQ(m.get_int("t.u64"), 1ll << 40);
  EXPECT_EQ(m.get_int("t.i64"), -(1ll << 40));
  EXPECT_EQ(m.get_float("t.f64"), 2.5);
  EXPECT_EQ(m.find("t.strs")->as_string_array(), (std::vector<std::string>{"a", "é", ""}));
  const GgufValue* n = m.find("t.nested");
  ASSERT_EQ(n->array_size(), 2u);
  EXPECT_EQ(n->element(0).as_int_array(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(n->element(1).as_int_array(), (std::vector<int64_t>{3}));
  const TensorInfo& q8 = g.tensors.get("q8");
  EXPECT_EQ(q8.dtype, DType::Q8_0);
  EXPECT_EQ(q8.shape, (std::vector<int64_t>{1, 32}));
  EXPECT_EQ(q8.nbytes, 34u);
  EXPECT_EQ(q8.offset - g.tensors.get("f32").offset, 64u);
  uint16_t d;
  std::memcpy(&d, q8.data(), 2);
  EXPECT_EQ(f16_to_f32(d), 0.5f);
  EXPECT_EQ(q8.data()[2 + 31], 31);
  const TensorInfo& f16 = g.tensors.get("f16");
  EXPECT_EQ(f16.shape, (std::vector<int64_t>{2, 2}));
  std::memcpy(&d, f16.data() + 6, 2);
  EXPECT_EQ(f16_to_f32(d), 4.0f);
}

}  // namespace
}  // namespace oxi
