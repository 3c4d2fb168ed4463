#include "kernels/pack.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
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

// Where the copies live. Linux: blocks of address space (kBlockBytes, or one copy's size when
// larger) asked for with transparent huge pages, the copies placed one after another in them. The
// copies are written once in full right after they are reserved, so a fresh 4 KiB page fault per
// 4 KiB costs more than the packing itself on a VM (measured on a 2-core Zen 5 guest: writing
// 700 MiB of new 4 KiB pages ~2.4 s, of huge pages ~65 ms once the host backs them;
// docs/kernels.md, "Packed copies in huge pages"). A copy per allocation got huge pages only
// when it was 2 MiB or more (most FFN matrices of the 0.8B shape are just under) and kept a
// partly used huge page at each copy's end; in shared blocks only each block's last page is
// partly used, and untouched address space is not resident. A block is unmapped when the last
// copy in it goes (copies hold it). A dropped copy's bytes stay unused until then (copies are
// dropped only when another matrix reuses an address while some model stays open).
// Elsewhere (wasm: memory there is committed when reserved) each copy has its own allocation.
constexpr uint64_t kHugePage = 2ull << 20;

struct Block {
  uint8_t* base = nullptr;  // kHugePage-aligned start of the usable bytes
  uint64_t size = 0, used = 0;
  void* map = nullptr;  // what to release
  uint64_t map_bytes = 0;
  Block() = default;
  Block(const Block&) = delete;
  Block& operator=(const Block&) = delete;
  ~Block();
};

constexpr uint64_t kBlockBytes = 256ull << 20;

#if defined(__linux__) && defined(MADV_HUGEPAGE)
Block::~Block() {
  if (map) munmap(map, map_bytes);
}

// A new block of at least n bytes (address space only: pages are faulted in as copies are written).
std::shared_ptr<Block> new_block(uint64_t n) {
  auto b = std::make_shared<Block>();
  b->size = (std::max(n, kBlockBytes) + kHugePage - 1) / kHugePage * kHugePage;
  b->map_bytes = b->size + kHugePage;  // room to align the start
  b->map = mmap(nullptr, b->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (b->map == MAP_FAILED) {
    b->map = nullptr;
    throw std::bad_alloc();
  }
  const auto at = reinterpret_cast<uintptr_t>(b->map);
  b->base = reinterpret_cast<uint8_t*>((at + kHugePage - 1) / kHugePage * kHugePage);
  madvise(b->base, b->size, MADV_HUGEPAGE);
  return b;
}
constexpr bool kShareBlocks = true;
#else
Block::~Block() { std::free(map); }

std::shared_ptr<Block> new_block(uint64_t n) {
  auto b = std::make_shared<Block>();
  b->size = (n + 63) / 64 * 64;
  b->map = std::aligned_alloc(64, b->size);
  if (!b->map) throw std::bad_alloc();
  b->base = static_cast<uint8_t*>(b->map);
  return b;
}
constexpr bool kShareBlocks = false;
#endif

struct Entry : PackedMatrix {
  const Kernels* isa = nullptr;
  DType dtype = DType::F32;
  int64_t cols = 0;
  uint64_t row_bytes = 0;
  uint8_t fingerprint[3][64] = {};
  std::shared_ptr<Block> block;  // holds data's bytes
};

struct Cache {
  std::mutex mu;
  std::unordered_map<const uint8_t*, std::shared_ptr<const Entry>> map;
  uint64_t bytes = 0;
  std::shared_ptr<Block> current;  // the block new copies go into (kShareBlocks)
  std::atomic<int> leases{0};
};

// n bytes (64-byte aligned) for a copy, in the current block while it has room. Under c.mu.
uint8_t* reserve_locked(Cache& c, uint64_t n, std::shared_ptr<Block>& holder) {
  n = (n + 63) / 64 * 64;
  if (!kShareBlocks || !c.current || c.current->size - c.current->used < n) {
    holder = new_block(n);
    if (kShareBlocks && n < kBlockBytes / 2) c.current = holder;  // a block of one large copy stays its own
  } else {
    holder = c.current;
  }
  uint8_t* p = holder->base + holder->used;
  holder->used += n;
  return p;
}

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
  uint8_t* dst = reserve_locked(c, total, e->block);
  e->data = dst;
  for (int k = 0; k < 3; ++k) std::memcpy(e->fingerprint[k], w.data + off[k], 64);
  const PackFn pack = K.pack[wt];
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
    c.current.reset();
    c.bytes = 0;
  }
}

PackStats pack_stats() {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return {static_cast<uint64_t>(c.map.size()), c.bytes};
}

}  // namespace oxi::kern
