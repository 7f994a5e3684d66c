// Backends view: one card per backend, and for operators per-intent latency sparklines and success bars.

import { get } from './api.js';
import { el, clear, when, badge, errorBox, note, num, ms, pct, isNum, loading } from './dom.js';
import { sparkline, bar } from './charts.js';

const HEALTH = ['starting', 'healthy', 'degraded', 'down', 'ejected'];
const HEALTH_LABEL = { degraded: 'half-open' };
const KINDS = ['mcp_stdio', 'mcp_http', 'flowise', 'langflow'];

export function healthBadge(health) {
  const b = badge('health', health, HEALTH, HEALTH_LABEL[health] || health);
  if (HEALTH_LABEL[health]) b.setAttribute('title', `health: ${health}`);
  return b;
}

let busy = false;

export async function loadBackends(state) {
  if (busy) return;
  busy = true;
  const status = document.getElementById('backends-status');
  const list = document.getElementById('backends-list');
  if (!list.childElementCount) clear(status, loading());
  try {
    const [backends, stats] = await Promise.all([
      get('/v1/backends'),
      state.operator ? get('/v1/stats').catch((err) => ({ error: err })) : Promise.resolve(null),
    ]);
    state.backends = Array.isArray(backends) ? backends : [];
    clear(status);
    if (stats && stats.error) status.appendChild(errorBox(stats.error, 'Stats:'));
    else if (!state.operator) status.appendChild(note('Performance charts (GET /v1/stats) need the operator right.', 'info'));
    renderBackends(list, state.backends, stats && !stats.error ? stats : null);
    clear(document.getElementById('backends-updated'), 'updated ', when(Date.now() / 1000));
    state.onBackends();
  } catch (err) {
    clear(status, errorBox(err, 'Could not load backends:'));
  } finally {
    busy = false;
  }
}

function counts(b) {
  const parts = [['tools', b.tool_count], ['prompts', b.prompt_count], ['resources', b.resource_count], ['flows', b.flow_count]];
  return el('ul', { class: 'counts' }, parts.filter(([, v]) => isNum(v)).map(([k, v]) => el('li', null, el('strong', null, num(v)), ` ${k}`)));
}

function toolList(title, items, describe) {
  if (!Array.isArray(items) || !items.length) return null;
  return el('div', { class: 'tool-list' }, el('h4', null, `${title} (${items.length})`),
    el('ul', null, items.map((t) => el('li', null, el('code', null, String(t.tool ?? '?')), ' ', el('span', { class: 'muted' }, String(t.kind ?? '')), ' ', describe(t)))));
}

function rules(list) {
  return Array.isArray(list) && list.length ? el('span', { class: 'rules' }, list.map((r) => el('span', { class: 'chip' }, String(r)))) : null;
}

function renderBackends(list, backends, stats) {
  clear(list);
  if (!backends.length) { list.appendChild(note('No backends are configured (or none is visible to this key).')); return; }
  for (const b of backends) list.appendChild(card(b, stats));
}

function card(b, stats) {
  const kind = KINDS.includes(b.kind) ? b.kind : 'other';
  const why = [];
  if (b.health === 'ejected' && isNum(b.ejected_until)) why.push(el('li', null, 'ejected until ', when(b.ejected_until)));
  if (b.last_error) {
    why.push(el('li', { class: 'error-text' }, 'last error ', isNum(b.last_error_at) ? when(b.last_error_at) : null, ': ', el('span', { class: 'msg' }, String(b.last_error))));
  }
  if (isNum(b.consecutive_failures) && b.consecutive_failures > 0) why.push(el('li', null, `${b.consecutive_failures} consecutive failure${b.consecutive_failures === 1 ? '' : 's'}`));
  if (b.catalog_error) why.push(el('li', { class: 'error-text' }, 'catalog rejected: ', el('span', { class: 'msg' }, String(b.catalog_error))));
  const c = el('article', { class: `card kind-${kind} ${badgeClass(b.health)}` },
    el('header', { class: 'card-head' },
      el('h3', null, String(b.name ?? '?')),
      healthBadge(b.health),
      isNum(b.health_since) ? el('span', { class: 'muted small' }, 'since ', when(b.health_since)) : null),
    el('p', { class: 'meta' }, el('code', null, String(b.kind ?? '?')), ' · ', String(b.transport ?? ''), b.node_id ? ` · node ${String(b.node_id).slice(0, 12)}` : ''),
    b.description ? el('p', { class: 'desc' }, String(b.description)) : null,
    counts(b),
    why.length ? el('ul', { class: 'why' }, why) : null,
    el('p', { class: 'small muted' }, b.catalog_refreshed_at !== undefined ? ['catalog refreshed ', when(b.catalog_refreshed_at), ' · '] : null,
      'checked ', when(b.last_check_at)),
    Array.isArray(b.sanitized) && b.sanitized.length ? el('p', { class: 'small' }, 'sanitized: ', b.sanitized.map((s) => el('span', { class: 'chip' }, String(s)))) : null,
    toolList('Held out of routing', b.held_tools, (t) => el('span', null, String(t.reason ?? ''),
      Array.isArray(t.changed) && t.changed.length ? ` (changed: ${t.changed.join(', ')})` : '', rules(t.rules))),
    toolList('Flagged', b.flagged_tools, (t) => rules(t.rules)));
  if (stats) c.appendChild(perf(b.name, stats));
  return c;
}

function badgeClass(health) { return HEALTH.includes(health) ? `card-${health}` : 'card-unknown'; }

function perf(name, stats) {
  const series = (stats.series || []).filter((s) => s && s.backend === name);
  const extra = stats.backends && stats.backends[name];
  const box = el('div', { class: 'perf' });
  if (extra) {
    box.appendChild(el('p', { class: 'small muted' }, `in flight ${num(extra.inflight)} · ejections ${num(extra.ejections)}`));
  }
  if (!series.length) { box.appendChild(el('p', { class: 'small muted' }, 'No calls recorded yet.')); return box; }
  const table = el('table', { class: 'perf-table' },
    el('thead', null, el('tr', null, ['intent', 'calls', 'latency', 'success', 'p95'].map((h) => el('th', { scope: 'col' }, h)))));
  const body = el('tbody');
  for (const s of series) {
    const errs = s.errors && typeof s.errors === 'object' ? Object.entries(s.errors) : [];
    body.appendChild(el('tr', null,
      el('td', null, String(s.intent ?? '')),
      el('td', { class: 'num' }, num(s.calls)),
      el('td', null, sparkline(s.recent, 90, 26)),
      el('td', null, bar(s.success_rate, { cls: s.success_rate >= 0.9 ? 'bar-good' : s.success_rate >= 0.6 ? 'bar-warn' : 'bar-bad', marker: s.success_rate_10, width: 56, label: `success ${pct(s.success_rate)}, last 10 ${pct(s.success_rate_10)}` }),
        ' ', el('span', { class: 'small' }, pct(s.success_rate))),
      el('td', { class: 'num', title: `mean ${ms(s.mean_latency_ms)}` }, ms(s.p95_latency_ms), el('div', { class: 'small muted' }, `perf ${num(s.perf_score)}`))));
    if (errs.length) {
      body.appendChild(el('tr', { class: 'err-row' }, el('td', { colspan: '5', class: 'small error-text' },
        'errors: ', errs.map(([k, v]) => `${k} ×${num(v)}`).join(', '))));
    }
  }
  table.appendChild(body);
  box.appendChild(table);
  return box;
}
