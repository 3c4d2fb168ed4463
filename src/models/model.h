// The model interface the runtime, CLI, C API and server share. One implementation per
// architecture (models/qwen35, models/gemma4), chosen by models/registry.cpp from the file's
// architecture. A Model is immutable after load and may be used by several sequences at once;
// everything per-sequence lives in its SequenceState.
//
// One forward call takes a batch of entries (rows) from one or more sequences: each entry is a
// token id or an embedding row, with its sequence and, optionally, explicit RoPE positions
// (Qwen's 3-stream mRoPE included). It returns logits (and, on request, the final hidden states)
// for the entries asked for. The weights are read once per call for all of its rows, so decoding
// N sequences together costs about one pass over the weights, not N.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "format/model_files.h"
#include "kernels/pack.h"
#include "nn/kv_cache.h"

namespace oxi::nn {
class Device;
}

namespace oxi {

struct ModelInfo {
  std::string arch;       // "qwen35", "qwen35moe", "gemma4"
  std::string name;       // general.name or the directory name
  int64_t n_vocab = 0;    // rows of the output layer (logits per token)
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_ctx_train = 0;
  uint64_t n_params = 0;
  uint64_t weight_bytes = 0;
};

// Attention numerics (LoadOptions::attention). kAuto: each family's default, which matches
// llama.cpp's default CPU path (Qwen 3.5: attention without flash attention; Gemma 4: flash
// attention, vector kernel under 64 tokens, tiled from 64). kFlashVector / kFlashTiled: always that
// flash-attention kernel (Gemma 4); kNoFlash: llama.cpp's -fa off order (Gemma 4).
enum class AttentionPath : int { kAuto = 0, kFlashVector = 1, kFlashTiled = 2, kNoFlash = 3 };

struct LoadOptions {
  int n_threads = 0;        // 0: all hardware threads
  std::string quant;        // "" keep file types; "q8_0" | "q4_0" | "q4_k": quantise at load (HF)
  // KV cache storage: true = f32, false = f16 (llama.cpp's default cache type). Environment
  // OXI_KV_F32=1 overrides to f32 (debugging, exactness tests).
  bool kv_f32 = false;
  // llama.cpp's --cache-type-k / --cache-type-v (f16 default, f32, q8_0), used when kv_f32 is
  // false. As llama.cpp, a quantised V cache needs flash attention: attention = kNoFlash with
  // cache_type_v q8_0 is refused at load (kInvalidArgument); so is a q8_0 cache with a device.
  nn::KvType cache_type_k = nn::KvType::kF16;
  nn::KvType cache_type_v = nn::KvType::kF16;
  AttentionPath attention = AttentionPath::kAuto;  // environment OXI_GEMMA4_ATTN=0..3 overrides
  // A block-level compute device (nn/device.h) that runs the whole forward pass: weights uploaded
  // at load, KV caches and recurrent states in its memory (docs/backends.md, "Whole-model
  // offload"). nullptr: the CPU kernels path. Families without a device forward log it and ignore it.
  std::shared_ptr<nn::Device> device;
  // A draft model's files (llama.cpp's -md) already opened by the caller, which keeps them mapped
  // as long as the model lives. Qwen 3.5: an MTP-only GGUF (llama.cpp converter's --mtp: block
  // n_layer's nextn.* tensors beside the embedding and output head), whose head replaces any in
  // the model's own file. Gemma 4: an assistant drafter, as GGUF (gemma4-assistant) or its HF
  // checkpoint read in place. Other families refuse it (kUnsupported).
  const ModelFiles* draft = nullptr;
  std::string draft_path;  // its path, for messages
};

// Per-sequence state: KV caches, sliding-window rings, conv and recurrent states.
class SequenceState {
 public:
  virtual ~SequenceState() = default;
  virtual int64_t n_past() const = 0;    // tokens already consumed
  virtual int64_t n_ctx() const = 0;     // capacity
  virtual void clear() = 0;              // back to empty
  // Keeps the first n tokens and forgets the rest, as if only those had been consumed (n ≤
  // n_past). Attention caches go back anywhere; sliding-window rings and recurrent layers go back
  // at most `rollback` tokens (new_state's argument), and recurrent layers only into the tokens of
  // the most recent forward call that included this sequence, when that call fed it two tokens or
  // more (a speculative verify step; single-token decode keeps no record). Throws
  // kInvalidArgument otherwise (the state is unchanged then).
  virtual void truncate(int64_t n) = 0;
  // Whole state as bytes, and back; restore(snapshot()) is bit-identical.
  virtual std::vector<uint8_t> snapshot() const = 0;
  virtual void restore(std::span<const uint8_t> bytes) = 0;
  // Room for positions < n_pos (at most n_ctx) in the attention caches now, so that later calls
  // do not grow them (bench: the timed part after a depth fill). A hint: no effect on results.
  virtual void reserve(int64_t n_pos) { (void)n_pos; }
};

// The input of one forward call: n entries. Entry i belongs to sequence states[seq[i]] and is
// token id token[i], or — when token[i] < 0 — row i of `embd` (n_embd floats, used as the first
// layer's input as given: no embedding scale; Gemma 4's per-layer input then uses the pad token's
// row, as llama.cpp does for image soft tokens).
// Entries of one sequence are contiguous and in order; they take the cache positions n_past,
// n_past + 1, … of their state. pos[i] is the entry's RoPE position (default: its cache
// position); pos3[3i..3i+2] its (t, h, w) mRoPE positions (Qwen; default: all three = pos[i]).
// output[i] != 0 asks for entry i's logits / hidden state; output == nullptr asks for the last
// entry of every sequence.
struct Batch {
  int64_t n = 0;
  const int32_t* token = nullptr;   // [n]; nullptr: every entry is an embedding row
  const float* embd = nullptr;      // [n, n_embd]; read only for entries without a token
  const int32_t* seq = nullptr;     // [n] indices into the call's states; nullptr: all 0
  const int32_t* pos = nullptr;     // [n]; nullptr: cache positions
  const int32_t* pos3 = nullptr;    // [n, 3]; nullptr: pos in every stream
  const uint8_t* output = nullptr;  // [n]; nullptr: the last entry of every sequence
  // Every entry also sees the later entries of its sequence in this batch (llama.cpp's
  // llama_set_causal_attn(false), which its mtmd uses for the image rows of some models, e.g.
  // Gemma 4 26B/31B). The batch must fit one pass (kMaxUbatch); only models whose
  // non_causal_ok() is true take it.
  bool non_causal = false;
};

// Rows for the entries whose output was asked for, in entry order. Either pointer may be null.
struct BatchOutput {
  float* logits = nullptr;  // [n_out, n_vocab]
  float* hidden = nullptr;  // [n_out, n_embd]: the final normed hidden state (the output head's input)
  // [n, n_embd]: the final normed hidden state of EVERY entry, whatever the output flags say (what
  // an MTP head reads for each position; the logits stay limited to the rows asked for).
  float* hidden_all = nullptr;
};

class Model {
 public:
  // Largest number of entries one internal pass takes; longer batches are split (a sequence's
  // entries may then span two passes, in order).
  static constexpr int64_t kMaxUbatch = 512;

  virtual ~Model() = default;

  // The pass types are public so that a family's device forward (models/*/device_forward.h) can
  // take them.
  // A run of one sequence's entries inside a pass.
  struct Segment {
    int32_t state = 0;   // index into the call's states
    int64_t row0 = 0;    // first entry (row of the pass)
    int64_t n = 0;       // entries
    int64_t pos0 = 0;    // cache position of the first entry (= the state's n_past)
  };
  // One pass: at most kMaxUbatch entries, validated. pos is always set.
  struct Pass {
    int64_t n = 0;
    const int32_t* token = nullptr;  // [n] or nullptr (all embedding rows)
    const float* embd = nullptr;     // [n, n_embd] or nullptr
    const int32_t* pos = nullptr;    // [n]
    const int32_t* pos3 = nullptr;   // [n, 3] or nullptr
    std::vector<Segment> segs;       // in entry order, one per sequence
    std::vector<int32_t> seg_of;     // [n] the segment (index into segs) of each entry
    std::vector<int64_t> out_rows;   // entries whose output is wanted, ascending
    bool non_causal = false;         // Batch::non_causal
    int32_t token_at(int64_t i) const { return token ? token[i] : -1; }
  };

  virtual const ModelInfo& info() const = 0;
  // Whether forward_batch takes Batch::non_causal.
  virtual bool non_causal_ok() const { return false; }
  // n_ctx ≤ 0: the model's default. rollback: how many of the most recent tokens truncate() must
  // be able to drop (speculative decoding keeps this at the draft length + 1).
  virtual std::unique_ptr<SequenceState> new_state(int64_t n_ctx, int64_t rollback = 0) const = 0;

  // Runs a batch (see Batch) and advances every state it names. Throws oxi::Error
  // (kInvalidArgument) before touching any state when a sequence would overflow its context, a
  // token id is out of range, an entry has neither token nor embedding, a sequence's entries are
  // not contiguous or a state is named twice.
  void forward_batch(std::span<SequenceState* const> states, const Batch& batch, const BatchOutput& out) const;

  // One sequence of token ids at positions n_past…: logits for every token ([tokens.size(),
  // n_vocab]) or only the last one ([n_vocab]); hidden_all (optional): every token's final normed
  // hidden state ([tokens.size(), n_embd], BatchOutput::hidden_all).
  void forward(SequenceState& state, std::span<const int32_t> tokens, float* logits, bool all_logits,
               float* hidden_all = nullptr) const;

  // The most entries of one sequence (in a state with rollback room for them) that one call can
  // carry with each entry's logits equal, bit for bit, to feeding the entries one call each, under
  // the kernel set now active. Speculative verify steps stay within it, so that greedy output with
  // speculation is exactly greedy output without. At least 1.
  virtual int64_t exact_batch_tokens() const;

  // Multi-token prediction (Qwen 3.5/3.6's MTP block): predicts the token after next from a
  // position's final normed hidden state h_p and the token x_{p+1} that followed it. The head
  // keeps its own attention cache: entry (h_p, x_{p+1}) sits at position p of an MTP state
  // (new_mtp_state), so a state fed n pairs holds positions 0 … n − 1.
  virtual bool has_mtp() const { return false; }
  virtual std::unique_ptr<SequenceState> new_mtp_state(int64_t n_ctx) const;
  // The MTP state of a drafter that reads the trunk's own state (Gemma 4's assistant drafter reads
  // the target's KV cache; `trunk` must outlive the returned state). Default: new_mtp_state.
  virtual std::unique_ptr<SequenceState> new_mtp_state_for(int64_t n_ctx, const SequenceState& trunk) const {
    (void)trunk;
    return new_mtp_state(n_ctx);
  }
  // The "MTP head" is a separate draft model (Gemma 4's assistant, -md; --spec draft) rather than
  // a head of the model's own (Qwen 3.5/3.6; --spec mtp).
  virtual bool mtp_is_draft_model() const { return false; }
  // Feeds n pairs (hidden [n, n_embd], tokens [n]) at the state's next positions. For the last
  // pair, writes its logits [n_vocab] (when logits is set: the draft for the position after next)
  // and its MTP output hidden state [n_embd] (when hidden_out is set: the h of the next chained
  // step).
  virtual void mtp_forward(SequenceState& st, const float* hidden, const int32_t* tokens, int64_t n, float* logits,
                           float* hidden_out) const;
  // Several MTP states' feeds in one pass of the head (the server's slots drafting together: the
  // head's weights and the output head are read once for all of them). Each job is what one
  // mtp_forward call takes; its state must not appear in another job. Throws oxi::Error
  // (kInvalidArgument) before touching any state when one job would (overflow, token id, a state
  // of another model or named twice). Each job's outputs are those of its own call, bit for bit
  // with float weights; with quantised ones up to the multi-row kernels' f32 order, as
  // forward_batch (docs/design.md). Default: one mtp_forward per job, after checking them all.
  struct MtpJob {
    SequenceState* state = nullptr;
    const float* hidden = nullptr;   // [n, n_embd]
    const int32_t* tokens = nullptr;  // [n]
    int64_t n = 0;
    float* logits = nullptr;      // optional: the last pair's [n_vocab]
    float* hidden_out = nullptr;  // optional: the last pair's [n_embd]
  };
  virtual void mtp_forward_batch(std::span<const MtpJob> jobs) const;

 protected:
  // mtp_forward_batch's checks (every job, before any runs).
  void check_mtp_jobs(std::span<const MtpJob> jobs) const;
  // Runs one pass and advances each segment's state by its entries. Writes out.logits /
  // out.hidden rows for pass.out_rows when those pointers are set.
  virtual void run(std::span<SequenceState* const> states, const Pass& pass, const BatchOutput& out) const = 0;

 private:
  // While any model is open, single-token decode may use packed weight copies (kernels/pack.h).
  kern::PackLease pack_lease_;
  // Types of the weight matrices (set by load_model), for exact_batch_tokens().
  std::vector<DType> weight_types_;
  friend std::unique_ptr<Model> load_model(const ModelFiles& files, const LoadOptions& options);
};

// Picks the implementation for files.architecture(); oxi::Error(kUnsupported) "unknown
// architecture X" otherwise.
std::unique_ptr<Model> load_model(const ModelFiles& files, const LoadOptions& options);

// The implementation family of an architecture name (GGUF general.architecture or HF model_type):
// "qwen35", "gemma4", or "" when none of ours.
std::string model_family(const std::string& arch);

}  // namespace oxi
