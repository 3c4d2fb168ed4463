// Audio input: decoding (libsndfile / libsamplerate), Gemma 4's log-mel front end against its
// documented arithmetic (frame count, HTK mel band of a pure tone, the silence floor), bad input.
// The tower's embeddings are checked against llama.cpp's mtmd by tests/e2e/gemma4a_oracle.test.sh
// (through AudioDev.Embed below).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "audio/decode.h"
#include "audio/gemma4a.h"
#include "audio/mel.h"
#include "core/error.h"
#include "format/hf.h"
#include "vision/media_prompt.h"

namespace {

using namespace oxi::audio;

// A 16-bit PCM WAV (RIFF header written here: the layout is the format's, fixed).
std::vector<uint8_t> wav16(const std::vector<int16_t>& frames, int channels, int rate) {
  std::vector<uint8_t> b;
  auto u32 = [&](uint32_t v) { for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i))); };
  auto u16 = [&](uint16_t v) { b.push_back(static_cast<uint8_t>(v)); b.push_back(static_cast<uint8_t>(v >> 8)); };
  auto tag = [&](const char* t) { for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(t[i])); };
  const uint32_t data = static_cast<uint32_t>(frames.size() * 2);
  tag("RIFF"); u32(36 + data); tag("WAVE");
  tag("fmt "); u32(16); u16(1); u16(static_cast<uint16_t>(channels)); u32(static_cast<uint32_t>(rate));
  u32(static_cast<uint32_t>(rate * channels * 2)); u16(static_cast<uint16_t>(channels * 2)); u16(16);
  tag("data"); u32(data);
  for (int16_t s : frames) u16(static_cast<uint16_t>(s));
  return b;
}

TEST(AudioDecode, WavMonoStereoAndRate) {
  if (!decode_supported()) GTEST_SKIP() << "built without libsndfile / libsamplerate";
  const std::vector<int16_t> mono{0, 16384, -32768, 32767, 100};
  const std::vector<float> x = decode_audio(wav16(mono, 1, 16000), "t.wav", 16000);
  ASSERT_EQ(x.size(), mono.size());
  for (size_t i = 0; i < mono.size(); ++i) EXPECT_FLOAT_EQ(x[i], mono[i] / 32768.0f);
  // Stereo: channels averaged.
  const std::vector<float> s = decode_audio(wav16({16384, 0, -16384, 16384}, 2, 16000), "s.wav", 16000);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_FLOAT_EQ(s[0], 0.25f);
  EXPECT_FLOAT_EQ(s[1], 0.0f);
  // 8 kHz → 16 kHz: twice the samples, a 500 Hz tone stays a 500 Hz tone.
  std::vector<int16_t> tone(8000);
  for (size_t i = 0; i < tone.size(); ++i) tone[i] = static_cast<int16_t>(10000 * std::sin(2 * M_PI * 500 * double(i) / 8000));
  const std::vector<float> up = decode_audio(wav16(tone, 1, 8000), "u.wav", 16000);
  EXPECT_NEAR(static_cast<double>(up.size()), 16000.0, 2.0);
  double err = 0;
  for (size_t i = 2000; i < 14000; ++i) err = std::max(err, std::abs(up[i] - 10000 / 32768.0 * std::sin(2 * M_PI * 500 * double(i) / 16000)));
  EXPECT_LT(err, 0.01);
}

TEST(AudioDecode, BadInputIsAClearError) {
  auto msg = [](const std::vector<uint8_t>& b) {
    try {
      decode_audio(b, "bad.wav", 16000);
    } catch (const oxi::Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  if (!decode_supported()) {
    EXPECT_NE(msg({1, 2, 3}).find("audio support not built"), std::string::npos);
    return;
  }
  EXPECT_NE(msg({}).find("empty audio file"), std::string::npos);
  const std::vector<uint8_t> junk(1000, 0x5a);
  EXPECT_NE(msg(junk).find("not a WAV, FLAC, Ogg or MP3"), std::string::npos);
  std::vector<uint8_t> cut = wav16(std::vector<int16_t>(100, 1), 1, 16000);
  cut.resize(30);  // a header cut short
  EXPECT_NE(msg(cut).find("bad.wav"), std::string::npos);
  EXPECT_NE(msg(wav16({}, 1, 16000)).find("bad.wav"), std::string::npos);  // a WAV with no samples
  EXPECT_THROW(load_audio("/nonexistent/x.wav", 16000), oxi::Error);
}

// FLAC, Ogg Vorbis and MP3 written by libsndfile's encoders decode back: FLAC exactly (16-bit),
// the lossy ones close to the tone (MP3 aligned by its decoder delay, as found by correlation).
TEST(AudioDecode, FlacOggMp3) {
  if (!decode_supported()) GTEST_SKIP() << "built without libsndfile / libsamplerate";
  std::vector<float> x(16000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::round(9000 * std::sin(2 * M_PI * 440 * double(i) / 16000)) / 32768.0f;
  const std::string dir = ::testing::TempDir();
  for (const char* fmt : {"flac", "ogg", "mp3"}) {
    const std::string path = dir + "/oxi_audio_test." + fmt;
    write_audio(path, x, 16000, fmt);
    const std::vector<float> y = load_audio(path, 16000);
    ASSERT_GE(y.size(), x.size() - 1200) << fmt;
    if (std::string(fmt) == "flac") {
      ASSERT_EQ(y.size(), x.size());
      for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i]) << i;
      continue;
    }
    double best = 0;
    for (int lag = 0; lag < 1200; ++lag) {
      double xy = 0, yy = 0, xx = 0;
      for (size_t i = 2000; i + lag < y.size() && i < 14000; ++i) {
        xy += x[i] * y[i + lag];
        yy += y[i + lag] * y[i + lag];
        xx += x[i] * x[i];
      }
      if (yy > 0) best = std::max(best, xy / std::sqrt(xx * yy));
    }
    EXPECT_GT(best, 0.99) << fmt;
  }
  std::remove((dir + "/oxi_audio_test.flac").c_str());
  std::remove((dir + "/oxi_audio_test.ogg").c_str());
  std::remove((dir + "/oxi_audio_test.mp3").c_str());
}

TEST(Gemma4Mel, FramesToneAndFloor) {
  // Frame count ⌊(n + 160 − 321) / 160⌋ + 1; tokens after two stride-2 convolutions.
  std::vector<float> x(16000, 0.0f);
  LogMel m = gemma4_log_mel(x.data(), static_cast<int64_t>(x.size()));
  EXPECT_EQ(m.frames, (16000 + 160 - 321) / 160 + 1);
  EXPECT_EQ(m.mels, 128);
  EXPECT_EQ(Gemma4ATower::tokens_for_frames(m.frames), 25);  // 99 → 50 → 25
  for (float v : m.data) EXPECT_FLOAT_EQ(v, std::log(1e-3f));  // silence: the floor
  EXPECT_THROW(gemma4_log_mel(x.data(), 160), oxi::Error);
  // A 1 kHz tone: the strongest filter is the one whose HTK-mel centre is nearest 1 kHz
  // (centres uniform in mel = 2595·log10(1 + f/700) over 0 … 8000 Hz, 130 edges).
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.5f * static_cast<float>(std::sin(2 * M_PI * 1000 * double(i) / 16000));
  m = gemma4_log_mel(x.data(), static_cast<int64_t>(x.size()));
  const float* fr = m.data.data() + 50 * 128;
  int best = 0;
  for (int j = 1; j < 128; ++j) if (fr[j] > fr[best]) best = j;
  const double mel_hi = 2595 * std::log10(1 + 8000.0 / 700), mel_1k = 2595 * std::log10(1 + 1000.0 / 700);
  const int expect = static_cast<int>(std::lround(mel_1k / mel_hi * 129)) - 1;  // centre of filter j is edge j + 1
  EXPECT_NEAR(best, expect, 1);
  // Magnitude scale: the peak filter holds roughly the tone's windowed magnitude A·Σw/2 = 0.5·160/2.
  EXPECT_GT(fr[best], std::log(5.0f));
  EXPECT_LT(fr[best], std::log(60.0f));
}

TEST(Gemma4Audio, ChunkRowsMatchTheFrontEnd) {
  // chunk_rows (used to place and bound a clip before encoding) against the frames the front end
  // really makes of each 30-second chunk (480000 samples, as llama.cpp's mtmd splits).
  for (int64_t n : {161ll, 16000ll, 32000ll, 480000ll, 496000ll, 960161ll}) {
    const std::vector<int64_t> rows = Gemma4ATower::chunk_rows(n);
    ASSERT_EQ(rows.size(), static_cast<size_t>((n + 479999) / 480000)) << n;
    std::vector<float> x(static_cast<size_t>(std::min<int64_t>(n, 480000)), 0.0f);
    for (size_t c = 0; c < rows.size(); ++c) {
      const int64_t len = std::min<int64_t>(480000, n - static_cast<int64_t>(c) * 480000);
      EXPECT_EQ(rows[c], Gemma4ATower::tokens_for_frames(gemma4_log_mel(x.data(), len).frames)) << n << " chunk " << c;
    }
  }
  EXPECT_EQ(Gemma4ATower::chunk_rows(32000), std::vector<int64_t>{50});                   // 2 s: 25 rows a second
  EXPECT_EQ(Gemma4ATower::chunk_rows(496000), (std::vector<int64_t>{750, 25}));          // 31 s: two chunks
  EXPECT_THROW(Gemma4ATower::chunk_rows(160), oxi::Error);                                // no whole frame
  EXPECT_THROW(Gemma4ATower::chunk_rows(480100), oxi::Error);                             // a 100-sample last chunk
  EXPECT_THROW(Gemma4ATower::chunk_rows(0), oxi::Error);
}

TEST(Gemma4Audio, AddAudioPlacesChunksBetweenTheMarkers) {
  // <|audio> (id 7), chunks of 3 and 2 rows (negative ids), <audio|> (id 8), at plain positions
  // continuing from the text's, even in an entry list that uses mRoPE for images.
  oxi::vision::MediaEntries ent;
  const int32_t text[2] = {1, 2}, row[2] = {-5, -6};
  ent.add_text(text);
  const int64_t chunks[2] = {3, 2};
  const std::vector<size_t> first = ent.add_audio(7, chunks, row, 8);
  EXPECT_EQ(first, (std::vector<size_t>{3, 6}));
  EXPECT_EQ(ent.tok, (std::vector<int32_t>{1, 2, 7, -5, -6, -5, -5, -6, 8}));
  EXPECT_EQ(ent.pos, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(ent.pos3[3 * 4 + 1], 4);
  EXPECT_EQ(ent.next, 9);
  EXPECT_TRUE(ent.mrope);  // left as it was
}

// oxi_audio_tests --gtest_filter=AudioDev.Convert writes OXI_AUD_IN (any readable clip, kept at
// its samples: 16 kHz expected) as OXI_AUD_OUT in OXI_AUD_FORMAT (the e2e test's FLAC / MP3 clips).
TEST(AudioDev, Convert) {
  const char* in = std::getenv("OXI_AUD_IN");
  const char* out = std::getenv("OXI_AUD_OUT");
  const char* fmt = std::getenv("OXI_AUD_FORMAT");
  if (!in || !out || !fmt) GTEST_SKIP() << "OXI_AUD_IN / OXI_AUD_OUT / OXI_AUD_FORMAT not set";
  write_audio(out, load_audio(in, 16000), 16000, fmt);
}

// oxi_audio_tests --gtest_filter=AudioDev.Embed writes a clip's embeddings as llama.cpp's
// MTMD_DEBUG_EMBEDDINGS dump does: int32 n_tokens, int32 n_embd, f32 rows. The tower:
// OXI_AUD_MMPROJ, or OXI_AUD_HF=DIR (the checkpoint's own). OXI_AUD_TIMES=N: encode N times and
// print the best time (the benchmark in docs/benchmarks.md).
TEST(AudioDev, Embed) {
  const char* mm = std::getenv("OXI_AUD_MMPROJ");
  const char* hf_dir = std::getenv("OXI_AUD_HF");
  const char* in = std::getenv("OXI_AUD_IN");
  const char* out = std::getenv("OXI_AUD_OUT");
  if ((!mm && !hf_dir) || !in || !out) GTEST_SKIP() << "OXI_AUD_MMPROJ (or OXI_AUD_HF) / OXI_AUD_IN / OXI_AUD_OUT not set";
  std::unique_ptr<Gemma4ATower> t;
  if (hf_dir) {
    const oxi::HfCheckpoint hf = oxi::read_hf_checkpoint(hf_dir);
    t = Gemma4ATower::from_hf(hf);
  } else {
    t = Gemma4ATower::from_mmproj(mm);
  }
  const std::vector<float> samples = load_audio(in, 16000);
  AudioEmbedding e = t->encode(samples);
  if (const char* times = std::getenv("OXI_AUD_TIMES")) {
    double best = 1e30;
    for (int i = 0; i < std::atoi(times); ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      e = t->encode(samples);
      best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
    std::printf("encode best of %s: %.1f ms\n", times, best);
  }
  std::ofstream f(out, std::ios::binary);
  const int32_t hdr[2] = {static_cast<int32_t>(e.n_tokens()), static_cast<int32_t>(t->config().out)};
  f.write(reinterpret_cast<const char*>(hdr), sizeof(hdr));
  f.write(reinterpret_cast<const char*>(e.rows.data()), static_cast<std::streamsize>(e.rows.size() * 4));
  std::printf("{\"n_tokens\": %lld, \"chunks\": %zu}\n", static_cast<long long>(e.n_tokens()), e.chunk_tokens.size());
}

}  // namespace
