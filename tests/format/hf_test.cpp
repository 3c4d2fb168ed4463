#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "format/hf.h"
#include "format/model_files.h"
#include "format/safetensors.h"
#include "test_util.h"

namespace oxi {
namespace {

namespace fs = std::filesystem;
using test::throws_clean;

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name) {
    path = fs::path(::testing::TempDir()) / ("oxi_hf_" + name);
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string str() const { return path.string(); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name, std::ios::binary) << text;
  }
};

void write_st(const fs::path& p, const std::vector<std::string>& names) {
  SafetensorsWriter w;
  for (const auto& n : names) w.add_tensor(n, DType::F32, {2}, std::vector<uint8_t>(8, 0));
  w.write(p.string());
}

TEST(Hf, SingleFileCheckpoint) {
  TempDir d("single");
  d.write("config.json", R"({"model_type":"qwen3_5","architectures":["Qwen3_5ForConditionalGeneration"],
    "text_config":{"model_type":"qwen3_5_text","hidden_size":64}})");
  d.write("tokenizer.json", "{}");
  d.write("tokenizer_config.json", R"({"chat_template":"from-config","eos_token":"<e>"})");
  d.write("generation_config.json", R"({"temperature":0.6})");
  write_st(d.path / "model.safetensors", {"a", "b"});
  HfCheckpoint ck = read_hf_checkpoint(d.str());
  EXPECT_EQ(ck.text_config["hidden_size"], 64);
  EXPECT_EQ(ck.config["model_type"], "qwen3_5");
  EXPECT_EQ(ck.generation_config["temperature"], 0.6);
  EXPECT_EQ(ck.tokenizer_config["eos_token"], "<e>");
  EXPECT_EQ(ck.tokenizer_json_path, (d.path / "tokenizer.json").string());
  EXPECT_EQ(ck.chat_template, "from-config");
  EXPECT_EQ(ck.tensors.size(), 2u);
  d.write("chat_template.jinja", "from-file");
  EXPECT_EQ(read_hf_checkpoint(d.str()).chat_template, "from-file");

  ModelFiles mf = open_model_files(d.str());
  EXPECT_EQ(mf.kind, ModelFileKind::kHf);
  EXPECT_EQ(mf.architecture(), "qwen3_5");
  EXPECT_EQ(mf.tensors().size(), 2u);
  // config.json path → its directory.
  EXPECT_EQ(open_model_files((d.path / "config.json").string()).tensors().size(), 2u);
}

TEST(Hf, TextConfigModelTypeAndNoTextConfig) {
  TempDir d("arch");
  d.write("config.json", R"({"text_config":{"model_type":"gemma4_text","x":1}})");
  write_st(d.path / "model.safetensors", {"a"});
  EXPECT_EQ(open_model_files(d.str()).architecture(), "gemma4_text");
  d.write("config.json", R"({"hidden_size":3})");
  HfCheckpoint ck = read_hf_checkpoint(d.str());
  EXPECT_EQ(ck.text_config["hidden_size"], 3);
  EXPECT_EQ(ck.generation_config, nlohmann::json::object());
  EXPECT_TRUE(ck.chat_template.empty());
  EXPECT_TRUE(ck.tokenizer_json_path.empty());
  EXPECT_TRUE(throws_clean([&] { open_model_files(d.str()).architecture(); }));
}

TEST(Hf, ShardedCheckpoint) {
  TempDir d("sharded");
  d.write("config.json", R"({"model_type":"m"})");
  write_st(d.path / "model-00001-of-00002.safetensors", {"a", "b"});
  write_st(d.path / "model-00002-of-00002.safetensors", {"c"});
  d.write("model.safetensors.index.json", R"({"metadata":{},"weight_map":{"a":"model-00001-of-00002.safetensors",
    "b":"model-00001-of-00002.safetensors","c":"model-00002-of-00002.safetensors"}})");
  HfCheckpoint ck = read_hf_checkpoint(d.str());
  EXPECT_EQ(ck.tensors.size(), 3u);
  EXPECT_EQ(ck.sources.size(), 2u);
  EXPECT_NE(ck.tensors.get("c").source->name().find("00002"), std::string::npos);

  // Tensor listed for a shard that lacks it.
  d.write("model.safetensors.index.json", R"({"weight_map":{"a":"model-00001-of-00002.safetensors",
    "z":"model-00002-of-00002.safetensors"}})");
  std::string msg;
  EXPECT_TRUE(throws_clean([&] { read_hf_checkpoint(d.str()); }, &msg));
  EXPECT_NE(msg.find("'z'"), std::string::npos) << msg;
  // Missing shard; path escaping the directory.
  d.write("model.safetensors.index.json", R"({"weight_map":{"a":"nope.safetensors"}})");
  EXPECT_TRUE(throws_clean([&] { read_hf_checkpoint(d.str()); }));
  d.write("model.safetensors.index.json", R"({"weight_map":{"a":"../x.safetensors"}})");
  EXPECT_TRUE(throws_clean([&] { read_hf_checkpoint(d.str()); }));
  // The same tensor in two shards.
  write_st(d.path / "model-00002-of-00002.safetensors", {"a"});
  d.write("model.safetensors.index.json", R"({"weight_map":{"a":"model-00001-of-00002.safetensors",
    "b":"model-00002-of-00002.safetensors"}})");
  EXPECT_TRUE(throws_clean([&] { read_hf_checkpoint(d.str()); }));
}

TEST(Hf, CacheSnapshotSymlinks) {
  TempDir d("cache");
  fs::create_directories(d.path / "blobs");
  fs::create_directories(d.path / "snapshots" / "abc123");
  std::ofstream(d.path / "blobs" / "cfg") << R"({"model_type":"gemma4"})";
  write_st(d.path / "blobs" / "w", {"x"});
  std::error_code ec;
  fs::create_symlink("../../blobs/cfg", d.path / "snapshots" / "abc123" / "config.json", ec);
  if (ec) GTEST_SKIP() << "no symlinks here";
  fs::create_symlink("../../blobs/w", d.path / "snapshots" / "abc123" / "model.safetensors");
  ModelFiles mf = open_model_files((d.path / "snapshots" / "abc123").string());
  EXPECT_EQ(mf.architecture(), "gemma4");
  EXPECT_EQ(mf.tensors().get("x").nbytes, 8u);
}

TEST(Hf, BadConfigs) {
  TempDir d("bad");
  write_st(d.path / "model.safetensors", {"a"});
  const char* bad[] = {"", "{", "[]", "42", R"({"text_config":5})", R"({"model_type":7})",
                       R"({"architectures":"x"})", "{\"a\":\"\xff\"}"};
  for (const char* c : bad) {
    d.write("config.json", c);
    std::string msg;
    EXPECT_TRUE(throws_clean([&] { read_hf_checkpoint(d.str()); }, &msg)) << c;
    EXPECT_NE(msg.find("config.json"), std::string::npos) << msg;
  }
  d.write("config.json", "{}");
  d.write("tokenizer_config.json", R"({"chat_template":5})");
  EXPECT_TRUE(throws_clean([&] { read_hf_checkpoint(d.str()); }));
  d.write("tokenizer_config.json", R"({"chat_template":[{"name":"tool_use","template":"T"},{"name":"default","template":"D"}]})");
  EXPECT_EQ(read_hf_checkpoint(d.str()).chat_template, "D");
  fs::remove(d.path / "model.safetensors");
  EXPECT_TRUE(throws_clean([&] { read_hf_checkpoint(d.str()); }));
  EXPECT_TRUE(throws_clean([&] { read_hf_checkpoint((d.path / "missing").string()); }));
  EXPECT_TRUE(throws_clean([&] { open_model_files((d.path / "missing.gguf").string()); }));
}

// sentence-transformers pooling (read_st_pooling): the mapping llama.cpp's converter uses, and
// every malformed or hostile config ignored with a warning naming the file, never a throw.
TEST(Hf, SentenceTransformersPooling) {
  TempDir d("st_pooling");
  const std::string modules =
      R"([{"idx":0,"name":"0","path":"","type":"sentence_transformers.models.Transformer"},)"
      R"({"idx":1,"name":"1","path":"1_Pooling","type":"sentence_transformers.models.Pooling"},)"
      R"({"idx":2,"name":"2","path":"2_Normalize","type":"sentence_transformers.models.Normalize"}])";
  EXPECT_FALSE(read_st_pooling(d.str()).type);  // no modules.json: nothing, no warning
  EXPECT_EQ(read_st_pooling(d.str()).warning, "");
  d.write("modules.json", modules);
  fs::create_directories(d.path / "1_Pooling");
  auto pooling = [&](const std::string& cfg) {
    d.write("1_Pooling/config.json", cfg);
    return read_st_pooling(d.str());
  };
  const char* off = R"("pooling_mode_max_tokens": false, "pooling_mode_mean_sqrt_len_tokens": false)";
  EXPECT_EQ(pooling(std::string(R"({"word_embedding_dimension": 64, "pooling_mode_cls_token": false, "pooling_mode_mean_tokens": true, )") + off + "}").type, 1);
  EXPECT_EQ(pooling(R"({"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": false, "pooling_mode_lasttoken": false})").type, 2);
  EXPECT_EQ(pooling(R"({"pooling_mode_cls_token": false, "pooling_mode_mean_tokens": false, "pooling_mode_lasttoken": true})").type, 3);
  // llama.cpp's precedence: mean, then cls, then last; absent modes are false.
  EXPECT_EQ(pooling(R"({"pooling_mode_cls_token": true, "pooling_mode_mean_tokens": true, "pooling_mode_lasttoken": true})").type, 1);
  EXPECT_EQ(pooling(R"({"pooling_mode_cls_token": true, "pooling_mode_lasttoken": true})").type, 2);
  EXPECT_EQ(pooling(R"({"pooling_mode_lasttoken": true})").type, 3);
  EXPECT_EQ(pooling(R"({"pooling_mode_lasttoken": true})").warning, "");

  auto ignored = [&](const StPooling& st, const std::string& needle) {
    EXPECT_FALSE(st.type) << needle;
    EXPECT_NE(st.warning.find(needle), std::string::npos) << st.warning;
  };
  ignored(pooling(R"({"pooling_mode_max_tokens": true})"), "none of the pooling modes");
  ignored(pooling(R"({})"), "none of the pooling modes");
  ignored(pooling(R"({"pooling_mode_mean_tokens": "yes"})"), "is not a boolean");
  ignored(pooling(R"({"pooling_mode_mean_tokens": 1})"), "is not a boolean");
  ignored(pooling(R"([true])"), "not a JSON object");
  ignored(pooling(R"({"pooling_mode_mean_tokens": tru)"), "bad JSON");
  ignored(pooling(std::string(100000, '[')), "1_Pooling/config.json");  // nesting bomb
  ignored(pooling(""), "1_Pooling/config.json");

  d.write("1_Pooling/config.json", R"({"pooling_mode_mean_tokens": true})");
  auto with_modules = [&](const std::string& m) {
    d.write("modules.json", m);
    return read_st_pooling(d.str());
  };
  const std::string pre = R"([{"type":"sentence_transformers.models.Pooling","path":)";
  for (const char* p : {R"("../1_Pooling")", R"("/etc")", R"("1_Pooling/..")", R"("")", R"(".")", R"("a\b")", "null", "7"}) {
    ignored(with_modules(pre + p + "}]"), "modules.json");
  }
  ignored(with_modules(pre + R"("2_Missing"}])"), "2_Missing/config.json");
  ignored(with_modules(R"({"type":"sentence_transformers.models.Pooling"})"), "not a JSON array");
  ignored(with_modules(R"([1])"), "not an object");
  ignored(with_modules(R"([{"type":)"), "bad JSON");
  // A Pooling module found first decides; modules of other types (or none) leave no type, quietly.
  EXPECT_FALSE(with_modules(R"([{"type":"sentence_transformers.models.Transformer","path":""}])").type);
  EXPECT_EQ(with_modules(R"([{"type":"sentence_transformers.models.Transformer","path":""}])").warning, "");
  EXPECT_EQ(with_modules(pre + R"("1_Pooling"}, {"type":"sentence_transformers.models.Pooling","path":"../x"}])").type, 1);
  // A path with a subdirectory inside the checkpoint is fine.
  fs::create_directories(d.path / "p" / "q");
  d.write("p/q/config.json", R"({"pooling_mode_cls_token": true})");
  EXPECT_EQ(with_modules(pre + R"("p/q"}])").type, 2);
}

}  // namespace
}  // namespace oxi
