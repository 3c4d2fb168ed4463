// The chat web UI of `oxinfer serve` (issue 31 item 2) in headless Chromium (playwright-core,
// Debian's chromium) against a real server on the synthetic Qwen 3.5 model:
// - the static files: Content-Type, ETag / 304, a strict CSP, no API key needed; --no-webui → 404;
// - the page loads with no console error and no CSP violation;
// - what the page shows equals what the `openai` npm client gets for the very request the page
//   sent (greedy): the reasoning in a closed <details>, the answer text;
// - settings reach the request (max_tokens 5 → at most 5 tokens in usage; thinking off);
// - model output holding <script> / <img onerror> (forced with a GBNF grammar) shows as text;
// - Stop cancels a long generation: /slots shows the slot free at once;
// - conversations survive a reload (localStorage), can be switched and deleted;
// - a 400 from the server is shown with its message.
// OXI_WEBUI_SCREENSHOT=FILE writes the screenshot there too (docs/webui.png comes from this).
import assert from "node:assert/strict";
import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { checks, makeQwenModel, startServer } from "./lib/server.mjs";

const { OXINFER, NLC_DIR } = process.env;
const require = createRequire(path.join(NLC_DIR, "package.json"));
const OpenAI = require("openai").default;
const { chromium } = require("playwright-core");
const work = process.env.OXI_WORK_DIR ?? "/tmp/oxi-webui";
const { check, finish } = checks();
const model = makeQwenModel(path.join(work, "model"));
const KEY = "webui-key";
// -c 8192: room for a generation long enough to be stopped half-way.
const srv = await startServer(OXINFER, model, ["-np", "1", "-c", "8192", "--api-key", KEY]);
const client = new OpenAI({ baseURL: `${srv.base}/v1`, apiKey: KEY });
const EOS = [151645, 151643];  // <|im_end|>, <|endoftext|> of the Qwen tokenizer

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"],
});
const ctx = await browser.newContext({ viewport: { width: 1000, height: 640 } });
// CSP violations are reported to the page as events; the listener is installed by the test
// harness (exempt from the page's CSP), before any page script runs.
await ctx.addInitScript(() => {
  window.__csp = [];
  document.addEventListener("securitypolicyviolation", (e) => window.__csp.push(`${e.violatedDirective} ${e.blockedURI}`));
});
const page = await ctx.newPage();
const consoleErrors = [];
page.on("console", (m) => m.type() === "error" && consoleErrors.push(m.text()));
page.on("pageerror", (e) => consoleErrors.push(`pageerror: ${e.message}`));

const $text = (sel) => page.locator(sel).last().evaluate((el) => el.textContent);
const openSettings = async () => {
  if (!(await page.locator("#settings").evaluate((d) => d.open))) await page.click("#settings summary");
};
async function setSettings(values) {
  await openSettings();
  for (const [name, v] of Object.entries(values)) {
    const el = page.locator(`#settings-form [name=${name}]`);
    if (name === "thinking") await el.selectOption(v);
    else await el.fill(v);
  }
  await page.click("#settings summary");  // closes it again
}
// Types a message, sends it, waits for the reply to end; returns the request body the page sent.
async function send(text) {
  const n = await page.locator(".msg.assistant").count();
  await page.fill("#input", text);
  const [req, res] = await Promise.all([page.waitForRequest("**/v1/chat/completions"),
    page.waitForResponse("**/v1/chat/completions"), page.click("#send")]);
  if (res.status() === 200) assert.equal(res.headers()["content-type"], "text/event-stream");
  await page.waitForFunction((n) => document.querySelectorAll(".msg.assistant").length > n && !document.querySelector("#send").disabled, n);
  return req.postDataJSON();
}
const stored = () => page.evaluate(() => JSON.parse(localStorage.getItem("oxinfer.conversations")));
// The same request without streaming, through the openai client.
const direct = (body) => {
  const { stream, stream_options, ...rest } = body;
  return client.chat.completions.create(rest);
};

try {
  await check("static files: types, ETag/304, strict CSP, no API key needed (the API still needs it)", async () => {
    const r = await fetch(`${srv.base}/`);
    assert.equal(r.status, 200);
    assert.equal(r.headers.get("content-type"), "text/html; charset=utf-8");
    const csp = r.headers.get("content-security-policy");
    assert.match(csp, /default-src 'self'/);
    assert.doesNotMatch(csp, /unsafe/);
    assert.match((await r.text()), /<script type="module" src="\/app.js">/);
    const etag = r.headers.get("etag");
    assert.match(etag, /^"[0-9a-f]{16}"$/);
    assert.equal((await fetch(`${srv.base}/`, { headers: { "If-None-Match": etag } })).status, 304);
    const js = await fetch(`${srv.base}/app.js`);
    assert.equal(js.headers.get("content-type"), "text/javascript; charset=utf-8");
    assert.equal((await fetch(`${srv.base}/style.css`)).headers.get("content-type"), "text/css; charset=utf-8");
    assert.equal((await fetch(`${srv.base}/index.html`)).status, 200);
    assert.equal((await fetch(`${srv.base}/nothing.js`)).status, 404);
    assert.equal((await fetch(`${srv.base}/appxjs`)).status, 404);  // the '.' of a route is not a wildcard
    assert.equal((await fetch(`${srv.base}/v1/models`)).status, 401);
  });

  await check("without the key the page says one is needed; with it, the model name", async () => {
    await page.goto(`${srv.base}/`);
    await page.waitForFunction(() => document.querySelector("#model").textContent.includes("API key"));
    // The only console error so far is Chromium's note on the 401.
    assert.ok(consoleErrors.every((e) => e.includes("401")), consoleErrors.join("\n"));
    await openSettings();
    await page.fill("#settings-form [name=api_key]", KEY);
    await page.click("#settings summary");
    consoleErrors.length = 0;
    await page.reload();
    await page.waitForFunction(() => document.querySelector("#model").textContent === "qwen35");
  });

  await check("a reply streams; its reasoning (folded) and answer equal the openai client's (greedy)", async () => {
    await setSettings({ temperature: "0", max_tokens: "40" });
    const body = await send("Hello there, who are you?");
    assert.equal(body.stream, true);
    assert.equal(body.temperature, 0);
    const r = await direct(body);
    const ref = r.choices[0].message;
    assert.ok(ref.reasoning_content.length > 0);
    assert.equal(await page.locator(".msg.assistant details.thinking").last().evaluate((d) => d.open), false);
    assert.equal(await $text(".msg.assistant .thinking .text"), ref.reasoning_content);
    assert.equal(await $text(".msg.assistant .content"), ref.content ?? "");
    const stats = await $text(".msg.assistant .stats");
    assert.match(stats, /^[0-9]+ tokens · [0-9.]+ tok\/s$/);
    assert.equal(parseInt(stats, 10), r.usage.completion_tokens);
  });

  await check("thinking off and max_tokens 5 reach the request: ≤ 5 tokens, the same answer", async () => {
    await page.click("#new-chat");
    await setSettings({ max_tokens: "5", thinking: "off" });
    const body = await send("Name a colour.");
    assert.equal(body.max_tokens, 5);
    assert.deepEqual(body.chat_template_kwargs, { enable_thinking: false });
    const ref = await direct(body);
    assert.ok(ref.choices[0].message.content.length > 0);
    assert.equal(await $text(".msg.assistant .content"), ref.choices[0].message.content);
    const last = (await stored())[0].messages.at(-1);
    assert.ok(last.usage.completion_tokens <= 5, JSON.stringify(last.usage));
    assert.equal(last.usage.completion_tokens, ref.usage.completion_tokens);
  });

  await check("a second turn sends the history; the answer again equals the client's", async () => {
    await setSettings({ max_tokens: "12" });
    const body = await send("And another one?");
    assert.deepEqual(body.messages.map((m) => m.role), ["user", "assistant", "user"]);
    assert.equal(await $text(".msg.assistant .content"), (await direct(body)).choices[0].message.content);
  });

  const html = "<script>window.pwned=1</script><img src=x onerror=\"window.pwned=2\"> & <b>bold</b>";
  await check("model output with <script> and <img onerror> is shown as text", async () => {
    await page.click("#new-chat");
    await setSettings({ max_tokens: "", extra: JSON.stringify({ grammar: `root ::= ${JSON.stringify(html)}` }) });
    await send("Say something dangerous.");
    assert.equal(await $text(".msg.assistant .content"), html);
    assert.equal(await page.locator("#messages script, #messages img, #messages b").count(), 0);
    assert.equal(await page.evaluate(() => window.pwned), undefined);
  });

  await check("a fenced code block shows in <pre>, as text", async () => {
    const answer = "Try this:\n```html\n<i>x</i> & y\n```\nDone.";
    await setSettings({ extra: JSON.stringify({ grammar: `root ::= ${JSON.stringify(answer)}` }) });
    await send("Show code.");
    assert.equal(await $text(".msg.assistant .content pre code"), "<i>x</i> & y");
    assert.equal(await page.locator("#messages i").count(), 0);
  });

  await check("a 400 from the server is shown with its message", async () => {
    await setSettings({ extra: JSON.stringify({ n_predict: 3 }) });
    await send("This request is refused.");
    assert.match(await $text(".msg.error .content"), /^400: .*n_predict/);
    // Chromium notes the failed request on the console: expected here, and only here.
    const i = consoleErrors.findIndex((e) => e.includes("status of 400"));
    assert.ok(i >= 0, consoleErrors.join("\n"));
    consoleErrors.splice(i, 1);
  });

  await check("Stop cancels a long generation: the slot is free at once", async () => {
    await page.click("#new-chat");
    const bias = Object.fromEntries(EOS.map((t) => [t, -100]));  // no end: it would run to the context's end
    await setSettings({ thinking: "", extra: JSON.stringify({ logit_bias: bias }) });
    await page.fill("#input", "Write forever.");
    await page.click("#send");
    await page.waitForFunction(() => document.querySelector(".msg.assistant:last-child")?.textContent.length > 40);
    await page.click("#stop");
    await page.waitForFunction(() => !document.querySelector("#send").disabled);
    const t0 = Date.now();
    let slot;
    for (;;) {
      slot = (await (await fetch(`${srv.base}/slots`, { headers: { Authorization: `Bearer ${KEY}` } })).json())[0];
      if (!slot.is_processing || Date.now() - t0 > 3000) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(slot.is_processing, false, JSON.stringify(slot));
    assert.ok(slot.next_token.n_decoded < 4000, JSON.stringify(slot));
    assert.match(await $text(".msg.assistant .stats"), /stopped/);
    const last = (await stored())[0].messages.at(-1);
    assert.equal(last.stopped, true);
  });

  await check("conversations survive a reload; switch and delete", async () => {
    await setSettings({ extra: "", max_tokens: "8", thinking: "off" });
    const before = await stored();
    assert.equal(before.length, 4);
    const shown = await page.locator("#messages").evaluate((el) => el.textContent);
    await page.reload();
    await page.waitForFunction(() => document.querySelector("#model").textContent === "qwen35");
    assert.deepEqual(await stored(), before);
    assert.equal(await page.locator("#messages").evaluate((el) => el.textContent), shown);
    assert.equal(await page.locator("#conversations li").count(), 4);
    assert.equal(await page.locator("#settings-form [name=max_tokens]").inputValue(), "8");  // settings kept too
    await page.locator("#conversations li .open").nth(3).click();  // the first conversation
    assert.equal(await $text(".msg.user .content"), "Hello there, who are you?");
    await page.locator("#conversations li .delete").nth(0).click();
    assert.equal((await stored()).length, 3);
    assert.equal(await page.locator("#conversations li").count(), 3);
  });

  await check("no console error and no CSP violation in the page", async () => {
    assert.deepEqual(consoleErrors, []);
    assert.deepEqual(await page.evaluate(() => window.__csp), []);
  });

  await check("screenshot", async () => {
    await page.click("#new-chat");
    await setSettings({ thinking: "", max_tokens: "200", extra: JSON.stringify({ grammar: `root ::= "<think>\\nThe user asks for a loop.\\n</think>\\n\\nHere is one:\\n\`\`\`python\\nfor i in range(3):\\n    print(i)\\n\`\`\`\\nIt prints 0, 1 and 2."` }) });
    await send("How do I write a loop in Python?");
    await page.locator(".msg.assistant details.thinking").last().evaluate((d) => (d.open = true));
    const file = path.join(work, "webui.png");
    await page.screenshot({ path: file });
    if (process.env.OXI_WEBUI_SCREENSHOT) fs.copyFileSync(file, process.env.OXI_WEBUI_SCREENSHOT);
  });
} finally {
  await browser.close();
  srv.proc.kill("SIGTERM");
}

await check("--no-webui: no page at /", async () => {
  const s = await startServer(OXINFER, model, ["--no-webui"]);
  try {
    assert.equal((await fetch(`${s.base}/`)).status, 404);
    assert.equal((await fetch(`${s.base}/app.js`)).status, 404);
    assert.equal((await fetch(`${s.base}/health`)).status, 200);
  } finally {
    s.proc.kill("SIGTERM");
  }
});
finish();
