// Generated Unicode tables (see gen_unicode_tables.py) and the small lookups over them.
#pragma once

#include <cstdint>

namespace oxi::unicode_tables {

struct DecompEntry { uint32_t cp, offset, len; };
struct CompEntry { uint64_t key; uint32_t composite; };  // key = first << 21 | second

extern const char kUnicodeVersion[];
extern const uint16_t flags_index[];
extern const uint8_t flags_data[];
extern const uint16_t ccc_index[];
extern const uint8_t ccc_data[];
extern const uint32_t kNumDecomp;
extern const DecompEntry decomp_entries[];
extern const uint32_t decomp_data[];
extern const uint32_t kNumComp;
extern const CompEntry comp_entries[];

}  // namespace oxi::unicode_tables
