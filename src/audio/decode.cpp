#include "audio/decode.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"

#ifdef OXI_HAVE_AUDIO_DECODE
#include <samplerate.h>
#include <sndfile.h>
#endif

namespace oxi::audio {

namespace {

constexpr uint64_t kMaxFileBytes = 256ull << 20;
constexpr double kMaxSeconds = 3600.0;

#ifdef OXI_HAVE_AUDIO_DECODE
// libsndfile's virtual I/O over a byte span.
struct Mem {
  std::span<const uint8_t> b;
  sf_count_t at = 0;
};
sf_count_t mem_len(void* u) { return static_cast<sf_count_t>(static_cast<Mem*>(u)->b.size()); }
sf_count_t mem_seek(sf_count_t off, int whence, void* u) {
  Mem* m = static_cast<Mem*>(u);
  const sf_count_t n = static_cast<sf_count_t>(m->b.size());
  sf_count_t to = whence == SEEK_SET ? off : whence == SEEK_CUR ? m->at + off : n + off;
  m->at = std::clamp<sf_count_t>(to, 0, n);
  return m->at;
}
sf_count_t mem_read(void* dst, sf_count_t count, void* u) {
  Mem* m = static_cast<Mem*>(u);
  const sf_count_t n = std::min<sf_count_t>(count, static_cast<sf_count_t>(m->b.size()) - m->at);
  if (n <= 0) return 0;
  std::memcpy(dst, m->b.data() + m->at, static_cast<size_t>(n));
  m->at += n;
  return n;
}
sf_count_t mem_write(const void*, sf_count_t, void*) { return 0; }
sf_count_t mem_tell(void* u) { return static_cast<Mem*>(u)->at; }
#endif

}  // namespace

bool decode_supported() {
#ifdef OXI_HAVE_AUDIO_DECODE
  return true;
#else
  return false;
#endif
}

std::vector<float> decode_audio(std::span<const uint8_t> bytes, const std::string& what, int rate) {
#ifndef OXI_HAVE_AUDIO_DECODE
  (void)bytes;
  (void)rate;
  throw_error(ErrorCode::kUnsupported, what + ": audio support not built (oxinfer was built without libsndfile / libsamplerate)");
#else
  if (bytes.empty()) throw_error(ErrorCode::kInvalidArgument, what + ": empty audio file");
  if (bytes.size() > kMaxFileBytes) throw_error(ErrorCode::kInvalidArgument, what + ": audio file larger than 256 MiB");
  if (rate < 1000 || rate > 384000) throw_error(ErrorCode::kInvalidArgument, "audio: sample rate out of range");
  Mem mem{bytes, 0};
  SF_VIRTUAL_IO io{mem_len, mem_seek, mem_read, mem_write, mem_tell};
  SF_INFO info{};
  SNDFILE* f = sf_open_virtual(&io, SFM_READ, &info, &mem);
  if (!f) {
    const std::string why = sf_strerror(nullptr);
    throw_error(ErrorCode::kInvalidArgument, what + ": not a WAV, FLAC, Ogg or MP3 audio file, or corrupt (" + why + ")");
  }
  struct Closer {
    SNDFILE* f;
    ~Closer() { sf_close(f); }
  } closer{f};
  if (info.channels < 1 || info.channels > 64 || info.samplerate < 1 || info.samplerate > 768000)
    throw_error(ErrorCode::kInvalidArgument, what + ": unsupported channel count or sample rate");
  // MP3 and some containers report no frame count up front: read in blocks, bounded by the limit.
  const int64_t max_frames = static_cast<int64_t>(kMaxSeconds * info.samplerate);
  const int ch = info.channels;
  std::vector<float> mono;
  std::vector<float> block(static_cast<size_t>(4096 * ch));
  for (;;) {
    const sf_count_t got = sf_readf_float(f, block.data(), 4096);
    if (got <= 0) break;
    if (static_cast<int64_t>(mono.size()) + got > max_frames)
      throw_error(ErrorCode::kInvalidArgument, what + ": audio longer than 1 hour");
    for (sf_count_t i = 0; i < got; ++i) {
      float s = 0;
      for (int c = 0; c < ch; ++c) s += block[static_cast<size_t>(i * ch + c)];
      mono.push_back(s / static_cast<float>(ch));
    }
  }
  if (sf_error(f) != SF_ERR_NO_ERROR)
    throw_error(ErrorCode::kInvalidArgument, what + ": corrupt audio data (" + std::string(sf_strerror(f)) + ")");
  if (mono.empty()) throw_error(ErrorCode::kInvalidArgument, what + ": the audio file has no samples");
  if (info.samplerate == rate) return mono;
  const double ratio = static_cast<double>(rate) / info.samplerate;
  std::vector<float> out(static_cast<size_t>(static_cast<double>(mono.size()) * ratio) + 16);
  SRC_DATA d{};
  d.data_in = mono.data();
  d.input_frames = static_cast<long>(mono.size());
  d.data_out = out.data();
  d.output_frames = static_cast<long>(out.size());
  d.src_ratio = ratio;
  if (int e = src_simple(&d, SRC_SINC_MEDIUM_QUALITY, 1))
    throw_error(ErrorCode::kInternal, what + ": resampling failed (" + std::string(src_strerror(e)) + ")");
  out.resize(static_cast<size_t>(d.output_frames_gen));
  if (out.empty()) throw_error(ErrorCode::kInvalidArgument, what + ": the audio is too short to resample");
  return out;
#endif
}

std::vector<float> load_audio(const std::string& path, int rate) {
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw_error(ErrorCode::kInvalidArgument, path + ": cannot read audio file (" + ec.message() + ")");
  if (size > kMaxFileBytes) throw_error(ErrorCode::kInvalidArgument, path + ": audio file larger than 256 MiB");
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  if (!in || (size && !in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(size))))
    throw_error(ErrorCode::kInvalidArgument, path + ": cannot read audio file");
  return decode_audio(bytes, path, rate);
}

void write_audio(const std::string& path, const std::vector<float>& samples, int rate, const std::string& format) {
#ifndef OXI_HAVE_AUDIO_DECODE
  (void)samples;
  (void)rate;
  (void)format;
  throw_error(ErrorCode::kUnsupported, path + ": audio support not built (oxinfer was built without libsndfile / libsamplerate)");
#else
  SF_INFO info{};
  info.samplerate = rate;
  info.channels = 1;
  if (format == "wav") info.format = SF_FORMAT_WAV | SF_FORMAT_PCM_16;
  else if (format == "flac") info.format = SF_FORMAT_FLAC | SF_FORMAT_PCM_16;
  else if (format == "ogg") info.format = SF_FORMAT_OGG | SF_FORMAT_VORBIS;
  else if (format == "mp3") info.format = SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III;
  else throw_error(ErrorCode::kInvalidArgument, "audio: unknown format '" + format + "' (wav, flac, ogg, mp3)");
  SNDFILE* f = sf_open(path.c_str(), SFM_WRITE, &info);
  if (!f) throw_error(ErrorCode::kUnsupported, path + ": cannot write " + format + " (" + std::string(sf_strerror(nullptr)) + ")");
  const sf_count_t n = sf_writef_float(f, samples.data(), static_cast<sf_count_t>(samples.size()));
  const int closed = sf_close(f);
  if (n != static_cast<sf_count_t>(samples.size()) || closed != 0) throw_error(ErrorCode::kIo, path + ": writing audio failed");
#endif
}

}  // namespace oxi::audio
