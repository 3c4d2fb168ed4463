// Streaming output parsers (see parser.h).
#include "chat/parser.h"

#include <algorithm>

#include "core/json_limits.h"

namespace oxi {

namespace {
// Model output parsed as JSON: a value nested deeper than kMaxJsonDepth (json_limits.h) is not
// taken (its copies and dumps recurse; a long generation of "[[[[…" would overflow the stack).
nlohmann::ordered_json parse_bounded(std::string_view text) {
  if (json_too_deep(text)) return nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded);
  return nlohmann::ordered_json::parse(text.begin(), text.end(), nullptr, false);
}
}  // namespace

namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

std::string_view trim_view(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && is_ws(s[b])) ++b;
  while (e > b && is_ws(s[e - 1])) --e;
  return s.substr(b, e - b);
}

bool starts_with(std::string_view s, std::string_view p) { return s.size() >= p.size() && s.substr(0, p.size()) == p; }

// Model output may hold invalid UTF-8 (a sampled partial byte sequence): U+FFFD instead of the
// exception nlohmann's dump throws (the fuzzer found one through a Gemma 4 call's arguments).
std::string dump_args(const nlohmann::ordered_json& args) {
  return args.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

struct Spec {
  std::vector<std::string> reasoning_open;
  std::string reasoning_close;
  std::string tool_open, tool_close;
  std::string bare_open, bare_close;  // a call without its wrapper (Qwen: <function=…></function>)
  std::vector<std::string> end_markers;
  std::vector<std::string> drop_markers;  // stray markers removed from content
};

Spec spec_for(ChatFormat f) {
  Spec s;
  if (f == ChatFormat::kQwen35) {
    s.reasoning_open = {"<think>"};
    s.reasoning_close = "</think>";
    s.tool_open = "<tool_call>";
    s.tool_close = "</tool_call>";
    s.bare_open = "<function=";
    s.bare_close = "</function>";
    s.end_markers = {"<|im_end|>", "<|endoftext|>"};
    s.drop_markers = {"</think>", "</tool_call>"};
  } else if (f == ChatFormat::kGemma4) {
    s.reasoning_open = {"<|channel>thought", "<|channel>"};
    s.reasoning_close = "<channel|>";
    s.tool_open = "<|tool_call>";
    s.tool_close = "<tool_call|>";
    s.end_markers = {"<turn|>", "<|tool_response>", "<eos>"};
    s.drop_markers = {"<channel|>"};
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// Value typing for Qwen 3.5 parameters.

std::string param_type(const nlohmann::ordered_json& tools, const std::string& fn, const std::string& param) {
  if (!tools.is_array()) return "";
  for (const auto& t : tools) {
    if (!t.is_object()) continue;
    const auto* f = t.contains("function") && t["function"].is_object() ? &t["function"] : &t;
    if (!f->contains("name") || !(*f)["name"].is_string() || (*f)["name"].get<std::string>() != fn) continue;
    if (!f->contains("parameters") || !(*f)["parameters"].is_object()) return "";
    const auto& p = (*f)["parameters"];
    if (!p.contains("properties") || !p["properties"].is_object() || !p["properties"].contains(param)) return "";
    const auto& ps = p["properties"][param];
    if (ps.is_object() && ps.contains("type") && ps["type"].is_string()) return ps["type"].get<std::string>();
    return "";
  }
  return "";
}

nlohmann::ordered_json typed_value(const std::string& raw, const std::string& type) {
  if (type == "string") return raw;
  const std::string_view t = trim_view(raw);
  if (type == "boolean") {
    if (t == "True" || t == "true") return true;
    if (t == "False" || t == "false") return false;
  }
  if (!t.empty()) {
    auto j = parse_bounded(t);
    if (!j.is_discarded() && !j.is_string()) {
      if (!j.is_null() || (!type.empty() && type != "string")) return j;
    }
  }
  return raw;
}

}  // namespace

bool parse_qwen35_tool_call(std::string_view body, const nlohmann::ordered_json& tools, ToolCall& out) {
  std::string_view s = trim_view(body);
  if (s.empty()) return false;
  if (s[0] == '{') {
    // Qwen3 / Hermes JSON form.
    auto j = parse_bounded(s);
    if (j.is_discarded() || !j.is_object() || !j.contains("name") || !j["name"].is_string()) return false;
    out.name = j["name"].get<std::string>();
    if (out.name.empty()) return false;
    nlohmann::ordered_json args = j.contains("arguments") ? j["arguments"] : nlohmann::ordered_json::object();
    if (args.is_string()) {
      auto parsed = parse_bounded(args.get<std::string>());
      if (parsed.is_discarded() || !parsed.is_object()) return false;
      args = parsed;
    }
    if (!args.is_object()) return false;
    out.arguments = dump_args(args);
    return true;
  }
  if (!starts_with(s, "<function=")) return false;
  s.remove_prefix(10);
  const size_t gt = s.find('>');
  if (gt == std::string_view::npos) return false;
  const std::string name(trim_view(s.substr(0, gt)));
  if (name.empty() || name.find('\n') != std::string::npos || name.find('<') != std::string::npos) return false;
  s.remove_prefix(gt + 1);
  nlohmann::ordered_json args = nlohmann::ordered_json::object();
  for (;;) {
    size_t b = 0;
    while (b < s.size() && is_ws(s[b])) ++b;
    s.remove_prefix(b);
    if (s.empty() || starts_with(s, "</function>")) break;
    if (!starts_with(s, "<parameter=")) return false;
    s.remove_prefix(11);
    const size_t pg = s.find('>');
    if (pg == std::string_view::npos) return false;
    const std::string pname(trim_view(s.substr(0, pg)));
    if (pname.empty() || pname.find('\n') != std::string::npos) return false;
    s.remove_prefix(pg + 1);
    // The value runs to </parameter>; tolerate a missing close before the next parameter or the
    // end of the function.
    size_t end = s.find("</parameter>");
    size_t skip = 12;
    const size_t next_param = s.find("<parameter=");
    const size_t fn_end = s.find("</function>");
    const size_t alt = std::min(next_param, fn_end);
    if (end == std::string_view::npos || alt < end) {
      end = alt == std::string_view::npos ? s.size() : alt;
      skip = 0;
    }
    std::string value(s.substr(0, end));
    if (!value.empty() && value.front() == '\n') value.erase(0, 1);
    if (!value.empty() && value.back() == '\n') value.pop_back();
    args[pname] = typed_value(value, param_type(tools, name, pname));
    s.remove_prefix(std::min(s.size(), end + skip));
  }
  if (starts_with(s, "</function>")) {
    s.remove_prefix(11);
    if (!trim_view(s).empty()) return false;
  }
  out.name = name;
  out.arguments = dump_args(args);
  return true;
}

namespace {

constexpr std::string_view kGq = "<|\"|>";

struct GemmaArgParser {
  std::string_view s;
  size_t p = 0;
  int depth = 0;

  void ws() {
    while (p < s.size() && is_ws(s[p])) ++p;
  }
  bool quoted(std::string& out) {
    if (s.substr(p, kGq.size()) != kGq) return false;
    const size_t e = s.find(kGq, p + kGq.size());
    if (e == std::string_view::npos) return false;
    out = std::string(s.substr(p + kGq.size(), e - p - kGq.size()));
    p = e + kGq.size();
    return true;
  }
  bool value(nlohmann::ordered_json& out) {
    if (++depth > 128) return false;
    struct D {
      int& d;
      ~D() { --d; }
    } dd{depth};
    ws();
    if (p >= s.size()) return false;
    if (s.substr(p, kGq.size()) == kGq) {
      std::string str;
      if (!quoted(str)) return false;
      out = str;
      return true;
    }
    if (s[p] == '{') {
      ++p;
      out = nlohmann::ordered_json::object();
      ws();
      if (p < s.size() && s[p] == '}') {
        ++p;
        return true;
      }
      for (;;) {
        ws();
        std::string key;
        if (s.substr(p, kGq.size()) == kGq) {
          if (!quoted(key)) return false;
        } else {
          const size_t c = s.find(':', p);
          if (c == std::string_view::npos) return false;
          key = std::string(trim_view(s.substr(p, c - p)));
          if (key.empty() || key.find_first_of("{}[],") != std::string::npos) return false;
          p = c;
        }
        ws();
        if (p >= s.size() || s[p] != ':') return false;
        ++p;
        nlohmann::ordered_json v;
        if (!value(v)) return false;
        out[key] = std::move(v);
        ws();
        if (p < s.size() && s[p] == ',') {
          ++p;
          continue;
        }
        if (p < s.size() && s[p] == '}') {
          ++p;
          return true;
        }
        return false;
      }
    }
    if (s[p] == '[') {
      ++p;
      out = nlohmann::ordered_json::array();
      ws();
      if (p < s.size() && s[p] == ']') {
        ++p;
        return true;
      }
      for (;;) {
        nlohmann::ordered_json v;
        if (!value(v)) return false;
        out.push_back(std::move(v));
        ws();
        if (p < s.size() && s[p] == ',') {
          ++p;
          continue;
        }
        if (p < s.size() && s[p] == ']') {
          ++p;
          return true;
        }
        return false;
      }
    }
    // Bare scalar up to a delimiter.
    size_t e = p;
    while (e < s.size() && s[e] != ',' && s[e] != '}' && s[e] != ']') ++e;
    const std::string_view tok = trim_view(s.substr(p, e - p));
    p = e;
    if (tok.empty()) return false;
    if (tok == "true") out = true;
    else if (tok == "false") out = false;
    else if (tok == "null" || tok == "None") out = nullptr;
    else {
      auto j = parse_bounded(tok);
      if (!j.is_discarded() && j.is_number()) out = j;
      else out = std::string(tok);
    }
    return true;
  }
};

}  // namespace

bool gemma4_args_to_json(std::string_view text, nlohmann::ordered_json& out) {
  GemmaArgParser ps{text};
  if (!ps.value(out)) return false;
  ps.ws();
  return ps.p == text.size();
}

bool parse_gemma4_tool_call(std::string_view body, ToolCall& out) {
  std::string_view s = trim_view(body);
  if (!starts_with(s, "call:")) return false;
  s.remove_prefix(5);
  const size_t brace = s.find('{');
  if (brace == std::string_view::npos) return false;
  const std::string name(trim_view(s.substr(0, brace)));
  if (name.empty() || name.find_first_of(" \n<>") != std::string::npos) return false;
  nlohmann::ordered_json args;
  if (!gemma4_args_to_json(s.substr(brace), args) || !args.is_object()) return false;
  out.name = name;
  out.arguments = dump_args(args);
  return true;
}

namespace {

class StreamParser : public OutputParser {
 public:
  StreamParser(ChatFormat f, ParserOptions opt) : fmt_(f), spec_(spec_for(f)), opt_(std::move(opt)) {
    if (opt_.start_in_reasoning && f != ChatFormat::kPlain) {
      st_ = St::kReasoning;
      skip_ws_[kR] = true;
    }
  }

  ChatDelta feed(std::string_view text) override {
    ChatDelta d;
    cur_ = &d;
    if (st_ != St::kEnded) {
      pending_.append(text);
      process(false);
    }
    cur_ = nullptr;
    return d;
  }

  ChatDelta finish() override {
    ChatDelta d;
    cur_ = &d;
    if (!finished_) {
      finished_ = true;
      if (st_ != St::kEnded) process(true);
      if (st_ == St::kTool) close_tool(/*at_end=*/true);
      ws_hold_[kC].clear();
      ws_hold_[kR].clear();
    }
    cur_ = nullptr;
    return d;
  }

  const ChatMessage& message() const override { return msg_; }
  bool ended() const override { return st_ == St::kEnded; }

 private:
  enum class St { kContent, kReasoning, kTool, kEnded };
  enum Ch { kC = 0, kR = 1 };
  enum class Act { kReasonOpen, kReasonClose, kToolOpen, kBareOpen, kToolClose, kEnd, kDrop };

  struct Marker {
    const std::string* text;
    Act act;
  };

  std::vector<Marker> markers() const {
    std::vector<Marker> m;
    if (fmt_ == ChatFormat::kPlain) return m;
    switch (st_) {
      case St::kContent:
        for (const auto& r : spec_.reasoning_open) m.push_back({&r, Act::kReasonOpen});
        m.push_back({&spec_.tool_open, Act::kToolOpen});
        if (!spec_.bare_open.empty()) m.push_back({&spec_.bare_open, Act::kBareOpen});
        for (const auto& d : spec_.drop_markers) m.push_back({&d, Act::kDrop});
        break;
      case St::kReasoning:
        m.push_back({&spec_.reasoning_close, Act::kReasonClose});
        m.push_back({&spec_.tool_open, Act::kToolOpen});
        if (!spec_.bare_open.empty()) m.push_back({&spec_.bare_open, Act::kBareOpen});
        break;
      case St::kTool: m.push_back({bare_ ? &spec_.bare_close : &spec_.tool_close, Act::kToolClose}); break;
      case St::kEnded: return m;
    }
    for (const auto& e : spec_.end_markers) m.push_back({&e, Act::kEnd});
    return m;
  }

  void process(bool at_end) {
    while (!pending_.empty() && st_ != St::kEnded) {
      const auto ms = markers();
      size_t best = std::string::npos, best_len = 0;
      Act act = Act::kDrop;
      for (const auto& m : ms) {
        const size_t p = pending_.find(*m.text);
        if (p == std::string::npos) continue;
        if (p < best || (p == best && m.text->size() > best_len)) {
          best = p;
          best_len = m.text->size();
          act = m.act;
        }
      }
      if (best != std::string::npos && !at_end) {
        // A complete marker that may still grow into a longer one ("<|channel>" vs
        // "<|channel>thought"): wait for more text.
        const size_t rest = pending_.size() - best;
        bool longer = false;
        for (const auto& m : ms) {
          if (m.text->size() > best_len && rest < m.text->size() &&
              pending_.compare(best, rest, *m.text, 0, rest) == 0) {
            longer = true;
          }
        }
        if (longer) {
          consume(pending_.substr(0, best));
          pending_.erase(0, best);
          break;
        }
      }
      if (best != std::string::npos) {
        consume(pending_.substr(0, best));
        const std::string marker = pending_.substr(best, best_len);
        pending_.erase(0, best + best_len);
        handle(act, marker);
        continue;
      }
      size_t hold = 0;
      if (!at_end) {
        for (const auto& m : ms) {
          const std::string& t = *m.text;
          for (size_t k = std::min(t.size() - 1, pending_.size()); k > hold; --k) {
            if (pending_.compare(pending_.size() - k, k, t, 0, k) == 0) {
              hold = k;
              break;
            }
          }
        }
      }
      consume(pending_.substr(0, pending_.size() - hold));
      pending_.erase(0, pending_.size() - hold);
      break;
    }
    if (st_ == St::kEnded) pending_.clear();
  }

  void consume(const std::string& text) {
    if (text.empty()) return;
    switch (st_) {
      case St::kContent: emit(kC, text); break;
      case St::kReasoning: emit(kR, text); break;
      case St::kTool:
        tool_buf_ += text;
        break;
      case St::kEnded: break;
    }
  }

  void emit(Ch ch, std::string text) {
    if (skip_ws_[ch]) {
      size_t b = 0;
      while (b < text.size() && is_ws(text[b])) ++b;
      text.erase(0, b);
      if (text.empty()) return;
      skip_ws_[ch] = false;
    }
    size_t e = text.size();
    while (e > 0 && is_ws(text[e - 1])) --e;
    if (e == 0) {
      ws_hold_[ch] += text;
      return;
    }
    std::string out = ws_hold_[ch] + text.substr(0, e);
    ws_hold_[ch] = text.substr(e);
    raw_emit(ch, out);
  }

  void raw_emit(Ch ch, const std::string& out) {
    if (out.empty()) return;
    if (ch == kC) {
      msg_.content += out;
      if (cur_) cur_->content += out;
    } else {
      msg_.reasoning_content += out;
      if (cur_) cur_->reasoning_content += out;
    }
  }

  void handle(Act act, const std::string& marker) {
    switch (act) {
      case Act::kReasonOpen:
        st_ = St::kReasoning;
        if (msg_.reasoning_content.empty()) skip_ws_[kR] = true;
        break;
      case Act::kReasonClose:
        ws_hold_[kR].clear();
        st_ = St::kContent;
        skip_ws_[kC] = true;
        break;
      case Act::kToolOpen:
      case Act::kBareOpen:
        bare_ = act == Act::kBareOpen;
        tool_from_ = st_ == St::kReasoning ? kR : kC;
        dropped_ws_ = ws_hold_[tool_from_];
        dropped_skip_ = skip_ws_[tool_from_];
        ws_hold_[tool_from_].clear();
        tool_open_text_ = marker;
        tool_buf_.clear();
        st_ = St::kTool;
        break;
      case Act::kToolClose:
        tool_close_text_ = marker;
        close_tool(false);
        break;
      case Act::kEnd:
        if (st_ == St::kTool) close_tool(true);
        st_ = St::kEnded;
        break;
      case Act::kDrop: break;
    }
  }

  void close_tool(bool at_end) {
    ToolCall tc;
    bool ok = false;
    if (fmt_ == ChatFormat::kQwen35 && bare_) {
      // <function=NAME>…</function> without the <tool_call> wrapper: only when it closed.
      ok = !at_end && parse_qwen35_tool_call(tool_open_text_ + tool_buf_ + tool_close_text_, opt_.tools, tc);
    } else if (fmt_ == ChatFormat::kQwen35) {
      // At the end of the stream (no </tool_call>), accept a body whose function block closed.
      ok = (!at_end || tool_buf_.find("</function>") != std::string::npos || trim_view(tool_buf_).substr(0, 1) == "{") &&
           parse_qwen35_tool_call(tool_buf_, opt_.tools, tc);
    } else if (fmt_ == ChatFormat::kGemma4) {
      ok = parse_gemma4_tool_call(tool_buf_, tc);
    }
    if (ok) {
      msg_.tool_calls.push_back(tc);
      if (cur_) cur_->tool_calls.emplace_back(msg_.tool_calls.size() - 1, tc);
      st_ = St::kContent;
      skip_ws_[kC] = true;
    } else {
      // Not a well-formed call: give the text back, unchanged, to the channel it came from.
      const Ch ch = tool_from_;
      st_ = ch == kR ? St::kReasoning : St::kContent;
      std::string raw = tool_open_text_ + tool_buf_ + (at_end ? std::string() : tool_close_text_);
      ws_hold_[ch] = dropped_ws_;
      skip_ws_[ch] = dropped_skip_;
      emit(ch, raw);
    }
    tool_buf_.clear();
  }

  ChatFormat fmt_;
  Spec spec_;
  ParserOptions opt_;
  St st_ = St::kContent;
  std::string pending_;
  std::string tool_buf_, tool_open_text_, tool_close_text_, dropped_ws_;
  bool dropped_skip_ = false;
  bool bare_ = false;
  Ch tool_from_ = kC;
  std::string ws_hold_[2];
  bool skip_ws_[2] = {true, true};
  bool finished_ = false;
  ChatMessage msg_;
  ChatDelta* cur_ = nullptr;
};

}  // namespace

std::unique_ptr<OutputParser> make_output_parser(ChatFormat format, const ParserOptions& opt) {
  return std::make_unique<StreamParser>(format, opt);
}

ChatMessage parse_output(ChatFormat format, std::string_view text, const ParserOptions& opt) {
  auto p = make_output_parser(format, opt);
  p->feed(text);
  p->finish();
  return p->message();
}

ChatFormat detect_chat_format(const std::string& src) {
  if (src.find("<|turn>") != std::string::npos || src.find("<|tool_call>") != std::string::npos) return ChatFormat::kGemma4;
  if (src.find("<|im_start|>") != std::string::npos || src.find("<tool_call>") != std::string::npos) return ChatFormat::kQwen35;
  return ChatFormat::kPlain;
}

ParserOptions parser_options_for_prompt(ChatFormat format, const std::string& prompt) {
  ParserOptions o;
  std::string open, close;
  if (format == ChatFormat::kQwen35) {
    open = "<think>";
    close = "</think>";
  } else if (format == ChatFormat::kGemma4) {
    open = "<|channel>";
    close = "<channel|>";
  } else {
    return o;
  }
  const size_t po = prompt.rfind(open);
  const size_t pc = prompt.rfind(close);
  o.start_in_reasoning = po != std::string::npos && (pc == std::string::npos || po > pc);
  return o;
}

}  // namespace oxi
