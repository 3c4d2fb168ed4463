// Small templates covering each supported Jinja feature (tests/chat/data/snippets.json, made by
// snippets.py), rendered by Python jinja2 as transformers configures it (render_ref.py, run at test
// time) and by our interpreter. Output must be byte-identical; where jinja2 raises, we raise.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "chat/jinja.h"
#include "core/error.h"

namespace {

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(JinjaSnippets, MatchPythonJinja2) {
  if (std::system("python3 -c 'import jinja2' >/dev/null 2>&1") != 0) GTEST_SKIP() << "python3-jinja2 missing";
  const std::string path = std::string(OXI_SOURCE_DIR) + "/tests/chat/data/snippets.json";
  std::string ref_json;
  {
    std::unique_ptr<FILE, int (*)(FILE*)> p(
        popen(("python3 " + std::string(OXI_SOURCE_DIR) + "/tests/chat/render_ref.py --snippets '" + path + "'").c_str(), "r"),
        pclose);
    ASSERT_TRUE(p);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p.get())) > 0) ref_json.append(buf, n);
  }
  const auto ref = nlohmann::ordered_json::parse(ref_json);
  const auto cases = nlohmann::ordered_json::parse(read_file(path));
  ASSERT_EQ(ref.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string tmpl = cases[i]["template"].get<std::string>();
    const auto& ctx = cases[i]["context"];
    std::string got;
    bool threw = false;
    std::string err;
    try {
      oxi::ChatTemplate t(tmpl);
      got = t.render(ctx);
    } catch (const oxi::Error& e) {
      threw = true;
      err = e.what();
    }
    if (ref[i].contains("error")) {
      EXPECT_TRUE(threw) << "#" << i << " " << tmpl << "\n  reference raised " << ref[i]["error"] << "\n  we printed: " << got;
    } else {
      EXPECT_FALSE(threw) << "#" << i << " " << tmpl << ": " << err;
      EXPECT_EQ(got, ref[i]["output"].get<std::string>()) << "#" << i << " " << tmpl;
    }
  }
}

}  // namespace
