// The API client: JSON over same-origin fetch, the CSRF token on every
// write (SPEC S2), errors as `ApiError`s said in the analyst's words
// (`errorText`), and the server's rate guard (SPEC T5) waited out.

import { t } from './i18n.js';

// Longest wait for one API answer.
const REQUEST_TIMEOUT_MS = 20000;

// The session's CSRF token, once the page has it (`setCsrf`).
let csrf = null;

export function setCsrf(token) {
  csrf = token || null;
}

export function csrfToken() {
  return csrf || metaToken();
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
    return t('err_api', { status: err.status, code: err.code, message: err.message });
  }
  if (err && err.name === 'AbortError') return t('err_timeout');
  if (err && err.name === 'TypeError') return t('err_network', { message: err.message });
  return t('err_unexpected');
}

export function metaToken() {
  const meta = document.querySelector('meta[name="csrf-token"]');
  const value = meta ? meta.getAttribute('content') : '';
  return value && !value.includes('{{') ? value : null;
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
  const headers = { Accept: 'application/json' };
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
      credentials: 'same-origin',
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
