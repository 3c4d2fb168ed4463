// Forced tool calls: the arguments are tied to the chosen tool's schema (Qwen: several tools side
// by side) and Gemma 4 calls are written in Gemma's own syntax. The expected call texts are written
// the way the Gemma 4 chat template renders a tool call (format_argument: bare keys in dictsort
// order, <|"|> string marks, no spaces); every text the Gemma constraint lets through must parse
// with the call parser into arguments that satisfy the schema.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "chat/parser.h"
#include "core/error.h"
#include "server/forced_tool.h"

namespace oxi {
namespace {

using json = nlohmann::json;

json tools() {
  return json::parse(R"([
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                     "Unit": {"type": "string", "enum": ["c", "f"]}},
      "required": ["city"]}}},
    {"type": "function", "function": {"name": "set_alarm", "parameters": {"type": "object",
      "properties": {"at": {"type": "array", "items": {"type": "number"}, "minItems": 1},
                     "label": {"type": "string", "maxLength": 3},
                     "loud": {"type": "boolean"}},
      "required": ["at", "loud"]}}},
    {"type": "function", "function": {"name": "ping"}}
  ])");
}

bool takes(TextConstraint& c, std::string_view text) {
  for (char ch : text) {
    if (!c.advance(std::string_view(&ch, 1))) return false;
  }
  return c.complete();
}

TEST(ForcedToolGemma, AcceptsTheTemplatesRendering) {
  auto mk = [] { return forced_tool_constraint(tools(), "required", ChatFormat::kGemma4, ""); };
  // dictsort is case-insensitive: Unit sorts after days.
  for (const char* ok : {
           "<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|>",
           "<|tool_call>call:get_weather{city:<|\"|>a<b|c<|\"|>,days:3,Unit:<|\"|>c<|\"|>}<tool_call|>",
           "<|tool_call>call:get_weather{city:<|\"|><|\"|>,Unit:<|\"|>f<|\"|>}<tool_call|>",
           "<|tool_call>call:set_alarm{at:[7,7.5,-1e3],label:<|\"|>abc<|\"|>,loud:true}<tool_call|>",
           "<|tool_call>call:set_alarm{at:[0],loud:false}<tool_call|>",
           "<|tool_call>call:ping{}<tool_call|>",
       }) {
    auto c = mk();
    EXPECT_TRUE(takes(*c, ok)) << ok;
    EXPECT_TRUE(c->finished()) << ok;
  }
  for (const char* bad : {
           "<|tool_call>call:get_weather{days:3}<tool_call|>",                          // city required
           "<|tool_call>call:get_weather{days:3,city:<|\"|>P<|\"|>}<tool_call|>",       // order
           "<|tool_call>call:get_weather{city:<|\"|>P<|\"|>,Unit:<|\"|>k<|\"|>}<tool_call|>",  // enum
           "<|tool_call>call:get_weather{city:3}<tool_call|>",                          // type
           "<|tool_call>call:set_alarm{at:[],loud:true}<tool_call|>",                   // minItems
           "<|tool_call>call:set_alarm{at:[1],label:<|\"|>abcd<|\"|>,loud:true}<tool_call|>",  // maxLength
           "<|tool_call>call:set_alarm{at:[1],loud:true,x:1}<tool_call|>",              // unknown key
           "<|tool_call>call:get_weather{city:<|\"|>P<|\"|>,days:3}",                  // unterminated
           "<|tool_call>call:other{}<tool_call|>",                                      // unknown tool
           "call:ping{}",                                                                // no marker
       }) {
    auto c = mk();
    EXPECT_FALSE(takes(*c, bad)) << bad;
  }
}

TEST(ForcedToolGemma, NamedChoiceOnlyThatTool) {
  auto c = forced_tool_constraint(tools(), "ping", ChatFormat::kGemma4, "<channel|>");
  EXPECT_FALSE(c->accepts("<|tool_call>"));  // the reasoning block is closed first
  EXPECT_FALSE(takes(*forced_tool_constraint(tools(), "ping", ChatFormat::kGemma4, "<channel|>"),
                     "<channel|><|tool_call>call:get_weather{city:<|\"|>P<|\"|>}<tool_call|>"));
  EXPECT_TRUE(takes(*c, "<channel|><|tool_call>call:ping{}<tool_call|>"));
  EXPECT_THROW(forced_tool_constraint(tools(), "nope", ChatFormat::kGemma4, ""), Error);
}

// Random walks through what the constraint allows: each finished text is a call the parser reads,
// naming a tool whose schema its arguments satisfy.
TEST(ForcedToolGemma, EveryAllowedCallParsesAndFitsItsSchema) {
  const std::vector<std::string> pieces = {
      "<|tool_call>", "<tool_call|>", "<|\"|>", "call:", "get_weather", "set_alarm", "ping", "city:", "days:",
      "Unit:", "at:", "label:", "loud:", "{", "}", "[", "]", ",", "a", "Z", " ", "<", "|", "1", "0", "-", ".",
      "e", "5", "true", "false", "c", "f", "é"};
  std::mt19937 rng(7);
  int finished = 0;
  for (int walk = 0; walk < 3000; ++walk) {
    auto c = forced_tool_constraint(tools(), "required", ChatFormat::kGemma4, "");
    std::string text;
    for (int step = 0; step < 300 && !c->finished(); ++step) {
      std::vector<const std::string*> ok;
      for (const auto& p : pieces)
        if (c->accepts(p)) ok.push_back(&p);
      if (ok.empty()) break;  // the pieces here cannot go on ("<" then "|"); a real vocabulary can
      const std::string& p = *ok[rng() % ok.size()];
      ASSERT_TRUE(c->advance(p));
      text += p;
    }
    if (!c->finished()) continue;
    ++finished;
    ASSERT_TRUE(text.rfind("<|tool_call>", 0) == 0 && text.size() > 25) << text;
    ToolCall call;
    ASSERT_TRUE(parse_gemma4_tool_call(text.substr(12, text.size() - 12 - 12), call)) << text;
    const json args = json::parse(call.arguments);
    if (call.name == "get_weather") {
      ASSERT_TRUE(args.at("city").is_string()) << text;
      if (args.contains("days")) EXPECT_TRUE(args["days"].is_number_integer()) << text;
      if (args.contains("Unit")) EXPECT_TRUE(args["Unit"] == "c" || args["Unit"] == "f") << text;
    } else if (call.name == "set_alarm") {
      ASSERT_TRUE(args.at("at").is_array() && !args["at"].empty()) << text;
      for (const auto& v : args["at"]) EXPECT_TRUE(v.is_number()) << text;
      EXPECT_TRUE(args.at("loud").is_boolean()) << text;
      if (args.contains("label")) EXPECT_LE(args["label"].get<std::string>().size(), 3u) << text;
    } else {
      EXPECT_EQ(call.name, "ping");
      EXPECT_TRUE(args.empty()) << text;
    }
  }
  EXPECT_GT(finished, 100);
}

// Hostile schemas: a type union at every level (4^24 walks of a small schema) would grow the grammar exponentially;
// the walk has a budget (a clean Error → 400), and so does the number of candidate tools.
TEST(ForcedToolGemma, HostileSchemasAreRefusedQuickly) {
  json s = {{"type", "string"}};
  for (int i = 0; i < 24; ++i) {
    s = {{"type", json::array({"object", "object", "object", "object"})}, {"properties", {{"a", s}}}, {"required", {"a"}}};
  }
  json t = json::array({{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", s}}}}});
  EXPECT_THROW(forced_tool_constraint(t, "required", ChatFormat::kGemma4, ""), Error);
  json many = json::array();
  for (int i = 0; i < 200; ++i) many.push_back({{"type", "function"}, {"function", {{"name", "f" + std::to_string(i)}}}});
  EXPECT_THROW(forced_tool_constraint(many, "required", ChatFormat::kQwen35, ""), Error);
  EXPECT_NE(forced_tool_constraint(many, "f7", ChatFormat::kQwen35, ""), nullptr);
}

TEST(ForcedToolQwen, ArgumentsFollowTheChosenToolsSchema) {
  auto mk = [] { return forced_tool_constraint(tools(), "required", ChatFormat::kQwen35, ""); };
  EXPECT_TRUE(takes(*mk(), "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P\", \"days\": 2}}</tool_call>"));
  EXPECT_TRUE(takes(*mk(), "<tool_call>\n{\"name\": \"set_alarm\", \"arguments\": {\"at\": [1.5], \"loud\": true}}</tool_call>"));
  EXPECT_TRUE(takes(*mk(), "<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}</tool_call>"));
  // One tool's arguments under another's name.
  EXPECT_FALSE(takes(*mk(), "<tool_call>\n{\"name\": \"set_alarm\", \"arguments\": {\"city\": \"P\"}}</tool_call>"));
  EXPECT_FALSE(takes(*mk(), "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"at\": [1], \"loud\": true}}</tool_call>"));
  EXPECT_FALSE(takes(*mk(), "<tool_call>\n{\"name\": \"nope\", \"arguments\": {}}</tool_call>"));
  // Only listed keys; a tool with `properties: {}` takes no arguments.
  EXPECT_FALSE(takes(*mk(), "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P\", \"x\": 1}}</tool_call>"));
  json t = tools();
  t[2]["function"]["parameters"] = {{"type", "object"}, {"properties", json::object()}};
  EXPECT_FALSE(takes(*forced_tool_constraint(t, "ping", ChatFormat::kQwen35, ""),
                     "<tool_call>\n{\"name\": \"ping\", \"arguments\": {\"x\": 1}}</tool_call>"));
  EXPECT_TRUE(takes(*forced_tool_constraint(t, "ping", ChatFormat::kQwen35, ""),
                    "<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}</tool_call>"));
  auto c = mk();
  EXPECT_TRUE(takes(*c, "<tool_call>\n{\"name\": \"ping\", \"arguments\": {}}</tool_call>"));
  EXPECT_TRUE(c->finished());
  // Named: the other tools are not candidates.
  EXPECT_FALSE(takes(*forced_tool_constraint(tools(), "ping", ChatFormat::kQwen35, ""),
                     "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P\"}}</tool_call>"));
  EXPECT_EQ(forced_tool_constraint(tools(), "required", ChatFormat::kPlain, ""), nullptr);
}

}  // namespace
}  // namespace oxi
