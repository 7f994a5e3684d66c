// Small hand-written SVG charts. Geometry goes in attributes; every colour comes from a CSS class.

import { el, isNum, ms } from './dom.js';

const NS = 'http://www.w3.org/2000/svg';

export function svg(tag, attrs, ...children) {
  const node = document.createElementNS(NS, tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (name === 'text') node.textContent = value;
    else if (name.startsWith('on') || name === 'style' || name === 'href') throw new Error(`refusing attribute ${name}`);
    else if (value !== null && value !== undefined) node.setAttribute(name, String(value));
  }
  for (const c of children) if (c) node.appendChild(c);
  return node;
}

// fluid: scales with its container (CSS width: 100%, height auto keeps the aspect ratio).
function frame(width, height, cls, label, fluid = false) {
  const size = fluid ? {} : { width, height };
  const s = svg('svg', { viewBox: `0 0 ${width} ${height}`, ...size, class: fluid ? `${cls} fluid` : cls, role: 'img', 'aria-label': label });
  s.appendChild(svg('title', { text: label }));
  return s;
}

const clamp = (v, lo, hi) => Math.min(hi, Math.max(lo, v));
const r1 = (v) => Math.round(v * 10) / 10;

// recent: [[ts, latency_ms, ok], ...] -> latency line, failed calls as red dots.
export function sparkline(recent, width = 140, height = 30) {
  const rows = (Array.isArray(recent) ? recent : []).filter((r) => Array.isArray(r) && isNum(r[1]));
  const lat = rows.map((r) => r[1]);
  const label = rows.length
    ? `Latency of the last ${rows.length} calls: ${ms(Math.min(...lat))} to ${ms(Math.max(...lat))}, ${rows.filter((r) => !r[2]).length} failed`
    : 'No recent calls';
  const s = frame(width, height, 'spark', label);
  if (!rows.length) return s;
  const max = Math.max(...lat, 1);
  const pad = 3;
  const x = (i) => r1(rows.length === 1 ? width / 2 : pad + (i * (width - 2 * pad)) / (rows.length - 1));
  const y = (v) => r1(height - pad - (v / max) * (height - 2 * pad));
  s.appendChild(svg('polyline', { class: 'spark-line', points: rows.map((r, i) => `${x(i)},${y(r[1])}`).join(' ') }));
  rows.forEach((r, i) => { if (!r[2]) s.appendChild(svg('circle', { class: 'spark-fail', cx: x(i), cy: y(r[1]), r: 2.2 })); });
  return s;
}

// A 0..1 bar (success rate, score); marker: an optional second value drawn as a tick.
export function bar(value, { width = 120, height = 10, cls = 'bar-fill', marker = null, label = '' } = {}) {
  const s = frame(width, height, 'bar', label || `${isNum(value) ? value.toFixed(3) : 'no value'}`);
  s.appendChild(svg('rect', { class: 'bar-track', x: 0, y: 0, width, height, rx: 2 }));
  if (isNum(value)) s.appendChild(svg('rect', { class: cls, x: 0, y: 0, width: r1(clamp(value, 0, 1) * width), height, rx: 2 }));
  if (isNum(marker)) {
    const mx = r1(clamp(marker, 0, 1) * width);
    s.appendChild(svg('line', { class: 'bar-marker', x1: mx, x2: mx, y1: 0, y2: height }));
  }
  return s;
}

// A value that may be negative: drawn from the centre, clamped to -1..1.
export function signedBar(value, { width = 120, height = 10, label = '' } = {}) {
  const s = frame(width, height, 'bar', label || `${isNum(value) ? value.toFixed(3) : 'no value'}`);
  const mid = width / 2;
  s.appendChild(svg('rect', { class: 'bar-track', x: 0, y: 0, width, height, rx: 2 }));
  if (isNum(value) && value !== 0) {
    const w = r1(Math.max(1, clamp(Math.abs(value), 0, 1) * mid));
    s.appendChild(svg('rect', { class: value < 0 ? 'bar-neg' : 'bar-fill', x: value < 0 ? r1(mid - w) : mid, y: 0, width: w, height }));
  }
  s.appendChild(svg('line', { class: 'bar-axis', x1: mid, x2: mid, y1: 0, y2: height }));
  return s;
}

const OUTCOMES = ['success', 'error', 'timeout', 'cancelled', 'unavailable'];

// Attempts as bars positioned by started_ms and sized by latency_ms.
export function attemptTimeline(attempts, totalMs) {
  const list = (attempts || []).filter((a) => a && typeof a === 'object');
  const end = Math.max(isNum(totalMs) ? totalMs : 0, ...list.map((a) => (a.started_ms || 0) + (a.latency_ms || 0)), 1);
  const width = 640, labelW = 200, row = 20, top = 4, axis = 16;
  const height = top + list.length * row + axis;
  const s = frame(width, height, 'timeline', `Attempts over ${ms(end)}`, true);
  const span = width - labelW - 10;
  const xs = (v) => r1(labelW + (clamp(v, 0, end) / end) * span);
  list.forEach((a, i) => {
    const y = top + i * row;
    const name = `${a.backend ?? '?'} / ${a.capability ?? '?'}`;
    s.appendChild(svg('text', { class: 'tl-label', x: labelW - 6, y: y + 13, 'text-anchor': 'end', text: name.length > 32 ? `${name.slice(0, 31)}…` : name }));
    const x0 = xs(a.started_ms || 0);
    const w = Math.max(2, r1(xs((a.started_ms || 0) + (a.latency_ms || 0)) - x0));
    const outcome = OUTCOMES.includes(a.outcome) ? a.outcome : 'unknown';
    const rect = svg('rect', { class: `tl-bar tl-${outcome}`, x: x0, y: y + 3, width: w, height: row - 6, rx: 2 });
    rect.appendChild(svg('title', { text: `${name}: ${a.outcome} after ${ms(a.latency_ms)} (started at ${ms(a.started_ms || 0)})${a.error ? ` — ${a.error}` : ''}` }));
    s.appendChild(rect);
  });
  const ay = top + list.length * row + 2;
  s.appendChild(svg('line', { class: 'axis', x1: labelW, x2: labelW + span, y1: ay, y2: ay }));
  s.appendChild(svg('text', { class: 'axis-text', x: labelW, y: ay + 12, text: '0' }));
  s.appendChild(svg('text', { class: 'axis-text', x: labelW + span, y: ay + 12, 'text-anchor': 'end', text: ms(end) }));
  return s;
}

export const STAGES = ['analyse', 'decide', 'plan', 'execute', 'respond'];

// Stage timings as one stacked bar with a legend.
export function stageBar(stages) {
  const entries = STAGES.map((k) => [k, stages && isNum(stages[k]) ? stages[k] : 0]);
  const total = entries.reduce((t, [, v]) => t + v, 0) || 1;
  const width = 640, height = 14;
  const s = frame(width, height, 'stages', entries.map(([k, v]) => `${k} ${ms(v)}`).join(', '), true);
  s.setAttribute('preserveAspectRatio', 'none');
  let x = 0;
  for (const [k, v] of entries) {
    const w = (v / total) * width;
    if (w > 0) {
      const rect = svg('rect', { class: `stage-${k}`, x: r1(x), y: 0, width: r1(Math.max(w, 1)), height });
      rect.appendChild(svg('title', { text: `${k}: ${ms(v)}` }));
      s.appendChild(rect);
    }
    x += w;
  }
  const legend = el('ul', { class: 'legend' }, entries.map(([k, v]) => el('li', null, el('span', { class: `swatch stage-${k}` }), `${k} ${ms(v)}`)));
  return el('div', { class: 'stage-chart' }, s, legend);
}

function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
  return 10 * p;
}

// series: [{name, cls, points: [[x, y]], bars?: bool}] over a shared x (seconds) and y axis.
export function timeChart(series, { title, yFormat = (v) => String(v), xFormat = (v) => `${v} s`, width = 640, height = 200 } = {}) {
  const all = series.flatMap((s) => s.points).filter((p) => isNum(p[0]) && isNum(p[1]));
  const s = frame(width, height, 'chart', title, true);
  const left = 56, right = 10, top = 10, bottom = 24;
  const w = width - left - right, h = height - top - bottom;
  const xmin = all.length ? Math.min(...all.map((p) => p[0])) : 0;
  const xmax = all.length ? Math.max(...all.map((p) => p[0])) : 1;
  const ymax = niceMax(all.length ? Math.max(...all.map((p) => p[1])) : 1);
  const xs = (v) => r1(left + (xmax === xmin ? w / 2 : ((v - xmin) / (xmax - xmin)) * w));
  const ys = (v) => r1(top + h - (clamp(v, 0, ymax) / ymax) * h);
  for (let i = 0; i <= 4; i += 1) {
    const v = (ymax * i) / 4;
    s.appendChild(svg('line', { class: i ? 'grid' : 'axis', x1: left, x2: left + w, y1: ys(v), y2: ys(v) }));
    s.appendChild(svg('text', { class: 'axis-text', x: left - 6, y: ys(v) + 4, 'text-anchor': 'end', text: yFormat(v) }));
  }
  for (const v of [xmin, (xmin + xmax) / 2, xmax]) {
    s.appendChild(svg('text', { class: 'axis-text', x: xs(v), y: height - 6, 'text-anchor': 'middle', text: xFormat(Math.round(v * 10) / 10) }));
  }
  const n = Math.max(...series.map((x) => x.points.length), 1);
  const bw = Math.max(1, r1((w / n) * 0.6));
  for (const ser of series) {
    const pts = ser.points.filter((p) => isNum(p[0]) && isNum(p[1]));
    if (ser.bars) {
      for (const [x, y] of pts) {
        if (y > 0) s.appendChild(svg('rect', { class: `series-bar ${ser.cls}`, x: r1(xs(x) - bw / 2), y: ys(y), width: bw, height: r1(top + h - ys(y)) }));
      }
    } else if (pts.length) {
      s.appendChild(svg('polyline', { class: `series-line ${ser.cls}`, points: pts.map(([x, y]) => `${xs(x)},${ys(y)}`).join(' ') }));
    }
  }
  const legend = el('ul', { class: 'legend' }, series.map((ser) => el('li', null, el('span', { class: `swatch ${ser.cls}` }), ser.name)));
  return el('figure', { class: 'chart-fig' }, el('figcaption', null, title), s, legend);
}
