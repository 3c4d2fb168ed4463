// Image decoding and resizing (see image.h). The codecs are Debian's: stb_image (libstb-dev) and
// libwebp; nothing here parses an image format by hand.
#include "vision/image.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>

#include <stb_image.h>
#include <webp/decode.h>

#include "core/byte_source.h"
#include "core/error.h"

namespace oxi::vision {

namespace {

[[noreturn]] void bad(const std::string& what, const std::string& msg) {
  throw_error(ErrorCode::kInvalidArgument, what + ": " + msg);
}

void check_dims(const std::string& what, int64_t w, int64_t h, int64_t max_pixels) {
  if (w <= 0 || h <= 0) bad(what, "image has no pixels");
  if (w > max_pixels / h)
    bad(what, "image of " + std::to_string(w) + "x" + std::to_string(h) + " pixels is larger than the limit of " +
                  std::to_string(max_pixels) + " pixels");
}

bool is_webp(std::span<const uint8_t> b) {
  return b.size() >= 12 && std::memcmp(b.data(), "RIFF", 4) == 0 && std::memcmp(b.data() + 8, "WEBP", 4) == 0;
}

}  // namespace

RgbImage decode_image(std::span<const uint8_t> bytes, const std::string& what, int64_t max_pixels) {
  if (bytes.empty()) bad(what, "empty image file");
  if (bytes.size() > static_cast<size_t>(INT32_MAX)) bad(what, "image file too large");
  RgbImage img;
  if (is_webp(bytes)) {
    int w = 0, h = 0;
    if (!WebPGetInfo(bytes.data(), bytes.size(), &w, &h)) bad(what, "corrupt WebP image");
    check_dims(what, w, h, max_pixels);
    img.width = w;
    img.height = h;
    img.rgb.resize(static_cast<size_t>(w) * static_cast<size_t>(h) * 3);
    if (!WebPDecodeRGBInto(bytes.data(), bytes.size(), img.rgb.data(), img.rgb.size(), w * 3))
      bad(what, "corrupt WebP image");
    return img;
  }
  const int len = static_cast<int>(bytes.size());
  int w = 0, h = 0, comp = 0;
  // The header alone first: the size is checked before any pixel memory is allocated.
  if (!stbi_info_from_memory(bytes.data(), len, &w, &h, &comp)) {
    const char* why = stbi_failure_reason();
    // stb_image refuses a PNG whose w·h·channels passes 2^30 bytes, then reports only that no
    // format matched; name the real reason from the IHDR size fields (bytes 16..23).
    static const uint8_t kPngSig[8] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};
    if (bytes.size() >= 24 && std::memcmp(bytes.data(), kPngSig, 8) == 0) {
      auto be32 = [&](size_t o) {
        return (int64_t{bytes[o]} << 24) | (int64_t{bytes[o + 1]} << 16) | (int64_t{bytes[o + 2]} << 8) | int64_t{bytes[o + 3]};
      };
      if (be32(16) > 0 && be32(20) > 0) check_dims(what, be32(16), be32(20), max_pixels);
    }
    bad(what, std::string("not a PNG, JPEG, WebP, GIF or BMP image, or a corrupt one (") + (why ? why : "unknown") + ")");
  }
  check_dims(what, w, h, max_pixels);
  int w2 = 0, h2 = 0;
  std::unique_ptr<stbi_uc, void (*)(void*)> px(stbi_load_from_memory(bytes.data(), len, &w2, &h2, &comp, 3),
                                               stbi_image_free);
  if (!px) {
    const char* why = stbi_failure_reason();
    bad(what, std::string("corrupt image (") + (why ? why : "decode failed") + ")");
  }
  if (w2 != w || h2 != h) bad(what, "image size differs between header and data");
  img.width = w;
  img.height = h;
  img.rgb.assign(px.get(), px.get() + static_cast<size_t>(w) * static_cast<size_t>(h) * 3);
  return img;
}

RgbImage load_image(const std::string& path, int64_t max_pixels) {
  ByteSourcePtr src = open_file_source(path);
  if (src->size() > kMaxImageFileBytes)
    throw_error(ErrorCode::kInvalidArgument, path + ": image file larger than " + std::to_string(kMaxImageFileBytes >> 20) + " MiB");
  return decode_image(std::span<const uint8_t>(src->data(), src->size()), path, max_pixels);
}

Size smart_resize(Size in, int64_t factor, int64_t min_pixels, int64_t max_pixels, ResizeMode mode) {
  if (in.width <= 0 || in.height <= 0) throw_error(ErrorCode::kInvalidArgument, "smart_resize: empty image");
  if (factor <= 0) throw_error(ErrorCode::kInvalidArgument, "smart_resize: factor must be positive");
  const int64_t w = in.width, h = in.height;
  Size out;
  if (mode == ResizeMode::kHf) {
    if (static_cast<double>(std::max(w, h)) / static_cast<double>(std::min(w, h)) > 200.0)
      throw_error(ErrorCode::kInvalidArgument, "image aspect ratio " + std::to_string(w) + ":" + std::to_string(h) +
                                                   " is above 200 (the Qwen2-VL processor's limit)");
    const double f = static_cast<double>(factor);
    // Python's round(): half to even (std::nearbyint under the default rounding mode).
    auto round_f = [f](double x) { return static_cast<int64_t>(std::nearbyint(x / f)) * static_cast<int64_t>(f); };
    int64_t hb = round_f(static_cast<double>(h)), wb = round_f(static_cast<double>(w));
    if (hb * wb > max_pixels) {
      const double beta = std::sqrt(static_cast<double>(h) * static_cast<double>(w) / static_cast<double>(max_pixels));
      hb = std::max(factor, static_cast<int64_t>(std::floor(static_cast<double>(h) / beta / f)) * factor);
      wb = std::max(factor, static_cast<int64_t>(std::floor(static_cast<double>(w) / beta / f)) * factor);
    } else if (hb * wb < min_pixels) {
      const double beta = std::sqrt(static_cast<double>(min_pixels) / (static_cast<double>(h) * static_cast<double>(w)));
      hb = static_cast<int64_t>(std::ceil(static_cast<double>(h) * beta / f)) * factor;
      wb = static_cast<int64_t>(std::ceil(static_cast<double>(w) * beta / f)) * factor;
    }
    out = {wb, hb};
  } else {
    // llama.cpp's variant: float arithmetic, std::round, at least one factor per side first.
    const float f = static_cast<float>(factor);
    auto round_f = [f, factor](float x) { return static_cast<int64_t>(std::round(x / f)) * factor; };
    auto ceil_f = [f, factor](float x) { return static_cast<int64_t>(std::ceil(x / f)) * factor; };
    auto floor_f = [f, factor](float x) { return static_cast<int64_t>(std::floor(x / f)) * factor; };
    int64_t wb = std::max(factor, round_f(static_cast<float>(w))), hb = std::max(factor, round_f(static_cast<float>(h)));
    if (max_pixels > 0 && hb * wb > max_pixels) {
      const float beta = std::sqrt(static_cast<float>(h) * static_cast<float>(w) / static_cast<float>(max_pixels));
      hb = std::max(factor, floor_f(static_cast<float>(h) / beta));
      wb = std::max(factor, floor_f(static_cast<float>(w) / beta));
    } else if (min_pixels > 0 && hb * wb < min_pixels) {
      const float beta = std::sqrt(static_cast<float>(min_pixels) / (static_cast<float>(h) * static_cast<float>(w)));
      hb = ceil_f(static_cast<float>(h) * beta);
      wb = ceil_f(static_cast<float>(w) * beta);
    }
    out = {wb, hb};
  }
  return out;
}

namespace {

constexpr int kPrecisionBits = 32 - 8 - 2;

double bicubic(double x) {
  constexpr double a = -0.5;
  x = std::fabs(x);
  if (x < 1.0) return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
  if (x < 2.0) return (((x - 5.0) * x + 8.0) * x - 4.0) * a;
  return 0.0;
}

// Per output pixel: the first contributing input pixel, how many, and their fixed-point weights.
struct Taps {
  int64_t ksize = 0;
  std::vector<int64_t> first, count;
  std::vector<int32_t> w;  // [out, ksize]
};

Taps taps(int64_t in, int64_t out) {
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  const double fscale = std::max(scale, 1.0);
  const double support = 2.0 * fscale;
  Taps t;
  t.ksize = static_cast<int64_t>(std::ceil(support)) * 2 + 1;
  t.first.resize(static_cast<size_t>(out));
  t.count.resize(static_cast<size_t>(out));
  t.w.assign(static_cast<size_t>(out * t.ksize), 0);
  std::vector<double> k(static_cast<size_t>(t.ksize));
  for (int64_t o = 0; o < out; ++o) {
    const double center = (static_cast<double>(o) + 0.5) * scale;
    int64_t lo = static_cast<int64_t>(center - support + 0.5);
    int64_t hi = static_cast<int64_t>(center + support + 0.5);
    lo = std::max<int64_t>(lo, 0);
    hi = std::min(hi, in);
    const int64_t n = hi - lo;
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) {
      k[static_cast<size_t>(j)] = bicubic((static_cast<double>(j + lo) - center + 0.5) / fscale);
      sum += k[static_cast<size_t>(j)];
    }
    for (int64_t j = 0; j < n; ++j) {
      const double v = sum != 0.0 ? k[static_cast<size_t>(j)] / sum : k[static_cast<size_t>(j)];
      const double fx = v * static_cast<double>(1 << kPrecisionBits);
      t.w[static_cast<size_t>(o * t.ksize + j)] = static_cast<int32_t>(v < 0 ? fx - 0.5 : fx + 0.5);
    }
    t.first[static_cast<size_t>(o)] = lo;
    t.count[static_cast<size_t>(o)] = n;
  }
  return t;
}

uint8_t clip8(int32_t acc) {
  const int32_t v = acc >> kPrecisionBits;
  return static_cast<uint8_t>(std::clamp(v, 0, 255));
}

}  // namespace

RgbImage resize_bicubic(const RgbImage& in, Size out) {
  if (out.width <= 0 || out.height <= 0) throw_error(ErrorCode::kInvalidArgument, "resize: empty target size");
  if (in.width == out.width && in.height == out.height) return in;
  // Horizontal pass: [in.h, out.w].
  RgbImage mid;
  mid.width = out.width;
  mid.height = in.height;
  if (in.width == out.width) {
    mid = in;
  } else {
    const Taps t = taps(in.width, out.width);
    mid.rgb.resize(static_cast<size_t>(mid.width * mid.height * 3));
    for (int64_t y = 0; y < in.height; ++y) {
      const uint8_t* src = in.rgb.data() + y * in.width * 3;
      uint8_t* dst = mid.rgb.data() + y * mid.width * 3;
      for (int64_t x = 0; x < out.width; ++x) {
        const int32_t* k = t.w.data() + x * t.ksize;
        const uint8_t* p = src + t.first[static_cast<size_t>(x)] * 3;
        int32_t a0 = 1 << (kPrecisionBits - 1), a1 = a0, a2 = a0;
        for (int64_t j = 0; j < t.count[static_cast<size_t>(x)]; ++j, p += 3) {
          a0 += p[0] * k[j];
          a1 += p[1] * k[j];
          a2 += p[2] * k[j];
        }
        dst[x * 3] = clip8(a0);
        dst[x * 3 + 1] = clip8(a1);
        dst[x * 3 + 2] = clip8(a2);
      }
    }
  }
  if (mid.height == out.height) return mid;
  // Vertical pass: [out.h, out.w].
  RgbImage res;
  res.width = out.width;
  res.height = out.height;
  res.rgb.resize(static_cast<size_t>(res.width * res.height * 3));
  const Taps t = taps(mid.height, out.height);
  const int64_t row = mid.width * 3;
  std::vector<int32_t> acc(static_cast<size_t>(row));
  for (int64_t y = 0; y < out.height; ++y) {
    std::fill(acc.begin(), acc.end(), 1 << (kPrecisionBits - 1));
    const int32_t* k = t.w.data() + y * t.ksize;
    for (int64_t j = 0; j < t.count[static_cast<size_t>(y)]; ++j) {
      const uint8_t* src = mid.rgb.data() + (t.first[static_cast<size_t>(y)] + j) * row;
      for (int64_t i = 0; i < row; ++i) acc[static_cast<size_t>(i)] += src[i] * k[j];
    }
    uint8_t* dst = res.rgb.data() + y * row;
    for (int64_t i = 0; i < row; ++i) dst[i] = clip8(acc[static_cast<size_t>(i)]);
  }
  return res;
}

RgbImage fit_image(const RgbImage& in, Size target, ResizeMode mode) {
  if (mode == ResizeMode::kHf || (in.width == target.width && in.height == target.height))
    return resize_bicubic(in, target);
  // llama.cpp: scale to fit (ceil), centre on black.
  const float sw = static_cast<float>(target.width) / static_cast<float>(in.width);
  const float sh = static_cast<float>(target.height) / static_cast<float>(in.height);
  const float s = std::min(sw, sh);
  const int64_t nw = std::min(static_cast<int64_t>(std::ceil(static_cast<float>(in.width) * s)), target.width);
  const int64_t nh = std::min(static_cast<int64_t>(std::ceil(static_cast<float>(in.height) * s)), target.height);
  const RgbImage r = resize_bicubic(in, {nw, nh});
  RgbImage out;
  out.width = target.width;
  out.height = target.height;
  out.rgb.assign(static_cast<size_t>(out.width * out.height * 3), 0);
  const int64_t ox = (target.width - nw) / 2, oy = (target.height - nh) / 2;
  for (int64_t y = 0; y < nh; ++y)
    std::memcpy(out.rgb.data() + ((y + oy) * out.width + ox) * 3, r.rgb.data() + y * nw * 3, static_cast<size_t>(nw * 3));
  return out;
}

}  // namespace oxi::vision
