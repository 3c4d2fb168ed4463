// Image decoding, the resize arithmetic, and bad input. References: Pillow (Debian python3-pil,
// run as /usr/bin/python3) for decoding and BICUBIC resizing — the library HF's slow Qwen2-VL
// processor resizes with — and HF's smart_resize formula evaluated by Python itself.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include <unistd.h>

#include "core/error.h"
#include "vision/image.h"

namespace {

using namespace oxi::vision;
namespace fs = std::filesystem;

const char* kPy = "/usr/bin/python3";

bool have_pil() {
  static const bool ok = std::system((std::string(kPy) + " -c 'import PIL' >/dev/null 2>&1").c_str()) == 0;
  return ok;
}

std::vector<uint8_t> read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

fs::path tmp_dir() {
  fs::path d = fs::temp_directory_path() / ("oxi_vision_test_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

// Removes the scratch directory when the test program ends.
struct TmpCleanup : ::testing::Environment {
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(fs::temp_directory_path() / ("oxi_vision_test_" + std::to_string(::getpid())), ec);
  }
};
[[maybe_unused]] const auto* const kCleanup = ::testing::AddGlobalTestEnvironment(new TmpCleanup);

// A smooth random image (so that JPEG and resizing see real content), as raw RGB.
RgbImage test_image(int64_t w, int64_t h, uint32_t seed) {
  std::mt19937 rng(seed);
  RgbImage img{w, h, std::vector<uint8_t>(static_cast<size_t>(w * h * 3))};
  const double a = std::uniform_real_distribution<double>(0.02, 0.2)(rng), b = std::uniform_real_distribution<double>(0.02, 0.2)(rng);
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c) {
        const double v = 127.5 + 100 * std::sin(a * x * (c + 1) + b * y) + std::uniform_int_distribution<int>(-20, 20)(rng);
        img.rgb[static_cast<size_t>((y * w + x) * 3 + c)] = static_cast<uint8_t>(std::clamp(v, 0.0, 255.0));
      }
  return img;
}

// Runs a Python snippet with Pillow; argv[1..] = args.
void py(const std::string& code, const std::vector<std::string>& args) {
  const fs::path script = tmp_dir() / "s.py";
  std::ofstream(script) << code;
  std::string cmd = std::string(kPy) + " " + script.string();
  for (const auto& a : args) cmd += " '" + a + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

void write_raw(const fs::path& p, const RgbImage& img) {
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(img.rgb.data()), static_cast<std::streamsize>(img.rgb.size()));
}

TEST(Image, DecodesEveryFormatAsPillowDoes) {
  if (!have_pil()) GTEST_SKIP() << "python3-pil not installed";
  const fs::path d = tmp_dir();
  const RgbImage img = test_image(37, 23, 1);
  write_raw(d / "src.rgb", img);
  // Pillow writes the files and decodes them again (its decode is the reference).
  py(R"(import sys
from PIL import Image
d, w, h = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
im = Image.frombytes("RGB", (w, h), open(d + "/src.rgb", "rb").read())
im.save(d + "/a.png"); im.save(d + "/a.jpg", quality=92); im.save(d + "/a.bmp")
im.save(d + "/a.webp", lossless=True); im.save(d + "/b.webp", quality=80)
im.quantize(64).save(d + "/a.gif")
Image.frombytes("RGBA", (w, h), bytes(range(256)) * (w * h * 4 // 256) + bytes(w * h * 4 % 256)).save(d + "/rgba.png")
for n in ["a.png", "a.jpg", "a.bmp", "a.webp", "b.webp", "a.gif", "rgba.png"]:
    open(d + "/" + n + ".rgb", "wb").write(Image.open(d + "/" + n).convert("RGB").tobytes())
)", {d.string(), "37", "23"});
  for (const char* name : {"a.png", "a.bmp", "a.webp", "a.gif", "rgba.png", "a.jpg", "b.webp"}) {
    SCOPED_TRACE(name);
    const RgbImage got = load_image((d / name).string());
    ASSERT_EQ(got.width, 37);
    ASSERT_EQ(got.height, 23);
    const std::vector<uint8_t> want = read_bytes(d / (std::string(name) + ".rgb"));
    ASSERT_EQ(got.rgb.size(), want.size());
    const bool lossy = std::string(name) == "a.jpg" || std::string(name) == "b.webp";
    double sum = 0;
    int maxd = 0;
    for (size_t i = 0; i < want.size(); ++i) {
      const int diff = std::abs(int(got.rgb[i]) - int(want[i]));
      sum += diff;
      maxd = std::max(maxd, diff);
    }
    // Lossy formats: libjpeg-turbo / libwebp (Pillow) and stb / libwebp (ours) may upsample chroma
    // differently; the pixels agree on average.
    if (lossy) EXPECT_LT(sum / static_cast<double>(want.size()), 3.0);
    else EXPECT_EQ(maxd, 0);
  }
}

TEST(Image, BicubicResizeEqualsPillow) {
  if (!have_pil()) GTEST_SKIP() << "python3-pil not installed";
  const fs::path d = tmp_dir();
  struct Case { int64_t w, h, ow, oh; };
  // Shrink, enlarge, one side only, and odd ratios (a tall, a wide, a tiny and a larger image).
  for (const Case c : {Case{37, 23, 64, 32}, Case{300, 41, 96, 32}, Case{19, 211, 32, 352}, Case{5, 3, 64, 64},
                       Case{640, 480, 448, 352}, Case{64, 48, 64, 96}}) {
    SCOPED_TRACE(std::to_string(c.w) + "x" + std::to_string(c.h) + " -> " + std::to_string(c.ow) + "x" + std::to_string(c.oh));
    const RgbImage img = test_image(c.w, c.h, static_cast<uint32_t>(c.w * 7 + c.h));
    write_raw(d / "r.rgb", img);
    py(R"(import sys
from PIL import Image
d, w, h, ow, oh = sys.argv[1], *map(int, sys.argv[2:])
im = Image.frombytes("RGB", (w, h), open(d + "/r.rgb", "rb").read())
open(d + "/r.out", "wb").write(im.resize((ow, oh), Image.BICUBIC).tobytes())
)", {d.string(), std::to_string(c.w), std::to_string(c.h), std::to_string(c.ow), std::to_string(c.oh)});
    const RgbImage got = resize_bicubic(img, {c.ow, c.oh});
    const std::vector<uint8_t> want = read_bytes(d / "r.out");
    ASSERT_EQ(got.rgb.size(), want.size());
    size_t bad = 0;
    for (size_t i = 0; i < want.size(); ++i) bad += got.rgb[i] != want[i];
    EXPECT_EQ(bad, 0u);
  }
}

// HF's smart_resize evaluated by Python (math.* in double, round() half to even), against ours.
TEST(Image, SmartResizeEqualsHfFormula) {
  const std::vector<std::pair<int64_t, int64_t>> sizes = {{1000, 500}, {80, 1040}, {10, 10}, {4000, 3000},
                                                          {7000, 5000}, {48, 48}, {1, 199}, {256, 256},
                                                          {333, 777}, {1920, 1080}};
  std::string list;
  for (auto [w, h] : sizes) list += std::to_string(w) + "," + std::to_string(h) + ";";
  const fs::path d = tmp_dir();
  const fs::path script = d / "sr.py";
  std::ofstream(script) << R"(import math, sys
def smart_resize(height, width, factor, min_pixels, max_pixels):
    h_bar = round(height / factor) * factor
    w_bar = round(width / factor) * factor
    if h_bar * w_bar > max_pixels:
        beta = math.sqrt((height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h_bar = math.ceil(height * beta / factor) * factor
        w_bar = math.ceil(width * beta / factor) * factor
    return h_bar, w_bar
out = []
for s in sys.argv[1].split(";"):
    if not s: continue
    w, h = map(int, s.split(","))
    hb, wb = smart_resize(h, w, 32, 65536, 16777216)
    out.append("%d %d" % (wb, hb))
print("\n".join(out))
)";
  const std::string cmd = "python3 " + script.string() + " '" + list + "' > " + (d / "sr.out").string();
  if (std::system(cmd.c_str()) != 0) GTEST_SKIP() << "python3 not available";
  std::ifstream in(d / "sr.out");
  for (auto [w, h] : sizes) {
    int64_t ew = 0, eh = 0;
    in >> ew >> eh;
    const Size got = smart_resize({w, h}, 32, 65536, 16777216);
    EXPECT_EQ(got.width, ew) << w << "x" << h;
    EXPECT_EQ(got.height, eh) << w << "x" << h;
  }
}

// Where llama.cpp's arithmetic differs (documented in docs/multimodal.md).
TEST(Image, LlamaCppVariant) {
  // 2.5 factors: Python rounds to even (2), std::round away from zero (3).
  EXPECT_EQ(smart_resize({80, 1040}, 32, 65536, 16777216, ResizeMode::kHf), (Size{64, 1024}));
  EXPECT_EQ(smart_resize({80, 1040}, 32, 8192, 4194304, ResizeMode::kLlamaCpp), (Size{96, 1056}));
  // llama.cpp keeps the aspect ratio inside the target and pads with black.
  RgbImage img{100, 60, std::vector<uint8_t>(100 * 60 * 3, 200)};
  const Size t = smart_resize({100, 60}, 32, 8192, 4194304, ResizeMode::kLlamaCpp);
  EXPECT_EQ(t, (Size{128, 96}));
  const RgbImage fitted = fit_image(img, t, ResizeMode::kLlamaCpp);
  ASSERT_EQ(fitted.width, 128);
  EXPECT_EQ(fitted.rgb[0], 0);                        // top padding row
  EXPECT_EQ(fitted.rgb[static_cast<size_t>((48 * 128 + 64) * 3)], 200);  // the image
  const RgbImage stretched = fit_image(img, t, ResizeMode::kHf);
  EXPECT_EQ(stretched.rgb[0], 200);
}

TEST(Image, BadInputIsAnError) {
  auto expect_err = [](const std::vector<uint8_t>& b, const std::string& want) {
    try {
      (void)decode_image(b, "x.img");
      FAIL() << "no error for " << want;
    } catch (const oxi::Error& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  expect_err({}, "empty image");
  expect_err({'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd'}, "not a PNG, JPEG, WebP, GIF or BMP");
  // Decompression bombs: valid PNG headers announcing 20000 x 20000 and 9000 x 9000 pixels (IHDR
  // CRC correct); refused from the header, before any pixel memory (the first by stb_image's own
  // 2^30-byte check, the second by our 8192 x 8192 limit).
  for (uint32_t side : {20000u, 9000u}) {
    std::vector<uint8_t> png = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 'I', 'H', 'D', 'R'};
    for (int rep = 0; rep < 2; ++rep)
      for (int s = 24; s >= 0; s -= 8) png.push_back(static_cast<uint8_t>(side >> s));
    png.insert(png.end(), {8, 2, 0, 0, 0});
    uint32_t crc = 0xffffffffu;
    for (size_t i = 12; i < png.size(); ++i) {
      crc ^= png[i];
      for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
    }
    crc ^= 0xffffffffu;
    for (int s = 24; s >= 0; s -= 8) png.push_back(static_cast<uint8_t>(crc >> s));
    expect_err(png, "larger than the limit");
  }
  // A truncated real image.
  if (have_pil()) {
    const fs::path d = tmp_dir();
    write_raw(d / "t.rgb", test_image(40, 30, 3));
    py(R"(import sys
from PIL import Image
d = sys.argv[1]
Image.frombytes("RGB", (40, 30), open(d + "/t.rgb", "rb").read()).save(d + "/t.png")
Image.frombytes("RGB", (40, 30), open(d + "/t.rgb", "rb").read()).save(d + "/t.webp")
)", {d.string()});
    for (const char* n : {"t.png", "t.webp"}) {
      std::vector<uint8_t> b = read_bytes(d / n);
      b.resize(b.size() / 2);
      expect_err(b, "corrupt");
    }
  }
  EXPECT_THROW((void)load_image("/nonexistent/image.png"), oxi::Error);
}

}  // namespace
