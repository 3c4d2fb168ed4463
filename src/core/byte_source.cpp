#include "core/byte_source.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <new>
#include <random>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/error.h"

#if !defined(__EMSCRIPTEN__) && !defined(_WIN32)
#define OXI_HAVE_MMAP 1
#include <signal.h>
#include <sys/mman.h>
#endif

namespace oxi {

const uint8_t* ByteSource::range(uint64_t offset, uint64_t len) const {
  const uint64_t n = size();
  if (offset > n || len > n - offset) {
    format_error(name(), "range [" + std::to_string(offset) + ", +" + std::to_string(len) +
                             ") is outside the file (size " + std::to_string(n) + ")");
  }
  return data() + offset;
}

namespace {

class MemorySource final : public ByteSource {
 public:
  MemorySource(std::vector<uint8_t> bytes, std::string name)
      : ByteSource(std::move(name)), bytes_(std::move(bytes)), data_(bytes_.data()), size_(bytes_.size()) {}
  // Bytes read into a buffer that was never zero-filled (a whole model file in the wasm build:
  // zeroing 500 MB first took a third of the load time).
  MemorySource(std::unique_ptr<uint8_t[]> raw, uint64_t size, std::string name)
      : ByteSource(std::move(name)), raw_(std::move(raw)), data_(raw_.get()), size_(size) {}
  const uint8_t* data() const override {
    static const uint8_t kEmpty = 0;
    return size_ == 0 ? &kEmpty : data_;
  }
  uint64_t size() const override { return size_; }

 private:
  std::vector<uint8_t> bytes_;
  std::unique_ptr<uint8_t[]> raw_;
  const uint8_t* data_;
  uint64_t size_;
};

#ifdef OXI_HAVE_MMAP
// ---- A mapped file truncated on disk (issue 29 #9) ----
// Reading a page of a mapping that lies past the file's new end raises SIGBUS, which killed the
// server on the next request. Copying the weights into memory would cost the load time and RSS
// that mapping saves, and a size check before each request still races with the truncation. So:
// a SIGBUS inside one of our mappings maps a zero page over the faulting page (the read resumes
// and sees zeros) and records the damage; Model::forward_batch, on every caller's path, checks
// damaged_mapped_file() after each pass and fails the call with an error naming the file. A
// SIGBUS anywhere else gets the handler that was there before (a real crash stays a crash).
// The handler reads only this lock-free table (no mutex, no allocation in a signal handler).
constexpr int kMapSlots = 512;
struct MapSlot {
  std::atomic<uintptr_t> lo{0}, hi{0};
};
MapSlot g_map_slots[kMapSlots];
std::atomic<int> g_damaged_slot{-1};
uintptr_t g_page_size = 4096;
struct sigaction g_prev_sigbus {};

void on_sigbus(int sig, siginfo_t* si, void*) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(si->si_addr);
  for (int i = 0; i < kMapSlots; ++i) {
    if (a < g_map_slots[i].lo.load() || a >= g_map_slots[i].hi.load()) continue;
    void* page = reinterpret_cast<void*>(a & ~(g_page_size - 1));
    if (::mmap(page, g_page_size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED) {
      g_damaged_slot.store(i);
      return;  // the faulting read runs again and sees the zero page
    }
    break;
  }
  // Not ours: put the previous handler back; the faulting instruction runs again and reaches it.
  ::sigaction(sig, &g_prev_sigbus, nullptr);
}

void install_sigbus_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_page_size = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, &g_prev_sigbus);
  });
}

// The slot of a new mapping (-1 when all are taken: that mapping is then not covered).
int claim_map_slot(const void* base, uint64_t size) {
  install_sigbus_handler();
  for (int i = 0; i < kMapSlots; ++i) {
    uintptr_t expected = 0;
    if (g_map_slots[i].hi.load() != 0) continue;
    const uintptr_t lo = reinterpret_cast<uintptr_t>(base);
    if (g_map_slots[i].lo.compare_exchange_strong(expected, lo)) {
      g_map_slots[i].hi.store(lo + size);
      return i;
    }
  }
  return -1;
}

void free_map_slot(int i) {
  if (i < 0) return;
  g_map_slots[i].hi.store(0);
  g_map_slots[i].lo.store(0);
}

std::mutex g_damaged_mu;
std::string g_damaged_name;  // the damaged mapping's file, recorded before its slot is reused

class MappedSource;

// Open mappings by start address, for release_mapped_range.
struct MappedRegistry {
  std::mutex mu;
  std::map<uintptr_t, const MappedSource*> by_start;
};
MappedRegistry& mapped_registry() {
  static MappedRegistry* r = new MappedRegistry;  // never destroyed: sources may outlive statics
  return *r;
}

class MappedSource final : public ByteSource {
 public:
  MappedSource(const std::string& path, void* base, uint64_t size)
      : ByteSource(path), base_(base), size_(size) {
    if (base_ == nullptr) return;
    slot_ = claim_map_slot(base_, size_);
    MappedRegistry& r = mapped_registry();
    std::lock_guard<std::mutex> lock(r.mu);
    r.by_start[reinterpret_cast<uintptr_t>(base_)] = this;
  }
  ~MappedSource() override {
    if (base_ == nullptr) return;
    damaged_mapped_file();  // records the name if this mapping was hit
    free_map_slot(slot_);
    {
      MappedRegistry& r = mapped_registry();
      std::lock_guard<std::mutex> lock(r.mu);
      r.by_start.erase(reinterpret_cast<uintptr_t>(base_));
    }
    munmap(base_, size_);
  }
  const uint8_t* data() const override {
    static const uint8_t kEmpty = 0;
    return base_ ? static_cast<const uint8_t*>(base_) : &kEmpty;
  }
  int slot() const { return slot_; }
  uint64_t size() const override { return size_; }
  void release(uint64_t offset, uint64_t len) const override {
    if (!base_ || offset >= size_) return;
    len = std::min(len, size_ - offset);
    const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
    const uint64_t lo = (offset + page - 1) / page * page, hi = (offset + len) / page * page;
    if (hi <= lo) return;
    uint8_t* p = static_cast<uint8_t*>(base_) + lo;
#ifdef MADV_NOHUGEPAGE
    // Where the kernel maps file pages by 2 MiB (transparent huge pages "always" and a file system
    // with large folios: ext4 on Linux 6.18 does), one later read near a released range (a token's
    // embedding row, a norm vector) would map its whole 2 MiB back; small pages keep that to the
    // fault-around window (0.8B Q4_0 pp512 + tg: peak RSS 900 → 769 MiB from this alone).
    ::madvise(p, hi - lo, MADV_NOHUGEPAGE);
#endif
    // Read-only shared file mapping: MADV_DONTNEED only unmaps the pages (never changes contents).
    ::madvise(p, hi - lo, MADV_DONTNEED);
  }

 private:
  void* base_;
  uint64_t size_;
  int slot_ = -1;
};
#endif

[[noreturn]] void io_error(const std::string& path, const std::string& what) {
  throw_error(ErrorCode::kIo, path + ": " + what + " (" + std::strerror(errno) + ")");
}

std::vector<uint8_t> read_all(const std::string& path, uint64_t max_bytes) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) io_error(path, "cannot open");
  std::vector<uint8_t> out;
  uint8_t buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
    if (out.size() + n > max_bytes) {
      std::fclose(f);
      throw_error(ErrorCode::kIo, path + ": file is larger than " + std::to_string(max_bytes) + " bytes");
    }
    out.insert(out.end(), buf, buf + n);
  }
  const bool err = std::ferror(f) != 0;
  std::fclose(f);
  if (err) io_error(path, "read failed");
  return out;
}

}  // namespace

bool release_mapped_range(const void* p, uint64_t n) {
#ifdef OXI_HAVE_MMAP
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  MappedRegistry& r = mapped_registry();
  // Held while releasing, so the mapping cannot be unmapped in between.
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.by_start.upper_bound(a);
  if (it == r.by_start.begin()) return false;
  --it;
  const uint64_t off = a - it->first;
  if (off >= it->second->size() || n > it->second->size() - off) return false;
  it->second->release(off, n);
  return true;
#else
  (void)p;
  (void)n;
  return false;
#endif
}

std::string damaged_mapped_file() {
#ifdef OXI_HAVE_MMAP
  const int slot = g_damaged_slot.load();
  if (slot < 0) return "";
  std::lock_guard<std::mutex> dl(g_damaged_mu);
  if (g_damaged_name.empty()) {
    MappedRegistry& r = mapped_registry();
    std::lock_guard<std::mutex> lock(r.mu);
    for (const auto& [start, src] : r.by_start) {
      if (src->slot() == slot) g_damaged_name = src->name();
    }
    if (g_damaged_name.empty()) g_damaged_name = "a model file";
  }
  return g_damaged_name;
#else
  return "";
#endif
}

ByteSourcePtr memory_source(std::vector<uint8_t> bytes, std::string name) {
  return std::make_shared<MemorySource>(std::move(bytes), std::move(name));
}

namespace {

// The whole file in memory: read at its size into an uninitialised buffer in 16 MiB reads (the wasm
// build's model files: no zero-fill, few calls into the browser's file reader); a file that is not
// regular is read the general way.
ByteSourcePtr read_file_source(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) io_error(path, "cannot open");
  struct stat st {};
  if (::fstat(::fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
      static_cast<uint64_t>(st.st_size) <= static_cast<uint64_t>(SIZE_MAX)) {
    const size_t size = static_cast<size_t>(st.st_size);
    std::unique_ptr<uint8_t[]> buf(new (std::nothrow) uint8_t[size]);
    if (!buf) {
      std::fclose(f);
      throw_error(ErrorCode::kIo, path + ": not enough memory to hold the file (" + std::to_string(size) + " bytes)");
    }
    size_t off = 0;
    while (off < size) {
      const size_t n = std::fread(buf.get() + off, 1, std::min<size_t>(size - off, size_t{16} << 20), f);
      if (n == 0) break;
      off += n;
    }
    const bool err = std::ferror(f) != 0;
    std::fclose(f);
    if (err) io_error(path, "read failed");
    return std::make_shared<MemorySource>(std::move(buf), off, path);
  }
  std::fclose(f);
  return memory_source(read_all(path, ~0ull), path);
}

std::atomic<bool> g_use_mmap{true};

}  // namespace

void set_use_mmap(bool use) { g_use_mmap = use; }

ByteSourcePtr open_file_source(const std::string& path) {
#ifdef OXI_HAVE_MMAP
  if (!g_use_mmap) return read_file_source(path);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) io_error(path, "cannot open");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    io_error(path, "cannot stat");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw_error(ErrorCode::kIo, path + ": not a regular file");
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  void* base = nullptr;
  if (size > 0) {
    base = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
      ::close(fd);
      io_error(path, "mmap failed");
    }
  }
  ::close(fd);
  return std::make_shared<MappedSource>(path, base, size);
#else
  return read_file_source(path);
#endif
}

std::string read_text_file(const std::string& path, uint64_t max_bytes) {
  auto bytes = read_all(path, max_bytes);
  return std::string(bytes.begin(), bytes.end());
}

namespace {

// A new file for writing next to `path`; never an existing file or a symlink (O_EXCL | O_NOFOLLOW).
std::FILE* create_temp_beside(const std::string& path, std::string& tmp) {
  std::random_device rd;
  for (int attempt = 0; attempt < 64; ++attempt) {
    char suffix[32];
    std::snprintf(suffix, sizeof(suffix), ".tmp.%ld.%08x", static_cast<long>(::getpid()), static_cast<unsigned>(rd()));
    tmp = path + suffix;
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 && errno == EEXIST) continue;  // planted or left over: pick another name
    if (fd < 0) io_error(tmp, "cannot create");
    std::FILE* f = ::fdopen(fd, "wb");
    if (!f) {
      ::close(fd);
      ::unlink(tmp.c_str());
      io_error(tmp, "cannot create");
    }
    return f;
  }
  io_error(path, "cannot create a temporary file beside it");
}

}  // namespace

void write_file_atomic(const std::string& path, const std::function<void(std::FILE*)>& fill) {
  std::string tmp;
  std::FILE* f = create_temp_beside(path, tmp);
  try {
    fill(f);
    if (std::fflush(f) != 0) io_error(path, "write failed");
  } catch (...) {
    std::fclose(f);
    ::unlink(tmp.c_str());
    throw;
  }
  if (std::fclose(f) != 0) {
    ::unlink(tmp.c_str());
    io_error(path, "write failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    io_error(path, "rename failed");
  }
}

void write_file_atomic(const std::string& path, const void* data, size_t n) {
  write_file_atomic(path, [&](std::FILE* f) {
    if (n != 0 && std::fwrite(data, 1, n, f) != n) io_error(path, "write failed");
  });
}

}  // namespace oxi
