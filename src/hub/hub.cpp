// hub_resolve_model: the Hub API → file selection → cache (blobs/, snapshots/<commit>/, refs/) →
// a local path. Offline (or when the Hub cannot be reached) the cache alone answers.
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/byte_source.h"
#include "core/json_limits.h"
#include "core/log.h"
#include "hub/hub_internal.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace oxi {
namespace hub {

namespace {

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

std::string strip_etag(std::string e) {
  e = trim(e);
  if (e.rfind("W/", 0) == 0) e = e.substr(2);
  if (e.size() >= 2 && e.front() == '"' && e.back() == '"') e = e.substr(1, e.size() - 2);
  return e;
}

std::string read_ref(const fs::path& p) {
  std::error_code ec;
  if (!fs::is_regular_file(p, ec)) return "";
  try {
    return trim(read_text_file(p.string(), 4096));
  } catch (const std::exception&) {
    return "";
  }
}

// Files present in a snapshot (symlinks followed; dangling links skipped), repo-relative.
std::vector<std::string> list_snapshot(const fs::path& snap) {
  std::vector<std::string> out;
  std::error_code ec;
  fs::recursive_directory_iterator it(snap, fs::directory_options::skip_permission_denied, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::error_code e2;
    if (fs::is_regular_file(it->path(), e2)) {
      out.push_back(it->path().lexically_relative(snap).generic_string());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Safetensors shards named by model.safetensors.index.json that are missing from `have`.
std::vector<std::string> missing_shards(const fs::path& snap, const std::set<std::string>& have) {
  std::vector<std::string> missing;
  const fs::path idx = snap / "model.safetensors.index.json";
  std::error_code ec;
  if (!fs::is_regular_file(idx, ec)) return missing;
  try {
    const std::string text = read_text_file(idx.string(), 64u << 20);
    if (json_too_deep(text)) return missing;
    const json j = json::parse(text);
    std::set<std::string> files;
    for (const auto& [k, v] : j.at("weight_map").items()) files.insert(v.get<std::string>());
    for (const auto& f : files) {
      if (!have.count(f)) missing.push_back(f);
    }
  } catch (const std::exception&) {
  }
  return missing;
}

std::string not_cached_hint(const HubSpec& spec) {
  return "run 'oxinfer pull " + spec.repo + (spec.quant.empty() ? "" : ":" + spec.quant) +
         (spec.revision == "main" ? "" : "@" + spec.revision) + "' while online";
}

}  // namespace

std::string resolve_in_cache(const std::string& cache_dir, const HubSpec& spec, const std::vector<std::string>& sidecars,
                             std::vector<std::pair<std::string, std::string>>* found, const std::string& primary_word) {
  const fs::path root = fs::path(cache_dir) / repo_folder_name(spec.repo);
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    throw_error(ErrorCode::kIo, spec.repo + " is not in the Hugging Face cache (" + cache_dir + "); " +
                                    not_cached_hint(spec));
  }
  std::string commit;
  if (is_hex(spec.revision, 40) && fs::is_directory(root / "snapshots" / spec.revision, ec)) {
    commit = spec.revision;
  } else {
    commit = read_ref(root / "refs" / spec.revision);
  }
  if (commit.empty() || !is_safe_blob_name(commit)) {
    throw_error(ErrorCode::kIo, "revision '" + spec.revision + "' of " + spec.repo + " is not in the cache (" +
                                    cache_dir + "); " + not_cached_hint(spec));
  }
  const fs::path snap = root / "snapshots" / commit;
  if (!fs::is_directory(snap, ec)) {
    throw_error(ErrorCode::kIo, "snapshot " + commit + " of " + spec.repo + " is missing from the cache; " +
                                    not_cached_hint(spec));
  }
  const auto files = list_snapshot(snap);
  Selection sel;
  try {
    sel = select_files(files, spec, primary_word);
  } catch (const Error& e) {
    throw Error(e.code(), std::string(e.what()) + " (in the cache, offline)");
  }
  if (!sel.gguf) {
    const auto miss = missing_shards(snap, std::set<std::string>(files.begin(), files.end()));
    if (!miss.empty()) {
      throw_error(ErrorCode::kIo, spec.repo + " is incomplete in the cache: " + miss.front() + " is missing; " +
                                      not_cached_hint(spec));
    }
    return snap.string();
  }
  if (found) {
    for (const auto& word : sidecars) {
      const std::string side = select_sidecar(files, sel.result, word, spec.quant);
      if (!side.empty()) found->emplace_back(word, (snap / side).string());
    }
  }
  return (snap / sel.result).string();
}

}  // namespace hub

namespace {

using namespace hub;

struct FileMeta {
  int64_t size = -1;
  std::string blob;    // etag / oid: the name in blobs/
  std::string sha256;  // lfs.oid
};

std::string read_token_file() {
  std::string path = env_or("HF_TOKEN_PATH", "");
  if (path.empty()) {
    const std::string home = env_or("HF_HOME", env_or("XDG_CACHE_HOME", env_or("HOME", ".") + "/.cache") + "/huggingface");
    path = home + "/token";
  }
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return "";
  try {
    return trim(read_text_file(path, 4096));
  } catch (const std::exception&) {
    return "";
  }
}

json parse_json(const std::string& body, const std::string& url) {
  if (json_too_deep(body)) throw_error(ErrorCode::kFormat, url + ": the Hub answered with JSON nested too deeply");
  try {
    return json::parse(body);
  } catch (const std::exception&) {
    throw_error(ErrorCode::kFormat, url + ": the Hub answered with malformed JSON");
  }
}

// GET /api/models/{repo}/tree/{commit}?recursive=true, following Link: rel="next" pages.
std::map<std::string, FileMeta> fetch_tree(const std::string& endpoint, const HubSpec& spec,
                                           const std::string& commit, const std::string& token) {
  std::map<std::string, FileMeta> out;
  std::string url = endpoint + "/api/models/" + spec.repo + "/tree/" + commit + "?recursive=true";
  for (int page = 0; page < 1000 && !url.empty(); ++page) {
    const HttpResponse r = http_fetch(url, token, false, true);
    if (r.status != 200) return {};
    const json j = parse_json(r.body, url);
    if (!j.is_array()) return {};
    for (const auto& e : j) {
      if (!e.is_object() || !e.contains("type") || e["type"] != "file" || !e.contains("path") ||
          !e["path"].is_string())
        continue;
      FileMeta m;
      if (e.contains("size") && e["size"].is_number_integer()) m.size = e["size"].get<int64_t>();
      if (e.contains("oid") && e["oid"].is_string()) m.blob = e["oid"].get<std::string>();
      if (e.contains("lfs") && e["lfs"].is_object()) {
        const auto& l = e["lfs"];
        if (l.contains("oid") && l["oid"].is_string()) {
          std::string oid = l["oid"].get<std::string>();
          if (oid.rfind("sha256:", 0) == 0) oid = oid.substr(7);
          m.sha256 = oid;
          m.blob = oid;
        }
        if (l.contains("size") && l["size"].is_number_integer()) m.size = l["size"].get<int64_t>();
      }
      out[e["path"].get<std::string>()] = m;
    }
    // Link: <URL>; rel="next"
    url.clear();
    const auto it = r.headers.find("link");
    if (it != r.headers.end()) {
      const std::string& link = it->second;
      const auto rel = link.find("rel=\"next\"");
      if (rel != std::string::npos) {
        const auto lt = link.rfind('<', rel), gt = link.rfind('>', rel);
        if (lt != std::string::npos && gt != std::string::npos && gt > lt) url = link.substr(lt + 1, gt - lt - 1);
      }
    }
  }
  return out;
}

// HEAD {endpoint}/{repo}/resolve/{commit}/{path} without following redirects: the etag and size.
FileMeta head_meta(const std::string& url, const std::string& token, const ErrorContext& ctx) {
  HttpResponse r = http_fetch(url, token, true, false);
  if (r.status >= 400) throw_http_error(r, url, ctx);
  auto h = [&](const char* n) {
    auto it = r.headers.find(n);
    return it == r.headers.end() ? std::string() : it->second;
  };
  FileMeta m;
  m.blob = strip_etag(h("x-linked-etag").empty() ? h("etag") : h("x-linked-etag"));
  const std::string sz = h("x-linked-size").empty() ? h("content-length") : h("x-linked-size");
  if (!sz.empty()) m.size = std::atoll(sz.c_str());
  if (is_hex(m.blob, 64)) m.sha256 = m.blob;
  return m;
}

std::string resolve_online(const std::string& cache_dir, const HubSpec& spec, const HubOptions& opt,
                           const std::string& endpoint, const std::string& token,
                           std::vector<std::pair<std::string, std::string>>* found) {
  ErrorContext ctx{endpoint, spec.repo, spec.revision, "", !token.empty()};
  const std::string info_url =
      endpoint + "/api/models/" + spec.repo + "/revision/" + url_encode(spec.revision, false);
  const HttpResponse r = http_fetch(info_url, token, false, true);
  if (r.status != 200) throw_http_error(r, info_url, ctx);
  const json info = parse_json(r.body, info_url);
  if (!info.is_object() || !info.contains("sha") || !info["sha"].is_string()) {
    throw_error(ErrorCode::kFormat, info_url + ": the Hub's answer has no commit sha");
  }
  const std::string commit = info["sha"].get<std::string>();
  if (!is_safe_blob_name(commit)) throw_error(ErrorCode::kFormat, info_url + ": bad commit sha '" + commit + "'");
  std::vector<std::string> paths;
  if (info.contains("siblings") && info["siblings"].is_array()) {
    for (const auto& s : info["siblings"]) {
      if (s.is_object() && s.contains("rfilename") && s["rfilename"].is_string()) {
        const std::string p = s["rfilename"].get<std::string>();
        if (is_safe_repo_path(p)) paths.push_back(p);
      }
    }
  }
  Selection sel = select_files(paths, spec, opt.primary_word);
  // Companions (mmproj, MTP head) are fetched with the model, into the same snapshot.
  std::vector<std::pair<std::string, std::string>> sides;
  if (sel.gguf) {
    for (const auto& word : opt.sidecars) {
      const std::string side = select_sidecar(paths, sel.result, word, spec.quant);
      if (side.empty()) continue;
      sides.emplace_back(word, side);
      if (std::find(sel.files.begin(), sel.files.end(), side) == sel.files.end()) sel.files.push_back(side);
    }
  }

  const fs::path root = fs::path(cache_dir) / repo_folder_name(spec.repo);
  const fs::path snap = root / "snapshots" / commit;
  const fs::path lock_dir = fs::path(cache_dir) / ".locks" / repo_folder_name(spec.repo);
  std::error_code ec;

  // Which files still need work (a snapshot entry from any tool counts as present).
  std::vector<std::string> todo;
  for (const auto& f : sel.files) {
    if (!fs::is_regular_file(snap / f, ec)) todo.push_back(f);
  }
  std::map<std::string, FileMeta> meta;
  if (!todo.empty()) {
    try {
      meta = fetch_tree(endpoint, spec, commit, token);
    } catch (const NetworkError&) {
      throw;
    } catch (const Error&) {
      meta.clear();  // fall back to HEAD per file
    }
  }
  struct Job {
    std::string path;
    FileMeta m;
    bool need_download = false;
  };
  std::vector<Job> jobs;
  int64_t total = 0, need_bytes = 0;
  int n_downloads = 0;
  for (const auto& f : todo) {
    const std::string url = endpoint + "/" + spec.repo + "/resolve/" + commit + "/" + url_encode(f, true);
    FileMeta m;
    auto it = meta.find(f);
    if (it != meta.end() && !it->second.blob.empty()) {
      m = it->second;
    } else {
      ErrorContext c2 = ctx;
      c2.path = f;
      m = head_meta(url, token, c2);
    }
    if (!is_safe_blob_name(m.blob)) {
      throw_error(ErrorCode::kFormat, spec.repo + "/" + f + ": the Hub gave no usable etag/oid ('" + m.blob + "')");
    }
    if (m.size > (int64_t(1) << 56)) {
      throw_error(ErrorCode::kFormat, spec.repo + "/" + f + ": implausible size " + std::to_string(m.size));
    }
    if (!m.sha256.empty() && !is_hex(m.sha256, 64)) {
      throw_error(ErrorCode::kFormat, spec.repo + "/" + f + ": malformed lfs sha256 '" + m.sha256 + "'");
    }
    Job j{f, m, !fs::exists(root / "blobs" / m.blob, ec)};
    if (j.need_download) {
      ++n_downloads;
      if (m.size > 0) {
        total += m.size;
        const auto part = fs::file_size(root / "blobs" / (m.blob + ".incomplete"), ec);
        need_bytes += m.size - (ec ? 0 : std::min<int64_t>(static_cast<int64_t>(part), m.size));
      }
    }
    jobs.push_back(j);
  }

  // Disk space check before any transfer.
  if (need_bytes > 0) {
    fs::create_directories(root / "blobs", ec);
    struct statvfs vfs {};
    if (::statvfs((root / "blobs").c_str(), &vfs) == 0) {
      const double avail = static_cast<double>(vfs.f_bavail) * static_cast<double>(vfs.f_frsize);
      if (static_cast<double>(need_bytes) > avail) {
        throw_error(ErrorCode::kIo, "not enough disk space in " + cache_dir + " for " + spec.repo + ": need " +
                                        std::to_string(need_bytes >> 20) + " MiB, " +
                                        std::to_string(static_cast<int64_t>(avail) >> 20) + " MiB free");
      }
    }
  }

  Progress progress(opt.progress);
  progress.set_total(total, n_downloads);
  for (const auto& j : jobs) {
    const fs::path blob = root / "blobs" / j.m.blob;
    if (j.need_download) {
      BlobRequest req;
      req.url = endpoint + "/" + spec.repo + "/resolve/" + commit + "/" + url_encode(j.path, true);
      req.token = token;
      req.blob_path = blob.string();
      req.lock_path = (lock_dir / (j.m.blob + ".lock")).string();
      req.label = j.path;
      req.size = j.m.size;
      req.sha256 = j.m.sha256;
      req.ctx = ctx;
      download_blob(req, &progress);
    }
    // snapshots/<commit>/<path> → ../../blobs/<blob> (one more ../ per directory level)
    const fs::path link = snap / j.path;
    fs::create_directories(link.parent_path(), ec);
    std::string target;
    for (size_t i = 0, depth = std::count(j.path.begin(), j.path.end(), '/'); i < depth + 2; ++i) target += "../";
    target += "blobs/" + j.m.blob;
    if (fs::is_symlink(link, ec) && !fs::exists(link, ec)) fs::remove(link, ec);  // dangling
    fs::create_symlink(target, link, ec);
    if (ec && !fs::is_regular_file(link)) {
      throw_error(ErrorCode::kIo, "cannot create " + link.string() + ": " + ec.message());
    }
  }
  if (spec.revision != commit) {
    const fs::path ref = root / "refs" / spec.revision;
    if (read_ref(ref) != commit) {
      fs::create_directories(ref.parent_path(), ec);
      write_file_atomic(ref.string(), commit.data(), commit.size());
    }
  }
  if (found) {
    for (const auto& [word, side] : sides) found->emplace_back(word, (snap / side).string());
  }
  return sel.gguf ? (snap / sel.result).string() : snap.string();
}

}  // namespace

namespace {
std::string resolve_model(const std::string& spec_text, const HubOptions& options,
                          std::vector<std::pair<std::string, std::string>>* found) {
  const HubSpec spec = parse_hub_spec(spec_text);
  const std::string cache_dir = options.cache_dir.empty() ? hf_hub_cache_dir() : options.cache_dir;
  if (options.offline || env_truthy("HF_HUB_OFFLINE"))
    return resolve_in_cache(cache_dir, spec, options.sidecars, found, options.primary_word);
  // A commit is immutable: a complete cached snapshot of it needs no network at all (unless
  // companions are asked for: only the listing says whether the repo has one).
  if (is_hex(spec.revision, 40) && options.sidecars.empty()) {
    try {
      return resolve_in_cache(cache_dir, spec, {}, nullptr, options.primary_word);
    } catch (const Error&) {
    }
  }
  std::string endpoint = options.endpoint.empty() ? env_or("HF_ENDPOINT", "https://huggingface.co") : options.endpoint;
  while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
  std::string token = options.token;
  if (token.empty()) token = env_or("HF_TOKEN", env_or("HUGGING_FACE_HUB_TOKEN", ""));
  if (token.empty()) token = read_token_file();
  try {
    return resolve_online(cache_dir, spec, options, endpoint, token, found);
  } catch (const json::exception& e) {
    // Only reachable through an unexpected shape of a Hub answer.
    throw_error(ErrorCode::kFormat, endpoint + ": unexpected answer from the Hub for " + spec.repo + ": " + e.what());
  } catch (const fs::filesystem_error& e) {
    throw_error(ErrorCode::kIo, std::string("cache ") + cache_dir + ": " + e.what());
  } catch (const NetworkError& e) {
    // The Hub cannot be reached: a complete cached copy still answers.
    std::string cached;
    try {
      cached = resolve_in_cache(cache_dir, spec, options.sidecars, found, options.primary_word);
    } catch (const Error&) {
      throw e;
    }
    log_warn(std::string(e.what()) + "; using the cached copy");
    return cached;
  }
}
}  // namespace

std::string hub_resolve_model(const std::string& spec_text, const HubOptions& options) {
  HubOptions o = options;
  o.sidecars.clear();
  return hub_resolve(spec_text, o).path;
}

HubModel hub_resolve(const std::string& spec_text, const HubOptions& options) {
  HubModel out;
  out.path = resolve_model(spec_text, options, &out.sidecars);
  return out;
}


}  // namespace oxi
