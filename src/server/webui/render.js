// Renders message text into an element with DOM text nodes only: model output is never parsed
// as HTML (no innerHTML), so "<script>" or "<img onerror=…>" in an answer shows as those
// characters. The one piece of markdown understood is the fenced code block (``` … ```), shown in
// <pre><code> (its text again set as a text node); everything else is plain text (CSS pre-wrap).
export function renderText(el, text) {
  el.replaceChildren();
  // An opening fence at a line start; the block ends at a closing fence line or at the end of the
  // text (a block still streaming). (?![\s\S]) is the end of the text (with /m, $ is any line end).
  const fence = /^```([^\n`]*)\n([\s\S]*?)(?:\n```[ \t]*(?:\n|(?![\s\S]))|(?![\s\S]))/gm;
  let at = 0;
  for (const m of text.matchAll(fence)) {
    // The line break before the fence is the block's own edge, not a blank line of text.
    if (m.index > at) el.append(document.createTextNode(text.slice(at, m.index).replace(/\n$/, "")));
    const pre = document.createElement("pre");
    const code = document.createElement("code");
    if (m[1].trim()) pre.dataset.lang = m[1].trim();
    code.textContent = m[2];
    pre.append(code);
    el.append(pre);
    at = m.index + m[0].length;
  }
  if (at < text.length) el.append(document.createTextNode(text.slice(at)));
}
