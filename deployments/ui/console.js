// Entry point: who am I, the API key, hash routing between the four views, auto-refresh.

import { get, setKey, forgetKey, hasKey, onUnauthenticated } from './api.js';
import { el, clear, tickTimes } from './dom.js';
import { loadBackends } from './backends.js';
import { initExplorer, fillBackendSelects } from './explorer.js';
import { loadDecisions, loadLoadtest } from './operator.js';

const VIEWS = ['backends', 'explorer', 'decisions', 'loadtest'];
const OPERATOR_VIEWS = ['decisions', 'loadtest'];
const state = { operator: false, whoami: null, whoamiError: null, backends: [], view: 'backends', onBackends: fillBackendSelects };

const $ = (id) => document.getElementById(id);

function authBanner(text) {
  const b = $('auth-banner');
  if (!text) { b.hidden = true; clear(b); return; }
  clear(b, text);
  b.hidden = false;
}

onUnauthenticated(() => {
  authBanner(hasKey()
    ? 'The router did not accept this API key (401). Enter a valid key above.'
    : 'This router needs an API key (401 unauthenticated). Enter it above.');
  // The key no longer works (expired, rotated): the auto-refresh stops asking with it, and the page is not
  // scrolled back to the key field every 5 s.
  state.whoami = null;
  state.operator = false;
  renderWhoami(null);
  $('api-key').focus({ preventScroll: true });
});

function renderWhoami(w, err) {
  const box = $('whoami');
  if (err) { clear(box, el('span', { class: 'error-text' }, `whoami failed: ${err.message}`)); return; }
  if (!w) { clear(box, el('span', { class: 'muted' }, 'not signed in')); return; }
  clear(box, el('strong', null, String(w.principal ?? '?')), ' · policy ', el('code', null, String(w.policy ?? '?')), ' · ',
    el('span', { class: w.operator ? 'badge role-op' : 'badge role-user' }, w.operator ? 'operator' : 'not operator'), ' · ',
    w.authenticated ? 'authenticated' : el('span', { class: 'muted' }, 'anonymous (no key needed)'));
}

async function whoami() {
  try {
    const w = await get('/v1/whoami');
    state.whoami = w;
    state.whoamiError = null;
    state.operator = !!(w && w.operator === true);
    authBanner(null);
    renderWhoami(w);
    return true;
  } catch (err) {
    state.whoami = null;
    state.operator = false;
    // Not the key's fault (429, 503 while a load test runs, the network): asked again, not left as "not operator".
    state.whoamiError = err.status !== 401 ? err : null;
    if (err.status !== 401) renderWhoami(null, err);
    return false;
  }
}

async function showView(name) {
  if (state.whoamiError) await whoami();
  state.view = VIEWS.includes(name) ? name : 'backends';
  for (const v of VIEWS) $(`view-${v}`).hidden = v !== state.view;
  for (const tab of document.querySelectorAll('.tab')) {
    const on = tab.getAttribute('data-view') === state.view;
    tab.setAttribute('aria-current', on ? 'page' : 'false');
    tab.classList.toggle('active', on);
    tab.classList.toggle('locked', OPERATOR_VIEWS.includes(tab.getAttribute('data-view')) && !state.operator);
  }
  load(state.view);
}

function load(view) {
  if (view === 'backends') return loadBackends(state);
  if (view === 'decisions') return loadDecisions(state);
  if (view === 'loadtest') return loadLoadtest(state);
  if (view === 'explorer' && !state.backends.length && state.whoami) return loadBackendsQuietly();
  return null;
}

async function loadBackendsQuietly() {
  try { state.backends = await get('/v1/backends') || []; fillBackendSelects(); } catch (_) { /* the explorer still works */ }
}

async function start() {
  await whoami();
  showView(location.hash.slice(1));
}

function init() {
  initExplorer(state);
  window.addEventListener('hashchange', () => showView(location.hash.slice(1)));
  for (const tab of document.querySelectorAll('.tab')) {
    tab.addEventListener('click', () => {
      const target = `#${tab.getAttribute('data-view')}`;
      if (location.hash === target) showView(target.slice(1)); else location.hash = target;
    });
  }
  $('key-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    const input = $('api-key');
    try { setKey(input.value); } catch (err) { authBanner(err.message); return; }
    input.value = '';
    input.placeholder = 'key set for this page';
    start();
  });
  $('forget-key').addEventListener('click', () => {
    forgetKey();
    $('api-key').value = '';
    $('api-key').placeholder = 'not needed on loopback';
    state.backends = [];
    clear($('backends-list'));
    start();
  });
  $('backends-refresh').addEventListener('click', () => loadBackends(state));
  $('decisions-refresh').addEventListener('click', () => loadDecisions(state));
  $('loadtest-refresh').addEventListener('click', () => loadLoadtest(state));
  // Auto-refresh backends every 5 s while that view is shown and the tab is visible.
  setInterval(() => {
    if (document.hidden) return;
    if (state.whoamiError) { showView(state.view); return; }
    if (state.view === 'backends' && state.whoami) loadBackends(state);
  }, 5000);
  setInterval(() => { if (!document.hidden) tickTimes(); }, 5000);
  start();
}

if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', init); else init();
