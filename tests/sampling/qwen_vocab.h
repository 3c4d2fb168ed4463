// The real Qwen 3.5 vocabulary as constrained sampling sees it (each token's bytes), for the
// constraint tests that run mask_rejected_tokens over it.
#pragma once

#include <string>
#include <utility>

#include "sampling/json_constraint.h"
#include "tokenizer/tokenizer.h"

namespace oxi::test {

class QwenVocab final : public ConstraintVocab {
 public:
  QwenVocab() : t_(load_tokenizer(std::string(OXI_SHARED_DIR) + "/testdata/tokenizer/ggml-vocab-qwen35.gguf")) {}
  int64_t size() const override { return t_->n_vocab(); }
  bool is_eog(int32_t id) const override { return t_->is_eog(id); }
  bool is_control(int32_t id) const override { return t_->is_control(id); }
  const std::string& piece(int32_t id) const override { return t_->token_to_piece(id); }

 private:
  TokenizerPtr t_;
};

}  // namespace oxi::test
