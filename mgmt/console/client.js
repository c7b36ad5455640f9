// The management API client: HTTP basic credentials kept in this tab's
// sessionStorage (never in the URL), JSON in and out, errors as ApiError.

const KEY = 'warren.credentials';

export class ApiError extends Error {
  constructor(status, error, reason) {
    super(reason || error || `HTTP ${status}`);
    this.status = status;
    this.error = error;
  }
}

let onUnauthorised = () => {};

// setUnauthorisedHandler sets what happens when the API refuses the
// stored credentials (the console goes back to the log-in form).
export function setUnauthorisedHandler(fn) { onUnauthorised = fn; }

function basic(user, pass) {
  const bytes = new TextEncoder().encode(`${user}:${pass}`);
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return 'Basic ' + btoa(bin);
}

export function storeCredentials(user, pass) {
  sessionStorage.setItem(KEY, JSON.stringify({ user, auth: basic(user, pass) }));
}

export function clearCredentials() { sessionStorage.removeItem(KEY); }

export function credentials() {
  try { return JSON.parse(sessionStorage.getItem(KEY) || 'null'); } catch { return null; }
}

// enc escapes one path segment ("/" is %2F, as the API wants vhosts).
export const enc = (s) => encodeURIComponent(s);

// api calls the management API: method, a path under /api, and options
// body (JSON-encoded unless a string), headers, text (answer as text).
export async function api(method, path, opts = {}) {
  const c = credentials();
  const headers = { ...(opts.headers || {}) };
  if (c) headers.Authorization = c.auth;
  let body;
  if (opts.body !== undefined) {
    body = typeof opts.body === 'string' ? opts.body : JSON.stringify(opts.body);
    headers['Content-Type'] = 'application/json';
  }
  const res = await fetch('/api' + path, { method, headers, body, cache: 'no-store', credentials: 'omit' });
  const text = await res.text();
  if (!res.ok) {
    let err = '', reason = '';
    try { ({ error: err, reason } = JSON.parse(text)); } catch { reason = text; }
    if (res.status === 401 && c && !opts.noLogout && (err === 'not_authorized' || !err)) onUnauthorised();
    throw new ApiError(res.status, err, reason);
  }
  if (opts.text) return text;
  return text ? JSON.parse(text) : null;
}

export const get = (path, opts) => api('GET', path, opts);

// query builds a query string from the defined, non-empty values of o.
export function query(o) {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(o)) if (v !== undefined && v !== null && v !== '') p.set(k, String(v));
  const s = p.toString();
  return s ? '?' + s : '';
}
