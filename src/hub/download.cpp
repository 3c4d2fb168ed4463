// Blob downloads: flock, resumable transfer into <blob>.incomplete, size + sha256 verification,
// rename into blobs/. And the progress display.
#include <curl/curl.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include "hub/hub_internal.h"

namespace fs = std::filesystem;

namespace oxi::hub {

namespace {

double now_s() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (b >= 1024 && u < 4) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.1f %s", b, units[u]);
  return buf;
}

std::string human_time(double s) {
  if (s < 0 || s > 359999) return "--:--";
  const long t = static_cast<long>(s + 0.5);
  char buf[32];
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", t / 3600, (t / 60) % 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%ld:%02ld", t / 60, t % 60);
  return buf;
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

struct Transfer {
  CURL* curl = nullptr;
  int fd = -1;
  Sha256* sha = nullptr;
  int64_t have = 0;      // bytes in the .incomplete file
  int64_t expected = -1;
  bool started = false;
  long status = 0;
  HttpResponse* resp = nullptr;
  std::string err_body;
  int write_errno = 0;
  bool too_big = false;
  bool bad_range = false;
  bool restarted = false;
  Progress* progress = nullptr;
};

size_t write_cb(char* buf, size_t size, size_t n, void* ud) {
  auto* t = static_cast<Transfer*>(ud);
  const size_t len = size * n;
  if (!t->started) {
    t->started = true;
    curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &t->status);
    if (t->status == 200 && t->have > 0) {
      // The server ignored the Range request: start over.
      if (::ftruncate(t->fd, 0) != 0 || ::lseek(t->fd, 0, SEEK_SET) != 0) {
        t->write_errno = errno;
        return 0;
      }
      t->have = 0;
      *t->sha = Sha256();
      t->restarted = true;
      if (t->progress) t->progress->update(0);
    } else if (t->status == 206) {
      // Content-Range: bytes START-END/TOTAL must start where our file ends.
      const std::string cr = t->resp->headers["content-range"];
      long long start = -1;
      if (std::sscanf(cr.c_str(), "bytes %lld-", &start) != 1 || start != t->have) {
        t->bad_range = true;
        return 0;
      }
    }
  }
  if (t->status < 200 || t->status >= 300) {
    if (t->err_body.size() < 4096) t->err_body.append(buf, std::min(len, size_t(4096)));
    return len;
  }
  if (t->expected >= 0 && t->have + static_cast<int64_t>(len) > t->expected) {
    t->too_big = true;
    return 0;
  }
  size_t off = 0;
  while (off < len) {
    const ssize_t w = ::write(t->fd, buf + off, len - off);
    if (w < 0) {
      if (errno == EINTR) continue;
      t->write_errno = errno;
      return 0;
    }
    off += static_cast<size_t>(w);
  }
  if (t->sha) t->sha->update(buf, len);
  t->have += static_cast<int64_t>(len);
  if (t->progress) t->progress->update(t->have);
  return len;
}

int attempts_allowed() {
  const std::string v = env_or("OXI_HUB_ATTEMPTS", "3");
  const int n = std::atoi(v.c_str());
  return n < 1 ? 1 : (n > 10 ? 10 : n);
}

// Hashes the existing prefix of the .incomplete file; leaves the offset at its end.
bool hash_prefix(int fd, Sha256* sha, int64_t n) {
  if (::lseek(fd, 0, SEEK_SET) != 0) return false;
  std::vector<char> buf(1 << 20);
  int64_t left = n;
  while (left > 0) {
    const ssize_t r = ::read(fd, buf.data(), static_cast<size_t>(std::min<int64_t>(left, buf.size())));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    sha->update(buf.data(), static_cast<size_t>(r));
    left -= r;
  }
  return ::lseek(fd, n, SEEK_SET) == n;
}

}  // namespace

void download_blob(const BlobRequest& req, Progress* progress) {
  std::error_code ec;
  fs::create_directories(fs::path(req.lock_path).parent_path(), ec);
  fs::create_directories(fs::path(req.blob_path).parent_path(), ec);
  Fd lock(::open(req.lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (lock.get() < 0) {
    throw_error(ErrorCode::kIo, "cannot create lock file " + req.lock_path + ": " + std::strerror(errno));
  }
  if (::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err == ENOLCK || err == EOPNOTSUPP || err == ENOSYS) {
      // A file system without locks (some network mounts): go on unlocked, like filelock's soft lock.
    } else if (err == EWOULDBLOCK) {
      std::fprintf(stderr, "waiting for another process downloading %s\n", req.label.c_str());
      while (::flock(lock.get(), LOCK_EX) != 0) {
        if (errno != EINTR) throw_error(ErrorCode::kIo, "cannot lock " + req.lock_path + ": " + std::strerror(errno));
      }
    } else {
      throw_error(ErrorCode::kIo, "cannot lock " + req.lock_path + ": " + std::strerror(err));
    }
  }
  if (fs::exists(req.blob_path, ec)) return;  // another process finished it meanwhile

  const std::string part = req.blob_path + ".incomplete";
  const bool verify = !req.sha256.empty();
  const int max_attempts = attempts_allowed();
  for (int attempt = 1;; ++attempt) {
    // The name is the HF cache's (resumable, so not exclusive); never through a planted symlink.
    Fd fd(::open(part.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644));
    if (fd.get() < 0) throw_error(ErrorCode::kIo, "cannot create " + part + ": " + std::strerror(errno));
    struct stat st {};
    ::fstat(fd.get(), &st);
    int64_t have = st.st_size;
    if (req.size >= 0 && have > req.size) {
      if (::ftruncate(fd.get(), 0) != 0) throw_error(ErrorCode::kIo, "cannot truncate " + part);
      have = 0;
    }
    Sha256 sha;
    if (have > 0 && verify && !hash_prefix(fd.get(), &sha, have)) {
      throw_error(ErrorCode::kIo, "cannot read " + part);
    }
    if (::lseek(fd.get(), have, SEEK_SET) != have) throw_error(ErrorCode::kIo, "cannot seek in " + part);
    const int64_t resumed_from = have;
    if (progress) progress->begin_file(req.label, req.size, have);

    Transfer t;
    HttpResponse resp;
    t.fd = fd.get();
    t.sha = verify ? &sha : nullptr;
    t.have = have;
    t.expected = req.size;
    t.resp = &resp;
    t.progress = progress;
    CURLcode rc = CURLE_OK;
    char errbuf[CURL_ERROR_SIZE] = {0};
    if (req.size < 0 || have < req.size) {
      CURL* c = curl_easy_init();
      if (!c) throw_error(ErrorCode::kIo, "cannot initialise libcurl");
      t.curl = c;
      curl_slist* headers = nullptr;
      setup_common(c, req.url, &headers, req.token);
      curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
      curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
      curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, curl_header_cb);
      curl_easy_setopt(c, CURLOPT_HEADERDATA, &resp);
      curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_cb);
      curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
      const std::string range = std::to_string(have) + "-";
      if (have > 0) curl_easy_setopt(c, CURLOPT_RANGE, range.c_str());
      rc = curl_easy_perform(c);
      if (!t.started) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &t.status);
      curl_slist_free_all(headers);
      curl_easy_cleanup(c);
    } else {
      t.status = 200;
    }
    const std::string sofar = human_bytes(static_cast<double>(t.have)) +
                              (req.size >= 0 ? " of " + human_bytes(static_cast<double>(req.size)) : "");
    if (t.write_errno != 0) {
      if (progress) progress->end_file(false);
      throw_error(ErrorCode::kIo, std::string(t.write_errno == ENOSPC ? "disk full" : "write error") +
                                      " writing " + part + " (" + std::strerror(t.write_errno) +
                                      "); the partial download is kept: free space and run again to resume");
    }
    if (t.too_big) {
      if (progress) progress->end_file(false);
      ::unlink(part.c_str());
      throw_error(ErrorCode::kFormat, req.label + ": the server sent more than the expected " +
                                          std::to_string(req.size) + " bytes; the download was discarded");
    }
    if (t.bad_range) {
      // Unusable partial answer: drop the partial file and start over.
      ::ftruncate(fd.get(), 0);
      if (attempt < max_attempts) continue;
      if (progress) progress->end_file(false);
      throw_error(ErrorCode::kIo, req.label + ": the server answered the resume request with a wrong range");
    }
    const bool http_ok = t.status >= 200 && t.status < 300;
    if (!http_ok && !(t.status == 416 && req.size < 0 && have > 0) && rc == CURLE_OK) {
      if (progress) progress->end_file(false);
      resp.status = t.status;
      resp.body = t.err_body;
      const bool retryable = t.status == 429 || t.status >= 500;
      if (retryable && attempt < max_attempts) {
        std::this_thread::sleep_for(std::chrono::seconds(attempt));
        continue;
      }
      if (have == 0) ::unlink(part.c_str());  // nothing to resume from
      ErrorContext ctx = req.ctx;
      ctx.path = req.label;
      throw_http_error(resp, req.url, ctx);
    }
    const bool short_read = req.size >= 0 && t.have < req.size;
    if (rc != CURLE_OK || short_read) {
      if (progress) progress->end_file(false);
      const bool progressed = t.have > resumed_from || t.restarted;
      if (attempt < max_attempts && (progressed || rc == CURLE_OPERATION_TIMEDOUT)) {
        std::fprintf(stderr, "%s: connection lost after %s, resuming\n", req.label.c_str(), sofar.c_str());
        std::this_thread::sleep_for(std::chrono::milliseconds(500 * attempt));
        continue;
      }
      const std::string why = rc != CURLE_OK ? (errbuf[0] ? std::string(errbuf) : curl_easy_strerror(rc))
                                              : std::string("the server closed the connection early");
      const std::string msg = "download of " + req.label + " interrupted after " + sofar + " (" + why +
                              "); the partial file is kept: run again to resume";
      if (t.have == 0 && resumed_from == 0) ::unlink(part.c_str());
      throw NetworkError(ErrorCode::kIo, msg);
    }
    if (verify) {
      const std::string got = sha.hex_digest();
      std::string want = req.sha256;
      for (auto& ch : want) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (got != want) {
        ::unlink(part.c_str());
        if (resumed_from > 0 && attempt < max_attempts) {
          std::fprintf(stderr, "%s: resumed partial file did not verify, downloading it again\n",
                       req.label.c_str());
          continue;
        }
        if (progress) progress->end_file(false);
        throw_error(ErrorCode::kFormat, "checksum mismatch for " + req.label + ": expected sha256 " + want +
                                            ", got " + got + "; the download was discarded");
      }
    }
    if (::fsync(fd.get()) != 0 && errno != EINVAL) {
      if (progress) progress->end_file(false);
      throw_error(ErrorCode::kIo, "cannot sync " + part + ": " + std::strerror(errno));
    }
    if (::rename(part.c_str(), req.blob_path.c_str()) != 0) {
      if (progress) progress->end_file(false);
      throw_error(ErrorCode::kIo, "cannot rename " + part + " to " + req.blob_path + ": " + std::strerror(errno));
    }
    if (progress) progress->end_file(true);
    return;
  }
}

// ---- progress ----

Progress::Progress(bool on)
    : enabled(on && !env_truthy("HF_HUB_DISABLE_PROGRESS_BARS")), tty(enabled && ::isatty(STDERR_FILENO) == 1) {}

void Progress::begin_file(const std::string& label, int64_t size, int64_t already) {
  label_ = label;
  size_ = size;
  start_bytes_ = already;
  cur_ = already;
  t0_ = now_s();
  last_draw_ = -1;
  if (!enabled) return;
  if (!tty) {
    std::fprintf(stderr, "downloading %s (%s%s)\n", label.c_str(),
                 size >= 0 ? human_bytes(static_cast<double>(size)).c_str() : "size unknown",
                 already > 0 ? (", resuming at " + human_bytes(static_cast<double>(already))).c_str() : "");
  } else {
    update(already);
  }
}

void Progress::update(int64_t file_bytes) {
  cur_ = file_bytes;
  if (!enabled) return;
  const double t = now_s();
  if (!tty) {
    // Plain lines (logs): one every 10 s for a long file.
    if (last_draw_ < 0) last_draw_ = t0_;
    if (t - last_draw_ < 10) return;
  } else if (last_draw_ >= 0 && t - last_draw_ < 0.1 && file_bytes != size_) {
    return;
  }
  last_draw_ = t;
  const double el = t - t0_;
  const double rate = el > 0.05 ? static_cast<double>(cur_ - start_bytes_) / el : 0.0;
  const double eta = (rate > 0 && size_ >= 0) ? static_cast<double>(size_ - cur_) / rate : -1;
  if (!tty) {
    std::fprintf(stderr, "  %s: %s%s, %s/s, ETA %s\n", label_.c_str(), human_bytes(static_cast<double>(cur_)).c_str(),
                 size_ >= 0 ? (" of " + human_bytes(static_cast<double>(size_))).c_str() : "",
                 human_bytes(rate).c_str(), human_time(eta).c_str());
    return;
  }
  const int pct = size_ > 0 ? static_cast<int>(100.0 * static_cast<double>(cur_) / static_cast<double>(size_)) : 0;
  const int width = 12;
  std::string bar(static_cast<size_t>(pct * width / 100), '#');
  bar.resize(width, '.');
  const int64_t total_now = done_before_ + cur_;
  // Total ETA from the rate over everything transferred since the first file started.
  if (session_t0_ < 0) session_t0_ = t0_;
  const double sel = t - session_t0_;
  const double srate = sel > 0.05 ? static_cast<double>(transferred_before_ + cur_ - start_bytes_) / sel : 0.0;
  const double teta = srate > 0 ? static_cast<double>(total_ - total_now) / srate : -1;
  char stats[256], total[160];
  std::snprintf(stats, sizeof stats, " %3d%% %s/%s %s/s ETA %s", pct, human_bytes(static_cast<double>(cur_)).c_str(),
                size_ >= 0 ? human_bytes(static_cast<double>(size_)).c_str() : "?", human_bytes(rate).c_str(),
                human_time(eta).c_str());
  std::snprintf(total, sizeof total, " | total %d/%d %s/%s ETA %s", file_index_ + 1, files_,
                human_bytes(static_cast<double>(total_now)).c_str(), human_bytes(static_cast<double>(total_)).c_str(),
                human_time(teta).c_str());
  // Never wider than the terminal, so '\r' keeps redrawing one line: drop the total, then the
  // bar, then shorten the name.
  struct winsize ws {};
  size_t cols = 80;
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) cols = ws.ws_col;
  const size_t room = cols > 1 ? cols - 1 : 0;
  std::string tail = std::string(" [") + bar + "]" + stats + total;
  if (label_.size() + tail.size() > room && 12 + tail.size() > room) tail = std::string(" [") + bar + "]" + stats;
  if (label_.size() + tail.size() > room && 12 + tail.size() > room) tail = stats;
  std::string name = label_;
  const size_t name_room = room > tail.size() ? room - tail.size() : 0;
  if (name.size() > name_room) name = name_room > 3 ? "..." + name.substr(name.size() - (name_room - 3)) : "";
  std::string text = name + tail;
  if (text.size() > room) text.resize(room);
  std::fprintf(stderr, "\r\033[K%s", text.c_str());
  std::fflush(stderr);
}

void Progress::end_file(bool ok) {
  if (enabled) {
    const double el = now_s() - t0_;
    if (tty) {
      last_draw_ = -1;
      update(cur_);
      std::fputc('\n', stderr);
    } else if (ok) {
      const double rate = el > 0.001 ? static_cast<double>(cur_ - start_bytes_) / el : 0.0;
      std::fprintf(stderr, "downloaded %s (%s in %.1f s, %s/s)\n", label_.c_str(),
                   human_bytes(static_cast<double>(cur_)).c_str(), el, human_bytes(rate).c_str());
    }
  }
  if (ok) {
    done_before_ += cur_;
    ++file_index_;
  }
  transferred_before_ += cur_ - start_bytes_;
}

}  // namespace oxi::hub
