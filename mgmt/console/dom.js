// DOM building and formatting helpers. Text always goes in as text nodes,
// so names from the broker cannot inject markup.

// h builds an element: attrs sets properties for on* handlers, "class",
// "style" (an object) and "dataset", attributes for the rest; kids are
// nodes, strings, numbers, arrays of those, or null/false (skipped).
export function h(tag, attrs, ...kids) {
  const svg = tag.startsWith('svg:');
  const el = svg ? document.createElementNS('http://www.w3.org/2000/svg', tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'style') Object.assign(el.style, v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'value' && !svg) el.value = v;
    else if (k === 'checked' && !svg) el.checked = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, kids);
  return el;
}

function append(el, kids) {
  for (const k of kids) {
    if (k === null || k === undefined || k === false) continue;
    if (Array.isArray(k)) append(el, k);
    else el.append(k instanceof Node ? k : String(k));
  }
}

// fill replaces el's children.
export function fill(el, ...kids) {
  el.replaceChildren();
  append(el, kids);
  return el;
}

export function fmtNum(n) {
  if (n === undefined || n === null || n === '') return '';
  if (typeof n !== 'number') return String(n);
  return n.toLocaleString('en-US', { maximumFractionDigits: 1 });
}

export function fmtRate(details) {
  const r = details && typeof details.rate === 'number' ? details.rate : 0;
  return `${r.toLocaleString('en-US', { maximumFractionDigits: 1 })}/s`;
}

export function fmtBytes(b) {
  if (typeof b !== 'number') return '';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (b >= 1024 && i < units.length - 1) { b /= 1024; i++; }
  return `${b.toLocaleString('en-US', { maximumFractionDigits: i ? 1 : 0 })} ${units[i]}`;
}

export function fmtTime(ms) {
  if (!ms) return '';
  const d = new Date(ms);
  return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
}

export function fmtDuration(ms) {
  let s = Math.floor(ms / 1000);
  const d = Math.floor(s / 86400); s -= d * 86400;
  const hh = Math.floor(s / 3600); s -= hh * 3600;
  const mm = Math.floor(s / 60); s -= mm * 60;
  return (d ? `${d}d ` : '') + `${hh}h ${mm}m ${s}s`;
}

export function fmtArgs(args) {
  const e = Object.entries(args || {});
  if (!e.length) return '';
  return e.map(([k, v]) => `${k}: ${typeof v === 'object' ? JSON.stringify(v) : v}`).join(', ');
}

// vhostLabel shows a vhost name; "/" is shown as is.
export const vhostLabel = (v) => v;

// link is an anchor to a console route (a hash path).
export function link(route, ...kids) {
  return h('a', { href: '#' + route }, ...kids);
}

// route builds a hash route from segments, each escaped.
export function route(...segs) {
  return '/' + segs.map((s) => encodeURIComponent(s)).join('/');
}

// table renders rows with columns {title, render(row) -> node|string,
// cls, sort (the API's sort key, for sortable headers)}; sortState
// {key, reverse, onSort} makes headers clickable.
export function table(cols, rows, opts = {}) {
  const head = h('tr', null, cols.map((c) => {
    if (!c.sort || !opts.sortState) return h('th', { class: c.cls }, c.title);
    const st = opts.sortState;
    const active = st.key === c.sort;
    const arrow = active ? (st.reverse ? ' \u25bc' : ' \u25b2') : '';
    return h('th', { class: (c.cls || '') + ' sortable' + (active ? ' sorted' : '') },
      h('button', { class: 'sort', type: 'button', dataset: { sort: c.sort }, onclick: () => st.onSort(c.sort) }, c.title + arrow));
  }));
  const body = rows.length
    ? rows.map((r) => h('tr', null, cols.map((c) => h('td', { class: c.cls }, c.render(r)))))
    : h('tr', null, h('td', { class: 'empty', colspan: cols.length }, opts.empty || 'Nothing to show.'));
  return h('table', { class: 'list' + (opts.cls ? ' ' + opts.cls : '') }, h('thead', null, head), h('tbody', null, body));
}

// facts renders [label, value] pairs as a definition table.
export function facts(pairs) {
  return h('table', { class: 'facts' }, h('tbody', null,
    pairs.filter(Boolean).map(([k, v]) => h('tr', null, h('th', null, k), h('td', null, v)))));
}

// stat is one big number with a label.
export function stat(label, value, id) {
  return h('div', { class: 'stat', id }, h('div', { class: 'stat-value' }, value), h('div', { class: 'stat-label' }, label));
}

// section is a titled panel.
export function section(title, ...kids) {
  return h('section', { class: 'panel' }, h('h2', null, title), ...kids);
}

let toastArea;

// notify shows a message for a few seconds (kind: ok or error).
export function notify(text, kind = 'ok') {
  if (!toastArea) {
    toastArea = h('div', { class: 'toasts', role: 'status', 'aria-live': 'polite' });
    document.body.append(toastArea);
  }
  const t = h('div', { class: 'toast ' + kind }, text);
  toastArea.append(t);
  while (toastArea.children.length > 3) toastArea.firstChild.remove();
  setTimeout(() => t.remove(), kind === 'error' ? 8000 : 4000);
}

const asks = new Set(); // confirmButtons showing their question

// asking reports whether a confirmButton on the page is waiting for its
// answer: the refresh loop then leaves the page alone, so the question
// is not redrawn away under the user's pointer.
export function asking() {
  for (const w of asks) if (!w.isConnected || !w.querySelector('.ask')) asks.delete(w);
  return asks.size > 0;
}

// clearToasts removes the messages shown (on log-out).
export function clearToasts() {
  if (toastArea) toastArea.replaceChildren();
}

// confirmButton is a button that asks once more in place before acting.
export function confirmButton(label, question, action, cls = 'danger') {
  const wrap = h('span', { class: 'confirm' });
  const first = h('button', { type: 'button', class: cls, onclick: () => { fill(wrap, ask); asks.add(wrap); } }, label);
  const ask = h('span', { class: 'ask' }, question + ' ',
    h('button', {
      type: 'button', class: cls,
      onclick: async () => {
        fill(wrap, first);
        try { await action(); } catch (err) { notify(err.message || String(err), 'error'); }
      },
    }, 'Yes, ' + label.toLowerCase()),
    ' ', h('button', { type: 'button', onclick: () => fill(wrap, first) }, 'Cancel'));
  return fill(wrap, first);
}

// field is a labelled form control.
export function field(label, control, hint) {
  const wide = control && control.tagName === 'TEXTAREA';
  return h('label', { class: wide ? 'field wide' : 'field' }, h('span', { class: 'field-label' }, label), control, hint ? h('span', { class: 'hint' }, hint) : null);
}

export function input(name, attrs = {}) {
  return h('input', { name, type: 'text', autocomplete: 'off', ...attrs });
}

export function select(name, options, value) {
  return h('select', { name }, options.map((o) => {
    const [v, l] = Array.isArray(o) ? o : [o, o];
    return h('option', { value: v, selected: v === value ? true : null }, l);
  }));
}

// form builds a form whose submit calls onsubmit with its values (by
// name; checkboxes as booleans) and reports errors from the API.
export function form(cls, onsubmit, ...kids) {
  const f = h('form', { class: 'form ' + (cls || ''), novalidate: true }, ...kids);
  f.addEventListener('submit', async (e) => {
    e.preventDefault();
    const vals = {};
    for (const el of f.elements) {
      if (!el.name) continue;
      vals[el.name] = el.type === 'checkbox' ? el.checked : el.type === 'file' ? el.files : el.value;
    }
    const btns = f.querySelectorAll('button[type=submit]');
    btns.forEach((b) => { b.disabled = true; });
    try {
      await onsubmit(vals, f);
    } catch (err) {
      notify(err.message || String(err), 'error');
    } finally {
      btns.forEach((b) => { b.disabled = false; });
    }
  });
  return f;
}

// parseArgs reads "key = value" lines as AMQP arguments: numbers and
// booleans typed, the rest strings; a line starting with { is JSON.
export function parseArgs(text) {
  const t = (text || '').trim();
  if (!t) return {};
  if (t.startsWith('{')) return JSON.parse(t);
  const out = {};
  for (const line of t.split('\n')) {
    const l = line.trim();
    if (!l) continue;
    const i = l.indexOf('=');
    if (i < 0) throw new Error(`"${l}": write key = value`);
    const k = l.slice(0, i).trim();
    const v = l.slice(i + 1).trim();
    out[k] = v === 'true' ? true : v === 'false' ? false : v !== '' && !isNaN(Number(v)) ? Number(v) : v;
  }
  return out;
}
