// The chat page of `oxinfer serve` (docs/server.md "Web UI"). Talks only to this server's
// /v1/models and /v1/chat/completions (stream: true, SSE). State kept in localStorage:
//   oxinfer.settings       {system, temperature, top_p, top_k, max_tokens, seed, thinking, extra, api_key}
//   oxinfer.conversations  [{id, title, messages: [{role, content, reasoning?, stats?, error?, stopped?}]}]
//   oxinfer.current        the id of the conversation shown
// Model text is only ever set as DOM text (render.js), never parsed as HTML.
import { renderText } from "./render.js";

const $ = (id) => document.getElementById(id);
const KEYS = { settings: "oxinfer.settings", convs: "oxinfer.conversations", current: "oxinfer.current" };

function loadJSON(key, fallback) {
  try {
    const v = JSON.parse(localStorage.getItem(key));
    return v ?? fallback;
  } catch {
    return fallback;
  }
}

let settings = loadJSON(KEYS.settings, {});
let convs = loadJSON(KEYS.convs, []);
if (!Array.isArray(convs)) convs = [];
let current = localStorage.getItem(KEYS.current);
let modelId = null;
let running = null; // {conv, msg, controller} while a reply streams

const saveConvs = () => {
  try {
    localStorage.setItem(KEYS.convs, JSON.stringify(convs));
    if (current) localStorage.setItem(KEYS.current, current);
  } catch (e) {
    // Storage full (or off): the chat goes on, unsaved; deleting old conversations frees room.
    $("model").textContent = `conversations not saved: ${e.message}`;
  }
};
const conv = () => convs.find((c) => c.id === current);

function newConversation() {
  const c = { id: crypto.randomUUID(), title: "New chat", messages: [] };
  convs.unshift(c);
  current = c.id;
  saveConvs();
  return c;
}

// ---- settings ----
const NUMBERS = { temperature: parseFloat, top_p: parseFloat, top_k: (v) => parseInt(v, 10), max_tokens: (v) => parseInt(v, 10), seed: (v) => parseInt(v, 10) };

function showSettings() {
  const f = $("settings-form");
  for (const el of f.elements) if (el.name) el.value = settings[el.name] ?? "";
  f.addEventListener("input", () => {
    for (const el of f.elements) if (el.name) settings[el.name] = el.value;
    localStorage.setItem(KEYS.settings, JSON.stringify(settings));
  });
}

function authHeaders() {
  return settings.api_key ? { Authorization: `Bearer ${settings.api_key}` } : {};
}

// The request body for the conversation's messages (errors and the reply being written left out).
function requestBody(c) {
  const messages = [];
  if (settings.system?.trim()) messages.push({ role: "system", content: settings.system });
  for (const m of c.messages) if (!m.error && !m.pending) messages.push({ role: m.role, content: m.content });
  const body = { messages, stream: true, stream_options: { include_usage: true } };
  if (modelId) body.model = modelId;
  for (const [k, parse] of Object.entries(NUMBERS)) {
    const v = `${settings[k] ?? ""}`.trim();
    if (v === "") continue;
    const n = parse(v);
    if (Number.isNaN(n)) throw new Error(`setting ${k}: '${v}' is not a number`);
    body[k] = n;
  }
  if (settings.thinking) body.chat_template_kwargs = { enable_thinking: settings.thinking === "on" };
  if (settings.extra?.trim()) {
    let extra;
    try {
      extra = JSON.parse(settings.extra);
    } catch (e) {
      throw new Error(`setting "extra request fields" is not valid JSON: ${e.message}`);
    }
    if (typeof extra !== "object" || extra === null || Array.isArray(extra)) throw new Error(`setting "extra request fields" must be a JSON object`);
    Object.assign(body, extra);
  }
  return body;
}

// ---- drawing ----
function drawList() {
  const ul = $("conversations");
  ul.replaceChildren();
  for (const c of convs) {
    const li = document.createElement("li");
    li.className = c.id === current ? "current" : "";
    const open = document.createElement("button");
    open.type = "button";
    open.className = "open";
    open.textContent = c.title;
    open.title = c.title;
    open.addEventListener("click", () => {
      current = c.id;
      saveConvs();
      drawAll();
    });
    const del = document.createElement("button");
    del.type = "button";
    del.className = "delete";
    del.textContent = "×";
    del.title = "Delete this conversation";
    del.addEventListener("click", () => {
      if (running?.conv === c) running.controller.abort();
      convs = convs.filter((x) => x !== c);
      if (current === c.id) current = convs[0]?.id ?? null;
      if (!current) localStorage.removeItem(KEYS.current);
      saveConvs();
      drawAll();
    });
    li.append(open, del);
    ul.append(li);
  }
}

function messageElement(m) {
  const div = document.createElement("div");
  div.className = `msg ${m.role}${m.error ? " error" : ""}`;
  const who = document.createElement("div");
  who.className = "who";
  who.textContent = m.error ? "error" : m.role;
  div.append(who);
  if (m.reasoning) {
    const d = document.createElement("details");
    d.className = "thinking";
    const s = document.createElement("summary");
    s.textContent = m.pending && !m.content ? "Thinking…" : "Thought";
    const body = document.createElement("div");
    body.className = "text";
    renderText(body, m.reasoning);
    d.append(s, body);
    div.append(d);
  }
  const text = document.createElement("div");
  text.className = "text content";
  renderText(text, m.error ?? m.content ?? "");
  div.append(text);
  if (m.stats || m.stopped) {
    const st = document.createElement("div");
    st.className = "stats";
    st.textContent = [m.stats, m.stopped ? "stopped" : ""].filter(Boolean).join(" · ");
    div.append(st);
  }
  return div;
}

function drawMessages() {
  const box = $("messages");
  const c = conv();
  // Keeps a <details> the user opened open while its message streams.
  const open = new Set([...box.querySelectorAll(".msg")].map((el, i) => (el.querySelector("details")?.open ? i : -1)));
  box.replaceChildren(...(c ? c.messages.map(messageElement) : []));
  box.querySelectorAll(".msg").forEach((el, i) => {
    const d = el.querySelector("details");
    if (d && open.has(i)) d.open = true;
  });
  box.scrollTop = box.scrollHeight;
}

function drawAll() {
  drawList();
  drawMessages();
  const busy = running !== null;
  $("send").disabled = busy;
  $("stop").disabled = !busy;
}

let frame = 0;
const drawSoon = () => {
  if (!frame) frame = requestAnimationFrame(() => ((frame = 0), drawMessages()));
};

// ---- talking to the server ----
async function errorText(res) {
  const raw = await res.text();
  try {
    const j = JSON.parse(raw);
    const msg = j.error?.message ?? (typeof j.error === "string" ? j.error : null);
    if (msg) return `${res.status}: ${msg}`;
  } catch {
    // not JSON
  }
  return `${res.status} ${res.statusText}${raw ? `: ${raw.slice(0, 300)}` : ""}`;
}

async function loadModel() {
  try {
    const res = await fetch("/v1/models", { headers: authHeaders() });
    if (!res.ok) {
      $("model").textContent = res.status === 401 ? "API key needed (Settings)" : `models: ${await errorText(res)}`;
      return;
    }
    modelId = (await res.json()).data?.[0]?.id ?? null;
    $("model").textContent = modelId ?? "(no model)";
  } catch (e) {
    $("model").textContent = `server unreachable: ${e.message}`;
  }
}

// Reads the SSE stream: each event "data: {json}", the last "data: [DONE]".
async function readStream(res, msg) {
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value;
    let cut;
    while ((cut = buf.indexOf("\n\n")) >= 0) {
      const event = buf.slice(0, cut);
      buf = buf.slice(cut + 2);
      for (const line of event.split("\n")) {
        if (!line.startsWith("data:")) continue;
        const data = line.slice(5).trim();
        if (data === "[DONE]") return;
        const j = JSON.parse(data);
        if (j.error) throw new Error(j.error.message ?? JSON.stringify(j.error));
        const d = j.choices?.[0]?.delta;
        if (d?.reasoning_content) msg.reasoning = (msg.reasoning ?? "") + d.reasoning_content;
        if (d?.content) msg.content += d.content;
        if (j.usage) {
          const n = j.usage.completion_tokens;
          const tps = j.timings?.predicted_per_second;
          msg.usage = j.usage;
          msg.stats = `${n} tokens` + (tps ? ` · ${tps.toFixed(1)} tok/s` : "");
        }
        drawSoon();
      }
    }
  }
}

async function send(text) {
  const c = conv() ?? newConversation();
  if (c.messages.length === 0) c.title = text.replace(/\s+/g, " ").slice(0, 40);
  c.messages.push({ role: "user", content: text });
  const msg = { role: "assistant", content: "", pending: true };
  let body;
  try {
    body = requestBody(c);
  } catch (e) {
    c.messages.push({ role: "assistant", error: e.message });
    saveConvs();
    return drawAll();
  }
  c.messages.push(msg);
  running = { conv: c, msg, controller: new AbortController() };
  saveConvs();
  drawAll();
  try {
    const res = await fetch("/v1/chat/completions", {
      method: "POST",
      headers: { "Content-Type": "application/json", ...authHeaders() },
      body: JSON.stringify(body),
      signal: running.controller.signal,
    });
    if (!res.ok) throw new Error(await errorText(res));
    await readStream(res, msg);
  } catch (e) {
    if (e.name === "AbortError") msg.stopped = true;
    else msg.error = e.message;
  } finally {
    delete msg.pending;
    // An error with no text keeps only the error; a reply cut by an error keeps its text too.
    if (msg.error && msg.content) c.messages.push({ role: "assistant", error: msg.error }), delete msg.error;
    running = null;
    saveConvs();
    drawAll();
  }
}

// ---- wiring ----
function start() {
  showSettings();
  if (!conv()) current = convs[0]?.id ?? null;
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = $("input").value;
    if (!text.trim() || running) return;
    $("input").value = "";
    send(text);
  });
  $("input").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) {
      e.preventDefault();
      $("composer").requestSubmit();
    }
  });
  $("stop").addEventListener("click", () => running?.controller.abort());
  $("new-chat").addEventListener("click", () => {
    if (running) return;
    newConversation();
    drawAll();
    $("input").focus();
  });
  // A new API key: ask for the model again.
  $("settings-form").elements.api_key.addEventListener("change", loadModel);
  drawAll();
  loadModel();
}

start();
