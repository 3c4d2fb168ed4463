// Images in: decoding (PNG, JPEG, GIF's first frame, BMP, … via stb_image; WebP via libwebp) to
// 8-bit RGB, and the resize arithmetic of the image processors — HF's Qwen2-VL `smart_resize` and
// Pillow's BICUBIC filter, with llama.cpp's mtmd variant beside it (docs/multimodal.md says where
// they differ and why both exist).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace oxi::vision {

// 8-bit RGB, row-major, 3 bytes per pixel.
struct RgbImage {
  int64_t width = 0;
  int64_t height = 0;
  std::vector<uint8_t> rgb;  // [height, width, 3]
};

// Largest image (in pixels, read from the header before any pixel is decoded) decode_image accepts:
// 8192 × 8192. A bigger header (a decompression bomb: a 20000 × 20000 PNG of a few KiB) is refused.
inline constexpr int64_t kMaxDecodePixels = 8192ll * 8192ll;
// Largest image file load_image reads.
inline constexpr uint64_t kMaxImageFileBytes = 256ull << 20;

// Decodes an image file's bytes. `what` names the input in errors. oxi::Error(kInvalidArgument)
// for an empty, corrupt or unsupported input ("X: not a PNG, JPEG, WebP, GIF or BMP image") and
// for dimensions above max_pixels (checked from the header first). Alpha is dropped (as PIL's
// convert("RGB") does: no compositing).
RgbImage decode_image(std::span<const uint8_t> bytes, const std::string& what, int64_t max_pixels = kMaxDecodePixels);
// Reads and decodes a file (kIo when it cannot be read or is larger than kMaxImageFileBytes).
RgbImage load_image(const std::string& path, int64_t max_pixels = kMaxDecodePixels);

struct Size {
  int64_t width = 0;
  int64_t height = 0;
  bool operator==(const Size&) const = default;
};

// Which arithmetic sizes and resizes an image.
//  kHf:       HF's Qwen2-VL image processor: smart_resize in double with Python's round (half to
//             even), then the image stretched to exactly that size (Pillow BICUBIC).
//  kLlamaCpp: llama.cpp mtmd's: the same formula in float with std::round (half away from zero),
//             then the image scaled to fit inside that size keeping its aspect ratio (ceil) and
//             centred on black padding.
enum class ResizeMode { kHf, kLlamaCpp };

// Qwen2-VL `smart_resize`: both sides multiples of `factor` (patch × merge = 32), the area within
// [min_pixels, max_pixels], the aspect ratio kept as near as the rounding allows.
// kInvalidArgument for an empty image or (HF) an aspect ratio above 200.
Size smart_resize(Size in, int64_t factor, int64_t min_pixels, int64_t max_pixels, ResizeMode mode = ResizeMode::kHf);

// Pillow's Image.resize(size, BICUBIC) on 8-bit RGB: separable convolution (horizontal pass, then
// vertical), cubic kernel a = −0.5 widened by the scale when shrinking (antialias), weights in
// 22-bit fixed point, each pass rounded and clamped to 8 bits. Returns a copy when the size is equal.
RgbImage resize_bicubic(const RgbImage& in, Size out);

// The image fitted to `target` as `mode` says (see ResizeMode).
RgbImage fit_image(const RgbImage& in, Size target, ResizeMode mode);

// How an image is brought to the tower's grid. kHf (default): the HF processor's arithmetic and
// its pixel limits. kLlamaCpp: llama.cpp mtmd's (its own limits: 8 … 4096 merged tokens).
struct PrepOptions {
  ResizeMode mode = ResizeMode::kHf;
};

struct ImageEmbedding {
  int64_t nx = 0, ny = 0;    // merged grid (tokens per row, rows); n_tokens = nx · ny
  int64_t width = 0, height = 0;  // the resized image the tower saw
  std::vector<float> rows;   // [nx · ny, out]
  int64_t n_tokens() const { return nx * ny; }
};

}  // namespace oxi::vision
