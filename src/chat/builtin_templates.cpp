// Our Jinja sources for llama.cpp's built-in chat template names (builtin_templates.h). Every
// output piece is a string expression and every tag trims the whitespace around it, so the layout
// of the source below never leaks into a prompt. Notes give llama.cpp's rules each one follows.
#include "chat/builtin_templates.h"

#include <algorithm>
#include <string>

namespace oxi {

namespace {

struct Builtin {
  const char* name;
  const char* source;
};

// The generation prompt of the role-tagged formats.
#define OXI_GEN_PROMPT(text) "{%- if add_generation_prompt -%}{{- '" text "' -}}{%- endif -%}"

const Builtin kBuiltins[] = {
    // <|im_start|>ROLE\nCONTENT<|im_end|>\n, content as given.
    {"chatml",
     "{%- for m in messages -%}{{- '<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n' -}}{%- endfor -%}"
     OXI_GEN_PROMPT("<|im_start|>assistant\\n")},
    // Header per message, content trimmed.
    {"llama3",
     "{%- for m in messages -%}"
     "{{- '<|start_header_id|>' + m['role'] + '<|end_header_id|>\\n\\n' + (m['content'] | trim) + '<|eot_id|>' -}}"
     "{%- endfor -%}" OXI_GEN_PROMPT("<|start_header_id|>assistant<|end_header_id|>\\n\\n")},
    // System messages (trimmed, joined without separator) go at the top of the next non-model turn;
    // "assistant" is spelled "model"; content trimmed.
    {"gemma",
     "{%- set ns = namespace(sys='') -%}"
     "{%- for m in messages -%}"
     "{%- if m['role'] == 'system' -%}{%- set ns.sys = ns.sys + (m['content'] | trim) -%}"
     "{%- else -%}"
     "{%- set role = 'model' if m['role'] == 'assistant' else m['role'] -%}"
     "{{- '<start_of_turn>' + role + '\\n' -}}"
     "{%- if ns.sys != '' and role != 'model' -%}{{- ns.sys + '\\n\\n' -}}{%- set ns.sys = '' -%}{%- endif -%}"
     "{{- (m['content'] | trim) + '<end_of_turn>\\n' -}}"
     "{%- endif -%}"
     "{%- endfor -%}" OXI_GEN_PROMPT("<start_of_turn>model\\n")},
    {"phi3",
     "{%- for m in messages -%}{{- '<|' + m['role'] + '|>\\n' + m['content'] + '<|end|>\\n' -}}{%- endfor -%}"
     OXI_GEN_PROMPT("<|assistant|>\\n")},
    {"phi4",
     "{%- for m in messages -%}{{- '<|im_start|>' + m['role'] + '<|im_sep|>' + m['content'] + '<|im_end|>' -}}{%- endfor -%}"
     OXI_GEN_PROMPT("<|im_start|>assistant<|im_sep|>")},
    {"zephyr",
     "{%- for m in messages -%}{{- '<|' + m['role'] + '|>\\n' + m['content'] + '<|endoftext|>\\n' -}}{%- endfor -%}"
     OXI_GEN_PROMPT("<|assistant|>\\n")},
    // System content and a blank line; user and assistant behind full-width-bar tags.
    {"deepseek3",
     "{%- for m in messages -%}"
     "{%- if m['role'] == 'system' -%}{{- m['content'] + '\\n\\n' -}}"
     "{%- elif m['role'] == 'user' -%}{{- '<｜User｜>' + m['content'] -}}"
     "{%- elif m['role'] == 'assistant' -%}{{- '<｜Assistant｜>' + m['content'] + '<｜end▁of▁sentence｜>' -}}{%- endif -%}"
     "{%- endfor -%}" OXI_GEN_PROMPT("<｜Assistant｜>")},
    // Turn tokens; content trimmed; the assistant is the CHATBOT.
    {"command-r",
     "{%- for m in messages -%}"
     "{%- if m['role'] == 'system' -%}{{- '<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>' -}}"
     "{%- elif m['role'] == 'user' -%}{{- '<|START_OF_TURN_TOKEN|><|USER_TOKEN|>' -}}"
     "{%- elif m['role'] == 'assistant' -%}{{- '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' -}}{%- endif -%}"
     "{%- if m['role'] in ['system', 'user', 'assistant'] -%}{{- (m['content'] | trim) + '<|END_OF_TURN_TOKEN|>' -}}{%- endif -%}"
     "{%- endfor -%}" OXI_GEN_PROMPT("<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>")},
    // Header per message, content trimmed (the Llama 3 layout with Llama 4's token names).
    {"llama4",
     "{%- for m in messages -%}"
     "{{- '<|header_start|>' + m['role'] + '<|header_end|>\\n\\n' + (m['content'] | trim) + '<|eot|>' -}}"
     "{%- endfor -%}" OXI_GEN_PROMPT("<|header_start|>assistant<|header_end|>\\n\\n")},
    {"falcon3",
     "{%- for m in messages -%}{{- '<|' + m['role'] + '|>\\n' + m['content'] + '\\n' -}}{%- endfor -%}"
     OXI_GEN_PROMPT("<|assistant|>\\n")},
    {"megrez",
     "{%- for m in messages -%}{{- '<|role_start|>' + m['role'] + '<|role_end|>' + m['content'] + '<|turn_end|>' -}}{%- endfor -%}"
     OXI_GEN_PROMPT("<|role_start|>assistant<|role_end|>")},
    // ROLE\nCONTENT</s>\n, every message after the first preceded by <s>.
    {"monarch",
     "{%- for m in messages -%}{{- ('' if loop.first else '<s>') + m['role'] + '\\n' + m['content'] + '</s>\\n' -}}{%- endfor -%}"
     OXI_GEN_PROMPT("<s>assistant\\n")},
    // A system message is its content and a blank line; USER: / ASSISTANT: lines.
    {"vicuna",
     "{%- for m in messages -%}"
     "{%- if m['role'] == 'system' -%}{{- m['content'] + '\\n\\n' -}}"
     "{%- elif m['role'] == 'user' -%}{{- 'USER: ' + m['content'] + '\\n' -}}"
     "{%- elif m['role'] == 'assistant' -%}{{- 'ASSISTANT: ' + m['content'] + '</s>\\n' -}}{%- endif -%}"
     "{%- endfor -%}" OXI_GEN_PROMPT("ASSISTANT:")},
    // vicuna with a SYSTEM: line.
    {"vicuna-orca",
     "{%- for m in messages -%}"
     "{%- if m['role'] == 'system' -%}{{- 'SYSTEM: ' + m['content'] + '\\n' -}}"
     "{%- elif m['role'] == 'user' -%}{{- 'USER: ' + m['content'] + '\\n' -}}"
     "{%- elif m['role'] == 'assistant' -%}{{- 'ASSISTANT: ' + m['content'] + '</s>\\n' -}}{%- endif -%}"
     "{%- endfor -%}" OXI_GEN_PROMPT("ASSISTANT:")},
    // System content as is; other roles "GPT4 Correct Role: "; every message ends <|end_of_turn|>.
    {"openchat",
     "{%- for m in messages -%}"
     "{%- if m['role'] == 'system' -%}{{- m['content'] + '<|end_of_turn|>' -}}"
     "{%- else -%}{{- 'GPT4 Correct ' + (m['role'] | capitalize) + ': ' + m['content'] + '<|end_of_turn|>' -}}{%- endif -%}"
     "{%- endfor -%}" OXI_GEN_PROMPT("GPT4 Correct Assistant:")},
    {"deepseek2",
     "{%- for m in messages -%}"
     "{%- if m['role'] == 'system' -%}{{- m['content'] + '\\n\\n' -}}"
     "{%- elif m['role'] == 'user' -%}{{- 'User: ' + m['content'] + '\\n\\n' -}}"
     "{%- elif m['role'] == 'assistant' -%}{{- 'Assistant: ' + m['content'] + '<｜end▁of▁sentence｜>' -}}{%- endif -%}"
     "{%- endfor -%}" OXI_GEN_PROMPT("Assistant:")},
};

#undef OXI_GEN_PROMPT

// The Llama 2 family: one "[INST] " opens the first turn; a system message is <<SYS>>\nCONTENT\n<</SYS>>\n\n
// (plain "llama2": its content and a newline), a user message closes the instruction with
// " [/INST]", an assistant message ends with </s> and the next message opens a new "[INST] "
// ("<s>[INST] " with bos). strip: every content trimmed. No generation prompt.
std::string llama2_source(bool sys_tags, bool bos, bool strip) {
  const std::string c = strip ? "(m['content'] | trim)" : "m['content']";
  return "{%- set ns = namespace(open=true) -%}{{- '[INST] ' -}}"
         "{%- for m in messages -%}"
         "{%- if not ns.open -%}{{- '" + std::string(bos ? "<s>[INST] " : "[INST] ") + "' -}}{%- set ns.open = true -%}{%- endif -%}"
         "{%- if m['role'] == 'system' -%}{{- " + (sys_tags ? "'<<SYS>>\n' + " + c + " + '\n<</SYS>>\n\n'" : c + " + '\n'") + " -}}"
         "{%- elif m['role'] == 'user' -%}{{- " + c + " + ' [/INST]' -}}"
         "{%- else -%}{{- " + c + " + '</s>' -}}{%- set ns.open = false -%}{%- endif -%}"
         "{%- endfor -%}";
}

// Mistral v1 / v3 / v3-tekken: a turn opens with LEAD "[INST]" TRAIL; a system message is its
// content and a blank line, a user message is its content and LEAD "[/INST]", an assistant reply
// TRAIL, its content (trimmed in v3) and </s>, and ends the turn. No generation prompt.
std::string mistral_source(const char* lead, const char* trail, bool trim_reply) {
  const std::string l = lead, t = trail;
  return "{%- set ns = namespace(open=false) -%}"
         "{%- for m in messages -%}"
         "{%- if not ns.open -%}{{- '" + l + "[INST]" + t + "' -}}{%- set ns.open = true -%}{%- endif -%}"
         "{%- if m['role'] == 'system' -%}{{- m['content'] + '\n\n' -}}"
         "{%- elif m['role'] == 'user' -%}{{- m['content'] + '" + l + "[/INST]' -}}"
         "{%- else -%}{{- '" + t + "' + " + (trim_reply ? "(m['content'] | trim)" : "m['content']") +
         " + '</s>' -}}{%- set ns.open = false -%}{%- endif -%}"
         "{%- endfor -%}";
}

// Mistral v7 (SP = " ") and v7-tekken (SP = ""): [SYSTEM_PROMPT]SP…[/SYSTEM_PROMPT], [INST]SP…[/INST],
// an assistant reply SP, its content and </s>. No generation prompt.
std::string mistral_v7_source(const char* sp) {
  const std::string t = sp;
  return "{%- for m in messages -%}"
         "{%- if m['role'] == 'system' -%}{{- '[SYSTEM_PROMPT]" + t + "' + m['content'] + '[/SYSTEM_PROMPT]' -}}"
         "{%- elif m['role'] == 'user' -%}{{- '[INST]" + t + "' + m['content'] + '[/INST]' -}}"
         "{%- else -%}{{- '" + t + "' + m['content'] + '</s>' -}}{%- endif -%}"
         "{%- endfor -%}";
}

std::optional<std::string> family_source(std::string_view name) {
  if (name == "llama2") return llama2_source(false, false, false);
  if (name == "llama2-sys") return llama2_source(true, false, false);
  if (name == "llama2-sys-bos") return llama2_source(true, true, false);
  if (name == "llama2-sys-strip") return llama2_source(true, false, true);
  if (name == "mistral-v1") return mistral_source(" ", " ", false);
  if (name == "mistral-v3") return mistral_source("", " ", true);
  if (name == "mistral-v3-tekken") return mistral_source("", "", false);
  if (name == "mistral-v7") return mistral_v7_source(" ");
  if (name == "mistral-v7-tekken") return mistral_v7_source("");
  return std::nullopt;
}

const char* const kFamilyNames[] = {"llama2", "llama2-sys", "llama2-sys-bos", "llama2-sys-strip", "mistral-v1",
                                    "mistral-v3", "mistral-v3-tekken", "mistral-v7", "mistral-v7-tekken"};

}  // namespace

std::optional<std::string> builtin_chat_template(std::string_view name) {
  for (const Builtin& b : kBuiltins) {
    if (name == b.name) return std::string(b.source);
  }
  return family_source(name);
}

std::vector<std::string> builtin_chat_template_names() {
  std::vector<std::string> out;
  for (const Builtin& b : kBuiltins) out.emplace_back(b.name);
  for (const char* n : kFamilyNames) out.emplace_back(n);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace oxi
