// The API client: JSON over same-origin fetch, the session on every
// request and the CSRF token on every write (SPEC S2, V1), errors as
// `ApiError`s said in the analyst's words (`errorText`), and the server's
// rate guard (SPEC T5) waited out.
//
// The session is no cookie: cookies are not scoped by port, so every
// program listening on another port of 127.0.0.1 that this browser visits
// would receive it. It lives in this origin's storage — scheme, host and
// port — and is sent by this script alone, as `Authorization: Bearer`.

import { t } from './i18n.js';

// Longest wait for one API answer.
const REQUEST_TIMEOUT_MS = 20000;

// Where this origin keeps the session (localStorage: every tab of this
// origin shares it, no other origin can read it).
const SESSION_KEY = 'labfy.session';

// The session's CSRF token, once the page has it (`setCsrf`).
let csrf = null;

export function setCsrf(token) {
  csrf = token || null;
}

export function csrfToken() {
  return csrf;
}

// Takes a session the server handed to this page (the answer to a login
// link carries it in a meta tag) into this origin's storage; true when
// there was one.
export function adoptSession() {
  const meta = document.querySelector('meta[name="labfy-session"]');
  const value = meta ? meta.getAttribute('content') : '';
  if (meta) meta.remove();
  if (!value || value.includes('{{')) return false;
  try {
    localStorage.setItem(SESSION_KEY, value);
  } catch {
    return false;
  }
  return true;
}

export function sessionToken() {
  try {
    return localStorage.getItem(SESSION_KEY);
  } catch {
    return null;
  }
}

export function forgetSession() {
  try {
    localStorage.removeItem(SESSION_KEY);
  } catch {
    // Storage refused: nothing was kept either.
  }
}

// The headers every request of the page carries: its session.
export function authHeaders() {
  const token = sessionToken();
  return token ? { Authorization: `Bearer ${token}` } : {};
}

export class ApiError extends Error {
  constructor(status, code, message, retryAfter) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
  }
}

export function errorText(err) {
  if (err instanceof ApiError) {
    if (err.status === 401) return t('err_session');
    if (err.status === 429) return t('err_rate', { s: err.retryAfter || '?' });
    if (err.code === 'NOT_ADMITTED') return t('err_not_admitted', { message: err.message });
    return t('err_api', { status: err.status, code: err.code, message: err.message });
  }
  if (err && err.name === 'AbortError') return t('err_timeout');
  if (err && err.name === 'TypeError') return t('err_network', { message: err.message });
  return t('err_unexpected');
}

// The server's rate guard on writes (SPEC T5) answers 429 with Retry-After;
// the UI's own writes wait that long and try again, a few times, so that an
// analyst's burst (notes, an import of many batches) is paced rather than
// failed. A longer wait, or a fourth 429, is reported.
const RATE_RETRIES = 3;
const RATE_MAX_WAIT_S = 10;

export async function paced(send) {
  for (let attempt = 0; ; attempt += 1) {
    try {
      return await send();
    } catch (err) {
      const wait = err instanceof ApiError && err.status === 429 ? Number(err.retryAfter) : NaN;
      if (!(wait > 0 && wait <= RATE_MAX_WAIT_S) || attempt >= RATE_RETRIES) throw err;
      await new Promise((ok) => setTimeout(ok, wait * 1000));
    }
  }
}

export function api(path, options = {}) {
  return (options.method ?? 'GET') === 'GET' ? apiOnce(path, options) : paced(() => apiOnce(path, options));
}

async function apiOnce(path, { method = 'GET', body } = {}) {
  const headers = { Accept: 'application/json', ...authHeaders() };
  if (method !== 'GET') {
    headers['Content-Type'] = 'application/json';
    const token = csrfToken();
    if (token) headers['X-CSRF-Token'] = token;
  }
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), REQUEST_TIMEOUT_MS);
  let res;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'omit',
      cache: 'no-store',
      redirect: 'error',
      signal: controller.signal,
    });
  } finally {
    clearTimeout(timer);
  }
  let data = null;
  const text = await res.text();
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!res.ok) {
    const e = data && typeof data === 'object' && data.error ? data.error : {};
    throw new ApiError(res.status, String(e.code ?? 'http_error'),
      String(e.message ?? res.statusText ?? ''), res.headers.get('Retry-After'));
  }
  // 204 (a deletion) answers nothing, on purpose.
  if (res.status === 204) return {};
  if (data === null || typeof data !== 'object') {
    throw new ApiError(res.status, 'bad_response', t('err_unexpected'));
  }
  return data;
}

// A file the server sends (an export's archive, an evidence's original):
// fetched with the session, then handed to the browser as a download under
// the name the server gave it. A plain link cannot carry the session.
export async function download(path, fallbackName) {
  const res = await fetch(path, { headers: authHeaders(), credentials: 'omit', cache: 'no-store', redirect: 'error' });
  if (!res.ok) {
    let e = {};
    try {
      e = (await res.json()).error ?? {};
    } catch {
      e = {};
    }
    throw new ApiError(res.status, String(e.code ?? 'http_error'), String(e.message ?? res.statusText ?? ''), res.headers.get('Retry-After'));
  }
  const blob = await res.blob();
  const url = URL.createObjectURL(blob);
  const a = document.createElement('a');
  a.href = url;
  a.download = fileNameOf(res.headers.get('Content-Disposition')) || fallbackName || '';
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}

// The file name of a `Content-Disposition` header (`filename*=UTF-8''…`
// first, then `filename="…"`), or ''.
export function fileNameOf(header) {
  if (!header) return '';
  const star = /filename\*\s*=\s*UTF-8''([^;]+)/i.exec(header);
  if (star) {
    try {
      return decodeURIComponent(star[1].trim());
    } catch {
      // Not percent-encoding: fall back to the plain name.
    }
  }
  const plain = /filename\s*=\s*"([^"]*)"/i.exec(header) || /filename\s*=\s*([^;]+)/i.exec(header);
  return plain ? plain[1].trim() : '';
}
