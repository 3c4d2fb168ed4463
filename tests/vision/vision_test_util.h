// Helpers the vision tower tests share.
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include "convert/convert.h"
#include "format/hf.h"
#include "vision/image.h"

namespace visiontest {

inline oxi::vision::RgbImage noise_image(int64_t w, int64_t hgt, uint32_t seed) {
  std::mt19937 rng(seed);
  oxi::vision::RgbImage img{w, hgt, std::vector<uint8_t>(static_cast<size_t>(w * hgt * 3))};
  for (auto& b : img.rgb) b = static_cast<uint8_t>(rng() & 0xff);
  return img;
}

// The checkpoint's tower written by our converter as an f32 mmproj (dir/mmproj.gguf); its path.
inline std::string convert_mmproj_f32(const oxi::HfCheckpoint& hf, const std::string& dir) {
  const std::string mm = dir + "/mmproj.gguf";
  oxi::ConvertOptions opt;
  opt.out_type = oxi::DType::F32;
  oxi::convert_hf_to_mmproj(hf, mm, opt);
  return mm;
}

}  // namespace visiontest
