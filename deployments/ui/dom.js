// DOM helpers: elements are built with createElement and filled with textContent only.

export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  if (attrs) {
    for (const [name, value] of Object.entries(attrs)) {
      if (value === null || value === undefined || value === false) continue;
      if (name === 'class') node.className = value;
      else if (name === 'text') node.textContent = value;
      else if (name === 'on') for (const [ev, fn] of Object.entries(value)) node.addEventListener(ev, fn);
      else if (name.startsWith('on') || name === 'style' || name === 'srcdoc') throw new Error(`refusing attribute ${name}`);
      else node.setAttribute(name, value === true ? '' : String(value));
    }
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(node, child);
    else if (child instanceof Node) node.appendChild(child);
    else node.appendChild(document.createTextNode(String(child)));
  }
}

export function clear(node, ...children) { node.replaceChildren(); append(node, children); return node; }

export const isNum = (v) => typeof v === 'number' && Number.isFinite(v);

export function num(v, digits = 2) {
  if (!isNum(v)) return '–';
  return Number.isInteger(v) ? String(v) : v.toFixed(digits);
}

export function ms(v) {
  if (!isNum(v)) return '–';
  if (v === 0) return '0 ms';
  if (Math.abs(v) >= 1000) return `${(v / 1000).toFixed(2)} s`;
  return `${v < 10 ? v.toFixed(1) : Math.round(v)} ms`;
}

export function pct(v) { return isNum(v) ? `${Math.round(v * 100)}%` : '–'; }

export function relative(epochS, now = Date.now() / 1000) {
  if (!isNum(epochS)) return 'never';
  const d = Math.round(now - epochS);
  const a = Math.abs(d);
  let s;
  if (a < 60) s = `${a} s`;
  else if (a < 3600) s = `${Math.floor(a / 60)} min`;
  else if (a < 86400) s = `${Math.floor(a / 3600)} h ${Math.floor((a % 3600) / 60)} min`;
  else s = `${Math.floor(a / 86400)} d`;
  return d >= 0 ? `${s} ago` : `in ${s}`;
}

// A <time> that shows "12 s ago" and the absolute date on hover; ticker() keeps them current.
export function when(epochS, prefix = '') {
  if (!isNum(epochS)) return el('span', { class: 'muted' }, prefix ? `${prefix}never` : 'never');
  const date = new Date(epochS * 1000);
  const t = el('time', { datetime: date.toISOString(), title: date.toLocaleString(), 'data-ts': String(epochS), 'data-prefix': prefix });
  t.textContent = prefix + relative(epochS);
  return t;
}

export function tickTimes() {
  const now = Date.now() / 1000;
  for (const t of document.querySelectorAll('time[data-ts]')) {
    t.textContent = (t.getAttribute('data-prefix') || '') + relative(Number(t.getAttribute('data-ts')), now);
  }
}

const SAFE_CLASS = /^[a-z0-9_-]{1,40}$/;
// A class derived from an API value, only when it is one we know.
export function cls(prefix, value, known) {
  return known.includes(value) && SAFE_CLASS.test(value) ? `${prefix}-${value}` : `${prefix}-unknown`;
}

export function badge(prefix, value, known, label) {
  return el('span', { class: `badge ${cls(prefix, value, known)}` }, label || String(value ?? '?'));
}

export function errorBox(err, title) {
  const box = el('div', { class: 'banner banner-error', role: 'alert' });
  if (title) box.appendChild(el('strong', null, title, ' '));
  if (err && err.type) box.appendChild(el('code', { class: 'err-type' }, err.type));
  if (err && err.status) box.appendChild(el('span', { class: 'muted' }, ` (HTTP ${err.status})`));
  box.appendChild(el('span', null, ' ', err && err.message ? err.message : String(err)));
  if (err && err.status === 401) box.appendChild(el('span', null, ' Enter an API key above.'));
  if (err && err.retryAfter) box.appendChild(el('span', null, ` Retry after ${err.retryAfter} s.`));
  if (err && err.requestId) box.appendChild(el('span', { class: 'muted small' }, ` request ${err.requestId}`));
  return box;
}

export function note(text, kind = 'info') { return el('p', { class: `banner banner-${kind}` }, text); }

export function loading(text = 'Loading…') { return el('p', { class: 'muted loading' }, text); }

export function json(value) { return el('pre', { class: 'json' }, JSON.stringify(value, null, 2)); }

export function kv(pairs) {
  const dl = el('dl', { class: 'kv' });
  for (const [k, v] of pairs) {
    if (v === null || v === undefined) continue;
    dl.append(el('dt', null, k), el('dd', null, v));
  }
  return dl;
}
