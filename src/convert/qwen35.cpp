// HF Qwen 3.5 checkpoint → GGUF for llama.cpp's `qwen35` / `qwen35moe` (spec A.8.2, A.8.3).
// Transforms: strip language_model., A_log → −exp(A_log) (ssm_a), dt_bias → ssm_dt.bias, conv1d
// squeezed to [C, K], +1 on every zero-centred norm (not linear_attn.norm), V heads reordered from
// HF's grouped order to ggml's tiled order when Hk ≠ Hv, fused MoE gate_up split into gate/up
// stacks (per-expert tensors stacked), vocab padded with [PADn] (UNUSED) tokens. The MTP block is
// written as llama.cpp's converter does (block n_layer: the decoder block + nextn.eh_proj / enorm /
// hnorm / shared_head_norm, nextn_predict_layers = 1); the vision tower is not (mmproj).
// Tensors are produced row by row at write time (streaming). Names and per-tensor transforms come
// from the family's one table (models/qwen35/tensor_names.h), which the model's HF read shares.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "core/error.h"
#include "core/log.h"
#include "format/gguf.h"
#include "kernels/matmul.h"
#include "kernels/thread_pool.h"
#include "models/common/quant_rule.h"
#include "models/common/weights.h"
#include "convert/convert.h"
#include "convert/mlx_q4_1.h"
#include "models/qwen35/config.h"
#include "models/qwen35/tensor_names.h"
#include "tokenizer/gguf_export.h"

namespace oxi {

namespace qwen35 {
namespace {

using nlohmann::json;

// One output tensor: rows of `cols` values, each produced from some source row.
struct Plan {
  std::string name;
  std::vector<int64_t> shape;  // row-major output shape
  DType type = DType::F32;
  int64_t rows = 0, cols = 0;
  std::function<std::pair<MatrixView, int64_t>(int64_t)> src;  // out row → (matrix, row)
  std::vector<int64_t> col_perm;                                // out col → src col (optional)
  std::function<void(float*, int64_t)> fix;                     // element transform (optional)
};

class Converter {
 public:
  Converter(const HfCheckpoint& hf, const ConvertOptions& opt) : hf_(hf), opt_(opt) {}
  void run(const std::string& out_path);

 private:
  const TensorInfo& take(const std::string& name, const std::vector<int64_t>& shape) {
    used_.insert(name);
    return wt::require(hf_.tensors, name, shape);
  }
  MatrixView view(const TensorInfo& t) {
    const int64_t cols = t.shape.empty() ? 1 : t.shape.back();
    return wt::matrix(t, cols ? t.n_elements() / cols : 0, cols);
  }
  // Type of weight `name` (GGUF name, `n_dims` dims, rows of `cols`): quantised types follow
  // llama-quantize's rule (models/common/quant_rule.h); float types apply to every matrix.
  DType matrix_type(const std::string& name, int n_dims, int64_t cols) const {
    if (rule_) return rule_->target(name, n_dims, cols).value_or(DType::F32);
    return opt_.out_type;
  }
  // --type q4_1: every MLX 4-bit matrix the rule quantises becomes Q4_1 — its groups copied
  // (convert/mlx_q4_1.h), also where the rule would bump it (Q6_K output / tied embeddings, Q8_0
  // attn_k/v of 8-expert models): requantising 4-bit information to more bits adds error only.
  DType mlx_type(DType planned, DType src) const {
    return opt_.out_type == DType::Q4_1 && is_mlx_q4(src) && planned != DType::F32 ? DType::Q4_1 : planned;
  }
  // GGUF tensor `g` of shape `shape` from its HF source (tensor_names.h: name, transform, V-head
  // order, f32 or the matrix type): one output row per source row, rows or columns reordered.
  void emit(const std::string& g, const std::vector<int64_t>& shape) {
    const HfTensor h = hf_tensor(g, lm_, c_.n_layer);
    if (h.name.empty()) throw_error(ErrorCode::kInternal, "convert: no HF source for " + g);
    const TensorInfo& t = take(h.name, hf_shape(h, shape));
    MatrixView m = view(t);
    Plan p;
    p.name = g;
    p.rows = m.rows;
    p.cols = m.cols;
    p.shape = shape;
    p.type = h.f32 ? DType::F32 : mlx_type(matrix_type(g, static_cast<int>(shape.size()), m.cols), t.dtype);
    // A 1-D per-head vector is one row: its head order is a column order.
    std::vector<int64_t> order = vhead_order(c_, h.vheads), row_perm;
    if (h.vheads == VHeads::kValueCols || (h.vheads == VHeads::kHeadRows && shape.size() == 1)) p.col_perm = std::move(order);
    else row_perm = std::move(order);
    p.src = [m, row_perm](int64_t r) { return std::make_pair(m, row_perm.empty() ? r : row_perm[static_cast<size_t>(r)]); };
    if (h.fix != Fix::kNone) p.fix = [fix = h.fix](float* x, int64_t n) { apply_fix(fix, x, n); };
    plans_.push_back(std::move(p));
  }
  void add_vocab(GgufWriter& w);

  const HfCheckpoint& hf_;
  ConvertOptions opt_;
  std::string lm_;  // HF language-model prefix (hf_lm_prefix)
  std::optional<QuantRule> rule_;
  Config c_;
  std::vector<Plan> plans_;
  std::set<std::string> used_;
  MlxQ4_1Stats mlx_stats_;  // --type q4_1 of an MLX checkpoint: groups copied / requantised
};

void Converter::add_vocab(GgufWriter& w) {
  if (hf_.tokenizer_json_path.empty())
    throw_error(ErrorCode::kFormat, hf_.dir + ": tokenizer.json is missing (needed for the GGUF vocabulary)");
  // The tokenizer library writes tokenizer.ggml.* exactly as llama.cpp's converter does (gpt2 /
  // qwen35, [PADn] UNUSED padding to vocab_size, special ids, chat template).
  write_tokenizer_gguf_metadata(hf_, w);
}

void Converter::run(const std::string& out_path) {
  c_ = config_from_hf(hf_);
  for (int64_t i = 0; i < c_.n_layer; ++i) {
    if (c_.recurrent[static_cast<size_t>(i)] != ((i + 1) % c_.interval != 0))
      throw_error(ErrorCode::kUnsupported, hf_.dir + "/config.json: layer_types do not follow full_attention_interval " +
                                               std::to_string(c_.interval) + " (GGUF cannot express that)");
  }
  if (c_.dk != c_.dv)
    throw_error(ErrorCode::kUnsupported, hf_.dir + "/config.json: linear_key_head_dim (" + std::to_string(c_.dk) +
                                             ") != linear_value_head_dim (" + std::to_string(c_.dv) +
                                             "): llama.cpp's qwen35 layout cannot express that");
  const DType ot = opt_.out_type;
  const bool quant = ot == DType::Q8_0 || ot == DType::Q4_0 || ot == DType::Q4_1 || ot == DType::Q4_K;
  if (ot != DType::F32 && ot != DType::F16 && ot != DType::BF16 && !quant)
    throw_error(ErrorCode::kInvalidArgument, "convert: output type must be f32, f16, bf16, q8_0, q4_0, q4_1 or q4_k");
  if (quant) rule_ = QuantRule{ot, c_.moe ? c_.n_expert : 0, !c_.tied};
  const TensorIndex& idx = hf_.tensors;
  lm_ = hf_lm_prefix(idx);
  const int64_t d = c_.n_embd, C = c_.conv_dim(), VD = c_.value_dim(), Hv = c_.hv, dv = c_.dv;

  emit("token_embd.weight", {c_.n_vocab, d});
  emit("output_norm.weight", {d});
  if (!c_.tied) emit("output.weight", {c_.n_vocab, d});
  else used_.insert(hf_tensor("output.weight", lm_, c_.n_layer).name);
  // One decoder block, GGUF prefix b (HF names and transforms: tensor_names.h).
  auto block = [&](const std::string& b, bool recurrent) {
    emit(b + "attn_norm.weight", {d});
    emit(b + "post_attention_norm.weight", {d});
    if (recurrent) {
      emit(b + "attn_qkv.weight", {C, d});
      emit(b + "attn_gate.weight", {VD, d});
      emit(b + "ssm_beta.weight", {Hv, d});
      emit(b + "ssm_alpha.weight", {Hv, d});
      emit(b + "ssm_conv1d.weight", {C, c_.conv_k});
      emit(b + "ssm_a", {Hv});
      emit(b + "ssm_dt.bias", {Hv});
      emit(b + "ssm_norm.weight", {dv});
      emit(b + "ssm_out.weight", {d, VD});
    } else {
      const int64_t H = c_.n_head, Hkv = c_.n_head_kv, hd = c_.head_dim;
      emit(b + "attn_q.weight", {2 * H * hd, d});
      emit(b + "attn_k.weight", {Hkv * hd, d});
      emit(b + "attn_v.weight", {Hkv * hd, d});
      emit(b + "attn_output.weight", {d, H * hd});
      emit(b + "attn_q_norm.weight", {hd});
      emit(b + "attn_k_norm.weight", {hd});
    }
    if (!c_.moe) {
      emit(b + "ffn_gate.weight", {c_.n_ff, d});
      emit(b + "ffn_up.weight", {c_.n_ff, d});
      emit(b + "ffn_down.weight", {d, c_.n_ff});
      return;
    }
    const int64_t E = c_.n_expert, I = c_.n_ff_exp;
    emit(b + "ffn_gate_inp.weight", {E, d});  // router stays f32
    auto stacked = [&](const std::string& out, int64_t rows_per, int64_t cols, std::function<std::pair<MatrixView, int64_t>(int64_t)> src) {
      Plan pl;
      pl.name = out;
      pl.shape = {E, rows_per, cols};
      pl.rows = E * rows_per;
      pl.cols = cols;
      pl.type = mlx_type(matrix_type(out, 3, cols), src(0).first.dtype);
      pl.src = std::move(src);
      plans_.push_back(std::move(pl));
    };
    // The GGUF keeps gate and up as separate stacks (llama.cpp's converter): split HF's fused
    // [E, 2I, d] (expert e: gate rows e·2I .., up rows e·2I + I ..), or stack per-expert matrices.
    const std::string fused = hf_tensor(b + "ffn_gate_up_exps.weight", lm_, c_.n_layer).name;
    if (idx.contains(fused)) {
      MatrixView gu = view(take(fused, {E, 2 * I, d}));
      MatrixView dn = view(take(hf_tensor(b + "ffn_down_exps.weight", lm_, c_.n_layer).name, {E, d, I}));
      stacked(b + "ffn_gate_exps.weight", I, d, [gu, I](int64_t r) { return std::make_pair(gu, (r / I) * 2 * I + r % I); });
      stacked(b + "ffn_up_exps.weight", I, d, [gu, I](int64_t r) { return std::make_pair(gu, (r / I) * 2 * I + I + r % I); });
      stacked(b + "ffn_down_exps.weight", d, I, [dn](int64_t r) { return std::make_pair(dn, r); });
    } else {  // legacy per-expert tensors
      std::vector<MatrixView> g, u, dd;
      for (int64_t e = 0; e < E; ++e) {
        auto expert = [&](const char* stack, int64_t rows, int64_t cols) {
          return view(take(hf_expert_name(b + stack, e, lm_, c_.n_layer), {rows, cols}));
        };
        g.push_back(expert("ffn_gate_exps.weight", I, d));
        u.push_back(expert("ffn_up_exps.weight", I, d));
        dd.push_back(expert("ffn_down_exps.weight", d, I));
      }
      stacked(b + "ffn_gate_exps.weight", I, d, [g, I](int64_t r) { return std::make_pair(g[static_cast<size_t>(r / I)], r % I); });
      stacked(b + "ffn_up_exps.weight", I, d, [u, I](int64_t r) { return std::make_pair(u[static_cast<size_t>(r / I)], r % I); });
      stacked(b + "ffn_down_exps.weight", d, I, [dd, d](int64_t r) { return std::make_pair(dd[static_cast<size_t>(r / d)], r % d); });
    }
    if (c_.n_ff_shexp > 0) {
      const int64_t S = c_.n_ff_shexp;
      emit(b + "ffn_gate_shexp.weight", {S, d});
      emit(b + "ffn_up_shexp.weight", {S, d});
      emit(b + "ffn_down_shexp.weight", {d, S});
      emit(b + "ffn_gate_inp_shexp.weight", {d});  // HF [1, d]
    }
  };
  for (int64_t i = 0; i < c_.n_layer; ++i) block("blk." + std::to_string(i) + ".", c_.recurrent[static_cast<size_t>(i)]);
  // The MTP head as llama.cpp's converter writes it: block n_layer with the nextn.* tensors
  // (nextn_predict_layers = 1). Checkpoints whose MTP tensors were stripped get none.
  const std::string bm = "blk." + std::to_string(c_.n_layer) + ".";
  const bool has_mtp = c_.n_mtp > 0 && idx.contains(hf_tensor(bm + "nextn.eh_proj.weight", lm_, c_.n_layer).name);
  if (opt_.mtp == ConvertOptions::Mtp::kOnly && !has_mtp)
    throw_error(ErrorCode::kUnsupported, hf_.dir + ": --mtp: the checkpoint has no MTP head (mtp.* tensors)");
  const bool mtp = has_mtp && opt_.mtp != ConvertOptions::Mtp::kNone;
  if (mtp) {
    block(bm, false);
    emit(bm + "nextn.eh_proj.weight", {d, 2 * d});
    emit(bm + "nextn.enorm.weight", {d});
    emit(bm + "nextn.hnorm.weight", {d});
    emit(bm + "nextn.shared_head_norm.weight", {d});
  }
  // Everything else must be a part we knowingly drop (vision tower; an MTP block beyond the first).
  for (const auto& [name, t] : idx.all()) {
    if (used_.count(name)) continue;
    if (name.rfind("mtp.", 0) == 0 || name.rfind("model.visual.", 0) == 0 || name.rfind("visual.", 0) == 0) continue;
    throw_error(ErrorCode::kUnsupported, hf_.dir + ": unexpected tensor " + name + " " + t.shape_string() + " for " + c_.arch);
  }

  if (opt_.mtp == ConvertOptions::Mtp::kOnly) {
    // The head alone, as llama.cpp's converter keeps it with --mtp: block n_layer and the shared
    // embedding, final norm and output matrix.
    const std::string b = "blk." + std::to_string(c_.n_layer) + ".";
    std::erase_if(plans_, [&](const Plan& pl) {
      return pl.name.rfind(b, 0) != 0 && pl.name != "token_embd.weight" && pl.name != "output_norm.weight" &&
             pl.name != "output.weight";
    });
  }

  GgufWriter w;
  const std::string a = c_.arch + ".";
  w.set_string("general.architecture", c_.arch);
  w.set_string("general.type", "model");
  std::string name = std::filesystem::path(hf_.dir).filename().string();
  if (name.empty()) name = std::filesystem::path(hf_.dir).parent_path().filename().string();
  w.set_string("general.name", name);
  const uint32_t ftype = quant ? quant_file_type(ot) : ot == DType::F32 ? 0 : ot == DType::F16 ? 1 : 32;
  w.set_u32("general.file_type", ftype);
  if (quant) w.set_u32("general.quantization_version", 2);
  auto u32 = [&](const std::string& k, int64_t v) { w.set_u32(a + k, static_cast<uint32_t>(v)); };
  u32("block_count", c_.n_layer + (mtp ? 1 : 0));
  if (mtp) u32("nextn_predict_layers", 1);
  u32("context_length", c_.n_ctx_train);
  u32("embedding_length", d);
  write_st_pooling(w, c_.arch, hf_);
  if (!c_.moe) u32("feed_forward_length", c_.n_ff);
  u32("attention.head_count", c_.n_head);
  u32("attention.head_count_kv", c_.n_head_kv);
  u32("attention.key_length", c_.head_dim);
  u32("attention.value_length", c_.head_dim);
  w.set_f32(a + "attention.layer_norm_rms_epsilon", c_.eps);
  w.set_f32(a + "rope.freq_base", c_.rope_theta);
  u32("rope.dimension_count", c_.n_rot);
  w.set_array_i32(a + "rope.dimension_sections", {c_.mrope[0], c_.mrope[1], c_.mrope[2], c_.mrope[3]});
  u32("ssm.conv_kernel", c_.conv_k);
  u32("ssm.state_size", c_.dk);
  u32("ssm.group_count", c_.hk);
  u32("ssm.time_step_rank", c_.hv);
  u32("ssm.inner_size", c_.value_dim());
  u32("full_attention_interval", c_.interval);
  if (c_.moe) {
    u32("expert_count", c_.n_expert);
    u32("expert_used_count", c_.n_expert_used);
    u32("expert_feed_forward_length", c_.n_ff_exp);
    if (c_.n_ff_shexp > 0) u32("expert_shared_feed_forward_length", c_.n_ff_shexp);
  }
  add_vocab(w);

  for (const Plan& pl : plans_) {
    auto rb = dtype_row_bytes(pl.type, static_cast<uint64_t>(pl.cols));
    if (!rb) throw_error(ErrorCode::kInternal, "convert: row size for " + pl.name);
    const uint64_t nbytes = *rb * static_cast<uint64_t>(pl.rows);
    const Plan* pp = &pl;
    MlxQ4_1Stats* stats = &mlx_stats_;
    w.add_tensor(pl.name, pl.type, pl.shape, nbytes, [pp, stats](uint8_t* dst, uint64_t) {
      const DType st = pp->rows > 0 ? pp->src(0).first.dtype : DType::F32;
      if (pp->type == DType::Q4_1 && is_mlx_q4(st)) {
        if (!pp->fix && keeps_q4_1_blocks(pp->col_perm)) return mlx_q4_to_q4_1(pp->rows, pp->cols, dst, pp->src, pp->col_perm, *stats);
        // A transform or a column order that splits blocks: through f32 (counted as requantised).
        stats->requantised += pp->rows * pp->cols / dtype_traits(st)->block_elems;
      }
      quantize_rows(pp->type, pp->rows, pp->cols, dst, [pp](int64_t r, float* row, float* scratch) {
        auto [m, sr] = pp->src(r);
        if (pp->col_perm.empty()) {
          dequantize_row(m, sr, row);
        } else {
          dequantize_row(m, sr, scratch);
          for (int64_t j = 0; j < pp->cols; ++j) row[j] = scratch[pp->col_perm[static_cast<size_t>(j)]];
        }
        if (pp->fix) pp->fix(row, pp->cols);
      });
    });
  }
  w.write(out_path);
  print_mlx_q4_1_stats(mlx_stats_);
}

}  // namespace
}  // namespace qwen35

void convert_qwen35(const HfCheckpoint& hf, const std::string& out_path, const ConvertOptions& opt) {
  qwen35::Converter(hf, opt).run(out_path);
}

}  // namespace oxi
