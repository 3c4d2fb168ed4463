// Hugging Face checkpoint directory reader. Only files: no model knowledge here.
#include "format/hf.h"

#include <filesystem>
#include <set>

#include "core/error.h"
#include "core/json_limits.h"
#include "format/mlx.h"
#include "format/util.h"

namespace oxi {

namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMaxJsonFile = 64ull << 20;  // config / tokenizer_config / index files

bool is_file(const std::string& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);  // follows symlinks (HF cache snapshots link into blobs/)
}

nlohmann::json parse_json_file(const std::string& path) {
  const std::string text = read_text_file(path, kMaxJsonFile);
  check_json_depth(text, path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    std::string m = e.what();
    if (auto p = m.find("] "); p != std::string::npos) m = m.substr(p + 2);
    if (auto p = m.find("; last read"); p != std::string::npos) m = m.substr(0, p);  // echoes raw bytes
    format_error(path, "bad JSON: " + m);
  }
}

nlohmann::json parse_json_object(const std::string& path) {
  nlohmann::json j = parse_json_file(path);
  if (!j.is_object()) format_error(path, "is not a JSON object");
  return j;
}

// A plain relative path inside a directory: not empty, not absolute, no backslash or NUL, valid
// UTF-8, and no "", "." or ".." component.
bool is_inner_relative_path(const std::string& p) {
  if (p.empty() || p[0] == '/' || p.find('\\') != std::string::npos || p.find('\0') != std::string::npos ||
      !fmt::valid_utf8(p)) {
    return false;
  }
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    const std::string part = p.substr(start, end - start);
    if (part == ".." || part == "." || part.empty()) return false;
    start = end + 1;
  }
  return true;
}

// A shard file name from an index must be a plain relative path inside the checkpoint directory.
void check_shard_name(const std::string& index_path, const std::string& tensor, const std::string& shard) {
  if (!is_inner_relative_path(shard)) {
    format_error(index_path, "tensor '" + fmt::printable(tensor) + "' maps to an invalid shard name '" +
                                 fmt::printable(shard) + "'");
  }
}

}  // namespace

HfCheckpoint read_hf_checkpoint(const std::string& dir_in) {
  std::string dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) throw_error(ErrorCode::kIo, dir + ": not a directory");
  }
  HfCheckpoint ck;
  ck.dir = dir;
  const std::string config_path = fmt::join_path(dir, "config.json");
  if (!is_file(config_path)) throw_error(ErrorCode::kIo, config_path + ": missing (not an HF checkpoint directory)");
  ck.config = parse_json_object(config_path);
  ck.text_config = ck.config;
  if (auto tc = ck.config.find("text_config"); tc != ck.config.end() && !tc->is_null()) {
    if (!tc->is_object()) format_error(config_path, "text_config is not an object");
    ck.text_config = *tc;
  }
  if (auto mt = ck.config.find("model_type"); mt != ck.config.end() && !mt->is_string()) {
    format_error(config_path, "model_type is not a string");
  }
  if (auto ar = ck.config.find("architectures"); ar != ck.config.end() && !ar->is_null()) {
    if (!ar->is_array()) format_error(config_path, "architectures is not an array");
    for (const auto& a : *ar) {
      if (!a.is_string()) format_error(config_path, "architectures entries must be strings");
    }
  }

  const std::string gen_path = fmt::join_path(dir, "generation_config.json");
  ck.generation_config = is_file(gen_path) ? parse_json_object(gen_path) : nlohmann::json::object();
  const std::string tc_path = fmt::join_path(dir, "tokenizer_config.json");
  ck.tokenizer_config = is_file(tc_path) ? parse_json_object(tc_path) : nlohmann::json::object();
  const std::string tok_path = fmt::join_path(dir, "tokenizer.json");
  if (is_file(tok_path)) ck.tokenizer_json_path = tok_path;

  const std::string tmpl_path = fmt::join_path(dir, "chat_template.jinja");
  if (is_file(tmpl_path)) {
    ck.chat_template = read_text_file(tmpl_path, kMaxJsonFile);
  } else if (auto ct = ck.tokenizer_config.find("chat_template"); ct != ck.tokenizer_config.end() && !ct->is_null()) {
    if (ct->is_string()) {
      ck.chat_template = ct->get<std::string>();
    } else if (ct->is_array()) {
      // [{"name": "default", "template": "..."}, ...]: take "default", else the first.
      for (const auto& e : *ct) {
        if (!e.is_object() || !e.contains("template") || !e["template"].is_string()) {
          format_error(tc_path, "chat_template list entries must be {name, template} objects");
        }
        const bool is_default = e.contains("name") && e["name"] == "default";
        if (ck.chat_template.empty() || is_default) ck.chat_template = e["template"].get<std::string>();
        if (is_default) break;
      }
    } else {
      format_error(tc_path, "chat_template is neither a string nor a list");
    }
  }

  // Weights.
  const std::string single = fmt::join_path(dir, "model.safetensors");
  const std::string index_path = fmt::join_path(dir, "model.safetensors.index.json");
  if (is_file(index_path)) {
    nlohmann::json index = parse_json_object(index_path);
    auto wm = index.find("weight_map");
    if (wm == index.end() || !wm->is_object()) format_error(index_path, "missing or non-object weight_map");
    std::vector<std::string> shards;
    std::set<std::string> seen;
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      if (!it.value().is_string()) format_error(index_path, "weight_map value for '" + fmt::printable(it.key()) + "' is not a string");
      const std::string shard = it.value().get<std::string>();
      check_shard_name(index_path, it.key(), shard);
      if (seen.insert(shard).second) shards.push_back(shard);
    }
    if (shards.empty()) format_error(index_path, "weight_map is empty");
    for (const auto& shard : shards) {
      const std::string sp = fmt::join_path(dir, shard);
      if (!is_file(sp)) throw_error(ErrorCode::kIo, index_path + ": shard " + shard + " is missing");
      ByteSourcePtr src = open_file_source(sp);
      SafetensorsFile sf = read_safetensors(src);
      for (const auto& [name, info] : sf.tensors.all()) ck.tensors.add(info, sp);
      ck.sources.push_back(std::move(src));
    }
    for (auto it = wm->begin(); it != wm->end(); ++it) {
      const TensorInfo* t = ck.tensors.find(it.key());
      const std::string shard = it.value().get<std::string>();
      if (!t) {
        format_error(index_path, "tensor '" + fmt::printable(it.key()) + "' is listed for " + shard +
                                     " but is not in it");
      }
      if (t->source->name() != fmt::join_path(dir, shard)) {
        format_error(index_path, "tensor '" + fmt::printable(it.key()) + "' is listed for " + shard +
                                     " but found in " + t->source->name());
      }
    }
  } else if (is_file(single)) {
    ByteSourcePtr src = open_file_source(single);
    SafetensorsFile sf = read_safetensors(src);
    ck.tensors = std::move(sf.tensors);
    ck.sources.push_back(std::move(src));
  } else {
    throw_error(ErrorCode::kIo, dir + ": no model.safetensors or model.safetensors.index.json");
  }
  apply_mlx_layout(ck);  // MLX (mlx-community) checkpoints: back to HF names and layouts (format/mlx.h)
  return ck;
}

StPooling read_st_pooling(const std::string& dir) {
  StPooling r;
  const std::string modules_path = fmt::join_path(dir, "modules.json");
  if (!is_file(modules_path)) return r;
  try {
    const nlohmann::json modules = parse_json_file(modules_path);
    if (!modules.is_array()) format_error(modules_path, "is not a JSON array of modules");
    const nlohmann::json* pooling = nullptr;
    for (const auto& m : modules) {
      if (!m.is_object()) format_error(modules_path, "holds a module that is not an object");
      const auto t = m.find("type");
      if (t != m.end() && t->is_string() && t->get<std::string>() == "sentence_transformers.models.Pooling") {
        pooling = &m;
        break;
      }
    }
    if (!pooling) return r;
    const auto p = pooling->find("path");
    if (p == pooling->end() || !p->is_string() || !is_inner_relative_path(p->get<std::string>())) {
      format_error(modules_path, "the Pooling module's \"path\" is not a relative path inside the directory");
    }
    const std::string config_path = fmt::join_path(fmt::join_path(dir, p->get<std::string>()), "config.json");
    if (!is_file(config_path)) format_error(config_path, "is missing (named by modules.json)");
    const nlohmann::json config = parse_json_object(config_path);
    auto mode = [&](const char* key) {
      const auto it = config.find(key);
      if (it == config.end() || it->is_null()) return false;
      if (!it->is_boolean()) format_error(config_path, std::string("'") + key + "' is not a boolean");
      return it->get<bool>();
    };
    if (mode("pooling_mode_mean_tokens")) r.type = 1;
    else if (mode("pooling_mode_cls_token")) r.type = 2;
    else if (mode("pooling_mode_lasttoken")) r.type = 3;
    else format_error(config_path, "sets none of the pooling modes oxinfer pools with (mean, cls, last token)");
  } catch (const Error& e) {
    r.type.reset();
    r.warning = e.what();
  }
  return r;
}

}  // namespace oxi
