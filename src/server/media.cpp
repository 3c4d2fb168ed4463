#include "server/media.h"

#include <cctype>
#include <filesystem>

#include "core/byte_source.h"
#include "core/error.h"
#include "hub/hub_internal.h"  // Sha256
#include "server/request.h"

namespace oxi::server {

namespace fs = std::filesystem;

std::vector<ImageRef> media_refs(const nlohmann::json& messages) {
  std::vector<ImageRef> out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& c = messages[i].contains("content") ? messages[i]["content"] : nlohmann::json();
    if (!c.is_array()) continue;
    for (size_t j = 0; j < c.size(); ++j) {
      const std::string t = c[j].value("type", "");
      const std::string at = "messages[" + std::to_string(i) + "].content[" + std::to_string(j) + "]." + t;
      if (t == "image_url") {
        const auto& u = c[j]["image_url"];
        out.push_back({u.is_string() ? u.get<std::string>() : u.value("url", ""), at});
      } else if (t == "input_audio") {  // the request parser wants {"data": string, ...}; "" (→ 400) otherwise
        const auto& a = c[j].contains("input_audio") ? c[j]["input_audio"] : nlohmann::json();
        const bool ok = a.is_object() && a.contains("data") && a["data"].is_string();
        out.push_back({ok ? a["data"].get<std::string>() : std::string(), at, true});
      }
    }
  }
  return out;
}

std::string audio_part_bytes(const ImageRef& ref) {
  std::string bytes;
  if (!base64_decode(ref.url, bytes)) throw RequestError(400, ref.param + ".data", "the input_audio data is not valid base64");
  if (bytes.empty()) throw RequestError(400, ref.param + ".data", "the input_audio data is empty");
  return bytes;
}

bool base64_decode(std::string_view in, std::string& out) {
  out.clear();
  out.reserve(in.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0, pad = 0;
  for (char ch : in) {
    int v;
    if (ch >= 'A' && ch <= 'Z') v = ch - 'A';
    else if (ch >= 'a' && ch <= 'z') v = ch - 'a' + 26;
    else if (ch >= '0' && ch <= '9') v = ch - '0' + 52;
    else if (ch == '+') v = 62;
    else if (ch == '/') v = 63;
    else if (ch == '=') { ++pad; continue; }
    else if (ch == ' ' || ch == '\n' || ch == '\r' || ch == '\t') continue;
    else return false;
    if (pad) return false;  // data after padding
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  // A final group of 2 or 3 characters leaves 4 or 2 bits (zero in canonical encodings); 1
  // character (6 bits) is no byte at all.
  return bits < 6 && pad <= 2;
}

namespace {

std::string percent_decode(std::string_view s, const ImageRef& ref) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out.push_back(s[i]);
      continue;
    }
    auto hex = [&](char c) {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      throw RequestError(400, ref.param, "bad percent escape in the file URL");
    };
    if (i + 2 >= s.size()) throw RequestError(400, ref.param, "bad percent escape in the file URL");
    const char c = static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2]));
    if (c == '\0') throw RequestError(400, ref.param, "a NUL byte in the file URL");
    out.push_back(c);
    i += 2;
  }
  return out;
}

std::string file_url_bytes(const ImageRef& ref, const std::string& media_dir) {
  if (media_dir.empty())
    throw RequestError(400, ref.param,
                       "file:// image URLs are refused: the server reads local files only under the directory given "
                       "by --media-dir DIR; send the image inline as a data: URL");
  std::string_view rest = std::string_view(ref.url).substr(7);  // after "file://"
  if (rest.rfind("localhost/", 0) == 0) rest.remove_prefix(9);
  if (rest.empty() || rest[0] != '/') throw RequestError(400, ref.param, "a file:// URL needs an absolute path (file:///dir/image.png)");
  std::error_code ec;
  const fs::path dir = fs::canonical(media_dir, ec);
  if (ec) throw RequestError(400, ref.param, "the --media-dir directory cannot be resolved");
  const fs::path file = fs::canonical(percent_decode(rest, ref), ec);
  // Same message whether the file is missing or outside: the answer must not probe the disk.
  const std::string outside = "the file URL does not name a readable file under the --media-dir directory";
  if (ec) throw RequestError(400, ref.param, outside);
  const auto rel = file.lexically_relative(dir);
  if (rel.empty() || *rel.begin() == ".." || rel.is_absolute() || !fs::is_regular_file(file, ec))
    throw RequestError(400, ref.param, outside);
  try {
    return read_text_file(file.string(), vision::kMaxImageFileBytes);
  } catch (const Error&) {
    throw RequestError(400, ref.param, outside + " (or it is larger than 256 MiB)");
  }
}

}  // namespace

std::string image_url_bytes(const ImageRef& ref, const std::string& media_dir) {
  const std::string& url = ref.url;
  auto starts = [&](const char* p) {
    const size_t n = std::char_traits<char>::length(p);
    if (url.size() < n) return false;
    for (size_t i = 0; i < n; ++i)
      if (std::tolower(static_cast<unsigned char>(url[i])) != p[i]) return false;
    return true;
  };
  if (starts("data:")) {
    const size_t comma = url.find(',');
    if (comma == std::string::npos) throw RequestError(400, ref.param, "a data: URL needs a ',' before its data");
    const std::string head = url.substr(5, comma - 5);
    if (head.size() < 7 || head.compare(head.size() - 7, 7, ";base64") != 0)
      throw RequestError(400, ref.param, "a data: image URL must be base64 (data:image/png;base64,...)");
    std::string bytes;
    if (!base64_decode(std::string_view(url).substr(comma + 1), bytes))
      throw RequestError(400, ref.param, "the data: URL's base64 data is not valid base64");
    if (bytes.empty()) throw RequestError(400, ref.param, "the data: URL holds no data");
    return bytes;
  }
  if (starts("file://")) return file_url_bytes(ref, media_dir);
  if (starts("http://") || starts("https://"))
    throw RequestError(400, ref.param,
                       "remote image URLs are not fetched (the server never downloads); send the image inline as a "
                       "data: URL (data:image/png;base64,...)");
  if (url.empty()) throw RequestError(400, ref.param, "the image_url has no url");
  throw RequestError(400, ref.param, "unsupported image URL scheme (data: URLs, or file:// under --media-dir)");
}

std::vector<int32_t> image_row_ids(std::string_view bytes) {
  hub::Sha256 h;
  h.update(bytes.data(), bytes.size());
  const std::string hex = h.hex_digest();
  std::vector<int32_t> ids;
  for (size_t w = 0; w < 8; ++w) {
    const auto v = static_cast<uint32_t>(std::stoul(hex.substr(w * 8, 8), nullptr, 16));
    ids.push_back(-1 - static_cast<int32_t>(v & 0x7FFFFFFFu));
  }
  return ids;
}

}  // namespace oxi::server
