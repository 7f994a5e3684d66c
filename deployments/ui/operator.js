// Operator views: recent decisions (+ learned examples of a backend) and the last load test report.

import { get, del, enc } from './api.js';
import { el, clear, when, badge, errorBox, note, num, ms, isNum, loading } from './dom.js';
import { timeChart } from './charts.js';
import { feedbackControl, prefill } from './explorer.js';

const VERDICTS = ['route', 'no_match', 'ambiguous'];
const OUTCOMES = ['ok', 'refused', 'failed'];
const NEEDS_OPERATOR = 'This view needs the operator right; the current key does not have it.';

export async function loadDecisions(state) {
  const body = document.getElementById('decisions-body');
  const examples = document.getElementById('examples-body');
  document.getElementById('decisions-refresh').hidden = !state.operator;
  if (!state.operator) {
    clear(body, note(NEEDS_OPERATOR));
    clear(examples, note('Listing and deleting learned examples needs the operator right.'));
    return;
  }
  if (!examples.childElementCount || examples.querySelector('.banner')) renderExamplesPicker(examples, state);
  clear(body, loading());
  try {
    const rows = await get('/v1/decisions?limit=50');
    const list = (Array.isArray(rows) ? rows : []).slice().sort((a, b) => (b.time || 0) - (a.time || 0));
    clear(body, decisionsTable(list));
  } catch (err) {
    clear(body, errorBox(err, 'Could not load decisions:'));
  }
}

function decisionsTable(list) {
  if (!list.length) return note('No decisions recorded yet.');
  const head = ['time', 'principal', 'question', 'intent', 'verdict', 'backend / tool', 'outcome', 'latency', 'feedback', ''];
  return el('div', { class: 'table-wrap' }, el('table', { class: 'decisions' },
    el('thead', null, el('tr', null, head.map((h) => el('th', { scope: 'col' }, h)))),
    el('tbody', null, list.map((d) => el('tr', null,
      el('td', { class: 'nowrap' }, when(d.time)),
      el('td', null, String(d.principal ?? '')),
      el('td', { class: 'question' }, String(d.question ?? '')),
      el('td', null, String(d.intent ?? '')),
      el('td', null, badge('verdict', d.verdict, VERDICTS, String(d.verdict ?? '?').replace('_', ' '))),
      el('td', null, d.backend ? el('span', null, String(d.backend), ' / ', el('code', null, String(d.capability ?? ''))) : el('span', { class: 'muted' }, '–')),
      el('td', null, badge('outcome', d.outcome, OUTCOMES), d.error ? el('div', null, el('code', { class: 'small' }, String(d.error))) : null),
      el('td', { class: 'num' }, ms(d.latency_ms)),
      el('td', null, d.request_id ? feedbackControl(String(d.request_id), { compact: true }) : null),
      el('td', null, el('button', { type: 'button', on: { click: () => { location.hash = '#explorer'; prefill(String(d.question ?? '')); } } }, 'Re-run')))))));
}

function renderExamplesPicker(box, state) {
  const select = el('select', { id: 'ex-backend', 'data-backends': '' }, el('option', { value: '' }, '(choose a backend)'),
    (state.backends || []).map((b) => el('option', { value: String(b.name) }, String(b.name))));
  const out = el('div', { id: 'examples-out', 'aria-live': 'polite' });
  select.addEventListener('change', () => loadExamples(select.value, out));
  clear(box, el('div', { class: 'inline-form' }, el('label', { for: 'ex-backend' }, 'Backend'), select,
    el('button', { type: 'button', on: { click: () => loadExamples(select.value, out) } }, 'Show examples')), out);
}

async function loadExamples(name, out) {
  if (!name) { clear(out); return; }
  clear(out, loading());
  try {
    const detail = await get(`/v1/backends/${enc(name)}`);
    const examples = Array.isArray(detail && detail.examples) ? detail.examples : [];
    clear(out, examplesTable(name, examples, out));
  } catch (err) {
    clear(out, errorBox(err, `Could not load ${name}:`));
  }
}

function examplesTable(name, examples, out) {
  const wrap = el('div', null, el('h3', null, `${examples.length} learned example${examples.length === 1 ? '' : 's'} of `, el('code', null, name)));
  if (examples.length) {
    wrap.appendChild(el('div', { class: 'table-wrap' }, el('table', { class: 'examples' },
      el('thead', null, el('tr', null, ['id', 'capability', 'kind', 'label', 'question', 'source', 'principal', 'created'].map((h) => el('th', { scope: 'col' }, h)))),
      el('tbody', null, examples.map((e) => el('tr', null,
        el('td', { class: 'num' }, String(e.id ?? '')),
        el('td', null, el('code', null, String(e.name ?? ''))),
        el('td', null, String(e.kind ?? '')),
        el('td', null, e.label === 1 ? el('span', { class: 'badge label-pos' }, '+1 right') : e.label === -1 ? el('span', { class: 'badge label-neg' }, '−1 wrong') : String(e.label ?? '')),
        el('td', { class: 'question' }, String(e.question ?? '')),
        el('td', null, String(e.source ?? '')),
        el('td', null, String(e.principal ?? '')),
        el('td', { class: 'nowrap' }, when(e.created_at))))))));
  }
  // Deleting asks twice, inline (no native dialog).
  const result = el('div', { 'aria-live': 'polite' });
  const confirmBox = el('div', { class: 'confirm', hidden: true },
    el('span', null, `Delete every learned example of ${name}? This cannot be undone. `),
    el('button', { type: 'button', class: 'danger', on: { click: async () => {
      confirmBox.hidden = true;
      clear(result, loading('Deleting…'));
      try {
        const r = await del(`/v1/backends/${enc(name)}/examples`);
        clear(out, note(`Deleted ${num(r && r.deleted)} example(s) of ${String((r && r.backend) ?? name)}.`, 'ok'));
      } catch (err) {
        clear(result, errorBox(err, 'Delete failed:'));
      }
    } } }, 'Yes, delete them'),
    el('button', { type: 'button', on: { click: () => { confirmBox.hidden = true; askBtn.hidden = false; } } }, 'Cancel'));
  const askBtn = el('button', { type: 'button', class: 'danger', disabled: examples.length ? null : true,
    on: { click: () => { confirmBox.hidden = false; askBtn.hidden = true; } } }, 'Delete all examples of this backend');
  wrap.append(el('p', null, askBtn), confirmBox, result);
  return wrap;
}

export async function loadLoadtest(state) {
  const body = document.getElementById('loadtest-body');
  document.getElementById('loadtest-refresh').hidden = !state.operator;
  if (!state.operator) { clear(body, note(NEEDS_OPERATOR)); return; }
  clear(body, loading());
  try {
    clear(body, report(await get('/v1/loadtest')));
  } catch (err) {
    if (err.status === 404) clear(body, note('No load test report yet. Run `mcp-router loadtest --concurrency 16 --duration 30` against this router, then refresh.'));
    else clear(body, errorBox(err, 'Could not load the load test report:'));
  }
}

function counts(title, obj) {
  const entries = obj && typeof obj === 'object' ? Object.entries(obj) : [];
  if (!entries.length) return null;
  return el('table', { class: 'small-table' }, el('caption', null, title),
    el('tbody', null, entries.sort((a, b) => b[1] - a[1]).map(([k, v]) => el('tr', null, el('th', { scope: 'row' }, k), el('td', { class: 'num' }, num(v))))));
}

function report(r) {
  const lat = r.latency_ms && typeof r.latency_ms === 'object' ? r.latency_ms : {};
  const timeline = Array.isArray(r.timeline) ? r.timeline.filter((p) => p && isNum(p.t)) : [];
  const summary = el('table', { class: 'summary' }, el('tbody', null, [
    ['target', String(r.url ?? '')], ['finished', when(r.finished_at)], ['concurrency', num(r.concurrency)], ['duration', `${num(r.elapsed_s, 1)} s`],
    ['requests', num(r.requests)], ['ok', num(r.ok)], ['errors', num(r.errors)], ['throughput', `${num(r.throughput_rps, 1)} req/s`],
    ...['p50', 'p95', 'p99', 'max'].map((k) => [`latency ${k}`, ms(lat[k])]),
  ].map(([k, v]) => el('tr', null, el('th', { scope: 'row' }, k), el('td', null, v)))));
  const charts = timeline.length ? [
    timeChart([
      { name: 'requests/s', cls: 's-rps', points: timeline.map((p) => [p.t, p.rps]) },
      { name: 'errors', cls: 's-err', bars: true, points: timeline.map((p) => [p.t, p.errors]) },
    ], { title: 'Throughput (req/s) and errors per interval', yFormat: (v) => num(v, 1) }),
    timeChart([
      // A second in which no request started has no latency.
      ...['p50', 'p95', 'p99'].map((k) => ({ name: k, cls: `s-${k}`,
        points: timeline.filter((p) => isNum(p[`${k}_ms`])).map((p) => [p.t, p[`${k}_ms`]]) })),
    ], { title: 'Latency percentiles', yFormat: ms }),
  ] : [note('The report has no timeline.')];
  return el('div', { class: 'loadtest' },
    el('div', { class: 'charts' }, charts),
    el('div', { class: 'lt-tables' }, summary, counts('Errors by status', r.errors_by_status), counts('Errors by cause', r.errors_by_cause)));
}

