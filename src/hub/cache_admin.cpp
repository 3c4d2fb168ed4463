// `oxinfer list` / `oxinfer rm`: what models the HF cache holds, and removing one of them.
// The cache is walked without following links: a snapshot entry is a link into ../../blobs (or a
// plain file, as caches without symlinks have); its blob counts toward a model's size only when
// it resolves inside the cache. Removal unlinks entries and blobs by name, after checking that
// their folder really is inside the repo folder, so a hostile link can never make us delete
// anything outside the cache (docs/hub.md "Listing and removing").
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "core/byte_source.h"
#include "hub/hub_internal.h"

namespace fs = std::filesystem;

namespace oxi {

namespace {

using namespace hub;

std::string real(const fs::path& p) {
  std::error_code ec;
  const fs::path r = fs::canonical(p, ec);
  return ec ? std::string() : r.string();
}

bool inside(const std::string& real_dir, const std::string& real_path) {
  return !real_dir.empty() && real_path.size() > real_dir.size() + 1 &&
         real_path.compare(0, real_dir.size(), real_dir) == 0 && real_path[real_dir.size()] == '/';
}

// One snapshot entry (a link or a plain file) and the blob it stands for.
struct Entry {
  std::string rel;       // repo-relative path
  fs::path path;         // the entry itself
  bool counted = false;  // resolves to a regular file inside the cache
  dev_t dev = 0;
  ino_t ino = 0;
  uint64_t size = 0;
  int64_t used = 0;      // newest of the target's atime/mtime and the entry's own mtime
};

struct Snapshot {
  std::string commit;
  fs::path dir;
  std::vector<Entry> entries;  // present files only (dangling links are skipped)
};

// The snapshots of a repo folder, their entries described (nothing is followed out of the cache).
std::vector<Snapshot> scan_repo(const fs::path& root, const std::string& real_cache) {
  std::vector<Snapshot> out;
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(root / "snapshots", ec)) {
    std::error_code e2;
    if (!d.is_directory(e2) || d.is_symlink(e2) || !is_safe_blob_name(d.path().filename().string())) continue;
    Snapshot snap{d.path().filename().string(), d.path(), {}};
    fs::recursive_directory_iterator it(d.path(), fs::directory_options::skip_permission_denied, e2), end;
    for (; !e2 && it != end; it.increment(e2)) {
      struct stat ls{}, st{};
      if (::lstat(it->path().c_str(), &ls) != 0 || S_ISDIR(ls.st_mode)) continue;
      if (!S_ISLNK(ls.st_mode) && !S_ISREG(ls.st_mode)) continue;
      if (::stat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;  // dangling
      Entry e;
      e.rel = it->path().lexically_relative(d.path()).generic_string();
      e.path = it->path();
      e.used = ls.st_mtime;
      if (inside(real_cache, real(it->path()))) {
        e.counted = true;
        e.dev = st.st_dev;
        e.ino = st.st_ino;
        e.size = static_cast<uint64_t>(st.st_size);
        e.used = std::max<int64_t>({e.used, st.st_atime, st.st_mtime});
      }
      snap.entries.push_back(std::move(e));
    }
    std::sort(snap.entries.begin(), snap.entries.end(), [](const Entry& a, const Entry& b) { return a.rel < b.rel; });
    out.push_back(std::move(snap));
  }
  std::sort(out.begin(), out.end(), [](const Snapshot& a, const Snapshot& b) { return a.commit < b.commit; });
  return out;
}

// The model an entry belongs to: its quant for a model GGUF, "" (the checkpoint) for any other
// file of a snapshot that holds a checkpoint, nullopt otherwise (mmproj, README of a GGUF repo).
std::optional<std::string> model_of(const std::string& rel, bool has_checkpoint) {
  if (is_model_gguf(rel)) return gguf_quant_label(rel);
  if (has_checkpoint && !(rel.size() >= 5 && upper(rel.substr(rel.size() - 5)) == ".GGUF")) return std::string();
  return std::nullopt;
}

bool snapshot_has_checkpoint(const Snapshot& s, const std::string& repo) {
  std::vector<std::string> paths;
  for (const auto& e : s.entries) paths.push_back(e.rel);
  try {
    return !select_model_files(paths, "", repo).gguf;
  } catch (const Error&) {
    return false;
  }
}

// "models--org--name" → "org/name" ("" when the folder is not a valid model repo folder).
std::string repo_of_folder(const std::string& folder) {
  if (folder.rfind("models--", 0) != 0) return "";
  std::string rest = folder.substr(8);
  const auto sep = rest.find("--");
  if (sep == std::string::npos) return "";
  const std::string repo = rest.substr(0, sep) + "/" + rest.substr(sep + 2);
  try {
    return parse_hub_spec(repo).repo == repo ? repo : "";
  } catch (const Error&) {
    return "";
  }
}

std::vector<CachedModel> list_repo(const fs::path& root, const std::string& repo, const std::string& real_cache) {
  const auto snaps = scan_repo(root, real_cache);
  std::string main_commit;
  try {
    main_commit = read_text_file((root / "refs" / "main").string(), 4096);
  } catch (const std::exception&) {
  }
  while (!main_commit.empty() && std::isspace(static_cast<unsigned char>(main_commit.back()))) main_commit.pop_back();
  std::map<std::string, CachedModel> rows;
  std::map<std::string, std::set<std::pair<dev_t, ino_t>>> blobs;
  for (const auto& s : snaps) {
    const bool ckpt = snapshot_has_checkpoint(s, repo);
    std::vector<std::string> paths;
    for (const auto& e : s.entries) paths.push_back(e.rel);
    for (const auto& e : s.entries) {
      const auto q = model_of(e.rel, ckpt);
      if (!q) continue;
      CachedModel& m = rows[*q];
      if (m.repo.empty() || (s.commit == main_commit && m.revision != main_commit)) {
        m.repo = repo;
        m.quant = *q;
        m.format = q->empty() ? "safetensors" : "gguf";
        m.revision = s.commit;
        m.path = s.dir.string();
        if (!q->empty()) {
          try {  // the file `-hf repo:QUANT --offline` would open
            m.path = (s.dir / select_model_files(paths, *q, repo).result).string();
          } catch (const Error&) {
            m.path.clear();  // e.g. a split GGUF with a part missing
          }
        }
      }
      m.files.push_back(e.rel);
      m.last_used = std::max(m.last_used, e.used);
      if (e.counted && blobs[*q].insert({e.dev, e.ino}).second) m.size_bytes += e.size;
    }
  }
  std::vector<CachedModel> out;
  for (auto& [q, m] : rows) {
    std::sort(m.files.begin(), m.files.end());
    m.files.erase(std::unique(m.files.begin(), m.files.end()), m.files.end());
    out.push_back(std::move(m));
  }
  return out;
}

struct RepoFolder {
  fs::path root;           // cache_dir/models--org--name
  std::string real_cache;  // the cache root, links resolved (the cache itself may be a link)
};

RepoFolder find_repo(const std::string& cache_dir, const HubSpec& spec) {
  RepoFolder f{fs::path(cache_dir) / repo_folder_name(spec.repo), real(cache_dir)};
  struct stat ls{};
  if (f.real_cache.empty() || ::lstat(f.root.c_str(), &ls) != 0) {
    throw_error(ErrorCode::kInvalidArgument, spec.repo + " is not in the Hugging Face cache (" + cache_dir + ")");
  }
  return f;
}

bool is_link(const fs::path& p) {
  struct stat ls{};
  return ::lstat(p.c_str(), &ls) == 0 && S_ISLNK(ls.st_mode);
}

uint64_t remove_repo_folder(const RepoFolder& f, const std::string& repo) {
  if (is_link(f.root)) {
    ::unlink(f.root.c_str());  // a link to a folder elsewhere: only the link is ours
    return 0;
  }
  uint64_t bytes = 0;
  for (const auto& m : list_repo(f.root, repo, f.real_cache)) bytes += m.size_bytes;
  std::error_code ec;
  fs::remove_all(f.root, ec);  // does not follow links inside
  if (ec) throw_error(ErrorCode::kIo, "cannot remove " + f.root.string() + ": " + ec.message());
  return bytes;
}

// The blob a snapshot link names, when it is a plain name in this repo's blobs/ ("" otherwise).
std::string blob_of_link(const fs::path& entry, const fs::path& root) {
  std::error_code ec;
  const fs::path target = fs::read_symlink(entry, ec);
  if (ec) return "";
  const fs::path t = (entry.parent_path() / target).lexically_normal();
  if (t.parent_path() != (root / "blobs").lexically_normal()) return "";
  const std::string name = t.filename().string();
  return is_safe_blob_name(name) ? name : "";
}

}  // namespace

std::vector<CachedModel> hub_list_cached(const std::string& cache_dir) {
  std::vector<CachedModel> out;
  const std::string real_cache = real(cache_dir);
  std::error_code ec;
  for (const auto& d : fs::directory_iterator(cache_dir, ec)) {
    const std::string repo = repo_of_folder(d.path().filename().string());
    std::error_code e2;
    if (repo.empty() || d.is_symlink(e2) || !d.is_directory(e2)) continue;
    for (auto& m : list_repo(d.path(), repo, real_cache)) out.push_back(std::move(m));
  }
  std::sort(out.begin(), out.end(), [](const CachedModel& a, const CachedModel& b) {
    return a.repo != b.repo ? a.repo < b.repo : a.quant < b.quant;
  });
  return out;
}

RemoveResult hub_remove_cached(const std::string& cache_dir, const std::string& spec_text) {
  if (spec_text.find('@') != std::string::npos) {
    throw_error(ErrorCode::kInvalidArgument, "rm takes org/name[:quant] (every revision is removed): '" + spec_text + "'");
  }
  const HubSpec spec = parse_hub_spec(spec_text);
  const RepoFolder f = find_repo(cache_dir, spec);
  RemoveResult res;
  const std::string folder = repo_folder_name(spec.repo);
  if (spec.quant.empty()) {
    res.freed_bytes = remove_repo_folder(f, spec.repo);
    res.removed.push_back(folder);
    return res;
  }
  const std::string want = upper(spec.quant);
  const std::string real_root = real(f.root);
  if (is_link(f.root) || !inside(f.real_cache, real_root)) {
    throw_error(ErrorCode::kInvalidArgument, "the cache folder of " + spec.repo + " is a link out of the cache; 'oxinfer rm " +
                                                 spec.repo + "' removes the link (and nothing it points to)");
  }
  const auto before = list_repo(f.root, spec.repo, f.real_cache);
  if (std::none_of(before.begin(), before.end(), [&](const CachedModel& m) { return m.quant == want; })) {
    std::string there;
    for (const auto& m : before) there += (there.empty() ? "" : ", ") + (m.quant.empty() ? "the safetensors checkpoint" : m.quant);
    throw_error(ErrorCode::kInvalidArgument, "no quant '" + spec.quant + "' of " + spec.repo + " in the cache; there: " +
                                                 (there.empty() ? "(no model)" : there));
  }
  // 1. The quant's snapshot entries (links or plain files), whose folder is really ours.
  std::set<std::string> candidates;  // blobs they linked to
  std::set<fs::path> dirs;
  for (const auto& s : scan_repo(f.root, f.real_cache)) {
    for (const auto& e : s.entries) {
      if (!is_model_gguf(e.rel) || gguf_quant_label(e.rel) != want) continue;
      if (!inside(real_root, real(e.path.parent_path()))) continue;
      struct stat ls{};
      if (::lstat(e.path.c_str(), &ls) != 0) continue;
      const std::string blob = S_ISLNK(ls.st_mode) ? blob_of_link(e.path, f.root) : "";
      if (::unlink(e.path.c_str()) != 0) throw_error(ErrorCode::kIo, "cannot remove " + e.path.string());
      if (!blob.empty()) candidates.insert(blob);
      if (S_ISREG(ls.st_mode) && ls.st_nlink == 1) res.freed_bytes += static_cast<uint64_t>(ls.st_size);
      res.removed.push_back((fs::path(folder) / "snapshots" / s.commit / e.rel).generic_string());
      for (fs::path p = e.path.parent_path(); p != s.dir && p.has_parent_path(); p = p.parent_path()) dirs.insert(p);
    }
  }
  // 2. Their blobs, unless another entry still reaches them (by name, or as the same file however
  // it is linked); only in the repo's own blobs/.
  std::set<std::pair<dev_t, ino_t>> still_used;
  for (const auto& s : scan_repo(f.root, f.real_cache)) {
    for (const auto& e : s.entries) {
      candidates.erase(blob_of_link(e.path, f.root));
      if (e.counted) still_used.insert({e.dev, e.ino});
    }
  }
  if (real(f.root / "blobs") == real_root + "/blobs") {
    for (const auto& b : candidates) {
      const fs::path p = f.root / "blobs" / b;
      struct stat ls{};
      if (::lstat(p.c_str(), &ls) != 0 || still_used.count({ls.st_dev, ls.st_ino}) || ::unlink(p.c_str()) != 0) continue;
      if (S_ISREG(ls.st_mode)) res.freed_bytes += static_cast<uint64_t>(ls.st_size);
      res.removed.push_back((fs::path(folder) / "blobs" / b).generic_string());
    }
  }
  // 3. Folders left empty (a quant's subfolder), deepest first; then the repo when no model is left.
  for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) ::rmdir(it->c_str());
  if (list_repo(f.root, spec.repo, f.real_cache).empty()) {
    res.freed_bytes += remove_repo_folder(f, spec.repo);
    res.removed.push_back(folder);
  }
  return res;
}

}  // namespace oxi
