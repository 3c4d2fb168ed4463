// Load-once repacked weight copies for the CPU kernels (the "ISA-friendly layout" of docs/kernels.md,
// "Packed GEMV"). Decode (up to kPackedGemvMaxTokens tokens: one per sequence of a batch) of a
// matrix whose type has a packed kernel in the active ISA table (Kernels::mm_packed) reads a
// row-interleaved copy made on the matrix's first such call; once it exists, calls with more
// tokens rebuild file-layout rows from it per 16-row group (Kernels::unpack) instead of reading
// the file, whose pages are released. Never written to a file.
//
// Lifetime: copies exist only while a PackLease is held (every open Model holds one) and are all
// dropped when the last lease goes. They are found by the matrix's address, dims and a fingerprint
// of its first, middle and last 64 bytes, so a matrix freed and another placed at the same address
// (tests, a model closed while another stays open) is packed again, not served stale.
#pragma once

#include <cstdint>
#include <memory>

#include "kernels/matmul.h"

namespace oxi::kern {

inline constexpr int kPackRows = 16;
inline constexpr uint64_t kPackQ4KBlock = 16 * 144;  // one super-block of 16 Q4_K rows
inline constexpr uint64_t kPackQ6KBlock = 16 * 210;  // one super-block of 16 Q6_K rows
inline constexpr uint64_t kPackQ40Block = 16 * 18;   // one block of 16 Q4_0 rows
// Calls of up to this many tokens run the packed kernel (Kernels::mm_packed) for all of them and
// create the copy if it is missing; more tokens read an existing copy through Kernels::unpack.
inline constexpr int64_t kPackedGemvMaxTokens = 16;

struct PackedMatrix {
  const uint8_t* data = nullptr;  // 16-row group g at data + g · group_bytes
  uint64_t group_bytes = 0;
  int64_t rows = 0;  // rows covered: a multiple of 16
};

// The packed copy of w for the active ISA (made now if missing and `create`), or nullptr: no
// lease held, no packed kernel for its type, or fewer than 16 rows. Thread-safe; the copy stays
// valid while the returned pointer is held. Making one drops the file's pages of the packed rows
// from the resident set (release_mapped_range): callers read those rows from the copy after it.
std::shared_ptr<const PackedMatrix> packed_for(const MatrixView& w, bool create = true);

// Held by every open model; the last one released drops every packed copy.
class PackLease {
 public:
  PackLease();
  ~PackLease();
  PackLease(const PackLease&) = delete;
  PackLease& operator=(const PackLease&) = delete;
};

// Diagnostics and tests: packed copies held now, and their bytes.
struct PackStats {
  uint64_t matrices = 0, bytes = 0;
};
PackStats pack_stats();

// The AVX-512 packers, unpackers and kernels (x86/avx512_pack.cpp).
struct MMArgs;
void pack_q4_0_avx512(const uint8_t* w, uint64_t w_stride, int64_t cols, int64_t g0, int64_t g1, uint8_t* dst);
void unpack_q4_0_avx512(const uint8_t* group, int64_t cols, uint8_t* rows, uint64_t row_stride);
void mm_q4_0_packed_avx512(const MMArgs& a);
// The file-layout Q4_0 GEMV's activation for tokens [a.t0, a.t1) (token t at
// (t − a.t0) · prepared_q4_0_stride(nb)), prepared once per call and thread while a.t0 == 0 and
// a.x_id is set (x86/avx512.cpp; the packed Q4_0 kernels read the same one).
const uint8_t* prepared_q4_0_act(const MMArgs& a, int64_t nb);
inline uint64_t prepared_q4_0_stride(int64_t nb) { return static_cast<uint64_t>((nb + 3) / 4) * 256; }
void pack_q4_K_avx512(const uint8_t* w, uint64_t w_stride, int64_t cols, int64_t g0, int64_t g1, uint8_t* dst);
void unpack_q4_K_avx512(const uint8_t* group, int64_t cols, uint8_t* rows, uint64_t row_stride);
void mm_q4_K_packed_avx512(const MMArgs& a);
void pack_q6_K_avx512(const uint8_t* w, uint64_t w_stride, int64_t cols, int64_t g0, int64_t g1, uint8_t* dst);
void unpack_q6_K_avx512(const uint8_t* group, int64_t cols, uint8_t* rows, uint64_t row_stride);
void mm_q6_K_packed_avx512(const MMArgs& a);

// The AVX2 ones (x86/avx2_pack.cpp; the same packed layout): `file` is the AVX2 table's file-
// layout kernel of the type, for rows past the copy.
void pack_q4_0_avx2(const uint8_t* w, uint64_t w_stride, int64_t cols, int64_t g0, int64_t g1, uint8_t* dst);
void unpack_q4_0_avx2(const uint8_t* group, int64_t cols, uint8_t* rows, uint64_t row_stride);
void mm_q4_0_packed_avx2(const MMArgs& a, void (*file)(const MMArgs&));
void pack_q4_K_avx2(const uint8_t* w, uint64_t w_stride, int64_t cols, int64_t g0, int64_t g1, uint8_t* dst);
void unpack_q4_K_avx2(const uint8_t* group, int64_t cols, uint8_t* rows, uint64_t row_stride);
void mm_q4_K_packed_avx2(const MMArgs& a, void (*file)(const MMArgs&));
void pack_q6_K_avx2(const uint8_t* w, uint64_t w_stride, int64_t cols, int64_t g0, int64_t g1, uint8_t* dst);
void unpack_q6_K_avx2(const uint8_t* group, int64_t cols, uint8_t* rows, uint64_t row_stride);
void mm_q6_K_packed_avx2(const MMArgs& a, void (*file)(const MMArgs&));

}  // namespace oxi::kern
