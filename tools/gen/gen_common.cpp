#include "gen_common.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/byte_source.h"
#include "core/error.h"
#include "core/half.h"
#include "format/safetensors.h"

namespace oxi::gen {

namespace fs = std::filesystem;

GenArgs::GenArgs(std::vector<std::string> argv) {
  for (size_t i = 0; i < argv.size(); ++i) {
    std::string a = argv[i];
    if (a.size() < 3 || a.rfind("--", 0) != 0) {
      throw_error(ErrorCode::kInvalidArgument, "unexpected argument '" + a + "'");
    }
    std::string value;
    auto eq = a.find('=');
    if (eq != std::string::npos) {
      value = a.substr(eq + 1);
      a = a.substr(0, eq);
    } else if (i + 1 < argv.size() && argv[i + 1].rfind("--", 0) != 0) {
      value = argv[++i];
    }
    values_[a] = value;
  }
  out_dir = get_str("--out", "");
  if (out_dir.empty()) throw_error(ErrorCode::kInvalidArgument, "--out DIR is required");
  seed = static_cast<uint64_t>(get_int("--seed", 1));
  std::string dt = get_str("--dtype", "bf16");
  auto d = dtype_from_name(dt);
  if (!d || (*d != DType::BF16 && *d != DType::F32 && *d != DType::F16)) {
    throw_error(ErrorCode::kInvalidArgument, "--dtype must be bf16, f16 or f32 (got '" + dt + "')");
  }
  dtype = *d;
  shards = static_cast<int>(get_int("--shards", 1));
  if (shards < 1 || shards > 64) throw_error(ErrorCode::kInvalidArgument, "--shards must be 1..64");
  tokenizer_dir = get_str("--tokenizer-dir", "");
  chat_template = get_str("--chat-template", "");
}

bool GenArgs::has(const std::string& name) const { return values_.count(name) != 0; }

std::string GenArgs::get_str(const std::string& name, const std::string& def) {
  used_[name] = true;
  auto it = values_.find(name);
  return it == values_.end() ? def : it->second;
}

int64_t GenArgs::get_int(const std::string& name, int64_t def) {
  used_[name] = true;
  auto it = values_.find(name);
  if (it == values_.end()) return def;
  try {
    size_t pos = 0;
    long long v = std::stoll(it->second, &pos);
    if (pos != it->second.size()) throw std::invalid_argument("trailing");
    return v;
  } catch (const std::exception&) {
    throw_error(ErrorCode::kInvalidArgument, "invalid value for " + name + ": '" + it->second + "'");
  }
}

double GenArgs::get_float(const std::string& name, double def) {
  used_[name] = true;
  auto it = values_.find(name);
  if (it == values_.end()) return def;
  try {
    size_t pos = 0;
    double v = std::stod(it->second, &pos);
    if (pos != it->second.size()) throw std::invalid_argument("trailing");
    return v;
  } catch (const std::exception&) {
    throw_error(ErrorCode::kInvalidArgument, "invalid value for " + name + ": '" + it->second + "'");
  }
}

bool GenArgs::flag(const std::string& name) {
  used_[name] = true;
  auto it = values_.find(name);
  if (it == values_.end()) return false;
  if (!it->second.empty()) {
    throw_error(ErrorCode::kInvalidArgument, name + " takes no value (got '" + it->second + "')");
  }
  return true;
}

void GenArgs::finish() const {
  for (const auto& [k, v] : values_) {
    if (!used_.count(k)) throw_error(ErrorCode::kInvalidArgument, "unknown option " + k);
  }
}

uint64_t Rng::next_u64() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

double Rng::uniform() { return static_cast<double>(next_u64() >> 11) * (1.0 / 9007199254740992.0); }

double Rng::normal() {
  if (have_spare_) {
    have_spare_ = false;
    return spare_;
  }
  double u1 = uniform(), u2 = uniform();
  if (u1 < 1e-300) u1 = 1e-300;
  double r = std::sqrt(-2.0 * std::log(u1));
  double th = 6.283185307179586 * u2;
  spare_ = r * std::sin(th);
  have_spare_ = true;
  return r * std::cos(th);
}

std::vector<float> randn(Rng& rng, int64_t n, double stddev, double mean) {
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<float>(mean + stddev * rng.normal());
  return v;
}

std::vector<float> randu(Rng& rng, int64_t n, double lo, double hi) {
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = static_cast<float>(lo + (hi - lo) * rng.uniform());
  return v;
}

std::vector<float> filled(int64_t n, float v) { return std::vector<float>(static_cast<size_t>(n), v); }

namespace {

std::vector<uint8_t> encode(const std::vector<float>& v, DType dt) {
  std::vector<uint8_t> out;
  if (dt == DType::F32) {
    out.resize(v.size() * 4);
    std::memcpy(out.data(), v.data(), out.size());
  } else if (dt == DType::I64) {  // integer buffers (e.g. a permutation); values exact below 2^24
    out.resize(v.size() * 8);
    for (size_t i = 0; i < v.size(); ++i) {
      const auto x = static_cast<int64_t>(v[i]);
      std::memcpy(out.data() + 8 * i, &x, 8);
    }
  } else {
    out.resize(v.size() * 2);
    for (size_t i = 0; i < v.size(); ++i) {
      uint16_t h = dt == DType::BF16 ? f32_to_bf16(v[i]) : f32_to_f16(v[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

}  // namespace

void Checkpoint::add(const std::string& name, std::vector<int64_t> shape, std::vector<float> values,
                     std::optional<DType> dtype) {
  int64_t n = 1;
  for (auto s : shape) n *= s;
  if (n != static_cast<int64_t>(values.size())) {
    throw_error(ErrorCode::kInternal, "oxi-gen: " + name + ": value count does not match shape");
  }
  DType dt = dtype.value_or(default_dtype_);
  auto bytes = encode(values, dt);
  tensors_.push_back({name, std::move(shape), std::move(bytes), dt});
}

void Checkpoint::add_randn(const std::string& name, std::vector<int64_t> shape, Rng& rng,
                           double stddev, double mean) {
  int64_t n = 1;
  for (auto s : shape) n *= s;
  const DType dt = default_dtype_;
  const size_t elt = dt == DType::F32 ? 4 : 2;
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * elt);
  constexpr int64_t kChunk = int64_t{1} << 20;
  for (int64_t i = 0; i < n; i += kChunk) {
    auto part = encode(randn(rng, std::min(kChunk, n - i), stddev, mean), dt);
    std::memcpy(bytes.data() + static_cast<size_t>(i) * elt, part.data(), part.size());
  }
  tensors_.push_back({name, std::move(shape), std::move(bytes), dt});
}

namespace {

void copy_file_to(const std::string& src, const std::string& dst) {
  std::string text = read_text_file(src);
  write_file_atomic(dst, text.data(), text.size());
}

}  // namespace

void Checkpoint::write(const GenArgs& args) {
  fs::create_directories(args.out_dir);
  const int n_shards = std::min<int>(args.shards, std::max<int>(1, static_cast<int>(tensors_.size())));
  // Greedy split by bytes, keeping file order.
  uint64_t total = 0;
  for (const auto& t : tensors_) total += t.bytes.size();
  std::vector<SafetensorsWriter> writers(static_cast<size_t>(n_shards));
  nlohmann::json weight_map = nlohmann::json::object();
  uint64_t done = 0;
  auto shard_name = [&](int s) {
    if (n_shards == 1) return std::string("model.safetensors");
    char buf[64];
    std::snprintf(buf, sizeof buf, "model-%05d-of-%05d.safetensors", s + 1, n_shards);
    return std::string(buf);
  };
  uint64_t total_bytes = 0;
  for (auto& t : tensors_) {
    int s = static_cast<int>((done * static_cast<uint64_t>(n_shards)) / std::max<uint64_t>(total, 1));
    if (s >= n_shards) s = n_shards - 1;
    done += t.bytes.size();
    total_bytes += t.bytes.size();
    writers[static_cast<size_t>(s)].add_tensor(t.name, t.dtype, t.shape, std::move(t.bytes));
    weight_map[t.name] = shard_name(s);
  }
  for (int s = 0; s < n_shards; ++s) {
    writers[static_cast<size_t>(s)].set_metadata("format", "pt");
    writers[static_cast<size_t>(s)].write(args.out_dir + "/" + shard_name(s));
  }
  if (n_shards > 1) {
    nlohmann::json idx;
    idx["metadata"] = {{"total_size", total_bytes}};
    idx["weight_map"] = weight_map;
    write_json(args.out_dir, "model.safetensors.index.json", idx);
  }
  if (!args.tokenizer_dir.empty()) {
    copy_file_to(args.tokenizer_dir + "/tokenizer.json", args.out_dir + "/tokenizer.json");
    copy_file_to(args.tokenizer_dir + "/tokenizer_config.json", args.out_dir + "/tokenizer_config.json");
  }
  if (!args.chat_template.empty()) {
    copy_file_to(args.chat_template, args.out_dir + "/chat_template.jinja");
  }
}

void write_json(const std::string& dir, const std::string& name, const nlohmann::json& j) {
  std::string s = j.dump(2) + "\n";
  write_file_atomic(dir + "/" + name, s.data(), s.size());
}

std::vector<GenFamily>& gen_families() {
  static std::vector<GenFamily> families;
  return families;
}

}  // namespace oxi::gen
