#include "audio/mel.h"

#include <cmath>
#include <complex>

#include "core/error.h"
#include "kernels/thread_pool.h"

namespace oxi::audio {

namespace {

constexpr int64_t kFft = 512, kWin = 320, kHop = 160, kRate = 16000;
constexpr double kPi = 3.14159265358979323846;

// In-place radix-2 FFT of kFft points (double).
void fft(std::complex<double>* a) {
  for (int64_t i = 1, j = 0; i < kFft; ++i) {
    int64_t bit = kFft >> 1;
    for (; j & bit; bit >>= 1) j ^= bit;
    j ^= bit;
    if (i < j) std::swap(a[i], a[j]);
  }
  for (int64_t len = 2; len <= kFft; len <<= 1) {
    const double ang = -2 * kPi / static_cast<double>(len);
    const std::complex<double> wl(std::cos(ang), std::sin(ang));
    for (int64_t i = 0; i < kFft; i += len) {
      std::complex<double> w(1, 0);
      for (int64_t k = 0; k < len / 2; ++k) {
        const std::complex<double> u = a[i + k], v = a[i + k + len / 2] * w;
        a[i + k] = u + v;
        a[i + k + len / 2] = u - v;
        w *= wl;
      }
    }
  }
}

// [mels, kFft/2 + 1] triangular HTK filters over 0 … rate/2, weights in double then float.
std::vector<float> htk_filters(int64_t mels) {
  const int64_t bins = kFft / 2 + 1;
  auto hz2mel = [](double f) { return 2595.0 * std::log10(1.0 + f / 700.0); };
  auto mel2hz = [](double m) { return 700.0 * (std::pow(10.0, m / 2595.0) - 1.0); };
  const double lo = hz2mel(0.0), hi = hz2mel(kRate / 2.0);
  std::vector<double> hz(static_cast<size_t>(mels + 2));
  for (int64_t i = 0; i < mels + 2; ++i) hz[static_cast<size_t>(i)] = mel2hz(lo + (hi - lo) * (double(i) / double(mels + 1)));
  std::vector<float> fb(static_cast<size_t>(mels * bins), 0.0f);
  for (int64_t m = 0; m < mels; ++m) {
    const double l = hz[static_cast<size_t>(m)], c = hz[static_cast<size_t>(m + 1)], r = hz[static_cast<size_t>(m + 2)];
    for (int64_t k = 0; k < bins; ++k) {
      const double f = static_cast<double>(k) * kRate / kFft;
      double w = 0;
      if (f >= l && f <= c) w = (f - l) / std::max(1e-30, c - l);
      else if (f > c && f <= r) w = (r - f) / std::max(1e-30, r - c);
      fb[static_cast<size_t>(m * bins + k)] = static_cast<float>(w);
    }
  }
  return fb;
}

}  // namespace

LogMel gemma4_log_mel(const float* samples, int64_t n, int64_t mels) {
  if (mels < 1 || mels > 1024) throw_error(ErrorCode::kInvalidArgument, "audio: mel bin count out of range");
  const int64_t frames = n >= kWin + 1 - kWin / 2 ? (n + kWin / 2 - (kWin + 1)) / kHop + 1 : 0;
  if (frames < 1) throw_error(ErrorCode::kInvalidArgument, "audio: too short (" + std::to_string(n) + " samples; at least 161 needed)");
  static const std::vector<float> fb128 = htk_filters(128);
  const std::vector<float> fb = mels == 128 ? fb128 : htk_filters(mels);
  std::vector<float> hann(kWin);
  for (int64_t i = 0; i < kWin; ++i) hann[static_cast<size_t>(i)] = static_cast<float>(0.5 - 0.5 * std::cos(2 * kPi * double(i) / kWin));
  const int64_t bins = kFft / 2 + 1;
  LogMel out;
  out.frames = frames;
  out.mels = mels;
  out.data.resize(static_cast<size_t>(frames * mels));
  parallel_for_chunked(frames, 32, [&](int64_t f0, int64_t f1) {
    std::vector<std::complex<double>> a(kFft);
    std::vector<double> mag(static_cast<size_t>(bins));
    for (int64_t f = f0; f < f1; ++f) {
      // Sample j of frame f is input sample f·hop + j − 160 (zero outside the input).
      for (int64_t j = 0; j < kFft; ++j) {
        const int64_t s = f * kHop + j - kWin / 2;
        const double x = j < kWin && s >= 0 && s < n ? double(hann[static_cast<size_t>(j)]) * samples[s] : 0.0;
        a[static_cast<size_t>(j)] = {x, 0.0};
      }
      fft(a.data());
      for (int64_t k = 0; k < bins; ++k) mag[static_cast<size_t>(k)] = std::abs(a[static_cast<size_t>(k)]);
      float* dst = out.data.data() + f * mels;
      for (int64_t m = 0; m < mels; ++m) {
        const float* w = fb.data() + m * bins;
        double sum = 0;
        for (int64_t k = 0; k < bins; ++k) sum += mag[static_cast<size_t>(k)] * w[k];
        dst[m] = static_cast<float>(std::log(std::max(sum, 1e-3)));
      }
    }
  });
  return out;
}

}  // namespace oxi::audio
