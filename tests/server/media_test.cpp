// Image URLs in chat requests (server/media.h): base64 against RFC 4648's test vectors, the URL
// rules (data: inline, http(s) never, file:// only under --media-dir), content-hash row ids.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "server/media.h"
#include "server/request.h"

namespace oxi::server {
namespace {

namespace fs = std::filesystem;

TEST(Media, Base64MatchesRfc4648Vectors) {
  const std::pair<const char*, const char*> v[] = {{"", ""},         {"Zg==", "f"},         {"Zm8=", "fo"},
                                                   {"Zm9v", "foo"},  {"Zm9vYg==", "foob"},  {"Zm9vYmE=", "fooba"},
                                                   {"Zm9vYmFy", "foobar"}};
  std::string out;
  for (const auto& [in, want] : v) {
    ASSERT_TRUE(base64_decode(in, out)) << in;
    EXPECT_EQ(out, want);
  }
  EXPECT_TRUE(base64_decode("Zm9v\nYmFy", out));  // line breaks (MIME) are skipped
  EXPECT_EQ(out, "foobar");
  EXPECT_TRUE(base64_decode("Zg", out));  // padding optional
  EXPECT_EQ(out, "f");
  EXPECT_FALSE(base64_decode("Zm9v!", out));
  EXPECT_FALSE(base64_decode("Zg==Zg==", out));  // data after padding
  EXPECT_FALSE(base64_decode("Z", out));         // 6 bits: no byte
  EXPECT_FALSE(base64_decode("Zm9vY", out));
}

int status_of(const ImageRef& ref, const std::string& dir, std::string* msg = nullptr) {
  try {
    image_url_bytes(ref, dir);
  } catch (const RequestError& e) {
    if (msg) *msg = e.what();
    return e.status();
  }
  return 200;
}

TEST(Media, UrlRules) {
  const fs::path root = fs::temp_directory_path() / ("oxi_media_test_" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root / "media");
  std::ofstream(root / "media/a.png") << "PNGBYTES";
  std::ofstream(root / "secret.png") << "SECRET";
  fs::create_symlink(root / "secret.png", root / "media/link.png");
  const std::string dir = (root / "media").string();

  EXPECT_EQ(image_url_bytes({"data:image/png;base64,Zm9vYmFy", "p"}, ""), "foobar");
  EXPECT_EQ(image_url_bytes({"DATA:image/jpeg;base64,Zm9v", "p"}, ""), "foo");
  std::string msg;
  EXPECT_EQ(status_of({"data:image/png,rawbytes", "p"}, ""), 400);
  EXPECT_EQ(status_of({"data:image/png;base64,", "p"}, ""), 400);
  EXPECT_EQ(status_of({"https://example.com/a.png", "p"}, dir, &msg), 400);
  EXPECT_NE(msg.find("not fetched"), std::string::npos) << msg;
  EXPECT_EQ(status_of({"http://127.0.0.1/a.png", "p"}, dir), 400);
  EXPECT_EQ(status_of({"ftp://x/a.png", "p"}, dir), 400);
  // file:// only under the directory, symlinks resolved, no way out with "..".
  EXPECT_EQ(status_of({"file://" + dir + "/a.png", "p"}, "", &msg), 400);
  EXPECT_NE(msg.find("--media-dir"), std::string::npos) << msg;
  EXPECT_EQ(image_url_bytes({"file://" + dir + "/a.png", "p"}, dir), "PNGBYTES");
  EXPECT_EQ(image_url_bytes({"file://localhost" + dir + "/%61.png", "p"}, dir), "PNGBYTES");
  EXPECT_EQ(status_of({"file://" + dir + "/link.png", "p"}, dir), 400);
  EXPECT_EQ(status_of({"file://" + dir + "/../secret.png", "p"}, dir), 400);
  EXPECT_EQ(status_of({"file://" + (root / "secret.png").string(), "p"}, dir), 400);
  EXPECT_EQ(status_of({"file://" + dir, "p"}, dir), 400);  // the directory itself
  EXPECT_EQ(status_of({"file://" + dir + "/missing.png", "p"}, dir), 400);
  EXPECT_EQ(status_of({"file://relative.png", "p"}, dir), 400);
  EXPECT_EQ(status_of({"file://" + dir + "/%zz.png", "p"}, dir), 400);
  fs::remove_all(root);
}

TEST(Media, RowIdsAreNegativeAndKeyedByContent) {
  const auto a = image_row_ids("image one"), a2 = image_row_ids("image one"), b = image_row_ids("image two");
  ASSERT_EQ(a.size(), 8u);
  EXPECT_EQ(a, a2);
  EXPECT_NE(a, b);
  for (int32_t id : a) EXPECT_LT(id, 0);
  // sha256("abc") = ba7816bf 8f01cfea …: the first id is −1 − (0xba7816bf & 0x7fffffff).
  EXPECT_EQ(image_row_ids("abc")[0], -1 - static_cast<int32_t>(0xba7816bfu & 0x7fffffffu));
}

TEST(Media, MediaRefsInMessageOrder) {
  const auto msgs = nlohmann::json::parse(R"([
    {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "data:1"}}]},
    {"role": "assistant", "content": "b"},
    {"role": "user", "content": [{"type": "image_url", "image_url": "data:2"},
                                 {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}]}])");
  const auto refs = media_refs(msgs);
  ASSERT_EQ(refs.size(), 3u);
  EXPECT_TRUE(refs[2].audio);
  EXPECT_EQ(refs[2].param, "messages[2].content[1].input_audio");
  EXPECT_EQ(audio_part_bytes(refs[2]), "RIFF");
  EXPECT_THROW(audio_part_bytes({"%%%", "p", true}), RequestError);
  EXPECT_THROW(audio_part_bytes({"", "p", true}), RequestError);
  EXPECT_FALSE(refs[0].audio);
  // A malformed part (the parser refuses it first) reads as empty data: a 400, not a crash.
  const auto odd = media_refs(nlohmann::json::parse(R"([{"role": "user", "content": [{"type": "input_audio"},
    {"type": "input_audio", "input_audio": {"data": 5}}]}])"));
  ASSERT_EQ(odd.size(), 2u);
  EXPECT_THROW(audio_part_bytes(odd[0]), RequestError);
  EXPECT_THROW(audio_part_bytes(odd[1]), RequestError);
  EXPECT_EQ(refs[0].url, "data:1");
  EXPECT_EQ(refs[0].param, "messages[0].content[1].image_url");
  EXPECT_EQ(refs[1].url, "data:2");
  EXPECT_EQ(refs[1].param, "messages[2].content[0].image_url");
}

}  // namespace
}  // namespace oxi::server
