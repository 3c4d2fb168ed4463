#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include <unistd.h>

#include "core/byte_source.h"
#include "core/error.h"
#include "format/gguf.h"
#include "test_util.h"

namespace oxi {
namespace {

using test::Bytes;
using test::throws_clean;

// A GGUF v3 file assembled by hand from the spec: 2 kvs, 2 tensors (F32 [2,3] and Q8_0 [1,32]).
Bytes hand_gguf() {
  Bytes f;
  f.raw("GGUF").u32(3).u64(2).u64(2);
  f.str("general.architecture").u32(8).str("testarch");
  f.str("test.list").u32(9).u32(5).u64(3).i32(-1).i32(7).i32(1 << 20);
  // tensor infos: ne innermost first
  f.str("a").u32(2).u64(3).u64(2).u32(0).u64(0);
  f.str("b").u32(2).u64(32).u64(1).u32(8).u64(32);
  f.pad_to(32);
  for (int i = 0; i < 6; ++i) f.f32(static_cast<float>(i) + 0.5f);
  f.pad_to(32);
  f.zeros(34);
  return f;
}

ByteSourcePtr mem(const Bytes& b, const char* name = "test.gguf") { return memory_source(b.b, name); }

TEST(Gguf, ReadsHandBuiltFile) {
  GgufFile g = read_gguf(mem(hand_gguf()));
  EXPECT_EQ(g.version, 3u);
  EXPECT_EQ(g.metadata.get_string("general.architecture"), "testarch");
  EXPECT_EQ(g.metadata.find("test.list")->as_int_array(), (std::vector<int64_t>{-1, 7, 1 << 20}));
  ASSERT_EQ(g.tensors.size(), 2u);
  const TensorInfo& a = g.tensors.get("a");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));  // ne {3,2} reversed
  EXPECT_EQ(a.dtype, DType::F32);
  EXPECT_EQ(a.nbytes, 24u);
  float x;
  std::memcpy(&x, a.data() + 5 * 4, 4);
  EXPECT_EQ(x, 5.5f);
  const TensorInfo& b = g.tensors.get("b");
  EXPECT_EQ(b.shape, (std::vector<int64_t>{1, 32}));
  EXPECT_EQ(b.nbytes, 34u);
  EXPECT_EQ(b.offset, a.offset + 32);
  EXPECT_EQ(a.n_elements(), 6);
  EXPECT_EQ(a.shape_string(), "[2, 3]");
}

TEST(Gguf, Version2Accepted) {
  Bytes f = hand_gguf();
  f.b[4] = 2;
  EXPECT_EQ(read_gguf(mem(f)).version, 2u);
}

TEST(Gguf, MetadataAccessorsAndErrors) {
  GgufFile g = read_gguf(mem(hand_gguf()));
  std::string msg;
  EXPECT_TRUE(throws_clean([&] { g.metadata.get_int("nope"); }, &msg));
  EXPECT_NE(msg.find("nope"), std::string::npos);
  EXPECT_TRUE(throws_clean([&] { g.metadata.get_int("general.architecture"); }, &msg));
  EXPECT_NE(msg.find("general.architecture"), std::string::npos);
  EXPECT_EQ(g.metadata.get_int("nope", 42), 42);
  EXPECT_EQ(g.metadata.get_string("nope", "d"), "d");
  EXPECT_EQ(g.metadata.find("test.list")->array_size(), 3u);
  EXPECT_EQ(g.metadata.find("test.list")->element(1).as_int(), 7);
  EXPECT_EQ(g.metadata.find("test.list")->as_float_array()[0], -1.0f);
  EXPECT_TRUE(throws_clean([&] { g.metadata.find("test.list")->as_string_array(); }));
  EXPECT_TRUE(throws_clean([&] { g.tensors.get("zz"); }));
}

TEST(Gguf, WriterRoundTripAllTypes) {
  GgufWriter w;
  w.set_metadata("k.u8", GgufValue::u8(200));
  w.set_metadata("k.i8", GgufValue::i8(-100));
  w.set_metadata("k.u16", GgufValue::u16(60000));
  w.set_metadata("k.i16", GgufValue::i16(-30000));
  w.set_u32("k.u32", 4000000000u);
  w.set_i32("k.i32", -2000000000);
  w.set_u64("k.u64", 1ull << 63);
  w.set_metadata("k.i64", GgufValue::i64(-(1ll << 62)));
  w.set_f32("k.f32", 1.5f);
  w.set_metadata("k.f64", GgufValue::f64(0.1));
  w.set_bool("k.bool", true);
  w.set_string("k.str", "héllo");
  w.set_array_string("k.strs", {"a", "", "ccc"});
  w.set_array_f32("k.f32s", {1.0f, -2.0f});
  w.set_array_bool("k.bools", {true, false, true});
  w.set_array_u32("k.u32s", {1, 2});
  w.set_metadata("k.nested", GgufValue::nested_array(GgufType::INT32, {GgufValue::int_array(GgufType::INT32, {1, 2}),
                                                                       GgufValue::int_array(GgufType::INT32, {3})}));
  std::vector<float> t1 = {1, 2, 3, 4, 5, 6};
  w.add_tensor("t1", DType::F32, {3, 2}, t1.data(), t1.size() * 4);
  w.add_tensor("t2", DType::Q4_0, {2, 64}, 2 * 2 * 18, [](uint8_t* dst, uint64_t n) {
    for (uint64_t i = 0; i < n; ++i) dst[i] = static_cast<uint8_t>(i);
  });
  auto bytes = w.write_to_memory();
  GgufFile g = read_gguf(memory_source(bytes, "rt.gguf"));
  const auto& m = g.metadata;
  EXPECT_EQ(m.find("k.u8")->type, GgufType::UINT8);
  EXPECT_EQ(m.get_int("k.u8"), 200);
  EXPECT_EQ(m.get_int("k.i8"), -100);
  EXPECT_EQ(m.get_int("k.u16"), 60000);
  EXPECT_EQ(m.get_int("k.i16"), -30000);
  EXPECT_EQ(m.get_int("k.u32"), 4000000000ll);
  EXPECT_EQ(m.get_int("k.i32"), -2000000000);
  EXPECT_EQ(m.find("k.u64")->as_uint(), 1ull << 63);
  EXPECT_TRUE(throws_clean([&] { m.get_int("k.u64"); }));  // out of int64 range
  EXPECT_EQ(m.get_int("k.i64"), -(1ll << 62));
  EXPECT_EQ(m.get_float("k.f32"), 1.5);
  EXPECT_EQ(m.get_float("k.f64"), 0.1);
  EXPECT_TRUE(m.get_bool("k.bool"));
  EXPECT_EQ(m.get_string("k.str"), "héllo");
  EXPECT_EQ(m.find("k.strs")->as_string_array(), (std::vector<std::string>{"a", "", "ccc"}));
  // String arrays of a parsed file are read on first use; a copied value keeps its bytes alive.
  GgufValue strs_copy = *m.find("k.strs");
  EXPECT_EQ(strs_copy.array_size(), 3u);
  EXPECT_EQ(strs_copy.element(2).as_string(), "ccc");
  EXPECT_EQ(m.find("k.f32s")->as_float_array(), (std::vector<float>{1.0f, -2.0f}));
  EXPECT_EQ(m.find("k.bools")->as_int_array(), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(m.find("k.u32s")->as_int_array(), (std::vector<int64_t>{1, 2}));
  const GgufValue* n = m.find("k.nested");
  ASSERT_EQ(n->array_size(), 2u);
  EXPECT_EQ(n->element(0).as_int_array(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(n->element(1).as_int_array(), (std::vector<int64_t>{3}));
  EXPECT_EQ(m.entries().front().first, "k.u8");  // file order kept
  const TensorInfo& a = g.tensors.get("t1");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(std::memcmp(a.data(), t1.data(), 24), 0);
  const TensorInfo& b = g.tensors.get("t2");
  EXPECT_EQ(b.dtype, DType::Q4_0);
  EXPECT_EQ(b.offset % 32, 0u);
  EXPECT_EQ(b.data()[71], 71);
  // ne on disk is innermost first: find "t1" info and check ne = {2, 3}.
  const std::string name = "t1";
  auto it = std::search(bytes.begin(), bytes.end(), name.begin(), name.end());
  ASSERT_NE(it, bytes.end());
  const size_t at = static_cast<size_t>(it - bytes.begin()) + 2;
  uint32_t nd;
  uint64_t ne0, ne1;
  std::memcpy(&nd, &bytes[at], 4);
  std::memcpy(&ne0, &bytes[at + 4], 8);
  std::memcpy(&ne1, &bytes[at + 12], 8);
  EXPECT_EQ(nd, 2u);
  EXPECT_EQ(ne0, 2u);
  EXPECT_EQ(ne1, 3u);
}

TEST(Gguf, WriterAlignmentAndFile) {
  GgufWriter w(64);
  std::vector<uint8_t> d(10, 7);
  w.add_tensor("x", DType::I8, {10}, d.data(), 10);
  w.add_tensor("y", DType::I8, {10}, d.data(), 10);
  const std::string path = ::testing::TempDir() + "oxi_writer_test.gguf";
  w.write(path);
  GgufFile g = read_gguf(path);
  EXPECT_EQ(g.alignment, 64u);
  EXPECT_EQ(g.metadata.find("general.alignment")->type, GgufType::UINT32);
  EXPECT_EQ(g.tensors.get("y").offset % 64, 0u);
  EXPECT_EQ(g.tensors.get("y").offset - g.tensors.get("x").offset, 64u);
  std::remove(path.c_str());
}

// Issue 29 #10: `convert` writes through GgufWriter::write; a symlink planted at the temp name it
// used to use ("<out>.tmp.<pid>") must not be followed.
TEST(Gguf, WriterNeverFollowsAPlantedSymlink) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / ("oxi_gguf_symlink_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string victim = (dir / "victim").string(), out = (dir / "out.gguf").string();
  write_file_atomic(victim, "secret", 6);
  fs::create_symlink(victim, out + ".tmp." + std::to_string(::getpid()));
  GgufWriter w;
  std::vector<uint8_t> d(10, 7);
  w.add_tensor("x", DType::I8, {10}, d.data(), 10);
  w.write(out);
  EXPECT_EQ(read_text_file(victim), "secret");
  EXPECT_EQ(read_gguf(out).tensors.get("x").nbytes, 10u);
  fs::remove_all(dir);
}

TEST(Gguf, WriterRejectsBadInput) {
  GgufWriter w;
  std::vector<uint8_t> d(34);
  EXPECT_TRUE(throws_clean([&] { w.add_tensor("q", DType::Q8_0, {1, 16}, d.data(), 17); }));  // row not whole blocks
  EXPECT_TRUE(throws_clean([&] { w.add_tensor("q", DType::Q8_0, {1, 32}, d.data(), 33); }));  // wrong size
  EXPECT_TRUE(throws_clean([&] { w.add_tensor("q", DType::F32, {1, 1, 1, 1, 1}, d.data(), 4); }));
  EXPECT_TRUE(throws_clean([&] { w.add_tensor("q", DType::BOOL, {1}, d.data(), 1); }));
  w.add_tensor("q", DType::Q8_0, {1, 32}, d.data(), 34);
  EXPECT_TRUE(throws_clean([&] { w.add_tensor("q", DType::Q8_0, {1, 32}, d.data(), 34); }));
  EXPECT_TRUE(throws_clean([] { GgufWriter bad(3); }));
}

// Every strict prefix of a valid file must be rejected with a clean error (never a crash).
TEST(Gguf, TruncatedAtEveryByteThrows) {
  GgufWriter w;
  w.set_string("general.architecture", "x");
  w.set_array_string("s", {"ab", "cd"});
  w.set_array_i32("i", {1, 2, 3});
  w.set_metadata("n", GgufValue::nested_array(GgufType::UINT8, {GgufValue::int_array(GgufType::UINT8, {1})}));
  std::vector<float> t(8, 1.0f);
  w.add_tensor("t", DType::F32, {2, 4}, t.data(), 32);
  w.add_tensor("u", DType::F32, {4}, t.data(), 16);
  auto full = w.write_to_memory();
  ASSERT_NO_THROW(read_gguf(memory_source(full, "full")));
  // The last tensor ends before the final padding; only cuts before its end must fail.
  const size_t needed = full.size() - ((32 - 16 % 32) % 32);
  for (size_t n = 0; n < needed; ++n) {
    std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<long>(n));
    EXPECT_TRUE(throws_clean([&] { read_gguf(memory_source(cut, "cut")); })) << "prefix " << n;
  }
}

// Flip every byte of the header (one at a time) to a few values: must load or throw oxi::Error.
TEST(Gguf, CorruptedHeaderBytesNeverCrash) {
  Bytes f = hand_gguf();
  const size_t header = f.b.size() - 32 - 34 - 8;
  for (size_t i = 0; i < header; ++i) {
    for (uint8_t v : {uint8_t{0}, uint8_t{0xff}, uint8_t{0x80}, static_cast<uint8_t>(f.b[i] + 1)}) {
      Bytes g = f;
      g.b[i] = v;
      try {
        read_gguf(mem(g));
      } catch (const Error&) {
      }
    }
  }
}

std::string shared_dir() { return OXI_SHARED_DIR; }

// Files written by llama.cpp (the vocab GGUFs in shared/testdata); expected values from
// node-llama-cpp's readGgufFileInfo on the same files.
TEST(Gguf, LlamaCppVocabQwen) {
  const std::string p = shared_dir() + "/testdata/tokenizer/ggml-vocab-qwen35.gguf";
  if (!std::filesystem::exists(p)) GTEST_SKIP() << "missing " << p;
  GgufFile g = read_gguf(p);
  EXPECT_EQ(g.version, 3u);
  EXPECT_EQ(g.tensors.size(), 0u);
  EXPECT_EQ(g.metadata.entries().size(), 20u);
  EXPECT_EQ(g.metadata.get_string("general.architecture"), "qwen2");
  EXPECT_EQ(g.metadata.get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(g.metadata.get_string("tokenizer.ggml.pre"), "qwen35");
  const auto& toks = g.metadata.find("tokenizer.ggml.tokens")->as_string_array();
  ASSERT_EQ(toks.size(), 151936u);
  EXPECT_EQ(toks[0], "!");
  EXPECT_EQ(toks[100], "§");
  EXPECT_EQ(g.metadata.find("tokenizer.ggml.merges")->array_size(), 151387u);
  EXPECT_EQ(g.metadata.get_int("tokenizer.ggml.bos_token_id"), 151643);
  EXPECT_EQ(g.metadata.get_int("qwen2.context_length"), 32768);
}

TEST(Gguf, LlamaCppVocabGemma4) {
  const std::string p = shared_dir() + "/testdata/tokenizer/ggml-vocab-gemma-4.gguf";
  if (!std::filesystem::exists(p)) GTEST_SKIP() << "missing " << p;
  GgufFile g = read_gguf(p);
  EXPECT_EQ(g.metadata.entries().size(), 42u);
  EXPECT_EQ(g.metadata.get_string("general.architecture"), "gemma4");
  EXPECT_EQ(g.metadata.get_string("tokenizer.ggml.model"), "gemma4");
  const auto& toks = g.metadata.find("tokenizer.ggml.tokens")->as_string_array();
  ASSERT_EQ(toks.size(), 262144u);
  EXPECT_EQ(toks[0], "<pad>");
  EXPECT_EQ(toks[100], "<|channel>");
  EXPECT_EQ(g.metadata.find("tokenizer.ggml.merges")->array_size(), 514906u);
  EXPECT_EQ(g.metadata.get_int("tokenizer.ggml.bos_token_id"), 2);
  EXPECT_EQ(g.metadata.get_int("tokenizer.ggml.eos_token_id"), 1);
  EXPECT_EQ(g.metadata.get_int("gemma4.context_length"), 262144);
}

}  // namespace
}  // namespace oxi

namespace oxi {
namespace {

void write_part(const std::string& path, int no, int count, int total, const std::vector<std::string>& names) {
  GgufWriter w;
  w.set_metadata("split.no", GgufValue::u16(static_cast<uint16_t>(no)));
  w.set_metadata("split.count", GgufValue::u16(static_cast<uint16_t>(count)));
  w.set_metadata("split.tensors.count", GgufValue::i32(total));
  if (no == 0) w.set_string("general.architecture", "splitarch");
  static const std::vector<float> data(4, 2.0f);
  for (const auto& n : names) w.add_tensor(n, DType::F32, {4}, data.data(), 16);
  w.write(path);
}

TEST(Gguf, SplitFiles) {
  const std::string dir = ::testing::TempDir();
  const std::string p1 = dir + "oxisplit-00001-of-00003.gguf", p2 = dir + "oxisplit-00002-of-00003.gguf",
                    p3 = dir + "oxisplit-00003-of-00003.gguf";
  write_part(p1, 0, 3, 4, {"a"});
  write_part(p2, 1, 3, 4, {"b", "c"});
  write_part(p3, 2, 3, 4, {"d"});
  EXPECT_TRUE(gguf_is_split_first(p1));
  EXPECT_FALSE(gguf_is_split_first(p2));
  GgufFile g = read_gguf(p1);
  EXPECT_EQ(g.tensors.size(), 4u);
  EXPECT_EQ(g.sources.size(), 3u);
  EXPECT_EQ(g.metadata.get_string("general.architecture"), "splitarch");
  EXPECT_EQ(g.tensors.get("c").source->name(), p2);
  float x;
  std::memcpy(&x, g.tensors.get("d").data(), 4);
  EXPECT_EQ(x, 2.0f);
  // Opening a later part names the first.
  std::string msg;
  EXPECT_TRUE(test::throws_clean([&] { read_gguf(p2); }, &msg));
  EXPECT_NE(msg.find("00001-of-00003"), std::string::npos) << msg;
  // Wrong split.no in part 3; a duplicate tensor across parts; wrong total; a missing part.
  write_part(p3, 1, 3, 4, {"d"});
  EXPECT_TRUE(test::throws_clean([&] { read_gguf(p1); }));
  write_part(p3, 2, 3, 4, {"a"});
  EXPECT_TRUE(test::throws_clean([&] { read_gguf(p1); }, &msg));
  EXPECT_NE(msg.find("duplicate"), std::string::npos) << msg;
  write_part(p3, 2, 3, 5, {"d"});
  write_part(p1, 0, 3, 5, {"a"});
  EXPECT_TRUE(test::throws_clean([&] { read_gguf(p1); }));
  std::remove(p3.c_str());
  EXPECT_TRUE(test::throws_clean([&] { read_gguf(p1); }));
  std::remove(p1.c_str());
  std::remove(p2.c_str());
}

}  // namespace
}  // namespace oxi
