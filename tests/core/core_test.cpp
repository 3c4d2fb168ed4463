#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <vector>

#include <unistd.h>
#include <limits>

#include "core/byte_source.h"
#include "core/error.h"
#include "core/half.h"

namespace oxi {
namespace {

TEST(Half, RoundTripsEveryF16) {
  // Every finite f16 converts to f32 and back unchanged (independent of our rounding code path,
  // since f16 → f32 is exact).
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const uint16_t v = static_cast<uint16_t>(h);
    if ((v & 0x7c00u) == 0x7c00u && (v & 0x3ffu)) continue;  // NaN payloads
    EXPECT_EQ(f32_to_f16(f16_to_f32(v)), v) << h;
  }
}

TEST(Half, KnownValues) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // rounds to inf
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie → even
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);          // tie → even (zero)
  EXPECT_EQ(f32_to_f16(std::ldexp(3.0f, -26)), 0x0001);
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(bf16_to_f32(0x4049), 3.140625f);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(ByteSource, RangeIsBoundsChecked) {
  auto src = memory_source({1, 2, 3, 4}, "mem");
  EXPECT_EQ(src->range(1, 3)[0], 2);
  EXPECT_THROW(src->range(2, 3), Error);
  EXPECT_THROW(src->range(~0ull, 2), Error);
  EXPECT_THROW(src->range(1, ~0ull), Error);
}

TEST(ByteSource, FileRoundTripAndMissingFile) {
  const std::string path = ::testing::TempDir() + "/oxi_bs_test.bin";
  const char payload[] = "hello";
  write_file_atomic(path, payload, 5);
  auto src = open_file_source(path);
  ASSERT_EQ(src->size(), 5u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(src->data()), 5), "hello");
  std::remove(path.c_str());
  try {
    open_file_source(path + ".missing");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    EXPECT_NE(std::string(e.what()).find(".missing"), std::string::npos);
  }
}

// Issue 29 #10: the temp file of an atomic write had a predictable name ("<path>.tmp.<pid>",
// fopen "wb"), so a symlink planted there made the writer overwrite the link's target.
TEST(ByteSource, AtomicWriteNeverFollowsAPlantedSymlink) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / ("oxi_symlink_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string victim = (dir / "victim").string(), out = (dir / "out.bin").string();
  write_file_atomic(victim, "secret", 6);
  for (const std::string name : {out + ".tmp." + std::to_string(::getpid()), out + ".tmp"}) {
    fs::create_symlink(victim, name);
  }
  write_file_atomic(out, "new content", 11);
  EXPECT_EQ(read_text_file(victim), "secret");
  EXPECT_EQ(read_text_file(out), "new content");
  EXPECT_FALSE(fs::is_symlink(out));
  // Nothing left behind but the planted links.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 4);
  fs::remove_all(dir);
}

// Issue 29 #9: a mapped file truncated on disk used to kill the process with SIGBUS at the next
// read of a lost page; now the read sees zeros and damaged_mapped_file() names the file.
TEST(ByteSource, TruncatedMappedFileReadsZerosAndIsReported) {
#if defined(__EMSCRIPTEN__) || defined(_WIN32)
  GTEST_SKIP() << "files are read, not mapped, here";
#else
  const std::string path = ::testing::TempDir() + "/oxi_truncated.bin";
  std::vector<uint8_t> bytes(1 << 20, 0xab);
  write_file_atomic(path, bytes.data(), bytes.size());
  auto src = open_file_source(path);
  EXPECT_EQ(damaged_mapped_file(), "");
  EXPECT_EQ(src->data()[900000], 0xab);
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);
  EXPECT_EQ(src->data()[100], 0xab);      // still in the file
  EXPECT_EQ(src->data()[900000], 0);      // lost page: zeros, not SIGBUS
  EXPECT_EQ(src->data()[(1 << 20) - 1], 0);
  EXPECT_EQ(damaged_mapped_file(), path);
  src.reset();
  EXPECT_EQ(damaged_mapped_file(), path);  // stays reported after the mapping is gone
  std::remove(path.c_str());
#endif
}

// release_mapped_range finds the open mapping holding an address, drops its pages without
// changing what reads see, and leaves other memory alone.
TEST(ByteSource, ReleaseMappedRangeByAddress) {
#if defined(__EMSCRIPTEN__) || defined(_WIN32)
  GTEST_SKIP() << "files are read, not mapped, here";
#endif
  const std::string path = ::testing::TempDir() + "/oxi_bs_release.bin";
  std::vector<uint8_t> payload(5 * 4096 + 123);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 131 + 7);
  write_file_atomic(path, payload.data(), payload.size());
  const uint8_t* former = nullptr;
  {
    auto src = open_file_source(path);
    ASSERT_EQ(src->size(), payload.size());
    const uint8_t* d = src->data();
    former = d;
    EXPECT_TRUE(release_mapped_range(d + 100, 3 * 4096));
    EXPECT_TRUE(release_mapped_range(d, payload.size()));
    EXPECT_FALSE(release_mapped_range(d + 10, payload.size()));  // runs past the end
    EXPECT_EQ(std::memcmp(d, payload.data(), payload.size()), 0);
    EXPECT_FALSE(release_mapped_range(payload.data(), payload.size()));  // heap
    EXPECT_EQ(payload[4096], static_cast<uint8_t>(4096 * 131 + 7));
  }
  EXPECT_FALSE(release_mapped_range(former, 16));  // closed: no longer a mapping of ours
  std::remove(path.c_str());
}

}  // namespace
}  // namespace oxi
