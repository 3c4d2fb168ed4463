// Model-recommended sampling settings (kept apart from session.cpp so the runtime's generation loop
// links without the format readers).
#include <cmath>

#include "core/error.h"
#include "core/log.h"
#include "runtime/session.h"

namespace oxi {

namespace {

bool json_number(const nlohmann::json& j, const char* key, double& out) {
  if (!j.is_object()) return false;
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return false;
  const double v = it->get<double>();
  if (!std::isfinite(v)) return false;
  out = v;
  return true;
}

bool gguf_number(const GgufMetadata& m, const std::string& key, double& out) {
  const GgufValue* v = m.find(key);
  if (!v || v->is_array()) return false;
  try {
    out = v->as_float();
  } catch (const Error&) {
    log_warn("ignoring metadata key " + key + ": not a number");
    return false;
  }
  return std::isfinite(out);
}

}  // namespace

SamplingParams model_sampling_defaults(const ModelFiles& files, const SamplingParams& base) {
  SamplingParams p = base;
  double v = 0.0;
  if (files.gguf) {
    // llama.cpp's keys (LLM_KV_SAMPLING_*).
    const GgufMetadata& m = files.gguf->metadata;
    if (gguf_number(m, "general.sampling.temp", v)) p.temperature = static_cast<float>(v);
    if (gguf_number(m, "general.sampling.top_k", v)) p.top_k = static_cast<int32_t>(v);
    if (gguf_number(m, "general.sampling.top_p", v)) p.top_p = static_cast<float>(v);
    if (gguf_number(m, "general.sampling.min_p", v)) p.min_p = static_cast<float>(v);
    if (gguf_number(m, "general.sampling.penalty_last_n", v)) p.penalty_last_n = static_cast<int32_t>(v);
    if (gguf_number(m, "general.sampling.penalty_repeat", v)) p.repeat_penalty = static_cast<float>(v);
  } else if (files.hf) {
    const nlohmann::json& g = files.hf->generation_config;
    if (json_number(g, "temperature", v)) p.temperature = static_cast<float>(v);
    if (json_number(g, "top_k", v)) p.top_k = static_cast<int32_t>(v);
    if (json_number(g, "top_p", v)) p.top_p = static_cast<float>(v);
    if (json_number(g, "min_p", v)) p.min_p = static_cast<float>(v);
    if (json_number(g, "repetition_penalty", v)) p.repeat_penalty = static_cast<float>(v);
    if (json_number(g, "presence_penalty", v)) p.presence_penalty = static_cast<float>(v);
    if (json_number(g, "frequency_penalty", v)) p.frequency_penalty = static_cast<float>(v);
    if (g.is_object()) {
      const auto it = g.find("do_sample");
      if (it != g.end() && it->is_boolean() && !it->get<bool>()) p.temperature = 0.0f;
    }
  }
  // Keep whatever the files said inside the ranges the sampler accepts.
  if (!(p.repeat_penalty > 0.0f)) p.repeat_penalty = base.repeat_penalty;
  if (p.penalty_last_n < -1) p.penalty_last_n = base.penalty_last_n;
  if (!(p.top_p >= 0.0f)) p.top_p = base.top_p;
  if (!(p.min_p <= 1.0f)) p.min_p = base.min_p;
  return p;
}

}  // namespace oxi
