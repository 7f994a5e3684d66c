// Route explorer: explain (POST /v1/route), run (POST /v1/query), and feedback on the decision.

import { post } from './api.js';
import { el, clear, badge, errorBox, num, ms, pct, isNum, kv, json, loading } from './dom.js';
import { bar, signedBar, attemptTimeline, stageBar } from './charts.js';

const VERDICTS = ['route', 'no_match', 'ambiguous'];
const COMPONENTS = ['dense_norm', 'bm25_norm', 'hybrid', 'intent_bonus', 'learned', 'match', 'health', 'perf', 'composite', 'confidence', 'tool_confidence'];
const SIGNED = ['intent_bonus', 'learned'];

let state;

export function initExplorer(appState) {
  state = appState;
  const form = document.getElementById('explorer-form');
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const action = ev.submitter && ev.submitter.value === 'run' ? 'run' : 'explain';
    if (!form.reportValidity()) return;
    (action === 'run' ? run : explain)(readForm());
  });
}

export function fillBackendSelects() {
  const names = (state.backends || []).map((b) => String(b.name));
  for (const select of document.querySelectorAll('select[data-backends], #q-backend')) {
    const keep = select.value;
    const first = select.firstElementChild;
    clear(select, first, names.map((n) => el('option', { value: n }, n)));
    if (names.includes(keep)) select.value = keep;
  }
}

export function prefill(question) {
  const q = document.getElementById('q-question');
  q.value = question;
  clear(document.getElementById('explorer-result'));
  q.focus();
}

function readForm() {
  const f = document.getElementById('explorer-form');
  const v = (name) => f.elements[name].value.trim();
  return { question: f.elements.question.value, intent: v('intent'), mode: v('mode'), backend: v('backend') };
}

function setBusy(on) {
  for (const b of document.querySelectorAll('#explorer-form button')) b.disabled = on;
}

async function explain(form) {
  const out = document.getElementById('explorer-result');
  clear(out, loading('Explaining…'));
  setBusy(true);
  const body = { question: form.question, k: 10 };
  if (form.intent) body.intent = form.intent;
  if (form.backend) body.backend = form.backend;
  try {
    const r = await post('/v1/route', body);
    rememberIntents(r.intent_scores);
    clear(out,
      el('div', { class: `verdict v-${VERDICTS.includes(r.decision) ? r.decision : 'unknown'}` },
        el('h3', null, 'Verdict: ', badge('verdict', r.decision, VERDICTS, String(r.decision ?? '?').replace('_', ' '))),
        el('p', { class: 'verdict-msg' }, String(r.message ?? ''))),
      kv([['would', wouldDo(r)], ['confidence', pct(r.confidence)], ['intent', `${r.intent ?? '?'} (${r.intent_source ?? '?'})`], ['method', String(r.method ?? '')], ['decided in', ms(r.decision_ms)]]),
      intentScores(r.intent_scores),
      candidateTable(r.candidates, 'Candidates'));
  } catch (err) {
    clear(out, errorBox(err, 'Explain failed:'));
  } finally { setBusy(false); }
}

// What /v1/query would do with the question: the calls in order, or the refusal's status and type.
function wouldDo(r) {
  const calls = Array.isArray(r.calls) ? r.calls.map(String) : [];
  const given = r.arguments && typeof r.arguments === 'object' ? ` with ${JSON.stringify(r.arguments)}` : '';
  if (calls.length) return `call ${calls.join(', then ')}${given}`;
  return `answer ${r.status ?? '?'} ${r.error ?? ''}`.trim();
}

function rememberIntents(scores) {
  if (!scores || typeof scores !== 'object') return;
  const list = document.getElementById('q-intents');
  if (list.childElementCount) return;
  for (const name of Object.keys(scores)) list.appendChild(el('option', { value: name }));
}

function intentScores(scores) {
  if (!scores || typeof scores !== 'object' || !Object.keys(scores).length) return null;
  const rows = Object.entries(scores).sort((a, b) => b[1] - a[1]);
  return el('details', { class: 'intent-scores' }, el('summary', null, 'Intent scores'),
    el('table', { class: 'scores' }, el('tbody', null, rows.map(([k, v]) => el('tr', null,
      el('th', { scope: 'row' }, k), el('td', null, bar(v, { width: 120 })), el('td', { class: 'num' }, num(v, 3)))))));
}

export function candidateTable(candidates, title) {
  const list = Array.isArray(candidates) ? candidates : [];
  const wrap = el('div', { class: 'candidates' }, el('h3', null, `${title} (${list.length})`));
  if (!list.length) { wrap.appendChild(el('p', { class: 'muted' }, 'No candidates.')); return wrap; }
  for (const c of list) {
    const s = c.scores && typeof c.scores === 'object' ? c.scores : {};
    const grid = el('div', { class: 'score-grid' });
    for (const k of COMPONENTS) {
      const v = s[k];
      grid.appendChild(el('div', { class: 'score-item' }, el('span', { class: 'score-name' }, k),
        SIGNED.includes(k) ? signedBar(v, { label: `${k} ${num(v, 3)}` }) : bar(v, { label: `${k} ${num(v, 3)}`, cls: `bar-fill score-${k}` }),
        el('span', { class: 'num' }, num(v, 3))));
    }
    const extra = [['dense', s.dense], ['bm25', s.bm25], ['server', s.server], ['examples', s.examples], ['nearest example', s.nearest_example], ['rejections', s.rejections], ['learned default', s.learned_default]]
      .filter(([, v]) => isNum(v)).map(([k, v]) => `${k} ${num(v, 3)}`).join(' · ');
    wrap.appendChild(el('div', { class: 'candidate' },
      el('div', { class: 'cand-head' },
        el('span', { class: 'rank' }, `#${num(c.rank)}`),
        el('strong', null, String(c.backend ?? '?')), ' / ', el('code', null, String(c.capability ?? '?')),
        ' ', el('span', { class: 'chip' }, String(c.kind ?? ''))),
      c.description ? el('p', { class: 'desc' }, String(c.description)) : null,
      c.placed ? el('p', { class: 'placed' }, `Placed before higher composites: ${String(c.placed)}`) : null,
      c.ruled_out ? el('p', { class: 'placed ruled-out' }, `Not called: ${String(c.ruled_out)}`) : null,
      grid,
      extra ? el('p', { class: 'small muted' }, extra) : null));
  }
  return wrap;
}

async function run(form) {
  const out = document.getElementById('explorer-result');
  clear(out, loading('Running…'));
  setBusy(true);
  const body = { question: form.question };
  for (const k of ['intent', 'mode', 'backend']) if (form[k]) body[k] = form[k];
  try {
    const r = await post('/v1/query', body);
    clear(out, answerView(r));
  } catch (err) {
    clear(out, queryError(err));
  } finally { setBusy(false); }
}

function answerView(r) {
  const routing = r.routing && typeof r.routing === 'object' ? r.routing : {};
  const box = el('div', { class: 'answer' },
    el('h3', null, 'Answer from ', el('strong', null, String(r.backend ?? '?')), ' / ', el('code', null, String(r.capability ?? '?')), ' ', el('span', { class: 'chip' }, String(r.kind ?? ''))),
    el('pre', { class: 'answer-text' }, String(r.answer ?? '')),
    kv([['mode', routing.mode && String(routing.mode)], ['intent', routing.intent && `${routing.intent} (${routing.intent_source ?? '?'})`],
      ['confidence', isNum(routing.confidence) ? pct(routing.confidence) : null],
      ['decision', ms(routing.decision_ms)], ['execution', ms(routing.execution_ms)], ['total', ms(routing.total_ms)],
      ['arguments from', routing.arguments_source && String(routing.arguments_source)], ['request', routing.request_id && String(routing.request_id)]]));
  if (routing.arguments) box.appendChild(el('details', null, el('summary', null, 'Arguments'), json(routing.arguments)));
  if (routing.stages_ms) box.appendChild(el('div', null, el('h4', null, 'Stages'), stageBar(routing.stages_ms)));
  if (Array.isArray(routing.attempts) && routing.attempts.length) box.appendChild(attempts(routing.attempts, routing.total_ms));
  if (routing.request_id) box.appendChild(feedbackControl(String(routing.request_id)));
  if (Array.isArray(routing.candidates) && routing.candidates.length) {
    box.appendChild(el('details', { class: 'more' }, el('summary', null, 'Candidates considered'), candidateTable(routing.candidates, 'Candidates')));
  }
  return box;
}

function attempts(list, total) {
  return el('div', { class: 'attempts' }, el('h4', null, 'Attempts'), attemptTimeline(list, total),
    el('ol', { class: 'small' }, list.map((a) => el('li', null, `${a.backend ?? '?'} / ${a.capability ?? '?'}: `,
      el('span', { class: `outcome outcome-${['success', 'error', 'timeout', 'cancelled', 'unavailable'].includes(a.outcome) ? a.outcome : 'unknown'}` }, String(a.outcome ?? '?')),
      ` after ${ms(a.latency_ms)}`, a.error_type ? el('code', null, ` ${a.error_type}`) : null, a.error ? `: ${a.error}` : ''))));
}

function queryError(err) {
  const d = err.details || {};
  const box = el('div', { class: 'query-error' }, errorBox(err, 'The router answered an error:'));
  const facts = kv([['tool', d.tool !== undefined ? String(d.tool) : null], ['backend', d.backend !== undefined ? String(d.backend) : null], ['field', d.field !== undefined ? String(d.field) : null]]);
  if (facts.childElementCount) box.appendChild(facts);
  if (d.schema) box.appendChild(el('details', { open: true }, el('summary', null, 'Input schema'), json(d.schema)));
  if (Array.isArray(d.attempts) && d.attempts.length) box.appendChild(attempts(d.attempts));
  if ((err.status === 404 || err.status === 409) && d.request_id) box.appendChild(feedbackControl(String(d.request_id)));
  if (Array.isArray(d.candidates)) box.appendChild(candidateTable(d.candidates, 'Closest candidates'));
  return box;
}

// "Right" / "Wrong, it should have been <backend> <tool>" for one request id.
export function feedbackControl(requestId, { compact = false } = {}) {
  const id = `fb-${Math.random().toString(36).slice(2, 9)}`;
  const result = el('span', { class: 'fb-result', 'aria-live': 'polite' });
  const backendSel = el('select', { id: `${id}-b`, 'data-backends': '' }, el('option', { value: '' }, '(backend)'),
    (state.backends || []).map((b) => el('option', { value: String(b.name) }, String(b.name))));
  const toolIn = el('input', { id: `${id}-t`, type: 'text', placeholder: 'tool (optional)', spellcheck: 'false', maxlength: '256' });
  const wrongForm = el('div', { class: 'fb-wrong', hidden: true },
    el('label', { for: `${id}-b` }, 'should have been'), backendSel,
    el('label', { for: `${id}-t`, class: 'sr-only' }, 'tool'), toolIn,
    el('button', { type: 'button', on: { click: () => {
      if (!backendSel.value) { clear(result, el('span', { class: 'error-text' }, 'Choose the backend that should have answered.')); backendSel.focus(); return; }
      const body = { request_id: requestId, correct: false, backend: backendSel.value };
      if (toolIn.value.trim()) body.tool = toolIn.value.trim();
      send(body);
    } } }, 'Send correction'));
  const buttons = [
    el('button', { type: 'button', class: 'fb-right', on: { click: () => send({ request_id: requestId, correct: true }) } }, 'Right'),
    el('button', { type: 'button', class: 'fb-wrong-btn', 'aria-expanded': 'false', on: { click: (ev) => {
      wrongForm.hidden = !wrongForm.hidden;
      ev.currentTarget.setAttribute('aria-expanded', String(!wrongForm.hidden));
      if (!wrongForm.hidden) backendSel.focus();
    } } }, compact ? 'Wrong…' : 'Wrong, it should have been…'),
  ];
  async function send(body) {
    clear(result, 'sending…');
    try {
      const r = await post('/v1/feedback', body);
      const stored = Array.isArray(r && r.stored) ? r.stored : [];
      clear(result, el('span', { class: 'ok-text' }, `Stored ${stored.length} example${stored.length === 1 ? '' : 's'}`),
        stored.length ? `: ${stored.map(describeStored).join('; ')}` : '');
      wrongForm.hidden = true;
    } catch (err) {
      clear(result, errorBox(err));
    }
  }
  return el('div', { class: compact ? 'feedback compact' : 'feedback' },
    compact ? null : el('h4', null, 'Was this routed right?'),
    el('div', { class: 'fb-row' }, buttons, wrongForm), result);
}

function describeStored(e) {
  if (!e || typeof e !== 'object') return String(e);
  const label = e.label === 1 ? '+' : e.label === -1 ? '−' : '';
  return `${label}${e.backend ?? ''}${e.name ? `/${e.name}` : ''}`;
}
