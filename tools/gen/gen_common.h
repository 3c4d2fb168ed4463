// oxi-gen: synthetic HF checkpoints (seeded random weights, real topologies) for tests.
//
// HOW TO ADD A FAMILY (one line): in tools/gen/gen_<family>.cpp write
//
//     static int gen_myfamily(oxi::gen::GenArgs& args);   // returns the process exit code
//     OXI_GEN_FAMILY(myfamily, "--hidden N --layers N ...  (one-line help)", gen_myfamily);
//
// main.cpp finds every registered family by name: `oxi-gen myfamily --out DIR [options]`.
// The CMakeLists globs tools/gen/*.cpp, so no build edit is needed either.
//
// Helpers a family uses (all below):
//   GenArgs      parsed `--name value` / `--flag` options: get_int / get_float / get_str / flag;
//                args.finish() at the end rejects unknown options (typos fail loudly).
//                Common options every family gets: --out DIR (required), --seed N (default 1),
//                --dtype bf16|f32|f16 (default bf16), --shards N (default 1),
//                --tokenizer-dir DIR (copy tokenizer.json + tokenizer_config.json from there),
//                --chat-template FILE (copied to DIR/chat_template.jinja).
//   Rng          seeded deterministic normals/uniforms (splitmix64 + Box-Muller), platform-stable.
//   Checkpoint   add(name, shape, float values) in the order you like; write(args) writes
//                model.safetensors (or N shards + model.safetensors.index.json) in args.dtype
//                (a tensor can force its own dtype, e.g. F32 for A_log), plus the tokenizer and
//                chat template files when given; write_json(dir, "config.json", j) for configs.
//   randn(rng, n, std), randu(rng, n, lo, hi), filled(n, v): float vectors.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "format/dtype.h"

namespace oxi::gen {

class GenArgs {
 public:
  GenArgs(std::vector<std::string> argv);  // options after the family name
  // Value options. Throw oxi::Error(kInvalidArgument) on a malformed number.
  int64_t get_int(const std::string& name, int64_t def);
  double get_float(const std::string& name, double def);
  std::string get_str(const std::string& name, const std::string& def);
  bool has(const std::string& name) const;
  // A boolean flag (no value). `--tied` and `--no-tied` style pairs: use flag() on each.
  bool flag(const std::string& name);
  // Throws for options nobody asked for. Call after reading everything.
  void finish() const;

  // Common options (read by the constructor).
  std::string out_dir;
  uint64_t seed = 1;
  DType dtype = DType::BF16;
  int shards = 1;
  std::string tokenizer_dir;
  std::string chat_template;

 private:
  std::map<std::string, std::string> values_;  // "--name" → value ("" for a flag)
  std::map<std::string, bool> used_;
};

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 0x1234567ull) {}
  uint64_t next_u64();
  double uniform();  // [0, 1)
  double normal();   // N(0, 1)

 private:
  uint64_t state_;
  bool have_spare_ = false;
  double spare_ = 0;
};

std::vector<float> randn(Rng& rng, int64_t n, double stddev, double mean = 0.0);
std::vector<float> randu(Rng& rng, int64_t n, double lo, double hi);
std::vector<float> filled(int64_t n, float v);

class Checkpoint {
 public:
  // Tensors are encoded to their file dtype as they are added, so a large checkpoint (E2B-shaped:
  // a 2.3 G-entry per-layer-embedding table) is held once, at bf16, not as f32.
  explicit Checkpoint(DType default_dtype) : default_dtype_(default_dtype) {}
  // `dtype` nullopt: the checkpoint's --dtype. Values are row-major in `shape`.
  void add(const std::string& name, std::vector<int64_t> shape, std::vector<float> values,
           std::optional<DType> dtype = std::nullopt);
  // Same values as add(name, shape, randn(rng, n, stddev, mean)) but generated and encoded in
  // chunks: no f32 copy of the whole tensor.
  void add_randn(const std::string& name, std::vector<int64_t> shape, Rng& rng, double stddev,
                 double mean = 0.0);
  // model.safetensors or shards + index; tokenizer/chat template copies. Creates the directory.
  // Moves the tensors out: call once.
  void write(const GenArgs& args);
  size_t size() const { return tensors_.size(); }

 private:
  struct T {
    std::string name;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;  // encoded as `dtype`
    DType dtype;
  };
  DType default_dtype_;
  std::vector<T> tensors_;
};

// Pretty-printed JSON written atomically to dir/name.
void write_json(const std::string& dir, const std::string& name, const nlohmann::json& j);

// Registration (used by OXI_GEN_FAMILY).
using GenFn = int (*)(GenArgs&);
struct GenFamily {
  std::string name;
  std::string help;
  GenFn fn;
};
std::vector<GenFamily>& gen_families();
struct GenRegistrar {
  GenRegistrar(const char* name, const char* help, GenFn fn) { gen_families().push_back({name, help, fn}); }
};

}  // namespace oxi::gen

#define OXI_GEN_FAMILY(NAME, HELP, FN) \
  static ::oxi::gen::GenRegistrar oxi_gen_registrar_##NAME(#NAME, HELP, FN)
