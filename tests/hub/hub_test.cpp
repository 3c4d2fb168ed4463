// Unit tests of the hub library without a network: SHA-256 (FIPS 180-4 vectors), spec parsing,
// names, quant matching, file selection, and reading a cache laid out by another tool.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "hub/hub.h"
#include "hub/hub_internal.h"

namespace fs = std::filesystem;
using namespace oxi;
using namespace oxi::hub;

TEST(HubSha256, KnownVectors) {
  // FIPS 180-4 / NIST examples.
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(HubSha256, IncrementalEqualsOneShot) {
  std::string data;
  for (int i = 0; i < 5000; ++i) data.push_back(static_cast<char>(i * 7 + 3));
  for (size_t chunk : {1u, 3u, 63u, 64u, 65u, 1000u}) {
    Sha256 s;
    for (size_t off = 0; off < data.size(); off += chunk) s.update(data.data() + off, std::min(chunk, data.size() - off));
    EXPECT_EQ(s.hex_digest(), sha256_hex(data)) << chunk;
  }
}

TEST(HubSpec, Parses) {
  auto s = parse_hub_spec("Qwen/Qwen3-0.6B");
  EXPECT_EQ(s.repo, "Qwen/Qwen3-0.6B");
  EXPECT_EQ(s.quant, "");
  EXPECT_EQ(s.revision, "main");
  s = parse_hub_spec("unsloth/gemma-4-GGUF:q4_k_m@v1.0");
  EXPECT_EQ(s.repo, "unsloth/gemma-4-GGUF");
  EXPECT_EQ(s.quant, "q4_k_m");
  EXPECT_EQ(s.revision, "v1.0");
  s = parse_hub_spec("a/b@refs/pr/1");
  EXPECT_EQ(s.revision, "refs/pr/1");
  s = parse_hub_spec("a/b@0123456789abcdef0123456789abcdef01234567:Q8_0");
  EXPECT_EQ(s.quant, "Q8_0");
  EXPECT_EQ(s.revision, "0123456789abcdef0123456789abcdef01234567");
}

TEST(HubSpec, RejectsBadInput) {
  for (const char* bad : {"", "noslash", "a/b/c", "/b", "a/", "a/b:", "a/b@", "../x", "a/..", "a/b@../x",
                          "a/b@/x", "a b/c", "a/b:Q4 K", "a/b:x@r:y", "a--b/c", "a/b\n", "a/b@x//y"}) {
    EXPECT_THROW(parse_hub_spec(bad), Error) << bad;
  }
  try {
    parse_hub_spec("noslash");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("org/name"), std::string::npos);
  }
}

TEST(HubNames, CacheDirFromEnvironment) {
  ::setenv("HF_HUB_CACHE", "/x/hub", 1);
  ::setenv("HF_HOME", "/y", 1);
  EXPECT_EQ(hf_hub_cache_dir(), "/x/hub");
  ::unsetenv("HF_HUB_CACHE");
  EXPECT_EQ(hf_hub_cache_dir(), "/y/hub");
  ::unsetenv("HF_HOME");
  ::unsetenv("XDG_CACHE_HOME");
  ::setenv("HOME", "/home/u", 1);
  EXPECT_EQ(hf_hub_cache_dir(), "/home/u/.cache/huggingface/hub");
  ::setenv("HF_HOME", "~/hf", 1);
  EXPECT_EQ(hf_hub_cache_dir(), "/home/u/hf/hub");
  ::unsetenv("HF_HOME");
}

TEST(HubNames, FolderAndPaths) {
  EXPECT_EQ(repo_folder_name("Qwen/Qwen3-0.6B"), "models--Qwen--Qwen3-0.6B");
  EXPECT_TRUE(is_safe_repo_path("config.json"));
  EXPECT_TRUE(is_safe_repo_path("Q4_K_M/m-00001-of-00002.gguf"));
  for (const char* bad : {"", "/etc/passwd", "../x", "a/../b", "a//b", "a/./b", "a\\b", "a/"}) {
    EXPECT_FALSE(is_safe_repo_path(bad)) << bad;
  }
  EXPECT_TRUE(is_safe_blob_name("0123abcd"));
  EXPECT_FALSE(is_safe_blob_name("../x"));
  EXPECT_FALSE(is_safe_blob_name(""));
  EXPECT_EQ(url_encode("a b/c+d", true), "a%20b/c%2Bd");
  EXPECT_EQ(url_encode("refs/pr/1", false), "refs%2Fpr%2F1");
}

TEST(HubQuant, Matching) {
  EXPECT_TRUE(quant_matches("Qwen3-8B-Q4_K_M.gguf", "Q4_K_M"));
  EXPECT_TRUE(quant_matches("qwen3-8b-q4_k_m.gguf", "Q4_K_M"));
  EXPECT_TRUE(quant_matches("model.Q4_K_M.gguf", "q4_k_m"));
  EXPECT_TRUE(quant_matches("Q4_K_M/m-Q4_K_M-00001-of-00002.gguf", "Q4_K_M"));
  EXPECT_TRUE(quant_matches("BF16/m-00001-of-00002.gguf", "bf16"));
  EXPECT_FALSE(quant_matches("m-Q4_K_M.gguf", "Q4_K"));
  EXPECT_FALSE(quant_matches("m-Q4_K_M.gguf", "K_M"));
  EXPECT_FALSE(quant_matches("m-IQ4_XS.gguf", "Q4_XS"));
  EXPECT_TRUE(quant_matches("m-UD-Q4_K_XL.gguf", "Q4_K_XL"));
  EXPECT_EQ(gguf_quant_label("m-UD-Q4_K_XL.gguf"), "Q4_K_XL");
  EXPECT_EQ(gguf_quant_label("x/m-q8_0-00002-of-00003.gguf"), "Q8_0");
  EXPECT_EQ(gguf_quant_label("BF16/model-00001-of-00002.gguf"), "BF16");  // the folder names it
  EXPECT_EQ(gguf_quant_label("model.gguf"), "MODEL");
}

TEST(HubSelect, HfCheckpoint) {
  const std::vector<std::string> files = {
      "README.md", ".gitattributes", "config.json", "generation_config.json", "tokenizer.json",
      "tokenizer_config.json", "chat_template.jinja", "model-00001-of-00002.safetensors",
      "model-00002-of-00002.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
      "onnx/model.onnx", "original/consolidated.safetensors", "images/a.png", "merges.txt"};
  const auto sel = select_model_files(files, "", "a/b");
  EXPECT_FALSE(sel.gguf);
  EXPECT_EQ(sel.result, "");
  const std::vector<std::string> want = {"config.json", "tokenizer.json", "tokenizer_config.json",
                                         "chat_template.jinja", "generation_config.json",
                                         "model.safetensors.index.json", "model-00001-of-00002.safetensors",
                                         "model-00002-of-00002.safetensors"};
  EXPECT_EQ(sel.files, want);
}

TEST(HubSelect, SafetensorsVariants) {
  // Index + shards: only the shards, even with a stray model.safetensors.
  auto sel = select_model_files({"config.json", "model.safetensors", "model.safetensors.index.json",
                                 "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"},
                                "", "a/b");
  EXPECT_EQ(sel.files, (std::vector<std::string>{"config.json", "model.safetensors.index.json",
                                                 "model-00001-of-00002.safetensors",
                                                 "model-00002-of-00002.safetensors"}));
  // A single file.
  sel = select_model_files({"config.json", "model.safetensors", "consolidated.safetensors"}, "", "a/b");
  EXPECT_EQ(sel.files, (std::vector<std::string>{"config.json", "model.safetensors"}));
  // Only differently named weights: all root-level safetensors.
  sel = select_model_files({"config.json", "weights.safetensors", "sub/x.safetensors"}, "", "a/b");
  EXPECT_EQ(sel.files, (std::vector<std::string>{"config.json", "weights.safetensors"}));
  // A checkpoint and GGUFs in one repo: no quant → checkpoint, a quant → GGUF.
  EXPECT_FALSE(select_model_files({"config.json", "model.safetensors", "m-Q4_K_M.gguf"}, "", "a/b").gguf);
  EXPECT_TRUE(select_model_files({"config.json", "model.safetensors", "m-Q4_K_M.gguf"}, "Q4_K_M", "a/b").gguf);
}

TEST(HubSelect, GgufDefaultAndExplicitQuant) {
  const std::vector<std::string> files = {"README.md", "m-Q8_0.gguf", "m-Q4_K_M.gguf", "m-Q4_K_S.gguf",
                                          "mmproj-m-F16.gguf", "m-BF16.gguf"};
  auto sel = select_model_files(files, "", "a/b");
  EXPECT_TRUE(sel.gguf);
  EXPECT_EQ(sel.files, std::vector<std::string>{"m-Q4_K_M.gguf"});
  EXPECT_EQ(sel.result, "m-Q4_K_M.gguf");
  sel = select_model_files(files, "q8_0", "a/b");
  EXPECT_EQ(sel.result, "m-Q8_0.gguf");
  try {
    select_model_files(files, "Q5_K_M", "a/b");
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("available: BF16, Q4_K_M, Q4_K_S, Q8_0"), std::string::npos) << e.what();
  }
  // The only GGUF is taken when no quant was asked for.
  sel = select_model_files({"m-Q6_K.gguf"}, "", "a/b");
  EXPECT_EQ(sel.result, "m-Q6_K.gguf");
  // A quant on a safetensors-only repo.
  EXPECT_THROW(select_model_files({"config.json", "model.safetensors"}, "Q4_K_M", "a/b"), Error);
  EXPECT_THROW(select_model_files({"README.md"}, "", "a/b"), Error);
}

// Companion files (mmproj, MTP head) by llama.cpp's downloader's rule (hub_internal.h).
TEST(HubSelect, Sidecars) {
  const std::vector<std::string> files = {"m-Q4_K_M.gguf",      "m-Q8_0.gguf",        "mmproj-m-F16.gguf",
                                          "mmproj-m-Q8_0.gguf", "mtp-m-Q8_0.gguf",    "mtp-m-Q4_K_M.gguf",
                                          "other/mmproj-x-Q4_0.gguf", "README.md"};
  // Nearest bit width to the model file's (Q4_K_M → 4): Q8_0 (8) beats F16 (16).
  EXPECT_EQ(select_sidecar(files, "m-Q4_K_M.gguf", "mmproj", ""), "mmproj-m-Q8_0.gguf");
  EXPECT_EQ(select_sidecar(files, "m-Q8_0.gguf", "mmproj", ""), "mmproj-m-Q8_0.gguf");
  // A quant asked for: the name that holds it exactly.
  EXPECT_EQ(select_sidecar(files, "m-Q4_K_M.gguf", "mtp-", "q4_k_m"), "mtp-m-Q4_K_M.gguf");
  EXPECT_EQ(select_sidecar(files, "m-Q8_0.gguf", "mtp-", "Q8_0"), "mtp-m-Q8_0.gguf");
  // Nothing of that kind; a folder beside the model's does not count.
  EXPECT_EQ(select_sidecar(files, "m-Q4_K_M.gguf", "eagle3-", ""), "");
  EXPECT_EQ(select_sidecar({"a/m-Q4_K_M.gguf", "b/mmproj-F16.gguf"}, "a/m-Q4_K_M.gguf", "mmproj", ""), "");
  // The model's own folder before the repo root; the root when the folder has none.
  const std::vector<std::string> nested = {"Q4_K_M/m-Q4_K_M-00001-of-00002.gguf", "Q4_K_M/mmproj-F32.gguf",
                                           "mmproj-F16.gguf", "BF16/mmproj-BF16.gguf"};
  EXPECT_EQ(select_sidecar(nested, nested[0], "mmproj", "Q4_K_M"), "Q4_K_M/mmproj-F32.gguf");
  EXPECT_EQ(select_sidecar({nested[0], nested[2], nested[3]}, nested[0], "mmproj", ""), "mmproj-F16.gguf");
}

TEST(HubSelect, CompanionsAreNeverTheModel) {
  for (const char* f : {"mmproj-m-F16.gguf", "m.imatrix.gguf", "mtp-m-Q8_0.gguf", "eagle3-m.gguf", "x/dflash-m.gguf"})
    EXPECT_FALSE(is_model_gguf(f)) << f;
  EXPECT_TRUE(is_model_gguf("m-Q8_0.gguf"));
  EXPECT_EQ(select_model_files({"mtp-m-Q4_K_M.gguf", "m-Q4_K_M.gguf"}, "Q4_K_M", "a/b").result, "m-Q4_K_M.gguf");
}

TEST(HubSelect, SplitGguf) {
  const std::vector<std::string> files = {"Q4_K_M/m-Q4_K_M-00002-of-00003.gguf", "Q4_K_M/m-Q4_K_M-00001-of-00003.gguf",
                                          "Q4_K_M/m-Q4_K_M-00003-of-00003.gguf", "Q8_0/m-Q8_0-00001-of-00002.gguf",
                                          "Q8_0/m-Q8_0-00002-of-00002.gguf"};
  const auto sel = select_model_files(files, "", "a/b");
  ASSERT_EQ(sel.files.size(), 3u);
  EXPECT_EQ(sel.result, "Q4_K_M/m-Q4_K_M-00001-of-00003.gguf");
  EXPECT_EQ(sel.files[2], "Q4_K_M/m-Q4_K_M-00003-of-00003.gguf");
  // A missing part is an error.
  EXPECT_THROW(select_model_files({"m-Q4_K_M-00001-of-00002.gguf"}, "Q4_K_M", "a/b"), Error);
}

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    char tmpl[] = "/tmp/oxi_hub_test_XXXXXX";
    path = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

void write(const fs::path& p, const std::string& s) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << s;
}

}  // namespace

TEST(HubCache, ReadsAnotherToolsLayoutOffline) {
  TempDir t;
  const std::string commit = "0123456789abcdef0123456789abcdef01234567";
  const fs::path repo = t.path / "models--org--tiny-GGUF";
  write(repo / "blobs" / "aaaa", "GGUF....");
  write(repo / "refs" / "main", commit);  // huggingface_hub writes no trailing newline
  fs::create_directories(repo / "snapshots" / commit);
  fs::create_symlink("../../blobs/aaaa", repo / "snapshots" / commit / "tiny-Q4_K_M.gguf");
  HubOptions opt;
  opt.offline = true;
  opt.cache_dir = t.path.string();
  EXPECT_EQ(hub_resolve_model("org/tiny-GGUF", opt), (repo / "snapshots" / commit / "tiny-Q4_K_M.gguf").string());
  EXPECT_EQ(hub_resolve_model("org/tiny-GGUF@" + commit, opt),
            (repo / "snapshots" / commit / "tiny-Q4_K_M.gguf").string());
  // Not cached: clear errors.
  EXPECT_THROW(hub_resolve_model("org/other", opt), Error);
  EXPECT_THROW(hub_resolve_model("org/tiny-GGUF@v2", opt), Error);
  try {
    hub_resolve_model("org/tiny-GGUF:Q8_0", opt);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("available: Q4_K_M"), std::string::npos) << e.what();
  }
  // A dangling link (blob removed) does not count as present.
  fs::remove(repo / "blobs" / "aaaa");
  EXPECT_THROW(hub_resolve_model("org/tiny-GGUF", opt), Error);
}

TEST(HubCache, HfCheckpointSnapshotDirAndMissingShard) {
  TempDir t;
  const std::string commit = "fedcba9876543210fedcba9876543210fedcba98";
  const fs::path snap = t.path / "models--org--tiny" / "snapshots" / commit;
  write(t.path / "models--org--tiny" / "refs" / "main", commit + "\n");
  write(snap / "config.json", "{}");
  write(snap / "tokenizer.json", "{}");  // regular files (a copy, not links) are read as well
  write(snap / "model-00001-of-00002.safetensors", "x");
  write(snap / "model.safetensors.index.json",
        R"({"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}})");
  HubOptions opt;
  opt.offline = true;
  opt.cache_dir = t.path.string();
  EXPECT_THROW(hub_resolve_model("org/tiny", opt), Error);  // shard 2 missing
  write(snap / "model-00002-of-00002.safetensors", "y");
  EXPECT_EQ(hub_resolve_model("org/tiny", opt), snap.string());
}

TEST(HubOnline, UnreachableEndpointIsAClearError) {
  ::unsetenv("HF_HUB_OFFLINE");
  TempDir t;
  HubOptions opt;
  opt.cache_dir = t.path.string();
  opt.endpoint = "http://127.0.0.1:1";  // nothing listens on port 1
  opt.progress = false;
  try {
    hub_resolve_model("org/tiny", opt);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kIo);
    EXPECT_NE(std::string(e.what()).find("cannot reach"), std::string::npos) << e.what();
  }
}

// ---- against tests/hub/fake_hub.py (python3, 127.0.0.1): the download path inside this binary,
// so sanitizer builds cover it too. Skipped when python3 is missing.
namespace {

struct FakeHub {
  FILE* pipe = nullptr;
  int port = 0;
  explicit FakeHub(const fs::path& repos) {
    const std::string cmd = "python3 " OXI_SOURCE_DIR "/tests/hub/fake_hub.py serve '" + repos.string() +
                            "' --idle 30 2>/dev/null";
    pipe = ::popen(cmd.c_str(), "r");
    char line[64] = {0};
    if (pipe && std::fgets(line, sizeof line, pipe)) std::sscanf(line, "PORT %d", &port);
  }
  ~FakeHub() {
    if (port) {
      try {
        http_fetch(endpoint() + "/__shutdown", "", false, false);
      } catch (const std::exception&) {
      }
    }
    if (pipe) ::pclose(pipe);
  }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port); }
};

std::string random_bytes(size_t n, unsigned seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1103515245u + 12345u;
    s[i] = static_cast<char>(seed >> 16);
  }
  return s;
}

}  // namespace

TEST(HubFake, DownloadResumeVerify) {
  if (std::system("python3 -c 1 >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 not available";
  ::unsetenv("HF_HUB_OFFLINE");
  ::unsetenv("OXI_HUB_ATTEMPTS");
  TempDir t;
  const std::string data = random_bytes(300000, 7);
  write(t.path / "repos/o/flaky/m-Q4_K_M.gguf", data);
  write(t.path / "repos/o/flaky.json", R"({"drop": {"m-Q4_K_M.gguf": "once"}})");
  write(t.path / "repos/o/bad/m-Q4_K_M.gguf", data);
  write(t.path / "repos/o/bad.json", R"({"corrupt": ["m-Q4_K_M.gguf"]})");
  FakeHub hub(t.path / "repos");
  ASSERT_NE(hub.port, 0);
  HubOptions opt;
  opt.cache_dir = (t.path / "cache").string();
  opt.endpoint = hub.endpoint();
  opt.progress = false;
  const std::string p = hub_resolve_model("o/flaky", opt);
  std::ifstream in(p, std::ios::binary);
  const std::string got((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_TRUE(got == data);
  EXPECT_EQ(fs::read_symlink(p).string(), "../../blobs/" + sha256_hex(data));
  const auto stats = http_fetch(hub.endpoint() + "/__stats", "", false, false).body;
  EXPECT_NE(stats.find("\"range:m-Q4_K_M.gguf\": 1"), std::string::npos) << stats;
  try {
    hub_resolve_model("o/bad", opt);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kFormat);
    EXPECT_NE(std::string(e.what()).find("checksum mismatch"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(t.path / "cache/models--o--bad/blobs" / sha256_hex(data)));
  EXPECT_FALSE(fs::exists(t.path / "cache/models--o--bad/blobs" / (sha256_hex(data) + ".incomplete")));
  try {
    hub_resolve_model("o/flaky:Q8_0", opt);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("available: Q4_K_M"), std::string::npos) << e.what();
  }
}

// -hf with companions: the mmproj and the MTP head come into the same snapshot as the model, only
// when asked for; offline resolution finds them again.
TEST(HubFake, SidecarsComeWithTheModel) {
  if (std::system("python3 -c 1 >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3 not available";
  ::unsetenv("HF_HUB_OFFLINE");
  TempDir t;
  write(t.path / "repos/o/vl/m-Q4_K_M.gguf", random_bytes(1000, 1));
  write(t.path / "repos/o/vl/mmproj-m-F16.gguf", random_bytes(1000, 2));
  write(t.path / "repos/o/vl/mtp-m-Q4_K_M.gguf", random_bytes(1000, 3));
  FakeHub hub(t.path / "repos");
  ASSERT_NE(hub.port, 0);
  HubOptions opt;
  opt.cache_dir = (t.path / "cache").string();
  opt.endpoint = hub.endpoint();
  opt.progress = false;
  const std::string plain = hub_resolve_model("o/vl", opt);
  const fs::path snap = fs::path(plain).parent_path();
  EXPECT_EQ(fs::path(plain).filename(), "m-Q4_K_M.gguf");
  EXPECT_FALSE(fs::exists(snap / "mmproj-m-F16.gguf"));
  opt.sidecars = {"mmproj", "mtp-"};
  const HubModel r = hub_resolve("o/vl", opt);
  EXPECT_EQ(r.path, plain);
  EXPECT_EQ(r.sidecar("mmproj"), (snap / "mmproj-m-F16.gguf").string());
  EXPECT_EQ(r.sidecar("mtp-"), (snap / "mtp-m-Q4_K_M.gguf").string());
  EXPECT_TRUE(fs::exists(r.sidecar("mmproj")));
  EXPECT_TRUE(fs::exists(r.sidecar("mtp-")));
  opt.offline = true;
  const HubModel off = hub_resolve("o/vl", opt);
  EXPECT_EQ(off.sidecar("mmproj"), r.sidecar("mmproj"));
  opt.sidecars = {"eagle3-"};
  EXPECT_EQ(hub_resolve("o/vl", opt).sidecars.size(), 0u);
  // -hfd: the repo's MTP head is what is fetched (the model is never its own companion).
  opt.offline = false;
  opt.sidecars.clear();
  opt.primary_word = "mtp-";
  EXPECT_EQ(hub_resolve_model("o/vl", opt), (snap / "mtp-m-Q4_K_M.gguf").string());
  // A repo without such a file is a draft model of its own (Gemma 4's assistant repos): its GGUF,
  // or its HF checkpoint as a snapshot directory.
  opt.primary_word = "eagle3-";
  EXPECT_EQ(hub_resolve_model("o/vl", opt), plain);
  write(t.path / "repos/o/asst/config.json", R"({"model_type":"gemma4_assistant"})");
  write(t.path / "repos/o/asst/model.safetensors", random_bytes(64, 4));
  opt.primary_word = "mtp-";
  const std::string asst = hub_resolve_model("o/asst", opt);
  EXPECT_TRUE(fs::is_directory(asst)) << asst;
  EXPECT_TRUE(fs::exists(fs::path(asst) / "model.safetensors"));
  write(t.path / "repos/o/empty/README.md", "nothing");
  EXPECT_THROW(hub_resolve_model("o/empty", opt), Error);
}
