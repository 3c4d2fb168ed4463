// libFuzzer target: the GGUF reader on arbitrary bytes. Must return or throw oxi::Error; anything
// else (crash, ASan report, other exception, hang) is a finding.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/byte_source.h"
#include "core/error.h"
#include "format/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    oxi::GgufFile g = oxi::read_gguf(oxi::memory_source(std::vector<uint8_t>(data, data + size), "fuzz.gguf"));
    // Touch what a model loader would: metadata accessors and every tensor's bytes.
    for (const auto& [k, v] : g.metadata.entries()) {
      try {
        if (v.is_array() && v.array_size() > 0) (void)v.element(v.array_size() - 1);
        else if (!v.is_array()) (void)v.as_float();
      } catch (const oxi::Error&) {
      }
    }
    uint64_t sum = 0;
    for (const auto& [name, t] : g.tensors.all()) {
      if (t.nbytes) sum += t.data()[0] + t.data()[t.nbytes - 1];
    }
    (void)sum;
  } catch (const oxi::Error&) {
  }
  return 0;
}
