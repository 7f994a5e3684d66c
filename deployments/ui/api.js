// Talking to the router: the API key (in this page's memory only), fetch with errors made visible.
// Not in sessionStorage: any page of the router's origin opened in the tab could read it there, /docs
// among them, whose Swagger UI FastAPI loads from a CDN.

let apiKey = '';

// The router serves the console at <prefix>/ui/; the API is at <prefix>/v1/...
const BASE = location.pathname.replace(/\/ui(\/.*)?$/, '');

const authListeners = [];
export function onUnauthenticated(fn) { authListeners.push(fn); }

export function hasKey() { return apiKey !== ''; }

export function setKey(value) {
  const key = String(value || '').trim();
  // A header value must be visible ASCII; anything else would make fetch throw on every call.
  if (!/^[\x21-\x7e]+$/.test(key)) throw new Error('An API key is visible ASCII characters without spaces.');
  apiKey = key;
}

export function forgetKey() {
  apiKey = '';
}

export class ApiError extends Error {
  constructor(status, type, message, details, requestId, retryAfter) {
    super(message);
    this.status = status;             // 0: no HTTP answer at all
    this.type = type;
    this.details = details || {};
    this.requestId = requestId || null;
    this.retryAfter = retryAfter || null;
  }
}

function describeDetail(detail) {
  // FastAPI's own errors (e.g. an unknown path) are {"detail": ...}.
  if (typeof detail === 'string') return detail;
  if (Array.isArray(detail)) {
    return detail.map((d) => (d && typeof d === 'object' ? `${(d.loc || []).join('.')}: ${d.msg || ''}` : String(d))).join('; ');
  }
  return JSON.stringify(detail);
}

export async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  if (apiKey) headers.Authorization = `Bearer ${apiKey}`;
  const init = { method, headers, cache: 'no-store', credentials: 'same-origin' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(BASE + path, init);
  } catch (err) {
    throw new ApiError(0, 'network_error', `Could not reach the router (${err && err.message ? err.message : 'network error'}).`);
  }
  const text = await response.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch (_) { data = null; }
  }
  if (response.ok) {
    if (text && data === null) throw new ApiError(response.status, 'bad_response', `${method} ${path} answered something that is not JSON.`);
    return data;
  }
  const e = data && typeof data === 'object' && data.error && typeof data.error === 'object' ? data.error : null;
  let type = e && typeof e.type === 'string' ? e.type : `http_${response.status}`;
  let message = e && typeof e.message === 'string' ? e.message : '';
  if (!message && data && data.detail !== undefined) message = describeDetail(data.detail);
  if (!message) message = `${method} ${path} answered ${response.status} ${response.statusText || ''}`.trim();
  const err = new ApiError(response.status, type, message, e && e.details, e && e.request_id,
    response.headers.get('Retry-After'));
  if (response.status === 401) authListeners.forEach((fn) => fn(err));
  throw err;
}

export const get = (path) => api('GET', path);
export const post = (path, body) => api('POST', path, body);
export const del = (path) => api('DELETE', path);
export const enc = encodeURIComponent;
