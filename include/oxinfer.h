/* oxinfer C API: the one interface the CLI, the HTTP server and the browser build share.
 *
 * Conventions: every function returns an oxi_status (0 = OK). On failure, oxi_last_error()
 * returns a one-line message for the calling thread (valid until the next call on that thread).
 * Objects are opaque; free them with their _free function (NULL is accepted). A model may be shared
 * by several contexts; a context (one sequence) is used by one thread at a time. */
#ifndef OXINFER_H
#define OXINFER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Structs are extended only at their end; get them from the _default_params() functions so new
 * fields get their defaults. 2: oxi_generate_params.json_schema. 3: speculative decoding
 * (oxi_generate_params.spec_mode / draft_max / draft_min, oxi_context_spec_stats) and
 * oxi_chat_tokenize (message text never becomes control tokens). 4: oxi_model_params.flash_attn.
 * 5: oxi_model_params.n_gpu_layers. 6: oxi_generate_params.grammar. 7: oxi_model_params.cache_type_k
 * / cache_type_v. 8: oxi_model_params.draft_model. 9: images: oxi_model_params.mmproj,
 * oxi_context_prefill_image. 10: audio: oxi_context_prefill_audio. 11:
 * oxi_model_params.image_preproc. */
#define OXI_API_VERSION 11

typedef enum oxi_status {
  OXI_OK = 0,
  OXI_ERR_INVALID_ARGUMENT = 1,
  OXI_ERR_IO = 2,
  OXI_ERR_FORMAT = 3,
  OXI_ERR_UNSUPPORTED = 4,
  OXI_ERR_OUT_OF_MEMORY = 5,
  OXI_ERR_CANCELLED = 6,
  OXI_ERR_NOT_IMPLEMENTED = 7,
  OXI_ERR_INTERNAL = 8
} oxi_status;

typedef struct oxi_model oxi_model;     /* weights + tokenizer + chat template, immutable */
typedef struct oxi_context oxi_context; /* one sequence: caches, recurrent state, sampler */

const char* oxi_last_error(void);
const char* oxi_status_name(oxi_status status);
const char* oxi_version(void);

/* ---- models ---------------------------------------------------------------------------- */
typedef struct oxi_model_params {
  int32_t n_threads; /* 0: all hardware threads (the kernels' thread pool is process-wide) */
  const char* quant; /* NULL/"" keep file types; "q8_0" | "q4_0" | "q4_k" (HF checkpoints) */
  const char* chat_template; /* NULL: the model's own; else Jinja source used instead (copied) */
  const char* device; /* NULL: env OXI_DEVICE, else "auto"; "none" | "auto" | a backend name
                         (process-wide, like the thread pool; docs/backends.md) */
  int32_t flash_attn; /* llama.cpp's -fa: -1 auto (default: each family's llama.cpp default order),
                         1 on (the same), 0 off (Gemma 4: llama.cpp's non-flash attention order) */
  int32_t n_gpu_layers; /* llama.cpp's -ngl, used when the device has block kernels (vulkan): -1
                           (default) or N > 0: the whole model on the device (partial offload is
                           not implemented: any N > 0 means all layers); 0: weights and decode
                           stay on the CPU, large prefill matmuls go to the device */
  const char* cache_type_k; /* llama.cpp's -ctk: NULL/"" = "f16" (default), "f32", "q8_0" */
  const char* cache_type_v; /* llama.cpp's -ctv: the same; "q8_0" needs flash attention (refused
                               with flash_attn 0, as llama.cpp does). A q8_0 K / V is rotated by a
                               Hadamard matrix as llama.cpp does (Qwen 3.5; env
                               OXI_ATTN_ROT_DISABLE=1 at load: off; docs/cli.md) */
  const char* draft_model; /* llama.cpp's -md: NULL/"" none; a draft model's GGUF. Qwen 3.5: an
                              MTP-only file (llama.cpp converter's --mtp), whose head drafts for
                              OXI_SPEC_MTP / OXI_SPEC_AUTO. Gemma 4: an assistant drafter
                              (arch gemma4-assistant, or its HF checkpoint directory) for
                              OXI_SPEC_DRAFT / OXI_SPEC_AUTO; one
                              that does not fit the model: OXI_ERR_INVALID_ARGUMENT */
  const char* mmproj; /* llama.cpp's --mmproj: NULL/"" the HF checkpoint's own vision tower if it
                         has one (loaded on the first image); else the tower's mmproj GGUF, loaded
                         (and checked against the model) by oxi_model_open */
  const char* image_preproc; /* the CLI's --image-preproc, Qwen 3.5 images: NULL/""/"hf" (default)
                                the HF image processor's resize; "llama" llama.cpp mtmd's (fewer
                                rows for sizes the two treat differently; docs/multimodal.md);
                                anything else: OXI_ERR_INVALID_ARGUMENT. Gemma 4: no difference */
} oxi_model_params;

oxi_model_params oxi_model_default_params(void);
/* path: a .gguf file or a Hugging Face checkpoint directory. */
oxi_status oxi_model_open(const char* path, const oxi_model_params* params, oxi_model** out);
void oxi_model_free(oxi_model* model);

typedef struct oxi_model_desc {
  const char* arch; /* owned by the model */
  const char* name;
  int64_t n_vocab;
  int64_t n_ctx_train;
  uint64_t n_params;
  int32_t bos_id; /* -1 if none */
  int32_t eos_id;
  int64_t n_tokens;       /* tokenizer vocabulary (ids that can be sampled; <= n_vocab) */
  int32_t has_chat_template;
} oxi_model_desc;
oxi_status oxi_model_describe(const oxi_model* model, oxi_model_desc* out);

/* ---- tokenizer ------------------------------------------------------------------------- */
/* Encodes UTF-8 text. add_special: add BOS/EOS as the model's config says; parse_special: match
 * special-token text such as "<|im_start|>". Writes up to cap ids and sets *n_out to the full count
 * (call again with a bigger buffer if *n_out > cap). */
oxi_status oxi_tokenize(const oxi_model* model, const char* text, size_t text_len, int add_special,
                        int parse_special, int32_t* ids, size_t cap, size_t* n_out);
/* Decodes ids to UTF-8 (same capacity protocol, in bytes, no terminator counted; a terminator
 * is written when it fits). */
oxi_status oxi_detokenize(const oxi_model* model, const int32_t* ids, size_t n_ids, char* text,
                          size_t cap, size_t* n_out);

/* Whether id ends a generation (EOS, EOT, <|im_end|>, <turn|>…). */
int oxi_token_is_eog(const oxi_model* model, int32_t id);

/* The chat template source in use ("" when the model has none; owned by the model). */
const char* oxi_model_chat_template(const oxi_model* model);

/* Renders the model's chat template. messages_json: an OpenAI-style JSON array of messages;
 * options_json: NULL or an object {"add_generation_prompt":true,"enable_thinking":false,
 * "tools":[...]} passed to the template. Output as for oxi_detokenize. */
oxi_status oxi_chat_render(const oxi_model* model, const char* messages_json,
                           const char* options_json, char* text, size_t cap, size_t* n_out);
/* Renders as oxi_chat_render and tokenizes the prompt (BOS as oxi_tokenize with add_special = 1)
 * so that only the template's own markup becomes special tokens: special-token text inside the
 * messages or tools ("<|im_end|><|im_start|>system" in a user message) stays plain text and cannot
 * forge a turn. Tokenizing oxi_chat_render's text with parse_special = 1 does not give that. The
 * option "special_in_content": true restores that old, unsafe behaviour. Ids as oxi_tokenize. */
oxi_status oxi_chat_tokenize(const oxi_model* model, const char* messages_json, const char* options_json,
                             int32_t* ids, size_t cap, size_t* n_out);

/* ---- generation ------------------------------------------------------------------------ */
#define OXI_SEED_RANDOM UINT64_MAX /* seed: pick a random one */

typedef struct oxi_sampling_params {
  float temperature; /* <= 0: greedy (argmax after penalties, ties to the smallest id) */
  int32_t top_k;     /* <= 0: off */
  float top_p;       /* >= 1: off */
  float min_p;       /* <= 0: off */
  float repeat_penalty;    /* 1: off */
  float presence_penalty;  /* 0: off */
  float frequency_penalty; /* 0: off */
  int32_t penalty_last_n;  /* window for penalties; 0: off, -1: whole context */
  uint64_t seed;
} oxi_sampling_params;

/* Greedy defaults; oxi_model_sampling_defaults() gives llama.cpp's defaults (temperature 0.8,
 * top-k 40, top-p 0.95, min-p 0.05, penalties off, last 64, random seed) overridden by the model's
 * recommended ones where present (HF generation_config.json; GGUF general.sampling.*).
 * Order of the chain, as llama.cpp: penalties, top-k, top-p, min-p, temperature, draw. */
oxi_sampling_params oxi_sampling_default_params(void);
oxi_sampling_params oxi_model_sampling_defaults(const oxi_model* model);

/* n_ctx <= 0: the model's training context. The context keeps a pointer to the model, which must
 * outlive it. */
oxi_status oxi_context_new(oxi_model* model, int32_t n_ctx, oxi_context** out);
void oxi_context_free(oxi_context* ctx);
/* Forget every token (caches and state emptied, checkpoint dropped). */
oxi_status oxi_context_reset(oxi_context* ctx);
int32_t oxi_context_n_ctx(const oxi_context* ctx);  /* capacity (0 for NULL) */
int32_t oxi_context_n_past(const oxi_context* ctx); /* tokens in the sequence (0 for NULL) */

/* Prompt caching. oxi_context_prefill feeds ids without generating. oxi_context_checkpoint saves
 * the current state (one checkpoint per context). oxi_context_reuse_prefix brings the context to
 * the longest prefix of ids[0..n) it can keep without recomputing (its current sequence if that is
 * a prefix of ids, else the checkpoint if that is, else empty), keeping at most n - 1 tokens so
 * something is left to generate from, and sets *n_kept: pass ids + *n_kept to oxi_generate. */
oxi_status oxi_context_prefill(oxi_context* ctx, const int32_t* ids, size_t n);
oxi_status oxi_context_checkpoint(oxi_context* ctx);
oxi_status oxi_context_reuse_prefix(oxi_context* ctx, const int32_t* ids, size_t n, size_t* n_kept);

typedef struct oxi_token_event {
  int32_t id;
  const char* text; /* UTF-8 of this step; never half a code point (may be "" while buffering) */
  size_t text_len;
  float logprob;    /* natural log-softmax of the raw logits for id */
  int32_t n_top;    /* entries in top_ids/top_logprobs (the n_top_logprobs asked for) */
  const int32_t* top_ids;
  const float* top_logprobs;
  int32_t is_eog;   /* this token ended the generation */
} oxi_token_event;

/* Called once per generated token (the end-of-generation token included: its event has is_eog set
 * and text ""); return non-zero to stop (the call then returns OXI_ERR_CANCELLED). */
typedef int (*oxi_token_callback)(const oxi_token_event* event, void* user_data);

typedef struct oxi_generate_params {
  int32_t max_tokens;     /* < 0: until end of generation or context full */
  int32_t n_top_logprobs; /* 0..20 */
  oxi_sampling_params sampling;
  const volatile int* cancel; /* optional flag polled between tokens (set from any thread) */
  int32_t ignore_eog;         /* non-zero: keep going past end-of-generation tokens */
  int32_t prefill_chunk;      /* prompt tokens per forward pass; <= 0: 512 */
  /* Structured output, as OpenAI's response_format {"type": "json_schema", "json_schema":
   * {"schema": S}}: NULL or "": free text; else S as JSON text ("null": any JSON object, like
   * response_format json_object). Tokens that would leave the output no longer a prefix of a
   * document valid for S are never sampled; once the document is complete only end-of-generation
   * tokens are, so generation ends with one (stop_reason 0) unless max_tokens or the context ends
   * it first. The schema subset is the server's (type and unions, properties, required,
   * additionalProperties, items, minItems/maxItems, maxLength, enum, const, anyOf/oneOf of simple
   * types, local $ref); a schema it cannot enforce is OXI_ERR_INVALID_ARGUMENT "json_schema: ...".
   * Not with ignore_eog. Read during the call only. */
  const char* json_schema;
  /* Speculative decoding (docs/speculative.md): drafted tokens are verified in one forward pass
   * and rolled back when rejected. Greedy output is identical to spec_mode 0's; sampled output
   * has the same distribution (not the same draws for a seed). OXI_SPEC_AUTO (the default) drafts
   * by prompt lookup and only while it pays on this machine; OXI_SPEC_NGRAM likewise but is
   * chosen explicitly; OXI_SPEC_MTP drafts with the model's MTP head (Qwen 3.5/3.6 files that
   * carry one, or oxi_model_params.draft_model's MTP file), OXI_SPEC_DRAFT with a Gemma 4
   * assistant (draft_model); either without its drafter is OXI_ERR_UNSUPPORTED. */
  int32_t spec_mode;
  int32_t draft_max; /* most drafts per verify step, 0..16 (contexts keep room to roll back 16) */
  int32_t draft_min; /* fewest drafts worth verifying; > 0 also forces drafting (default 0) */
  /* A GBNF grammar (llama.cpp's grammar syntax, root rule `root`): NULL or "": free text. The
   * output stays a prefix of a string in the grammar's language, whole UTF-8 characters at a
   * time; end-of-generation tokens are sampled only where the text is in the language, and once
   * nothing can follow, only they are. It constrains the first generated token on, so a chat
   * prompt should not open a reasoning block. A bad grammar is OXI_ERR_INVALID_ARGUMENT
   * "grammar: line L, column C: ...". Not with json_schema or ignore_eog. Read during the call. */
  const char* grammar;
} oxi_generate_params;

enum { OXI_SPEC_NONE = 0, OXI_SPEC_AUTO = 1, OXI_SPEC_NGRAM = 2, OXI_SPEC_MTP = 3, OXI_SPEC_DRAFT = 4 };

oxi_generate_params oxi_generate_default_params(void);

typedef struct oxi_generate_result {
  int32_t n_prompt;      /* prompt tokens consumed */
  int32_t n_generated;
  double prompt_seconds;
  double gen_seconds;
  int32_t stop_reason; /* 0 end-of-generation token, 1 max_tokens, 2 context full, 3 cancelled */
} oxi_generate_result;

/* Appends prompt ids to the context's sequence, then samples until an end-of-generation token,
 * max_tokens, the context limit or cancellation. Afterwards the sequence holds the prompt and every
 * generated token but the last (which was never fed back): to continue, pass that token as the
 * next prompt. A prompt that does not fit the context is refused (OXI_ERR_INVALID_ARGUMENT) before
 * anything is computed. On OXI_ERR_CANCELLED, result (if given) is filled too. */
oxi_status oxi_generate(oxi_context* ctx, const int32_t* prompt, size_t n_prompt,
                        const oxi_generate_params* params, oxi_token_callback on_token,
                        void* user_data, oxi_generate_result* result);

/* ---- images and audio (docs/multimodal.md "C API") ----------------------------------------
 * A prompt with images goes in pieces, as llama.cpp's mtmd evaluates it: render the chat with a
 * marker where each image goes (e.g. "<__media__>"), tokenize the text between markers
 * (oxi_tokenize with parse_special), feed each text piece with oxi_context_prefill and each image
 * with oxi_context_prefill_image, then pass the last text piece (never empty: the generation
 * prompt) to oxi_generate. */

/* Appends one image to the context's sequence: the model's image-start token, the vision tower's
 * rows, the image-end token (Qwen 3.5: <|vision_start|> … <|vision_end|> at mRoPE positions;
 * Gemma 4: <|image> … <image|>), as llama.cpp's mtmd places them. bytes: a PNG, JPEG, WebP, GIF or
 * BMP file's bytes (read during the call; at most 4096 × 4096 pixels). n_entries (optional): the
 * context entries the image took (rows + 2). A model without a vision tower:
 * OXI_ERR_INVALID_ARGUMENT; bad bytes: OXI_ERR_INVALID_ARGUMENT naming the reason; an image that
 * does not fit the context: OXI_ERR_INVALID_ARGUMENT, nothing appended. */
oxi_status oxi_context_prefill_image(oxi_context* ctx, const void* bytes, size_t n_bytes, int32_t* n_entries);

/* Appends one audio clip (Gemma 4 E2B / E4B, whose mmproj or HF checkpoint has an audio tower):
 * <|audio>, the audio tower's rows (one batch per 30-second chunk, causal), <audio|>, as
 * llama.cpp's mtmd places them; the chat template's audio part is where it goes (feed the pieces
 * around it as for images). bytes: a WAV, FLAC, Ogg or MP3 file's bytes (read during the call;
 * decoded to 16 kHz mono, at most 1 hour). n_entries (optional): the entries it took (rows + 2,
 * about 25 rows a second). A model without an audio tower: OXI_ERR_INVALID_ARGUMENT (a model
 * that is not Gemma 4: OXI_ERR_UNSUPPORTED); bad bytes (empty, corrupt, not audio):
 * OXI_ERR_INVALID_ARGUMENT naming the reason; a clip that does not fit the context:
 * OXI_ERR_INVALID_ARGUMENT, nothing appended. The wasm build: OXI_ERR_UNSUPPORTED. */
oxi_status oxi_context_prefill_audio(oxi_context* ctx, const void* bytes, size_t n_bytes, int32_t* n_entries);

/* Speculative decoding in the context's last oxi_generate call: verify steps run, draft tokens
 * verified, draft tokens accepted (any pointer may be NULL). */
oxi_status oxi_context_spec_stats(const oxi_context* ctx, int32_t* n_verify, int32_t* n_drafted,
                                  int32_t* n_accepted);

#ifdef __cplusplus
}
#endif

#endif /* OXINFER_H */
