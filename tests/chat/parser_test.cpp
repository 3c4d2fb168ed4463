// Output parser tests: every case is fed whole, split in two at every byte position, and byte by
// byte; the final message and the concatenated deltas must be the same every time.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "chat/jinja.h"
#include "chat/parser.h"

namespace oxi {
namespace {

using json = nlohmann::ordered_json;

struct Expect {
  std::string content, reasoning;
  std::vector<std::pair<std::string, std::string>> calls;  // name, arguments (compared as JSON)
  bool ended = false;
};

void check_msg(const ChatMessage& m, const Expect& e, const std::string& label) {
  EXPECT_EQ(m.content, e.content) << label;
  EXPECT_EQ(m.reasoning_content, e.reasoning) << label;
  ASSERT_EQ(m.tool_calls.size(), e.calls.size()) << label;
  for (size_t i = 0; i < e.calls.size(); ++i) {
    EXPECT_EQ(m.tool_calls[i].name, e.calls[i].first) << label;
    EXPECT_EQ(nlohmann::json::parse(m.tool_calls[i].arguments), nlohmann::json::parse(e.calls[i].second))
        << label << " args " << m.tool_calls[i].arguments;
  }
}

// Feeds `chunks`, checks that deltas add up to the message, returns the message.
ChatMessage run_chunks(ChatFormat f, const ParserOptions& o, const std::vector<std::string>& chunks, bool* ended) {
  auto p = make_output_parser(f, o);
  ChatMessage acc;
  auto apply = [&](const ChatDelta& d) {
    acc.content += d.content;
    acc.reasoning_content += d.reasoning_content;
    for (auto& [idx, tc] : d.tool_calls) {
      EXPECT_EQ(idx, acc.tool_calls.size());
      acc.tool_calls.push_back(tc);
    }
  };
  for (const auto& c : chunks) apply(p->feed(c));
  apply(p->finish());
  EXPECT_EQ(acc.content, p->message().content);
  EXPECT_EQ(acc.reasoning_content, p->message().reasoning_content);
  EXPECT_EQ(acc.tool_calls.size(), p->message().tool_calls.size());
  if (ended) *ended = p->ended();
  return p->message();
}

void check_all_splits(ChatFormat f, const ParserOptions& o, const std::string& text, const Expect& e) {
  bool ended = false;
  check_msg(run_chunks(f, o, {text}, &ended), e, "whole: " + text);
  EXPECT_EQ(ended, e.ended) << text;
  for (size_t k = 0; k <= text.size(); ++k) {
    check_msg(run_chunks(f, o, {text.substr(0, k), text.substr(k)}, nullptr), e, "split at " + std::to_string(k) + ": " + text);
    if (::testing::Test::HasFailure()) return;
  }
  std::vector<std::string> bytes;
  for (char c : text) bytes.emplace_back(1, c);
  check_msg(run_chunks(f, o, bytes, nullptr), e, "byte by byte: " + text);
}

ParserOptions in_reasoning(json tools = json()) {
  ParserOptions o;
  o.start_in_reasoning = true;
  o.tools = std::move(tools);
  return o;
}

// ---- Qwen 3.5 ------------------------------------------------------------------------------

TEST(QwenParser, ReasoningThenContent) {
  check_all_splits(ChatFormat::kQwen35, in_reasoning(), "The user asks 2+2.\n</think>\n\nThe answer is 4.",
                   {"The answer is 4.", "The user asks 2+2.", {}});
}

TEST(QwenParser, ExplicitThinkOpen) {
  check_all_splits(ChatFormat::kQwen35, {}, "<think>\nhmm\n</think>\n\nHi!", {"Hi!", "hmm", {}});
}

TEST(QwenParser, NoReasoningPlainContent) {
  check_all_splits(ChatFormat::kQwen35, {}, "Hello <b>world</b>, a < b and <tool without call.",
                   {"Hello <b>world</b>, a < b and <tool without call.", "", {}});
}

TEST(QwenParser, TextBeforeToolCall) {
  const std::string out =
      "I should check the weather.\n</think>\n\nLet me look that up.\n\n<tool_call>\n<function=get_weather>\n"
      "<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter=opts>\n"
      "{\"detail\": true}\n</parameter>\n</function>\n</tool_call>";
  check_all_splits(ChatFormat::kQwen35, in_reasoning(), out,
                   {"Let me look that up.", "I should check the weather.",
                    {{"get_weather", R"({"city":"Paris","days":3,"opts":{"detail":true}})"}}});
}

TEST(QwenParser, SeveralToolCalls) {
  const std::string out =
      "plan\n</think>\n\n<tool_call>\n<function=a>\n<parameter=x>\nmulti\nline\ntext\n</parameter>\n</function>\n"
      "</tool_call>\n<tool_call>\n<function=b>\n<parameter=list>\n[1, 2]\n</parameter>\n<parameter=f>\n1.5\n"
      "</parameter>\n</function>\n</tool_call>";
  check_all_splits(ChatFormat::kQwen35, in_reasoning(), out,
                   {"", "plan", {{"a", R"({"x":"multi\nline\ntext"})"}, {"b", R"({"list":[1,2],"f":1.5})"}}});
}

TEST(QwenParser, ThinkCloseMissingBeforeToolCall) {
  const std::string out = "I need the tool\n<tool_call>\n<function=f>\n<parameter=q>\nabc\n</parameter>\n</function>\n</tool_call>";
  check_all_splits(ChatFormat::kQwen35, in_reasoning(), out, {"", "I need the tool", {{"f", R"({"q":"abc"})"}}});
}

TEST(QwenParser, CutOffInsideToolCallDegradesToContent) {
  const std::string out = "ok\n</think>\n\nCalling.\n<tool_call>\n<function=get_wea";
  check_all_splits(ChatFormat::kQwen35, in_reasoning(), out, {"Calling.\n<tool_call>\n<function=get_wea", "ok", {}});
}

TEST(QwenParser, CutOffAfterFunctionCloseKeepsCall) {
  const std::string out = "<tool_call>\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>";
  check_all_splits(ChatFormat::kQwen35, {}, out, {"", "", {{"f", R"({"a":1})"}}});
}

TEST(QwenParser, CutOffInReasoning) {
  check_all_splits(ChatFormat::kQwen35, in_reasoning(), "still thinking about <too", {"", "still thinking about <too", {}});
}

TEST(QwenParser, MalformedToolCallIsContent) {
  check_all_splits(ChatFormat::kQwen35, {}, "Before <tool_call>\nnot a call\n</tool_call> after",
                   {"Before <tool_call>\nnot a call\n</tool_call> after", "", {}});
}

TEST(QwenParser, CallWithoutToolCallWrapper) {
  // Seen in Qwen3-Coder-style outputs: the <tool_call> opening tag is missing.
  check_all_splits(ChatFormat::kQwen35, in_reasoning(),
                   "r\n</think>\n\nSure.\n<function=f>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>",
                   {"Sure.", "r", {{"f", R"({"a":1})"}}});
  check_all_splits(ChatFormat::kQwen35, {}, "Use <function=f> like this", {"Use <function=f> like this", "", {}});
}

TEST(QwenParser, JsonToolCallForm) {
  check_all_splits(ChatFormat::kQwen35, {},
                   "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1, \"b\": \"x\"}}\n</tool_call>",
                   {"", "", {{"f", R"({"a":1,"b":"x"})"}}});
}

TEST(QwenParser, EndMarkerStops) {
  Expect e{"Hi", "", {}, true};
  check_all_splits(ChatFormat::kQwen35, {}, "Hi<|im_end|>more text", e);
}

TEST(QwenParser, SchemaKeepsStrings) {
  json tools = json::parse(R"([{"type":"function","function":{"name":"f","parameters":{"type":"object",
      "properties":{"code":{"type":"string"},"n":{"type":"integer"},"flag":{"type":"boolean"}}}}}])");
  const std::string out =
      "<tool_call>\n<function=f>\n<parameter=code>\n123\n</parameter>\n<parameter=n>\n7\n</parameter>\n"
      "<parameter=flag>\nFalse\n</parameter>\n</function>\n</tool_call>";
  check_all_splits(ChatFormat::kQwen35, in_reasoning(tools), "r</think>" + out,
                   {"", "r", {{"f", R"({"code":"123","n":7,"flag":false})"}}});
  // Without a schema, numbers become numbers.
  check_all_splits(ChatFormat::kQwen35, {}, out, {"", "", {{"f", R"({"code":123,"n":7,"flag":"False"})"}}});
}

// ---- Gemma 4 -------------------------------------------------------------------------------

TEST(GemmaParser, ThoughtThenContent) {
  check_all_splits(ChatFormat::kGemma4, {}, "<|channel>thought\nLet me think.<channel|>The answer.<turn|>",
                   {"The answer.", "Let me think.", {}, true});
}

TEST(GemmaParser, PlainContent) {
  check_all_splits(ChatFormat::kGemma4, {}, "Plain answer with <|something> and {braces}.",
                   {"Plain answer with <|something> and {braces}.", "", {}});
}

TEST(GemmaParser, ThinkingWithToolCalls) {
  const std::string out =
      "<|channel>thought\nneed weather<channel|><|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>,days:3,"
      "opts:{detail:true},tags:[<|\"|>a<|\"|>,<|\"|>b, c<|\"|>],x:None,r:-1.5e3}<tool_call|>"
      "<|tool_call>call:search{query:<|\"|>what's {new}: \"x\"<|\"|>}<tool_call|><|tool_response>";
  check_all_splits(ChatFormat::kGemma4, {}, out,
                   {"", "need weather",
                    {{"get_weather", R"({"city":"Paris","days":3,"opts":{"detail":true},"tags":["a","b, c"],"x":null,"r":-1500.0})"},
                     {"search", R"({"query":"what's {new}: \"x\""})"}},
                    true});
}

TEST(GemmaParser, TextBeforeToolCall) {
  check_all_splits(ChatFormat::kGemma4, {}, "Sure, checking.<|tool_call>call:f{}<tool_call|>",
                   {"Sure, checking.", "", {{"f", "{}"}}});
}

TEST(GemmaParser, CutOffToolCall) {
  check_all_splits(ChatFormat::kGemma4, {}, "<|tool_call>call:f{a:<|\"|>x", {"<|tool_call>call:f{a:<|\"|>x", "", {}});
}

TEST(GemmaParser, MalformedArgs) {
  check_all_splits(ChatFormat::kGemma4, {}, "<|tool_call>call:f{a:[1,}<tool_call|>tail",
                   {"<|tool_call>call:f{a:[1,}<tool_call|>tail", "", {}});
}

// Found by the chat_parser fuzz target: invalid UTF-8 in a call's arguments made the JSON dump
// throw (std::terminate in the parser, a 500 in the server); now it becomes U+FFFD.
TEST(GemmaParser, InvalidUtf8InArgs) {
  check_all_splits(ChatFormat::kGemma4, {}, "<|tool_call>call:f{a:<|\"|>x\xff<|\"|>}<tool_call|>",
                   {"", "", {{"f", "{\"a\":\"x\xef\xbf\xbd\"}"}}});
  check_all_splits(ChatFormat::kQwen35, {}, "<tool_call>\n<function=f>\n<parameter=a>\nx\xff\n</parameter>\n</function>\n</tool_call>",
                   {"", "", {{"f", "{\"a\":\"x\xef\xbf\xbd\"}"}}});
}

TEST(GemmaParser, ArgsToJson) {
  json j;
  ASSERT_TRUE(gemma4_args_to_json("{a:1,b:<|\"|>s<|\"|>,c:[true,false,null],d:{e:2.5}}", j));
  EXPECT_EQ(j.dump(), R"({"a":1,"b":"s","c":[true,false,null],"d":{"e":2.5}})");
  EXPECT_FALSE(gemma4_args_to_json("{a:1", j));
  EXPECT_FALSE(gemma4_args_to_json("{a:<|\"|>unterminated}", j));
  std::string deep(5000, '[');
  EXPECT_FALSE(gemma4_args_to_json(deep, j));
}

// ---- Round trip through the real templates ---------------------------------------------------

std::string read_file(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(ParserRoundTrip, TemplateRenderedCallsParseBack) {
  const json args = json::parse(R"({"city":"Paris","days":3,"tags":["a","b"],"opts":{"detail":true},"ratio":1.5,"note":"multi\nline"})");
  json msgs = json::array();
  msgs.push_back({{"role", "user"}, {"content", "hi"}});
  msgs.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", json::array({{{"type", "function"}, {"function", {{"name", "get_weather"}, {"arguments", args}}}}})}});
  const json tools = json::parse(R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
      "properties":{"city":{"type":"string"},"days":{"type":"integer"},"tags":{"type":"array"},"opts":{"type":"object"},
      "ratio":{"type":"number"},"note":{"type":"string"}}}}}])");
  ChatRenderOptions opt;
  opt.add_generation_prompt = false;
  opt.tools = tools;
  struct T {
    const char* file;
    ChatFormat fmt;
    const char* open;
    const char* close;
  } ts[] = {{"Qwen3.5-4B.jinja", ChatFormat::kQwen35, "<tool_call>", "</tool_call>"},
            {"google-gemma-4-31B-it.jinja", ChatFormat::kGemma4, "<|tool_call>", "<tool_call|>"}};
  for (const auto& t : ts) {
    const std::string src = read_file(std::string(OXI_SHARED_DIR) + "/testdata/templates/" + t.file);
    ASSERT_FALSE(src.empty());
    EXPECT_EQ(detect_chat_format(src), t.fmt);
    const std::string prompt = render_chat(src, msgs, opt);
    const size_t b = prompt.rfind(t.open), e = prompt.find(t.close, b);
    ASSERT_NE(b, std::string::npos) << prompt;
    ASSERT_NE(e, std::string::npos) << prompt;
    ParserOptions po;
    po.tools = tools;
    ChatMessage m = parse_output(t.fmt, prompt.substr(b, e + std::string(t.close).size() - b), po);
    ASSERT_EQ(m.tool_calls.size(), 1u) << t.file;
    EXPECT_EQ(m.tool_calls[0].name, "get_weather");
    EXPECT_EQ(nlohmann::json::parse(m.tool_calls[0].arguments), nlohmann::json::parse(args.dump())) << t.file;
  }
}

TEST(ParserOptionsForPrompt, DetectsOpenThink) {
  EXPECT_TRUE(parser_options_for_prompt(ChatFormat::kQwen35, "<|im_start|>assistant\n<think>\n").start_in_reasoning);
  EXPECT_FALSE(parser_options_for_prompt(ChatFormat::kQwen35, "<|im_start|>assistant\n<think>\n\n</think>\n\n").start_in_reasoning);
  EXPECT_FALSE(parser_options_for_prompt(ChatFormat::kGemma4, "<|turn>model\n<|channel>thought\n<channel|>").start_in_reasoning);
}

}  // namespace
}  // namespace oxi

namespace oxi {
namespace {

// A tool call whose JSON arguments nest deeper than kMaxJsonDepth (a long generation of "[[[…")
// is not taken as a call (copying or dumping it would recurse that deep), and nothing crashes.
TEST(ParserHardening, DeepArgumentsAreNotACall) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  ToolCall call;
  EXPECT_FALSE(parse_qwen35_tool_call("{\"name\": \"f\", \"arguments\": {\"a\": " + deep + "}}", nlohmann::ordered_json::array(), call));
  nlohmann::ordered_json s = "{\"a\": " + deep + "}";
  EXPECT_FALSE(parse_qwen35_tool_call("{\"name\": \"f\", \"arguments\": " + s.dump() + "}", nlohmann::ordered_json::array(), call));
  const std::string shallow = std::string(100, '[') + std::string(100, ']');
  EXPECT_TRUE(parse_qwen35_tool_call("{\"name\": \"f\", \"arguments\": {\"a\": " + shallow + "}}", nlohmann::ordered_json::array(), call));
}

}  // namespace
}  // namespace oxi
