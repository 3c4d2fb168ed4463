#include <gtest/gtest.h>

#include <cstdio>

#include "core/byte_source.h"
#include "format/safetensors.h"
#include "test_util.h"

namespace oxi {
namespace {

using test::throws_clean;

std::vector<uint8_t> st_file(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> f(8);
  const uint64_t n = header.size();
  std::memcpy(f.data(), &n, 8);
  f.insert(f.end(), header.begin(), header.end());
  for (size_t i = 0; i < data_bytes; ++i) f.push_back(static_cast<uint8_t>(i));
  return f;
}

SafetensorsFile read_mem(const std::string& header, size_t data_bytes) {
  return read_safetensors(memory_source(st_file(header, data_bytes), "t.safetensors"));
}

TEST(Safetensors, ReadsHandWrittenHeader) {
  const std::string h =
      R"({"__metadata__":{"format":"pt"},"w":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]},)"
      R"("b":{"dtype":"I64","shape":[],"data_offsets":[12,20]},"e":{"dtype":"F32","shape":[0,4],"data_offsets":[20,20]}})";
  auto f = read_mem(h, 20);
  EXPECT_EQ(f.metadata.at("format"), "pt");
  ASSERT_EQ(f.tensors.size(), 3u);
  const auto& w = f.tensors.get("w");
  EXPECT_EQ(w.dtype, DType::BF16);
  EXPECT_EQ(w.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(w.offset, 8u + h.size());
  EXPECT_EQ(w.nbytes, 12u);
  EXPECT_EQ(f.tensors.get("b").n_elements(), 1);
  EXPECT_EQ(f.tensors.get("e").nbytes, 0u);
}

TEST(Safetensors, AllDtypes) {
  const char* names[] = {"F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8", "BOOL"};
  const int sizes[] = {8, 4, 2, 2, 8, 4, 2, 1, 1, 1};
  for (int i = 0; i < 10; ++i) {
    DType t = safetensors_dtype(names[i], "f", "t");
    EXPECT_STREQ(safetensors_dtype_name(t), names[i]);
    const std::string h = std::string(R"({"t":{"dtype":")") + names[i] + R"(","shape":[3],"data_offsets":[0,)" +
                          std::to_string(3 * sizes[i]) + "]}}";
    EXPECT_EQ(read_mem(h, 3 * sizes[i]).tensors.get("t").nbytes, static_cast<uint64_t>(3 * sizes[i])) << names[i];
  }
  EXPECT_TRUE(throws_clean([] { safetensors_dtype("F8_E4M3", "f", "t"); }));
  EXPECT_TRUE(throws_clean([] { safetensors_dtype("Q4", "f", "t"); }));
}

TEST(Safetensors, WriterRoundTrip) {
  SafetensorsWriter w;
  std::vector<uint8_t> a(2 * 3 * 4, 1), b(5 * 2, 2);
  w.add_tensor("a.weight", DType::F32, {2, 3}, a);
  w.add_tensor("b", DType::BF16, {5}, b);
  w.set_metadata("format", "pt");
  auto bytes = w.write_to_memory();
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ((8 + n) % 8, 0u);
  auto f = read_safetensors(memory_source(bytes, "rt"));
  EXPECT_EQ(f.tensors.get("a.weight").shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(f.tensors.get("b").data()[0], 2);
  EXPECT_EQ(f.tensors.get("a.weight").data()[23], 1);
  EXPECT_EQ(f.metadata.at("format"), "pt");
  const std::string path = ::testing::TempDir() + "oxi_st_rt.safetensors";
  w.write(path);
  EXPECT_EQ(read_safetensors(path).tensors.size(), 2u);
  std::remove(path.c_str());
  EXPECT_TRUE(throws_clean([&] { w.add_tensor("b", DType::BF16, {5}, b); }));
  EXPECT_TRUE(throws_clean([&] { w.add_tensor("c", DType::BF16, {6}, b); }));
  EXPECT_TRUE(throws_clean([&] { w.add_tensor("c", DType::Q4_K, {256}, std::vector<uint8_t>(144)); }));
}

TEST(Safetensors, RejectsBadInput) {
  const char* bad[] = {
      "not json",
      "[1,2]",
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})",              // size mismatch
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,400]}})",            // outside data
      R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})",             // negative dim
      R"({"a":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})",            // float dim
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,0]}})",              // begin > end
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})",                // one offset
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[2,6]}})",
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
      R"({"a":{"dtype":"X","shape":[1],"data_offsets":[0,4]}})",
      R"({"a":{"shape":[1],"data_offsets":[0,4]}})",
      R"({"a":5})",
      R"({"__metadata__":{"x":1}})",
      R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,4]}})",
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,18446744073709551615]}})",
      "{\"\xff\xfe\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",  // invalid UTF-8
      "{\"a\":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
  };
  for (const char* h : bad) {
    std::string msg;
    EXPECT_TRUE(throws_clean([&] { read_mem(h, 8); }, &msg)) << h;
    EXPECT_NE(msg.find("t.safetensors"), std::string::npos) << msg;
  }
  // Header length bigger than the file, > 100 MiB, too-small files.
  std::vector<uint8_t> f = st_file("{}", 0);
  uint64_t huge = 1ull << 40;
  std::memcpy(f.data(), &huge, 8);
  EXPECT_TRUE(throws_clean([&] { read_safetensors(memory_source(f, "h")); }));
  huge = 200;
  std::memcpy(f.data(), &huge, 8);
  EXPECT_TRUE(throws_clean([&] { read_safetensors(memory_source(f, "h")); }));
  EXPECT_TRUE(throws_clean([&] { read_safetensors(memory_source({1, 2, 3}, "h")); }));
}

TEST(Safetensors, TruncatedAtEveryByteThrows) {
  SafetensorsWriter w;
  w.add_tensor("a", DType::F32, {2, 2}, std::vector<uint8_t>(16, 3));
  w.add_tensor("b", DType::I8, {3}, std::vector<uint8_t>(3, 4));
  auto full = w.write_to_memory();
  ASSERT_NO_THROW(read_safetensors(memory_source(full, "full")));
  for (size_t n = 0; n < full.size(); ++n) {
    std::vector<uint8_t> cut(full.begin(), full.begin() + static_cast<long>(n));
    EXPECT_TRUE(throws_clean([&] { read_safetensors(memory_source(cut, "cut")); })) << n;
  }
}

}  // namespace
}  // namespace oxi
