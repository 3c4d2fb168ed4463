#include "kernels/pack.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_map>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include "core/byte_source.h"
#include "kernels/dispatch.h"
#include "kernels/thread_pool.h"

namespace oxi::kern {
namespace {

struct Entry : PackedMatrix {
  const Kernels* isa = nullptr;
  DType dtype = DType::F32;
  int64_t cols = 0;
  uint64_t row_bytes = 0;
  uint8_t fingerprint[3][64] = {};
  std::unique_ptr<uint8_t, decltype(&std::free)> owned{nullptr, &std::free};
};

struct Cache {
  std::mutex mu;
  std::unordered_map<const uint8_t*, std::shared_ptr<const Entry>> map;
  uint64_t bytes = 0;
  std::atomic<int> leases{0};
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: leases may be released during static teardown
  return *c;
}

// Offsets of the 64-byte fingerprint windows of a matrix of n bytes (n >= 64).
void windows(uint64_t n, uint64_t (&off)[3]) {
  off[0] = 0;
  off[1] = (n / 2) & ~uint64_t{63};
  off[2] = n - 64;
}

void drop_locked(Cache& c, std::unordered_map<const uint8_t*, std::shared_ptr<const Entry>>::iterator it) {
  c.bytes -= it->second->group_bytes * static_cast<uint64_t>(it->second->rows / kPackRows);
  c.map.erase(it);
}

}  // namespace

std::shared_ptr<const PackedMatrix> packed_for(const MatrixView& w, bool create) {
  // OXI_PACK_OFF=1: same-binary A/B against the file-layout GEMV (docs/kernels.md).
  static const bool pack_off = [] {
    const char* v = std::getenv("OXI_PACK_OFF");
    return v != nullptr && *v != '\0' && *v != '0';
  }();
  Cache& c = cache();
  if (pack_off || c.leases.load(std::memory_order_relaxed) <= 0 || w.rows < kPackRows) return nullptr;
  const int wt = wtype_index(w.dtype);
  const Kernels& K = active_kernels();
  if (wt < 0 || !K.mm_packed[wt] || !K.pack[wt]) return nullptr;
  const uint64_t n = static_cast<uint64_t>(w.rows) * w.row_bytes;
  uint64_t off[3];
  windows(n, off);
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.map.find(w.data);
  if (it != c.map.end()) {
    const Entry& e = *it->second;
    bool same = e.isa == &K && e.dtype == w.dtype && e.cols == w.cols && e.row_bytes == w.row_bytes &&
                e.rows == w.rows / kPackRows * kPackRows;
    for (int k = 0; same && k < 3; ++k) same = std::memcmp(e.fingerprint[k], w.data + off[k], 64) == 0;
    if (same) return it->second;
    drop_locked(c, it);
  }
  if (!create) return nullptr;
  auto e = std::make_shared<Entry>();
  const int64_t groups = w.rows / kPackRows;
  e->isa = &K;
  e->dtype = w.dtype;
  e->cols = w.cols;
  e->row_bytes = w.row_bytes;
  e->rows = groups * kPackRows;
  e->group_bytes = static_cast<uint64_t>(kPackRows) * *dtype_row_bytes(w.dtype, static_cast<uint64_t>(w.cols));
  const uint64_t total = e->group_bytes * static_cast<uint64_t>(groups);
  // 2 MiB aligned and, where the kernel does transparent huge pages on request, backed by them:
  // the copy is written once in full, and 4 KiB page faults cost more than the copying on a VM.
  constexpr uint64_t kHuge = 2ull << 20;
  const uint64_t align = total >= kHuge ? kHuge : 64;
  e->owned.reset(static_cast<uint8_t*>(std::aligned_alloc(align, (total + align - 1) / align * align)));
  if (!e->owned) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (align == kHuge) madvise(e->owned.get(), (total + align - 1) / align * align, MADV_HUGEPAGE);
#endif
  e->data = e->owned.get();
  for (int k = 0; k < 3; ++k) std::memcpy(e->fingerprint[k], w.data + off[k], 64);
  const PackFn pack = K.pack[wt];
  uint8_t* dst = e->owned.get();
  // From here on every reader of rows [0, e->rows) goes through the copy (prefill too, through
  // Kernels::unpack), so the file's pages of each packed chunk leave the resident set: peak RSS
  // holds one copy of the matrix, not two. The pages stay in the page cache.
  const uint64_t group_src = static_cast<uint64_t>(kPackRows) * w.row_bytes;
  auto run = [&](int64_t g0, int64_t g1) {
    pack(w.data, w.row_bytes, w.cols, g0, g1, dst);
    release_mapped_range(w.data + static_cast<uint64_t>(g0) * group_src, static_cast<uint64_t>(g1 - g0) * group_src);
  };
  if (in_parallel_region()) {
    run(0, groups);
  } else {
    parallel_for_chunked(groups, 16, run);
  }
  release_mapped_range(w.data, static_cast<uint64_t>(groups) * group_src);  // pages two chunks shared
  c.bytes += total;
  c.map.emplace(w.data, e);
  return e;
}

PackLease::PackLease() { cache().leases.fetch_add(1); }

PackLease::~PackLease() {
  Cache& c = cache();
  if (c.leases.fetch_sub(1) == 1) {
    std::lock_guard<std::mutex> lock(c.mu);
    c.map.clear();
    c.bytes = 0;
  }
}

PackStats pack_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return {static_cast<uint64_t>(c.map.size()), c.bytes};
}

}  // namespace oxi::kern
