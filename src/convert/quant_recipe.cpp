// llama-quantize's per-tensor type choice (see quant_recipe.h). Only the branches reachable from
// the file types quant_file_types() lists (and the architectures we convert) matter for the
// bytes, but the category, counter and layer logic follows llama.cpp's exactly so that the
// "use more bits" layers fall on the same tensors.
#include "convert/quant_recipe.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <numeric>

#include "core/error.h"
#include "models/common/quant_rule.h"

namespace oxi {

namespace {

// llama_ftype values (include/llama.h).
enum : uint32_t {
  kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ8_0 = 7, kQ5_0 = 8, kQ5_1 = 9, kQ3_K_S = 11, kQ3_K_M = 12,
  kQ3_K_L = 13, kQ4_K_S = 14, kQ4_K_M = 15, kQ5_K_S = 16, kQ5_K_M = 17, kQ6_K = 18, kIQ4_NL = 25, kIQ4_XS = 30,
  kBF16 = 32,
};

enum class Cat { TokenEmbd, AttnQ, AttnV, AttnK, AttnQkv, AttnKvB, AttnOut, FfnUp, FfnGate, FfnDown, Output, Other };

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// llama.cpp's tensor_get_category: first match wins, in this order.
Cat category(const std::string& n) {
  if (n == "output.weight") return Cat::Output;
  if (n == "token_embd.weight" || n == "per_layer_token_embd.weight") return Cat::TokenEmbd;
  if (has(n, "attn_qkv.weight")) return Cat::AttnQkv;
  if (has(n, "attn_kv_b.weight")) return Cat::AttnKvB;
  if (has(n, "attn_v.weight")) return Cat::AttnV;
  if (has(n, "attn_k.weight")) return Cat::AttnK;
  if (has(n, "attn_q.weight")) return Cat::AttnQ;
  if (has(n, "attn_output.weight")) return Cat::AttnOut;
  if (has(n, "ffn_up")) return Cat::FfnUp;
  if (has(n, "ffn_gate")) return Cat::FfnGate;
  if (has(n, "ffn_down")) return Cat::FfnDown;
  return Cat::Other;
}
bool attn_v_like(Cat c) { return c == Cat::AttnV || c == Cat::AttnQkv || c == Cat::AttnKvB; }

// Block number of "blk.N.…", −1 for other names (sscanf "blk.%d." semantics: digits after "blk.").
int block_of(const std::string& n) {
  int v = -1;
  if (std::sscanf(n.c_str(), "blk.%d.", &v) != 1) return -1;
  return v;
}

// Layers that get more bits in the _M recipes: the first and last eighth, and every third in between.
bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

int ggml_n_dims(const std::vector<int64_t>& ne) {
  for (int i = static_cast<int>(ne.size()) - 1; i >= 1; --i)
    if (ne[static_cast<size_t>(i)] != 1) return i + 1;
  return 1;
}

bool is_quantized(DType t) {
  return t != DType::F32 && t != DType::F16 && t != DType::BF16 && t != DType::F64 && t != DType::I8 &&
         t != DType::I16 && t != DType::I32 && t != DType::I64;
}

struct State {
  int n_attention_wv = 0, i_attention_wv = 0;
  int n_ffn = 0, i_ffn_down = 0, i_ffn_gate = 0, i_ffn_up = 0;
  bool tied = true;
};

// llama_tensor_get_type_impl for our file types.
DType mixed_type(State& s, const QuantModelInfo& m, uint32_t ft, DType t, const QuantTensorInfo& ti, Cat cat) {
  const bool falcon = m.arch == "falcon";
  const int n_expert = static_cast<int>(std::max<int64_t>(1, m.n_expert));
  // (i_layer, n_layer) for ffn tensors: the running counter for dense models, the block number
  // for MoE ones (their expert tensors are not one per layer).
  auto layer_info = [&](int counter) {
    int i = counter;
    if (n_expert > 1) {
      i = block_of(ti.name);
      if (i < 0 || i >= s.n_ffn)
        throw_error(ErrorCode::kFormat, "quantize: cannot tell the layer of tensor " + ti.name);
    }
    return std::make_pair(i, s.n_ffn);
  };
  if (cat == Cat::Output || (s.tied && cat == Cat::TokenEmbd)) {
    const auto tr = dtype_traits(t);
    if (falcon || !tr || ti.ne[0] % tr->block_elems != 0) t = DType::Q8_0;
    else if (t != DType::Q8_0) t = DType::Q6_K;
  } else if (cat == Cat::TokenEmbd) {
    // only the 1–2-bit recipes change untied embeddings
  } else if (attn_v_like(cat)) {
    if (ft == kQ3_K_M) t = s.i_attention_wv < 2 ? DType::Q5_K : DType::Q4_K;
    else if (ft == kQ3_K_L) t = DType::Q5_K;
    else if ((ft == kIQ4_NL || ft == kIQ4_XS) && m.n_gqa >= 4) t = DType::Q5_K;
    else if ((ft == kQ4_K_M || ft == kQ5_K_M) && use_more_bits(s.i_attention_wv, s.n_attention_wv)) t = DType::Q6_K;
    else if (ft == kQ4_K_S && s.i_attention_wv < 4) t = DType::Q5_K;
    if (m.n_expert == 8) t = DType::Q8_0;
    ++s.i_attention_wv;
  } else if (cat == Cat::AttnK) {
    if (m.n_expert == 8) t = DType::Q8_0;
  } else if (cat == Cat::FfnDown) {
    const auto [i, n] = layer_info(s.i_ffn_down);
    if (ft == kQ3_K_M) t = i < n / 16 ? DType::Q5_K : (!falcon || use_more_bits(i, n)) ? DType::Q4_K : DType::Q3_K;
    else if (ft == kQ3_K_L) t = falcon ? DType::Q4_K : DType::Q5_K;
    else if (ft == kQ4_K_M) {
      if (falcon) t = i < n / 16 ? DType::Q6_K : use_more_bits(i, n) ? DType::Q5_K : DType::Q4_K;
      else if (use_more_bits(i, n)) t = DType::Q6_K;
    } else if (i < n / 8 && (ft == kIQ4_NL || ft == kIQ4_XS)) t = DType::Q5_K;
    else if (ft == kQ5_K_M && use_more_bits(i, n)) t = DType::Q6_K;
    else if (ft == kQ4_K_S && !falcon && i < n / 8) t = DType::Q5_K;
    ++s.i_ffn_down;
  } else if (cat == Cat::AttnOut) {
    if (!falcon) {
      if (m.n_expert == 8) {
        if (ft == kQ3_K_S || ft == kQ3_K_M || ft == kIQ4_NL || ft == kQ4_K_S || ft == kQ4_K_M || ft == kIQ4_XS) t = DType::Q5_K;
      } else {
        if (ft == kQ3_K_M) t = DType::Q4_K;
        else if (ft == kQ3_K_L) t = DType::Q5_K;
      }
    } else if (ft == kQ3_K_L) {
      t = DType::Q4_K;
    }
  } else if (cat == Cat::FfnGate) {
    layer_info(s.i_ffn_gate);  // validates the layer as llama.cpp does; no type change here
    ++s.i_ffn_gate;
  } else if (cat == Cat::FfnUp) {
    layer_info(s.i_ffn_up);
    ++s.i_ffn_up;
  }
  return t;
}

}  // namespace

const std::vector<QuantFileType>& quant_file_types() {
  static const std::vector<QuantFileType> k = {
      {"Q4_K_M", kQ4_K_M, DType::Q4_K}, {"Q4_K_S", kQ4_K_S, DType::Q4_K}, {"Q5_K_M", kQ5_K_M, DType::Q5_K},
      {"Q5_K_S", kQ5_K_S, DType::Q5_K}, {"Q6_K", kQ6_K, DType::Q6_K},     {"Q8_0", kQ8_0, DType::Q8_0},
      {"Q4_0", kQ4_0, DType::Q4_0},     {"Q3_K_M", kQ3_K_M, DType::Q3_K}, {"IQ4_XS", kIQ4_XS, DType::IQ4_XS},
      {"Q3_K_S", kQ3_K_S, DType::Q3_K}, {"Q3_K_L", kQ3_K_L, DType::Q3_K}, {"Q4_1", kQ4_1, DType::Q4_1},
      {"Q5_0", kQ5_0, DType::Q5_0},     {"Q5_1", kQ5_1, DType::Q5_1},     {"IQ4_NL", kIQ4_NL, DType::IQ4_NL},
      {"F16", kF16, DType::F16},        {"BF16", kBF16, DType::BF16},     {"F32", kF32, DType::F32},
  };
  return k;
}

std::optional<QuantFileType> find_quant_file_type(const std::string& name) {
  std::string u = name;
  std::transform(u.begin(), u.end(), u.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  for (const auto& f : quant_file_types())
    if (u == f.name) return f;
  return std::nullopt;
}

std::vector<size_t> llama_tensor_order(const std::vector<std::string>& names) {
  std::vector<size_t> order(names.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::vector<int> blk(names.size());
  for (size_t i = 0; i < names.size(); ++i) blk[i] = block_of(names[i]);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (blk[a] != blk[b]) return blk[a] < blk[b];
    return names[a] < names[b];
  });
  return order;
}

std::vector<DType> quant_recipe_types(const QuantFileType& ft, const QuantModelInfo& model,
                                      const std::vector<QuantTensorInfo>& tensors, bool pure) {
  std::vector<std::string> names;
  names.reserve(tensors.size());
  for (const auto& t : tensors) names.push_back(t.name);
  const std::vector<size_t> order = llama_tensor_order(names);
  State s;
  s.n_ffn = static_cast<int>(model.n_layer_all);
  for (const auto& t : tensors) {
    const Cat c = category(t.name);
    if (attn_v_like(c)) ++s.n_attention_wv;
    if (c == Cat::Output) s.tied = false;
  }
  std::vector<DType> out(tensors.size());
  for (size_t k : order) {
    const QuantTensorInfo& t = tensors[k];
    if (t.ne.empty() || !quant_allowed(t.name, ggml_n_dims(t.ne))) {
      out[k] = t.type;
      continue;
    }
    DType nt = ft.base;
    if (is_quantized(ft.base)) {
      if (!pure) nt = mixed_type(s, model, ft.ftype, nt, t, category(t.name));
      nt = quant_fallback(nt, t.ne[0]);
    }
    out[k] = nt;
  }
  return out;
}

}  // namespace oxi
