// The chat page: load a model (URL, Hugging Face id, local file, or one cached in this browser),
// chat with its own chat template, streamed tokens, thinking folded, stop, sampling settings.
// `?model=URL` in the page address loads that model at start.
import { createOxinfer } from './oxinfer.mjs';

const $ = (id) => document.getElementById(id);
let oxi = null;
let model = null;
let messages = [];
let controller = null;

function setError(msg) {
  $('error').textContent = msg || '';
}

function mb(n) {
  return (n / 1048576).toFixed(n < 10 * 1048576 ? 1 : 0) + ' MB';
}

async function refreshCached() {
  const list = $('cached');
  list.textContent = '';
  let items = [];
  try {
    items = await (await ensureOxi()).listCached();
  } catch { /* no OPFS */ }
  if (!items.length) {
    list.innerHTML = '<li>none yet (models are kept here after the first load)</li>';
    return;
  }
  for (const it of items) {
    const li = document.createElement('li');
    li.textContent = `${it.name} — ${mb(it.size)}${it.complete ? '' : ' (partial)'}`;
    const use = document.createElement('button');
    use.textContent = 'load';
    use.onclick = () => { $('source').value = it.url; load(); };
    const del = document.createElement('button');
    del.textContent = 'delete';
    del.onclick = async () => { await oxi.deleteCached(it.key); refreshCached(); };
    li.append(use, del);
    list.append(li);
  }
}

async function ensureOxi() {
  const threads = Number($('threads').value) || 2;
  if (!oxi || oxi.threads !== threads) oxi = await createOxinfer({ threads, device: 'auto' });
  return oxi;
}

function setBusy(busy) {
  $('send').disabled = busy || !model;
  $('input').disabled = !model;
  $('stop').disabled = !busy;
  $('load').disabled = busy;
}

async function load() {
  setError('');
  const files = [...$('file').files];
  const source = files.length ? files : $('source').value.trim();
  if (!source || (Array.isArray(source) && !source.length)) {
    setError('Give a URL, a Hugging Face id or a file.');
    return;
  }
  if (model) {
    await model.free();
    model = null;
  }
  setBusy(true);
  const bar = $('progress');
  bar.hidden = false;
  bar.value = 0;
  const t0 = performance.now();
  $('status').textContent = 'loading…';
  try {
    const o = await ensureOxi();
    model = await o.loadModel(source, {
      onProgress: (loaded, total) => {
        bar.max = total || 1;
        bar.value = loaded;
        const s = (performance.now() - t0) / 1000;
        $('loadinfo').textContent = `${mb(loaded)} / ${mb(total)} · ${(loaded / 1048576 / Math.max(s, 1e-3)).toFixed(1)} MB/s`;
      },
    });
    const i = model.info();
    $('status').textContent = `${i.name} · ${i.arch} · ${i.file_type} · ${i.device} (${i.isa}) · ${i.threads} thread${i.threads > 1 ? 's' : ''}`;
    $('loadinfo').textContent = `loaded in ${((performance.now() - t0) / 1000).toFixed(1)} s`;
    restoreChat();
  } catch (err) {
    model = null;
    $('status').textContent = 'no model';
    setError(err.message);
  } finally {
    bar.hidden = true;
    setBusy(false);
    refreshCached();
  }
}

function addMessage(role, text) {
  const div = document.createElement('div');
  div.className = `msg ${role}`;
  if (role === 'assistant') {
    const details = document.createElement('details');
    details.hidden = true;
    const summary = document.createElement('summary');
    summary.textContent = 'thinking';
    const thought = document.createElement('div');
    thought.className = 'thought';
    details.append(summary, thought);
    const content = document.createElement('div');
    content.className = 'content';
    content.textContent = text || '';
    div.append(details, content);
  } else {
    div.textContent = text;
  }
  $('messages').append(div);
  div.scrollIntoView({ block: 'end' });
  return div;
}

function saveChat() {
  try { localStorage.setItem('oxinfer-chat', JSON.stringify(messages)); } catch { /* full or disabled */ }
}

function restoreChat() {
  $('messages').textContent = '';
  try { messages = JSON.parse(localStorage.getItem('oxinfer-chat') || '[]'); } catch { messages = []; }
  for (const m of messages) addMessage(m.role, m.content);
}

async function send(ev) {
  ev.preventDefault();
  const text = $('input').value.trim();
  if (!text || !model) return;
  $('input').value = '';
  setError('');
  messages.push({ role: 'user', content: text });
  addMessage('user', text);
  const div = addMessage('assistant', '');
  const details = div.querySelector('details');
  const thought = div.querySelector('.thought');
  const content = div.querySelector('.content');
  controller = new AbortController();
  setBusy(true);
  const t0 = performance.now();
  let n = 0;
  try {
    const out = await model.generate({
      messages,
      maxTokens: Number($('maxTokens').value) || 512,
      temperature: Number($('temperature').value),
      topK: Number($('topK').value),
      topP: Number($('topP').value),
      minP: Number($('minP').value),
      enableThinking: $('thinking').checked,
      signal: controller.signal,
      onToken: (t) => {
        n++;
        if (t.reasoning) { details.hidden = false; thought.textContent += t.reasoning; }
        if (t.content) content.textContent += t.content;
        div.scrollIntoView({ block: 'end' });
        const s = (performance.now() - t0) / 1000;
        $('stats').textContent = `${n} tokens · ${(n / Math.max(s, 1e-3)).toFixed(1)} tok/s`;
      },
    });
    content.textContent = out.text;
    if (out.reasoning) { details.hidden = false; thought.textContent = out.reasoning; }
    messages.push({ role: 'assistant', content: out.text });
    saveChat();
    const t = out.timings || {};
    if (t.gen_ms) {
      $('stats').textContent = `${t.gen_n} tokens · ${(t.gen_n / (t.gen_ms / 1000)).toFixed(1)} tok/s · prompt ${t.prompt_n} tokens at ${(t.prompt_n / Math.max(t.prompt_ms / 1000, 1e-3)).toFixed(1)} tok/s${out.stop_reason === 'aborted' ? ' · stopped' : ''}`;
    } else if (out.stop_reason === 'aborted') {
      $('stats').textContent += ' · stopped';
    }
  } catch (err) {
    setError(err.message);
  } finally {
    controller = null;
    setBusy(false);
    $('input').focus();
  }
}

$('load').onclick = load;
$('form').onsubmit = send;
$('stop').onclick = () => controller && controller.abort();
$('clear').onclick = () => { messages = []; saveChat(); $('messages').textContent = ''; };
$('input').addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey) $('form').requestSubmit();
});
refreshCached();
const auto = new URLSearchParams(location.search).get('model');
if (auto) {
  $('source').value = auto;
  load();
}
