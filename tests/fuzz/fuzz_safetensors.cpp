// libFuzzer target: the safetensors reader on arbitrary bytes.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/byte_source.h"
#include "core/error.h"
#include "format/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    oxi::SafetensorsFile f =
        oxi::read_safetensors(oxi::memory_source(std::vector<uint8_t>(data, data + size), "fuzz.safetensors"));
    uint64_t sum = 0;
    for (const auto& [name, t] : f.tensors.all()) {
      if (t.nbytes) sum += t.data()[0] + t.data()[t.nbytes - 1];
    }
    (void)sum;
  } catch (const oxi::Error&) {
  }
  return 0;
}
