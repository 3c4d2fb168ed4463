// Audio files → mono float samples at a given rate (Gemma 4's tower wants 16 kHz). Decoding is
// libsndfile's (WAV, FLAC, Ogg Vorbis/Opus, MP3 and the other formats of Debian's libsndfile
// 1.2), channels are averaged to mono (as llama.cpp's miniaudio decoder downmixes), and other rates
// are converted with libsamplerate (SRC_SINC_MEDIUM_QUALITY). Samples are libsndfile's normalised
// floats (16-bit PCM: x / 32768, what miniaudio gives too).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace oxi::audio {

// false when oxinfer was built without libsndfile / libsamplerate.
bool decode_supported();

// Limits: files above 256 MiB and audio longer than 1 hour are refused before decoding.
// oxi::Error naming `what` (the file): kUnsupported "audio support not built" without the
// libraries; kInvalidArgument for an empty file, data libsndfile does not recognise ("not a WAV,
// FLAC, Ogg or MP3 audio file"), corrupt data, no samples, or too long.
std::vector<float> decode_audio(std::span<const uint8_t> bytes, const std::string& what, int rate);
std::vector<float> load_audio(const std::string& path, int rate);

// Writes mono samples as `format` ("wav" 16-bit PCM, "flac" 16-bit, "ogg" Vorbis, "mp3") with
// libsndfile: how the tests make the compressed files they decode (no encoder tool is needed on
// the machine). oxi::Error as decode_audio's (kUnsupported without the libraries).
void write_audio(const std::string& path, const std::vector<float>& samples, int rate, const std::string& format);

}  // namespace oxi::audio
