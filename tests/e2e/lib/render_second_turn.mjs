// The second turn of a media conversation as the model's own template renders it
// (@huggingface/jinja, node-llama-cpp's dependency, found through $NLC_DIR), with the media part's
// placeholder swapped for llama-mtmd-cli's <__media__> marker — the prompt llama-mtmd-cli is given
// to answer what the server answers on its second turn.
// Usage: node render_second_turn.mjs TEMPLATE KIND TEXT ANSWER   (KIND: image | audio)
// Conversation: user [KIND part, TEXT], assistant ANSWER, user "Say more."; enable_thinking on, as
// llama-mtmd-cli --jinja renders.
import { createRequire } from "node:module";
import fs from "node:fs";
import path from "node:path";

const [templatePath, kind, text, answer] = process.argv.slice(2);
if (kind !== "image" && kind !== "audio") throw new Error("KIND must be image or audio");
const require = createRequire(path.resolve(process.env.NLC_DIR, "package.json"));
const { Template } = require("@huggingface/jinja");
const msgs = [{ role: "user", content: [{ type: kind }, { type: "text", text }] },
  { role: "assistant", content: answer }, { role: "user", content: "Say more." }];
const s = new Template(fs.readFileSync(templatePath, "utf8"))
  .render({ messages: msgs, add_generation_prompt: true, enable_thinking: true, bos_token: "<bos>" });
const placeholder = `<|${kind}|>`;
if (s.split(placeholder).length !== 2) throw new Error(`expected one ${kind} placeholder: ` + s);
process.stdout.write(s.replace(placeholder, "<__media__>"));
