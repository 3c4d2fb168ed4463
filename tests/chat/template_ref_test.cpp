// Renders the real chat templates (../shared/testdata/templates) for a set of conversations and
// compares with Python jinja2 configured as transformers configures it (tests/chat/render_ref.py,
// run at test time). Every case is rendered with the generation prompt on/off and enable_thinking
// unset/true/false. Where the reference raises, we must raise too.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "chat/jinja.h"
#include "core/error.h"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool run_capture(const std::string& cmd, std::string& out) {
  std::unique_ptr<FILE, int (*)(FILE*)> p(popen(cmd.c_str(), "r"), pclose);
  if (!p) return false;
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p.get())) > 0) out.append(buf, n);
  return pclose(p.release()) == 0;
}

bool have_jinja2() { return std::system("python3 -c 'import jinja2' >/dev/null 2>&1") == 0; }

class TemplateVsJinja2 : public ::testing::TestWithParam<const char*> {};

TEST_P(TemplateVsJinja2, AllConversations) {
  if (!have_jinja2()) GTEST_SKIP() << "python3-jinja2 not installed";
  const std::string tmpl_path = std::string(OXI_SHARED_DIR) + "/testdata/templates/" + GetParam();
  const std::string cases_path = std::string(OXI_SOURCE_DIR) + "/tests/chat/data/conversations.json";
  const std::string src = read_file(tmpl_path);
  ASSERT_FALSE(src.empty()) << tmpl_path;
  std::string ref_json;
  ASSERT_TRUE(run_capture("python3 " + std::string(OXI_SOURCE_DIR) + "/tests/chat/render_ref.py --batch '" +
                              tmpl_path + "' '" + cases_path + "'",
                          ref_json));
  const auto ref = nlohmann::ordered_json::parse(ref_json);
  const auto cases = nlohmann::ordered_json::parse(read_file(cases_path));
  oxi::ChatTemplate tmpl(src);
  size_t compared = 0;
  for (const auto& r : ref) {
    nlohmann::ordered_json c;
    for (const auto& cc : cases) {
      if (cc["name"] == r["name"]) c = cc;
    }
    ASSERT_TRUE(c.is_object());
    oxi::ChatRenderOptions opt;
    opt.add_generation_prompt = r["add_generation_prompt"].get<bool>();
    if (r["enable_thinking"].is_boolean()) opt.enable_thinking = r["enable_thinking"].get<bool>() ? 1 : 0;
    if (c.contains("tools")) opt.tools = c["tools"];
    opt.bos_token = "<bos>";
    opt.eos_token = "<eos>";
    const std::string label = r["name"].get<std::string>() + " gen=" + r["add_generation_prompt"].dump() +
                              " thinking=" + r["enable_thinking"].dump();
    if (r.contains("error")) {
      EXPECT_THROW(oxi::render_chat(tmpl, c["messages"], opt), oxi::Error) << label << " (reference: " << r["error"] << ")";
    } else {
      std::string got;
      try {
        got = oxi::render_chat(tmpl, c["messages"], opt);
      } catch (const std::exception& e) {
        ADD_FAILURE() << label << ": threw " << e.what();
        continue;
      }
      EXPECT_EQ(got, r["output"].get<std::string>()) << label;
    }
    ++compared;
  }
  EXPECT_GE(compared, 60u);
}

INSTANTIATE_TEST_SUITE_P(RealTemplates, TemplateVsJinja2,
                         ::testing::Values("Qwen3.5-4B.jinja", "Qwen-Qwen3-0.6B.jinja", "google-gemma-4-31B-it.jinja",
                                           "google-gemma-4-31B-it-interleaved.jinja"));

}  // namespace
