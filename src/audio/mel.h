// Gemma 4's log-mel front end (feature_extraction_gemma4 as llama.cpp's mtmd computes it for the
// gemma4a projector; facts in docs/multimodal.md "Gemma 4 audio"): 16 kHz samples, 160 zeros
// prepended (semicausal padding, half the 320-sample frame), frames every 160 samples, each the
// first 320 samples × a periodic Hann window of 320, zero-padded to a 512-point FFT; magnitudes
// |X_k| (k = 0 … 256) through 128 triangular HTK-mel filters over 0 … 8000 Hz (no area
// normalisation), floor 1e-3, natural log. Frame count: ⌊(n + 160 − 321) / 160⌋ + 1.
#pragma once

#include <cstdint>
#include <vector>

namespace oxi::audio {

struct LogMel {
  int64_t frames = 0, mels = 0;
  std::vector<float> data;  // [frames, mels]
};

// oxi::Error kInvalidArgument for fewer than 161 samples (no whole frame). Frames on the kernels'
// thread pool.
LogMel gemma4_log_mel(const float* samples, int64_t n, int64_t mels = 128);

}  // namespace oxi::audio
