// Labfy browser UI: an investigation browser for the analyst.
//
// Rules this file keeps (SPEC S4 and the page's Content-Security-Policy):
// - every string that comes from the API reaches the DOM through
//   `textContent` or `createTextNode`; no innerHTML, insertAdjacentHTML,
//   outerHTML, document.write or eval anywhere;
// - no inline style: looks come from classes in app.css;
// - links only ever point at this page's own `#/...` routes.
//
// Single page with hash routing so the back button works:
//   #/                      overview of the current investigation
//   #/evidence/<ref>        evidence reader
//   #/node/<ref>            a graph node and its neighbours
//   #/provenance/<ref>      the provenance trail of an object

import { egoGraph } from './graph.js';
import { LOCALES, enumLabel, fmtBytes, fmtNumber, hasLabel, lang, switchLang, t, tn } from './i18n.js';
import { $, append, clear, cssToken, detailValue, displayKind, dl, emptyNote, h, hrefFor, isEvidence, objectLink, section, seg, shown, svgEl, timeEl } from './dom.js';
import { api, ApiError, csrfToken, errorText, metaToken, paced, setCsrf } from './api.js';
import { bindResources, renderResources, resBoot, resTable } from './resources.js';

const EXCERPT_PAGE = 4000;
const NEIGHBOURS_PAGE = 50;
const NEIGHBOURS_MAX = 500; // the server's bound on `limit`
const SEARCH_LIMIT = 20;
const SEARCH_MAX_CHARS = 256;
const NOTE_TITLE_MAX_CHARS = 200;
const NOTE_SOURCE = 'analyste:navigateur';
const CORRELATIONS_LIMIT = 20;
const PROVENANCE_DEPTH = 8;
// How long the page waits for the server to come back on another workspace (SPEC C1).
const WORKSPACE_SWITCH_TIMEOUT_MS = 60000;
const MARK_START = '\uE000';
const MARK_END = '\uE001';

// ---------------------------------------------------------------------------
// Language (the words themselves, and number and date formats: i18n.js)

function setLang(next) {
  if (!switchLang(next)) return;
  applyChrome();
  renderSearchResults();
  renderAgent();
  renderResources();
  renderEgress();
  route();
}

// ---------------------------------------------------------------------------
// Formatting

// ---------------------------------------------------------------------------
// Status line

function setStatus(text, kind = 'info') {
  const el = $('status');
  el.textContent = text || '';
  el.dataset.kind = kind;
  el.hidden = !text;
}

function clearStatus() {
  setStatus('');
}

function showError(err) {
  setStatus(errorText(err), 'error');
}

// ---------------------------------------------------------------------------
// State

const state = {
  workspaceId: null,
  isolation: null, // { isolated, detail } from the server, a kernel fact
  workspace: null,
  investigations: [],
  investigationId: null,
  bootError: null,
  booted: false,
  gen: 0, // bumped on every route; stale renders check it and stop
  leaveView: [], // what the shown view frees when another replaces it (a drawing)
  search: null, // { q, gen, loading, data, error }
  searchGen: 0,
};

// ---------------------------------------------------------------------------
// Chrome: header, labels, search box

function applyChrome() {
  document.documentElement.lang = lang;
  for (const el of document.querySelectorAll('[data-i18n]')) el.textContent = t(el.dataset.i18n);
  for (const el of document.querySelectorAll('[data-i18n-placeholder]')) el.placeholder = t(el.dataset.i18nPlaceholder);
  for (const el of document.querySelectorAll('[data-i18n-aria-label]')) el.setAttribute('aria-label', t(el.dataset.i18nAriaLabel));
  for (const btn of document.querySelectorAll('button[data-lang]')) {
    btn.setAttribute('aria-pressed', String(btn.dataset.lang === lang));
  }
  renderWorkspace();
}

function renderWorkspace() {
  const ws = state.workspace;
  $('workspace-name').textContent = ws ? String(ws.name ?? '') : '';
  const badge = $('workspace-class');
  if (ws && ws.class) {
    const cls = String(ws.class);
    badge.textContent = hasLabel(`class_${cls}`) ? t(`class_${cls}`) : cls;
    badge.className = `badge badge-${cssToken(cls)}`;
    badge.dataset.class = cls;
    badge.hidden = false;
  } else {
    badge.hidden = true;
  }
  const iso = $('isolation');
  if (state.isolation && typeof state.isolation.isolated === 'boolean') {
    // SPEC T1: a protection this platform could not give is said on the
    // badge itself, not only in its tooltip.
    const missing = Array.isArray(state.isolation.missing)
      ? state.isolation.missing.filter((c) => hasLabel(`missing_${c}`))
      : [];
    const absent = missing.length ? ` — ${t('missing_protections')} ${missing.map((c) => t(`missing_${c}`)).join(', ')}` : '';
    iso.textContent = t(state.isolation.isolated ? 'isolated' : 'not_isolated') + absent;
    iso.title = String(state.isolation.detail ?? '');
    iso.className = `badge ${state.isolation.isolated ? 'badge-isolated' : 'badge-not-isolated'}${missing.length ? ' badge-missing' : ''}`;
    iso.dataset.isolated = String(state.isolation.isolated);
    iso.hidden = false;
  } else {
    iso.hidden = true;
  }
  const picker = $('investigation-picker');
  const select = $('investigation-select');
  const shown = state.investigations.filter((i) => !i.archived_at || i.id === state.investigationId);
  if (shown.length > 1) {
    clear(select);
    for (const inv of shown) {
      const opt = h('option', { value: String(inv.id), text: inv.title ?? inv.id });
      opt.selected = inv.id === state.investigationId;
      select.append(opt);
    }
    picker.hidden = false;
  } else {
    picker.hidden = true;
  }
}

function bindChrome() {
  for (const btn of document.querySelectorAll('button[data-lang]')) {
    btn.addEventListener('click', () => setLang(btn.dataset.lang));
  }
  $('investigation-select').addEventListener('change', (ev) => {
    state.investigationId = ev.target.value;
    state.search = null;
    renderSearchResults();
    if (location.hash === '#/' || location.hash === '') route();
    else location.hash = '#/';
  });
  $('search-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    runSearch($('search-input').value);
  });
  window.addEventListener('hashchange', route);
}

// ---------------------------------------------------------------------------
// Search

async function runSearch(raw) {
  const q = raw.trim();
  const gen = ++state.searchGen;
  if (!q) {
    state.search = null;
    renderSearchResults();
    return;
  }
  if (Array.from(q).length > SEARCH_MAX_CHARS) {
    state.search = { q, loading: false, error: null, tooLong: true };
    renderSearchResults();
    return;
  }
  if (!state.investigationId) {
    state.search = { q, loading: false, error: null, noInvestigation: true };
    renderSearchResults();
    return;
  }
  state.search = { q, loading: true, data: null, error: null };
  renderSearchResults();
  try {
    const data = await api(`/api/v1/investigations/${seg(state.investigationId)}/search?q=${encodeURIComponent(q)}&limit=${SEARCH_LIMIT}`);
    if (gen !== state.searchGen) return;
    state.search = { q, loading: false, data, error: null };
  } catch (err) {
    if (gen !== state.searchGen) return;
    state.search = { q, loading: false, data: null, error: err };
    showError(err);
  }
  renderSearchResults();
}

// Split a snippet on U+E000 (match start) / U+E001 (match end) into text
// nodes and <mark> elements. Unbalanced markers are tolerated.
function snippetNodes(snippet) {
  const out = [];
  let buf = '';
  let inMark = false;
  const flush = () => {
    if (!buf) return;
    out.push(inMark ? h('mark', { text: buf }) : document.createTextNode(shown(buf)));
    buf = '';
  };
  for (const ch of String(snippet ?? '')) {
    if (ch === MARK_START) {
      flush();
      inMark = true;
    } else if (ch === MARK_END) {
      flush();
      inMark = false;
    } else {
      buf += ch;
    }
  }
  flush();
  return out;
}

function renderSearchResults() {
  const summary = $('search-summary');
  const list = clear($('search-results'));
  const s = state.search;
  summary.dataset.state = 'idle';
  if (!s) {
    summary.textContent = t('search_hint');
    return;
  }
  if (s.tooLong) {
    summary.textContent = t('search_too_long', { n: SEARCH_MAX_CHARS });
    summary.dataset.state = 'error';
    return;
  }
  if (s.noInvestigation) {
    summary.textContent = t('search_no_investigation');
    summary.dataset.state = 'error';
    return;
  }
  if (s.loading) {
    summary.textContent = t('search_loading', { q: s.q });
    summary.dataset.state = 'loading';
    return;
  }
  if (s.error) {
    summary.textContent = errorText(s.error);
    summary.dataset.state = 'error';
    return;
  }
  const hits = Array.isArray(s.data.hits) ? s.data.hits : [];
  summary.dataset.state = 'done';
  summary.textContent = hits.length ? tn('search_hits', hits.length, { q: s.q }) : t('search_none', { q: s.q });
  for (const hit of hits) {
    const metaParts = [hit.source, hit.mime].filter((x) => x !== null && x !== undefined && x !== '');
    list.append(h('li', null,
      h('a', { href: hrefFor(hit.id, 'evidence'), class: 'hit', testid: 'search-hit', dataset: { ref: String(hit.id) } },
        h('span', { class: 'hit-title', testid: 'search-hit-title', text: hit.title ?? hit.id }),
        h('span', { class: 'hit-meta' },
          h('span', { class: 'hit-source', text: metaParts.join(' · ') }),
          hit.collected_at ? timeEl(hit.collected_at) : null),
        h('span', { class: 'hit-snippet', testid: 'search-hit-snippet' }, snippetNodes(hit.snippet)))));
  }
  if (s.data.truncated) {
    list.append(h('li', { class: 'muted small', text: t('search_truncated') }));
  }
  if (Number.isInteger(s.data.ranked_among)) {
    list.append(h('li', { class: 'muted small', testid: 'search-ranked-among',
      text: t('search_ranked_among', { n: fmtNumber(s.data.ranked_among) }) }));
  }
}

// ---------------------------------------------------------------------------
// Routing

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, '');
  const slash = raw.indexOf('/');
  const name = slash < 0 ? raw : raw.slice(0, slash);
  let arg = slash < 0 ? '' : raw.slice(slash + 1);
  try {
    arg = decodeURIComponent(arg);
  } catch {
    // Keep the raw text; the API will answer 400/404 for a bad ref.
  }
  return { name, arg };
}

function beginView(className, testid) {
  const gen = ++state.gen;
  for (const free of state.leaveView.splice(0)) free();
  clearStatus();
  // What the last action said (a note saved, an entity merged) shows once
  // the view it led to starts.
  flushPendingStatus();
  const view = clear($('view'));
  view.className = `view ${className}`;
  view.dataset.view = testid;
  view.dataset.state = 'loading';
  view.append(h('p', { class: 'muted loading', testid: 'loading', text: t('loading') }));
  return { gen, view, live: () => gen === state.gen };
}

function finishView(ctx, ...children) {
  if (!ctx.live()) return false;
  clear(ctx.view);
  append(ctx.view, children);
  ctx.view.dataset.state = 'ready';
  return true;
}

function failView(ctx, err) {
  if (!ctx.live()) return;
  clear(ctx.view);
  ctx.view.dataset.state = 'error';
  ctx.view.append(h('div', { class: 'error-box', testid: 'view-error' },
    h('p', { text: t('view_failed') }),
    h('a', { href: '#/', text: t('back_overview') })));
  showError(err);
}

function route() {
  if (!state.booted) return;
  const { name, arg } = parseHash();
  switch (name) {
    case '':
    case 'overview':
      return renderOverview();
    case 'evidence':
      return arg ? renderEvidence(arg) : renderOverview();
    case 'node':
      return arg ? renderNode(arg) : renderOverview();
    case 'provenance':
      return arg ? renderProvenance(arg) : renderOverview();
    case 'cases':
      return renderCases();
    case 'list':
      return renderList();
    default:
      renderOverview();
      setStatus(t('unknown_route'), 'info');
      return undefined;
  }
}

// ---------------------------------------------------------------------------
// Lists (SPEC U2): every count opens its list — `#/list/{what}?kind=&sort=&
// order=&prefix=` — sorted by a column header, filtered by kind or by the
// start of a title or name, paginated by key (`after`: the last item shown;
// earlier pages are remembered while the view lives).

const LISTS = ['evidence', 'entities', 'relations'];
const LIST_PAGE = 50;
const ENTITY_KINDS = ['person', 'organisation', 'location', 'domain', 'email', 'phone', 'url', 'ipv4', 'ipv6',
  'iban', 'btc_address', 'eth_address', 'onion', 'file_hash'];
// Columns: [label key, sort name or null, cell, cell class].
const LIST_COLUMNS = {
  evidence: [
    ['list_col_title', 'title', (e) => h('a', { href: hrefFor(e.id, 'evidence'), class: 'obj', testid: 'list-object', text: e.title })],
    ['list_col_mime', null, (e) => e.mime, 'nowrap'],
    ['list_col_size', null, (e) => fmtBytes(e.byte_len), 'nowrap num'],
    ['list_col_collected', 'collected', (e) => timeEl(e.collected_at), 'nowrap'],
  ],
  entities: [
    ['list_col_name', 'name', (e) => objectLink({ id: e.id, kind: 'entity', subkind: e.kind, label: e.name }, 'list-object')],
    ['list_col_pieces', 'mentions', (e) => fmtNumber(e.mention_count), 'nowrap num'],
  ],
  relations: [
    ['list_col_src', null, (r) => objectLink(r.src, 'list-object')],
    ['list_col_relation', null, (r) => enumLabel('rel', r.kind)],
    ['list_col_dst', null, (r) => objectLink(r.dst, 'list-object')],
    ['list_col_confidence', null, (r) => fmtNumber(r.confidence), 'nowrap num'],
    ['list_col_producer', null, (r) => enumLabel('producer', r.producer ?? 'specimen')],
    ['list_col_created', 'created', (r) => timeEl(r.created_at), 'nowrap'],
  ],
};
// Sorts whose natural order is newest or most first.
const LIST_DESC_FIRST = new Set(['collected', 'mentions', 'created']);

function listHref(what, params = {}) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v) q.set(k, v);
  const tail = q.toString();
  return `#/list/${what}${tail ? `?${tail}` : ''}`;
}

function listParams() {
  const raw = location.hash.replace(/^#\/?list\/?/, '');
  const at = raw.indexOf('?');
  const what = at < 0 ? raw : raw.slice(0, at);
  const q = new URLSearchParams(at < 0 ? '' : raw.slice(at + 1));
  return { what, kind: q.get('kind') || '', sort: q.get('sort') || '', order: q.get('order') || '', prefix: q.get('prefix') || '' };
}

async function renderList() {
  const p = listParams();
  if (!LISTS.includes(p.what)) {
    renderOverview();
    setStatus(t('unknown_route'), 'info');
    return;
  }
  const ctx = beginView('view-list', 'list');
  const inv = state.investigationId;
  const kindLabel = p.kind ? enumLabel(p.what === 'relations' ? 'rel' : 'kind', p.kind) : '';
  const title = p.kind ? t(`list_title_${p.what}_kind`, { kind: kindLabel }) : t(`list_title_${p.what}`);
  setTitle(title);
  const pages = [null]; // `after` of each page seen; the last is the one shown
  const tbody = h('tbody', { testid: 'list-rows' });
  const summary = h('p', { class: 'muted small', testid: 'list-summary', 'aria-live': 'polite' });
  const prev = h('button', { type: 'button', class: 'secondary', testid: 'list-prev', text: t('list_prev'), disabled: true });
  const next = h('button', { type: 'button', class: 'secondary', testid: 'list-next', text: t('list_next'), disabled: true });
  const error = h('p', { class: 'error-box', testid: 'list-error', role: 'alert', hidden: true });
  let nextCursor = null;
  let sortShown = p.sort;
  let orderShown = p.order;

  const columns = LIST_COLUMNS[p.what];
  const go = (change) => { location.hash = listHref(p.what, { kind: p.kind, sort: p.sort, order: p.order, prefix: p.prefix, ...change }); };
  const headRow = h('tr', null);
  const renderHead = () => {
    clear(headRow);
    for (const [key, sort] of columns) {
      if (!sort) {
        headRow.append(h('th', { scope: 'col', text: t(key) }));
        continue;
      }
      const active = sort === sortShown;
      const desc = orderShown === 'desc';
      const th = h('th', { scope: 'col', 'aria-sort': active ? (desc ? 'descending' : 'ascending') : 'none' });
      const button = h('button', { type: 'button', class: 'sort', testid: `list-sort-${sort}`, dataset: { active: String(active) } },
        t(key), active ? h('span', { 'aria-hidden': 'true', text: desc ? ' ↓' : ' ↑' }) : null);
      button.addEventListener('click', () => {
        // The same column again turns the order around; a new one starts in
        // its natural order. Only the text column keeps a text filter.
        const order = active ? (desc ? 'asc' : 'desc') : (LIST_DESC_FIRST.has(sort) ? 'desc' : 'asc');
        const textSort = sort === 'title' || sort === 'name';
        go({ sort, order, prefix: textSort ? p.prefix : '' });
      });
      th.append(button);
      headRow.append(th);
    }
  };

  const load = async () => {
    const after = pages[pages.length - 1];
    const q = new URLSearchParams({ limit: String(LIST_PAGE) });
    for (const k of ['kind', 'sort', 'order', 'prefix']) if (p[k]) q.set(k, p[k]);
    if (after) q.set('after', after);
    prev.disabled = true;
    next.disabled = true;
    error.hidden = true;
    ctx.view.dataset.state = 'loading';
    try {
      const page = await api(`/api/v1/investigations/${seg(inv)}/lists/${p.what}?${q}`);
      if (!ctx.live()) return;
      sortShown = page.sort;
      orderShown = page.order;
      renderHead();
      clear(tbody);
      const items = Array.isArray(page.items) ? page.items : [];
      for (const item of items) {
        tbody.append(h('tr', { testid: 'list-row', dataset: { ref: String(item.id) } },
          columns.map(([, , cell, cls]) => h('td', { class: cls }, cell(item)))));
      }
      if (items.length === 0) {
        tbody.append(h('tr', null, h('td', { colspan: String(columns.length), class: 'muted empty', testid: 'list-empty',
          text: p.prefix ? t('list_empty_prefix', { prefix: p.prefix }) : t('list_empty') })));
      }
      nextCursor = page.next ?? null;
      const n = pages.length;
      const from = (n - 1) * LIST_PAGE + 1;
      summary.textContent = items.length === 0 ? '' : t('list_range', {
        from: fmtNumber(from), to: fmtNumber(from + items.length - 1), page: fmtNumber(n),
      }) + (nextCursor ? '' : ` · ${t('list_end')}`);
      summary.dataset.shown = String(items.length);
      prev.disabled = n <= 1;
      next.disabled = !nextCursor;
      ctx.view.dataset.state = 'ready';
    } catch (err) {
      if (!ctx.live()) return;
      error.textContent = errorText(err);
      error.hidden = false;
      ctx.view.dataset.state = 'ready';
      prev.disabled = pages.length <= 1;
      showError(err);
    }
  };
  next.addEventListener('click', () => {
    if (!nextCursor) return;
    pages.push(nextCursor);
    load();
  });
  prev.addEventListener('click', () => {
    if (pages.length <= 1) return;
    pages.pop();
    load();
  });

  // Filters: the kind (entities, relations), the start of a title or name.
  const controls = h('form', { class: 'list-controls', testid: 'list-controls', autocomplete: 'off', novalidate: true });
  if (p.what !== 'evidence') {
    const kinds = p.what === 'entities' ? ENTITY_KINDS : RELATION_KINDS;
    const select = h('select', { id: 'list-kind', testid: 'list-kind' },
      h('option', { value: '', text: t('list_kind_all') }),
      kinds.map((k) => h('option', { value: k, text: enumLabel(p.what === 'relations' ? 'rel' : 'kind', k) })));
    select.value = p.kind;
    select.addEventListener('change', () => go({ kind: select.value }));
    controls.append(h('label', { for: 'list-kind', text: t('list_kind') }), select);
  }
  if (p.what !== 'relations') {
    const input = h('input', { id: 'list-prefix', testid: 'list-prefix', type: 'search', maxlength: '200', spellcheck: 'false',
      placeholder: t(p.what === 'evidence' ? 'list_prefix_title' : 'list_prefix_name') });
    input.value = p.prefix;
    controls.append(h('label', { for: 'list-prefix', text: t('list_prefix') }), input,
      h('button', { type: 'submit', testid: 'list-filter', text: t('list_filter') }));
    controls.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const prefix = input.value.trim();
      // A text filter lists in title or name order (the server's rule).
      go({ prefix, sort: prefix ? '' : p.sort, order: prefix ? '' : p.order });
    });
  }

  const shown = finishView(ctx,
    h('article', { class: 'list', testid: 'list-view', dataset: { list: p.what, kind: p.kind } },
      h('header', { class: 'view-head' },
        h('p', { class: 'eyebrow', text: t('list_eyebrow') }),
        h('h1', { testid: 'list-title', text: title })),
      h('section', { class: 'panel' },
        controls,
        h('div', { class: 'table-wrap' },
          h('table', { class: 'list-table', testid: 'list-table' }, h('thead', null, headRow), tbody)),
        error,
        h('div', { class: 'list-foot' }, summary, h('div', { class: 'list-pager' }, prev, next)))));
  if (!shown) return;
  renderHead();
  await load();
}

// ---------------------------------------------------------------------------
// Cases (SPEC C1): the investigations of the served workspace — created,
// renamed, archived, brought back, opened — the workspace renamed, a new
// REAL workspace created, another one opened, archived or brought back.

async function reloadInvestigations() {
  const { investigations = [] } = await api(`/api/v1/workspaces/${seg(state.workspaceId)}/investigations`);
  state.investigations = investigations;
  renderWorkspace();
}

function openInvestigation(id) {
  state.investigationId = id;
  state.search = null;
  renderSearchResults();
  renderWorkspace();
  location.hash = '#/';
}

function formSay(status) {
  return (text, kind) => {
    status.textContent = text;
    status.dataset.kind = kind;
    status.hidden = !text;
  };
}

// One workspace of the data directory: the open one marked; another one
// opened (the supervisor restarts the server on it), archived or brought back.
function workspaceRow(ws, refresh) {
  const name = String(ws.name ?? ws.id);
  const current = ws.id === state.workspaceId;
  const archived = Boolean(ws.archived_at);
  const ready = String(ws.status ?? '') === 'READY';
  const cls = String(ws.class ?? '');
  const actions = h('div', { class: 'form-actions case-actions' });
  if (!current && ready && !archived) {
    const open = h('button', { type: 'button', testid: 'ws-open', text: t('cases_ws_open') });
    open.addEventListener('click', async () => {
      open.disabled = true;
      try {
        await api(`/api/v1/workspaces/${seg(ws.id)}/open`, { method: 'POST' });
        await waitForWorkspace(ws.id, name);
      } catch (err) {
        showError(err);
        open.disabled = false;
      }
    });
    actions.append(open);
  }
  if (!current) {
    const archive = h('button', { type: 'button', class: 'secondary', testid: archived ? 'ws-unarchive' : 'ws-archive', text: t(archived ? 'cases_unarchive' : 'cases_archive') });
    archive.addEventListener('click', async () => {
      archive.disabled = true;
      try {
        await api(`/api/v1/workspaces/${seg(ws.id)}/archive`, { method: 'POST', body: { archived: !archived } });
        setStatus(t(archived ? 'cases_ws_unarchived_done' : 'cases_ws_archived_done', { name }), 'ok');
        await refresh();
      } catch (err) {
        showError(err);
        archive.disabled = false;
      }
    });
    actions.append(archive);
  }
  return h('li', { class: 'case', testid: 'ws-row', dataset: { ref: String(ws.id), current: String(current) } },
    h('div', { class: 'case-head' },
      h('strong', { class: 'case-title', testid: 'ws-name', text: name }),
      h('span', { class: `pill ${cls === 'REAL' ? 'status-running' : 'status-queued'}`, text: hasLabel(`class_${cls}`) ? t(`class_${cls}`) : cls }),
      current ? h('span', { class: 'pill status-succeeded', testid: 'ws-current', text: t('cases_ws_current') }) : null,
      archived ? h('span', { class: 'pill status-queued', testid: 'ws-archived', text: t('cases_ws_archived') }) : null,
      ready ? null : h('span', { class: 'pill status-queued', text: t('cases_ws_generating') })),
    h('p', { class: 'muted small' }, tn('cases_ws_investigations', Number(ws.investigation_count ?? 0)), ' · ', t('created_label'), ' ', timeEl(ws.created_at)),
    actions.childElementCount ? actions : null);
}

// After `POST …/open` (SPEC C1): the supervisor stops this server and starts
// one on the chosen workspace on the same port (the listening socket is the
// supervisor's, so requests wait rather than fail); the session cookie is
// the supervisor's and stays valid. The page waits for the new server to
// answer for that workspace, then reloads on it.
async function waitForWorkspace(id, name) {
  const message = h('p', { text: t('switch_wait') });
  const box = h('div', { class: 'switching', role: 'status', 'aria-live': 'polite', testid: 'ws-switching' },
    h('div', { class: 'switching-card' }, h('h2', { text: t('switch_heading', { name }) }), message));
  document.body.append(box);
  const deadline = Date.now() + WORKSPACE_SWITCH_TIMEOUT_MS;
  while (Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 500));
    try {
      const session = await api('/api/v1/session');
      if (session.workspace_id === id) {
        state.investigationId = null;
        location.hash = '#/';
        location.reload();
        return;
      }
    } catch {
      // The old server stopping, the new one starting: ask again.
    }
  }
  message.textContent = t('switch_failed', { name });
  const reload = h('button', { type: 'button', testid: 'ws-switch-reload', text: t('switch_reload') });
  reload.addEventListener('click', () => location.reload());
  box.firstChild.append(h('div', { class: 'form-actions' }, reload));
}

function caseRow(inv, refresh) {
  const archived = Boolean(inv.archived_at);
  const title = String(inv.title ?? inv.id);
  const rename = h('button', { type: 'button', class: 'secondary', testid: 'case-rename', text: t('cases_rename') });
  const archive = h('button', { type: 'button', class: 'secondary', testid: archived ? 'case-unarchive' : 'case-archive', text: t(archived ? 'cases_unarchive' : 'cases_archive') });
  const open = h('button', { type: 'button', testid: 'case-open', text: t('cases_open') });
  const row = h('li', { class: 'case', testid: 'case', dataset: { ref: String(inv.id), archived: String(archived) } },
    h('div', { class: 'case-head' },
      h('strong', { class: 'case-title', testid: 'case-title', text: title }),
      inv.id === state.investigationId ? h('span', { class: 'pill status-succeeded', text: t('cases_current') }) : null,
      archived ? h('span', { class: 'pill status-queued', testid: 'case-archived', text: t('cases_archived') }) : null),
    inv.summary ? h('p', { class: 'muted small', text: String(inv.summary) }) : null,
    h('p', { class: 'muted small' }, tn('cases_items', Number(inv.evidence_count ?? 0)), ' · ', t('created_label'), ' ', timeEl(inv.created_at)),
    h('div', { class: 'form-actions case-actions' }, open, rename, archive));
  open.addEventListener('click', () => openInvestigation(inv.id));
  archive.addEventListener('click', async () => {
    archive.disabled = true;
    try {
      await api(`/api/v1/investigations/${seg(inv.id)}/archive`, { method: 'POST', body: { archived: !archived } });
      setStatus(t(archived ? 'cases_unarchived_done' : 'cases_archived_done', { title }), 'ok');
      await refresh();
    } catch (err) {
      showError(err);
      archive.disabled = false;
    }
  });
  rename.addEventListener('click', () => {
    const input = h('input', { type: 'text', value: title, testid: 'case-rename-input', maxlength: '200', 'aria-label': t('cases_title') });
    const save = h('button', { type: 'button', testid: 'case-rename-save', text: t('cases_save') });
    const cancel = h('button', { type: 'button', class: 'secondary', text: t('cases_cancel') });
    const form = h('div', { class: 'case-rename' }, input, h('div', { class: 'form-actions case-actions' }, cancel, save));
    rename.disabled = true;
    row.append(form);
    input.focus();
    cancel.addEventListener('click', () => {
      form.remove();
      rename.disabled = false;
    });
    save.addEventListener('click', async () => {
      const next = input.value.trim();
      if (!next) {
        setStatus(t('cases_missing_title'), 'error');
        return;
      }
      save.disabled = true;
      try {
        await api(`/api/v1/investigations/${seg(inv.id)}/update`, { method: 'POST', body: { title: next } });
        setStatus(t('cases_renamed', { title: next }), 'ok');
        await refresh();
      } catch (err) {
        showError(err);
        save.disabled = false;
      }
    });
  });
  return row;
}

async function renderCases() {
  const ctx = beginView('view-cases', 'cases');
  setTitle(t('nav_cases'));
  if (state.bootError || !state.workspaceId) {
    failView(ctx, state.bootError ?? new ApiError(404, 'no_workspace', t('no_workspace'), null));
    return;
  }
  const list = h('ol', { class: 'rows cases', testid: 'cases' });
  const refresh = async () => {
    await reloadInvestigations();
    if (!ctx.live()) return;
    clear(list);
    // In use first, archived after, each oldest first.
    const sorted = [...state.investigations].sort((a, b) => Number(Boolean(a.archived_at)) - Number(Boolean(b.archived_at)));
    list.append(...sorted.map((i) => caseRow(i, refresh)));
  };
  try {
    await refresh();
  } catch (err) {
    failView(ctx, err);
    return;
  }

  // A new investigation.
  const title = h('input', { id: 'case-new-title', type: 'text', testid: 'case-new-title', maxlength: '200', autocomplete: 'off', required: true });
  const summary = h('textarea', { id: 'case-new-summary', rows: '2', testid: 'case-new-summary', maxlength: '2000' });
  const create = h('button', { type: 'submit', testid: 'case-create', text: t('cases_create') });
  const createStatus = h('p', { class: 'form-status', role: 'status', hidden: true });
  const createForm = h('form', { class: 'note-form', testid: 'case-new', novalidate: true },
    h('label', { for: 'case-new-title', text: t('cases_title') }), title,
    h('label', { for: 'case-new-summary', text: t('cases_summary') }), summary,
    h('div', { class: 'form-actions' }, create), createStatus);
  createForm.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const say = formSay(createStatus);
    if (!title.value.trim()) {
      say(t('cases_missing_title'), 'error');
      return;
    }
    create.disabled = true;
    try {
      const inv = await api(`/api/v1/workspaces/${seg(state.workspaceId)}/investigations`, {
        method: 'POST', body: { title: title.value.trim(), summary: summary.value.trim() },
      });
      await reloadInvestigations();
      setStatusAfterRoute(t('cases_created', { title: inv.title }), 'ok');
      openInvestigation(inv.id);
    } catch (err) {
      say(errorText(err), 'error');
      create.disabled = false;
    }
  });

  // Every workspace of the data directory.
  const wsList = h('ol', { class: 'rows cases', testid: 'ws-list' });
  const refreshWorkspaces = async () => {
    const { workspaces = [] } = await api('/api/v1/workspaces');
    if (!ctx.live()) return;
    clear(wsList);
    // The open one first, then in use, then archived.
    const rank = (w) => (w.id === state.workspaceId ? 0 : w.archived_at ? 2 : 1);
    wsList.append(...[...workspaces].sort((a, b) => rank(a) - rank(b)).map((w) => workspaceRow(w, refreshWorkspaces)));
  };
  try {
    await refreshWorkspaces();
  } catch (err) {
    failView(ctx, err);
    return;
  }

  // The workspace: its name; a new REAL one.
  const ws = state.workspace || {};
  const wsName = h('input', { id: 'case-ws-name', type: 'text', testid: 'case-ws-name', maxlength: '200', value: String(ws.name ?? '') });
  const wsSave = h('button', { type: 'submit', testid: 'case-ws-rename', text: t('cases_save') });
  const wsStatus = h('p', { class: 'form-status', role: 'status', hidden: true });
  const wsForm = h('form', { class: 'note-form', novalidate: true },
    h('label', { for: 'case-ws-name', text: t('cases_workspace_name') }), wsName,
    h('div', { class: 'form-actions' }, wsSave), wsStatus);
  wsForm.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const name = wsName.value.trim();
    const say = formSay(wsStatus);
    if (!name) return;
    wsSave.disabled = true;
    try {
      await api(`/api/v1/workspaces/${seg(state.workspaceId)}/rename`, { method: 'POST', body: { name } });
      state.workspace = { ...(state.workspace || {}), name };
      renderWorkspace();
      say(t('cases_workspace_renamed', { name }), 'ok');
    } catch (err) {
      say(errorText(err), 'error');
    } finally {
      wsSave.disabled = false;
    }
  });
  const newWs = h('input', { id: 'case-new-ws', type: 'text', testid: 'case-new-ws', maxlength: '200', autocomplete: 'off' });
  const newWsCreate = h('button', { type: 'submit', testid: 'case-ws-create', text: t('cases_workspace_create') });
  const newWsStatus = h('p', { class: 'form-status', testid: 'case-ws-status', role: 'status', hidden: true });
  const newWsForm = h('form', { class: 'note-form', novalidate: true },
    h('p', { class: 'muted small', text: t('cases_new_workspace_help') }),
    h('label', { for: 'case-new-ws', text: t('cases_workspace_name') }), newWs,
    h('div', { class: 'form-actions' }, newWsCreate), newWsStatus);
  newWsForm.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const name = newWs.value.trim();
    const say = formSay(newWsStatus);
    if (!name) return;
    newWsCreate.disabled = true;
    try {
      await api('/api/v1/workspaces', { method: 'POST', body: { name } });
      say(t('cases_workspace_created', { name }), 'ok');
      newWs.value = '';
      await refreshWorkspaces();
    } catch (err) {
      say(errorText(err), 'error');
    } finally {
      newWsCreate.disabled = false;
    }
  });

  finishView(ctx,
    h('article', { class: 'cases-view', testid: 'cases-view' },
      h('header', { class: 'view-head' },
        h('p', { class: 'eyebrow', text: t('cases_heading') }),
        h('h1', { text: String(ws.name ?? '') })),
      h('div', { class: 'grid' },
        h('div', { class: 'col' }, section('nav_cases', 'cases-panel', list)),
        h('div', { class: 'col' },
          section('cases_new', 'case-new-panel', createForm),
          section('cases_workspace', 'case-ws-panel', wsForm),
          section('cases_workspaces', 'ws-panel', wsList),
          section('cases_new_workspace', 'case-new-ws-panel', newWsForm)))));
}

function setTitle(...parts) {
  document.title = [...parts.filter(Boolean), 'Labfy'].join(' — ');
}

// ---------------------------------------------------------------------------
// Overview

// The appliance's processes as the supervisor reports them (all text via
// textContent, like everything else).
function renderProcesses(st) {
  if (!st || !Array.isArray(st.processes)) {
    return h('p', { class: 'muted', testid: 'processes-none', text: t('processes_none', { detail: String(st?.detail ?? '') }) });
  }
  return h('ol', { class: 'rows', testid: 'process-list' },
    ...st.processes.map((p) => {
      const role = String(p.role ?? '');
      const state = String(p.state ?? '');
      const detail = String(p.detail ?? '');
      // The supervisor's state in the chosen language; the process's own
      // words (English, from its code or its libraries) behind a toggle in
      // French (SPEC U4, U6: "running" and "not ready" are both said).
      const notReady = detail.startsWith('not ready');
      return h('li', { class: 'process', testid: 'process', dataset: { role, state } },
        h('strong', { text: hasLabel(`role_${role}`) ? t(`role_${role}`) : role }), ' ',
        h('span', { class: `badge badge-state-${cssToken(state)}`, testid: 'process-state', text: hasLabel(`proc_state_${state}`) ? t(`proc_state_${state}`) : state }), ' ',
        notReady ? h('span', { class: 'badge badge-state-unhealthy', testid: 'process-not-ready', text: t('proc_not_ready') }) : null, notReady ? ' ' : null,
        h('span', { class: 'muted small', text: t('restarts', { n: String(p.restarts ?? 0) }) }),
        !detail ? null
          : lang === 'fr' ? h('details', { class: 'muted small', testid: 'process-detail' }, h('summary', { text: t('proc_detail') }), h('p', { text: detail }))
            : h('p', { class: 'muted small', testid: 'process-detail', text: detail }));
    }));
}

async function renderOverview() {
  const ctx = beginView('view-overview', 'overview');
  setTitle(t('nav_overview'));
  if (state.bootError) {
    failView(ctx, state.bootError);
    return;
  }
  if (!state.workspaceId) {
    finishView(ctx, emptyNote('no_workspace', 'overview-empty'));
    return;
  }
  if (!state.investigationId) {
    finishView(ctx, emptyNote('no_investigation', 'overview-empty'));
    return;
  }
  const inv = state.investigationId;
  let data;
  try {
    data = await api(`/api/v1/investigations/${seg(inv)}/overview`);
  } catch (err) {
    failView(ctx, err);
    return;
  }
  if (!ctx.live()) return;
  if (data.workspace && typeof data.workspace === 'object') {
    state.workspace = { ...(state.workspace || {}), ...data.workspace };
    renderWorkspace();
  }
  const info = data.investigation || {};
  setTitle(info.title, t('nav_overview'));

  const correlations = h('div', { class: 'panel-body', testid: 'correlations' },
    h('p', { class: 'muted', text: t('loading') }));
  const processes = h('div', { class: 'panel-body', testid: 'processes' },
    h('p', { class: 'muted', text: t('loading') }));

  finishView(ctx,
    h('article', { class: 'overview', testid: 'overview', dataset: { investigation: String(info.id ?? inv) } },
      h('header', { class: 'view-head' },
        h('p', { class: 'eyebrow', text: t('overview_heading') }),
        h('h1', { testid: 'overview-title', text: info.title ?? inv }),
        info.summary ? h('p', { class: 'summary', testid: 'overview-summary', text: info.summary }) : null,
        info.created_at ? h('p', { class: 'muted small' }, t('created_label'), ' ', timeEl(info.created_at)) : null),
      renderCounts(data.counts || {}),
      h('div', { class: 'grid' },
        h('div', { class: 'col' },
          section('section_top_entities', 'top-entities-panel', renderTopEntities(data.top_entities)),
          section('section_correlations', 'correlations-panel', correlations),
          section('section_entity_kinds', 'entity-kinds-panel', renderEntityKinds(data.entity_kinds))),
        h('div', { class: 'col' },
          section('section_recent_evidence', 'recent-evidence-panel', renderRecentEvidence(data.recent_evidence)),
          section('section_import', 'import-panel', renderImportForm(ctx, inv)),
          section('section_export', 'export-panel', renderExportForm(ctx, inv)),
          section('section_jobs', 'jobs-panel', renderJobs(data.jobs), renderExtractForm(ctx, inv, data.jobs)),
          section('section_processes', 'processes-panel', processes),
          section('section_note', 'note-panel', renderNoteForm(inv))))));

  api('/api/v1/status').then((st) => {
    if (ctx.live()) clear(processes).append(renderProcesses(st));
  }, (err) => {
    if (ctx.live()) clear(processes).append(h('p', { class: 'error-box', text: errorText(err) }));
  });

  try {
    const c = await api(`/api/v1/investigations/${seg(inv)}/correlations?limit=${CORRELATIONS_LIMIT}`);
    if (!ctx.live()) return;
    clear(correlations).append(renderCorrelations(c.correlations));
  } catch (err) {
    if (!ctx.live()) return;
    clear(correlations).append(h('p', { class: 'error-box', text: errorText(err) }));
  }
}

function renderCounts(counts) {
  const keys = ['evidence', 'entities', 'relations', 'provenance', 'jobs'];
  // Those with a list open it (SPEC U2); the others are figures, not links.
  return h('ul', { class: 'counts', testid: 'counts' },
    keys.map((k) => {
      const body = [
        h('span', { class: 'count-value', testid: `count-${k}`, dataset: { value: String(Number(counts[k] ?? 0)) }, text: fmtNumber(counts[k] ?? 0) }),
        h('span', { class: 'count-label', text: t(`count_${k}`) }),
      ];
      return LISTS.includes(k)
        ? h('li', { class: 'count count-link' }, h('a', { href: `#/list/${k}`, testid: `count-link-${k}` }, ...body))
        : h('li', { class: 'count' }, ...body);
    }));
}

function renderTopEntities(items) {
  if (!Array.isArray(items) || items.length === 0) return emptyNote('empty', 'top-entities-empty');
  return h('ol', { class: 'rows', testid: 'top-entities' },
    items.map((e) => h('li', null,
      objectLink({ id: e.id, kind: e.kind, label: e.name }, 'top-entity'),
      h('span', { class: 'muted small', text: tn('in_evidence', Number(e.evidence_count ?? 0)) }))));
}

function renderCorrelations(items) {
  if (!Array.isArray(items) || items.length === 0) return emptyNote('empty', 'correlations-empty');
  return h('ol', { class: 'rows', testid: 'correlation-list' },
    items.map((c) => {
      const ent = c.entity || {};
      const samples = Array.isArray(c.sample_evidence) ? c.sample_evidence : [];
      return h('li', { testid: 'correlation' },
        objectLink({ id: ent.id, kind: ent.kind, label: ent.name }, 'correlation-entity'),
        h('span', { class: 'muted small', text: tn('in_evidence', Number(c.evidence_count ?? 0)) }),
        samples.length
          ? h('span', { class: 'samples' }, samples.map((ref, i) =>
            h('a', { href: hrefFor(ref, 'evidence'), class: 'sample', testid: 'correlation-sample', title: String(ref), text: `#${i + 1}` })))
          : null);
    }));
}

function renderEntityKinds(items) {
  if (!Array.isArray(items) || items.length === 0) return emptyNote('empty', 'entity-kinds-empty');
  return h('ul', { class: 'chips', testid: 'entity-kinds' },
    items.map((k) => h('li', { class: `chip kind-${cssToken(k.kind)}`, testid: 'entity-kind' },
      h('a', { href: listHref('entities', { kind: k.kind }), testid: 'entity-kind-link' },
        h('span', { text: enumLabel('kind', k.kind) }),
        h('span', { class: 'chip-count', text: fmtNumber(k.count) })))));
}

function renderRecentEvidence(items) {
  if (!Array.isArray(items) || items.length === 0) return emptyNote('empty', 'recent-evidence-empty');
  return h('ol', { class: 'rows', testid: 'recent-evidence' },
    items.map((ev) => h('li', null,
      h('a', { href: hrefFor(ev.id, 'evidence'), class: 'obj', testid: 'recent-evidence-item', dataset: { ref: String(ev.id) } },
        h('span', { class: 'obj-label', text: ev.title ?? ev.id })),
      h('span', { class: 'muted small' },
        [ev.source, ev.mime].filter(Boolean).join(' · '),
        ev.collected_at ? ' · ' : null,
        ev.collected_at ? timeEl(ev.collected_at) : null))));
}

function renderJobs(items) {
  if (!Array.isArray(items) || items.length === 0) return emptyNote('empty', 'jobs-empty');
  return h('ol', { class: 'rows', testid: 'jobs' },
    items.map((j) => {
      const p = Number(j.progress);
      const bar = Number.isFinite(p)
        ? h('progress', { max: p > 1 ? '100' : '1', value: String(Math.max(0, p)), title: t('job_progress') })
        : null;
      return h('li', { class: 'job', testid: 'job', dataset: { status: String(j.status ?? '') } },
        h('span', { class: 'job-kind', text: j.kind ? enumLabel('job_kind', j.kind) : j.id }),
        h('span', { class: `pill status-${cssToken(j.status)}`, text: enumLabel('status', j.status) }),
        bar,
        jobDetail(j) ? h('span', { class: 'muted small job-detail', testid: 'job-detail', text: jobDetail(j) }) : null,
        j.updated_at ? h('span', { class: 'muted small' }, timeEl(j.updated_at)) : null);
    }));
}

// A job's detail in the chosen language where its figures are known; the
// stored one-line detail otherwise.
function jobDetail(j) {
  const st = j.stats || {};
  if (j.kind === 'export' && typeof st.fingerprint === 'string') {
    return `${t('export_done', { files: fmtNumber(st.files ?? 0) })} ${t('export_fingerprint')} : ${st.fingerprint.slice(0, 16)}…`;
  }
  if (j.kind === 'import' && Number.isFinite(Number(st.files))) {
    return [tn('import_n_files', Number(st.files)),
      ...['imported', 'duplicates', 'refused', 'embedded'].map((k) => tn(`import_n_${k}`, Number(st[k] ?? 0)))].join(' · ');
  }
  if (j.kind === 'extraction' && Number.isFinite(Number(st.scanned))) {
    return t('job_extraction_detail', {
      scanned: fmtNumber(st.scanned), to_scan: fmtNumber(st.to_scan),
      mentions: fmtNumber(st.mentions), entities: fmtNumber(st.entities_created),
    });
  }
  return j.detail || '';
}

const EXTRACT_POLL_MS = 500;

// Starts the extraction of the investigation's selectors (SPEC C4) and
// follows its job until it ends; the overview then reloads with the graph it
// filled. A job already running is followed the same way.
function renderExtractForm(ctx, inv, jobs) {
  const button = h('button', { type: 'button', testid: 'extract-start', text: t('extract_start') });
  const status = h('p', { class: 'form-status', testid: 'extract-status', role: 'status', hidden: true });
  const say = (text, kind) => {
    status.textContent = text;
    status.dataset.kind = kind;
    status.hidden = !text;
  };
  const follow = async (job) => {
    button.disabled = true;
    let j = job;
    while (ctx.live() && j.status === 'RUNNING') {
      say(`${t('extract_started')} ${jobDetail(j)}`, 'info');
      await new Promise((r) => setTimeout(r, EXTRACT_POLL_MS));
      if (!ctx.live()) return;
      try {
        j = await api(`/api/v1/jobs/${seg(j.id)}`);
      } catch (err) {
        say(errorText(err), 'error');
        button.disabled = false;
        return;
      }
    }
    if (!ctx.live()) return;
    button.disabled = false;
    if (j.status === 'SUCCEEDED') {
      const st = j.stats || {};
      setStatusAfterRoute(t('extract_done', { mentions: fmtNumber(st.mentions ?? 0), entities: fmtNumber(st.entities_created ?? 0) }), 'ok');
      route();
    } else {
      say(t('extract_failed'), 'error');
    }
  };
  button.addEventListener('click', async () => {
    button.disabled = true;
    say(t('extract_started'), 'info');
    try {
      const job = await api(`/api/v1/investigations/${seg(inv)}/extraction`, { method: 'POST', body: {} });
      await follow(job);
    } catch (err) {
      say(errorText(err), 'error');
      showError(err);
      button.disabled = false;
    }
  });
  const running = Array.isArray(jobs) ? jobs.find((j) => j.kind === 'extraction' && j.status === 'RUNNING') : null;
  if (running) queueMicrotask(() => follow(running));
  return h('div', { class: 'extract-form', testid: 'extract-form' },
    h('p', { class: 'muted small', text: t('extract_help') }),
    h('div', { class: 'form-actions' }, button),
    status);
}

// ---------------------------------------------------------------------------
// Import (SPEC C2): files dropped or chosen are sent in batches as
// multipart/form-data to an import job; the bytes sent show as a progress
// bar, each file's outcome as a line of the report. The last report stays
// on the overview until another import starts.

const IMPORT_BATCH_FILES = 50;
const IMPORT_BATCH_BYTES = 64 * 1024 * 1024;
const IMPORT_REQUEST_TIMEOUT_MS = 10 * 60 * 1000;
let lastImport = null; // { inv, lines: [{path, outcome, evidence, reason}], summary, kind }

// One batch, with the bytes sent reported as they go.
function uploadBatch(job, files, onProgress) {
  return new Promise((resolve, reject) => {
    const form = new FormData();
    for (const f of files) form.append('file', f, f.webkitRelativePath || f.name);
    const xhr = new XMLHttpRequest();
    xhr.open('POST', `/api/v1/imports/${seg(job)}/files`);
    xhr.setRequestHeader('Accept', 'application/json');
    const token = csrfToken();
    if (token) xhr.setRequestHeader('X-CSRF-Token', token);
    xhr.timeout = IMPORT_REQUEST_TIMEOUT_MS;
    xhr.upload.addEventListener('progress', (e) => onProgress(e.loaded));
    xhr.addEventListener('load', () => {
      let data = null;
      try {
        data = JSON.parse(xhr.responseText);
      } catch {
        data = null;
      }
      if (xhr.status >= 200 && xhr.status < 300 && data && Array.isArray(data.files)) {
        resolve(data.files);
      } else {
        const e = data && data.error ? data.error : {};
        reject(new ApiError(xhr.status, String(e.code ?? 'http_error'), String(e.message ?? xhr.statusText ?? ''), xhr.getResponseHeader('Retry-After')));
      }
    });
    xhr.addEventListener('error', () => reject(new ApiError(0, 'network', t('err_unexpected'), null)));
    xhr.addEventListener('timeout', () => reject(new ApiError(0, 'timeout', t('err_unexpected'), null)));
    xhr.send(form);
  });
}

// Refusal reasons and parser notes are written by Labfy's own code in
// English, in a fixed wording; in French each known one is said in French,
// its figures kept (an unknown one is shown as written).
const IMPORT_PHRASES = [
  [/^empty file \(0 bytes\)$/, () => 'fichier vide (0 octet)'],
  [/^larger than the bound of (\d+) bytes$/, (m) => `plus grand que la limite de ${fmtNumber(m[1])} octets`],
  [/^larger than the bound \((\d+) bytes > (\d+)\)$/, (m) => `plus grand que la limite (${fmtNumber(m[1])} octets > ${fmtNumber(m[2])})`],
  [/^(file name|path) contains control characters$/, (m) => `${m[1] === 'path' ? 'le chemin' : 'le nom'} contient des caractères de contrôle`],
  [/^(file name|path) contains a `\.\.` component$/, (m) => `${m[1] === 'path' ? 'le chemin' : 'le nom'} contient un composant « .. »`],
  [/^empty (file name|path)$/, () => 'nom de fichier vide'],
  [/^(file name|path) longer than (\d+) characters$/, (m) => `nom plus long que ${fmtNumber(m[2])} caractères`],
  [/^the disk is full$/, () => 'le disque est plein'],
  [/^symbolic link pointing outside the imported folder$/, () => 'lien symbolique vers l’extérieur du dossier importé'],
  [/^text not extracted: (.*)$/, (m) => `texte non extrait : ${m[1]}`],
  [/^text cut at (\d+) bytes of (\d+)$/, (m) => `texte coupé à ${fmtNumber(m[1])} octets sur ${fmtNumber(m[2])}`],
  [/^no text layer \(a scan\?\)$/, () => 'pas de couche texte (un document numérisé ?)'],
  [/^only the first (\d+) (attachments|of (\d+) messages) were taken$/, (m) => (m[3]
    ? `seuls les ${m[1]} premiers des ${fmtNumber(m[3])} messages ont été pris`
    : `seules les ${m[1]} premières pièces jointes ont été prises`)],
  [/^inflated size above (\d+) bytes: text cut$/, (m) => `plus de ${fmtNumber(m[1])} octets une fois décompressé : texte coupé`],
];

function importPhrase(text) {
  const raw = String(text ?? '');
  if (lang !== 'fr') return raw;
  for (const [re, say] of IMPORT_PHRASES) {
    const m = raw.match(re);
    if (m) return say(m);
  }
  return raw;
}

function importLine(l) {
  const outcome = String(l.outcome ?? '');
  return h('li', { class: `import-line outcome-${cssToken(outcome)}`, testid: 'import-line', dataset: { outcome } },
    h('span', { class: `pill status-${outcome === 'refused' ? 'failed' : (outcome === 'imported' ? 'succeeded' : 'queued')}`, text: enumLabel('import_outcome', outcome) }),
    l.evidence
      ? h('a', { href: hrefFor(l.evidence, 'evidence'), class: 'import-path', testid: 'import-line-link', text: String(l.path ?? '') })
      : h('span', { class: 'import-path', text: String(l.path ?? '') }),
    l.reason ? h('span', { class: 'muted small import-reason', testid: 'import-reason', text: importPhrase(l.reason) }) : null);
}

function renderImportForm(ctx, inv) {
  const pickFiles = h('input', { type: 'file', multiple: true, hidden: true, testid: 'import-files' });
  const pickFolder = h('input', { type: 'file', multiple: true, hidden: true, testid: 'import-folder' });
  pickFolder.webkitdirectory = true;
  const filesButton = h('button', { type: 'button', testid: 'import-pick-files', text: t('import_pick_files') });
  const folderButton = h('button', { type: 'button', class: 'secondary', testid: 'import-pick-folder', text: t('import_pick_folder') });
  // A drop target for the mouse; the keyboard's way in is its two buttons
  // (a button holding buttons is not accessible: SPEC U7).
  const zone = h('div', { class: 'drop-zone', testid: 'import-drop', role: 'group', 'aria-label': t('import_drop') },
    h('p', { text: t('import_drop') }),
    h('p', { class: 'muted small', text: t('import_or') }),
    h('div', { class: 'form-actions' }, filesButton, folderButton));
  const bar = h('progress', { max: '1', value: '0', testid: 'import-progress', hidden: true });
  const status = h('p', { class: 'form-status', testid: 'import-status', role: 'status', hidden: true });
  const report = h('ol', { class: 'rows import-report', testid: 'import-report' });
  const reportHead = h('h3', { class: 'small', text: t('import_report'), hidden: true });
  const say = formSay(status);
  const show = (imp) => {
    clear(report);
    reportHead.hidden = true;
    if (!imp || imp.inv !== inv) return;
    // Refusals first: they are what needs the analyst's eye.
    const order = { refused: 0, imported: 1, duplicate: 2 };
    const sorted = [...imp.lines].sort((a, b) => (order[a.outcome] ?? 3) - (order[b.outcome] ?? 3));
    report.append(...sorted.map(importLine));
    reportHead.hidden = !sorted.length;
    if (imp.summary) say(imp.summary, imp.kind);
  };
  const busy = (on) => {
    filesButton.disabled = on;
    folderButton.disabled = on;
    zone.classList.toggle('busy', on);
  };
  const run = async (list) => {
    const files = Array.from(list || []);
    if (!files.length) return;
    busy(true);
    lastImport = { inv, lines: [], summary: '', kind: 'info' };
    show(lastImport);
    const total = files.reduce((n, f) => n + f.size, 0);
    let sentBefore = 0;
    let done = 0;
    bar.hidden = false;
    bar.max = String(Math.max(total, 1));
    bar.value = '0';
    const progress = (sentNow) => {
      bar.value = String(Math.min(total, sentBefore + sentNow));
      say(t('import_sending', { done: fmtNumber(done), total: fmtNumber(files.length), sent: fmtBytes(sentBefore + sentNow), bytes: fmtBytes(total) }), 'info');
    };
    try {
      const { job } = await api(`/api/v1/investigations/${seg(inv)}/imports`, { method: 'POST', body: { expected: files.length } });
      let batch = [];
      let batchBytes = 0;
      const flush = async () => {
        if (!batch.length) return;
        const size = batchBytes;
        progress(0);
        const lines = await paced(() => uploadBatch(job, batch, (n) => {
          progress(n);
          if (n >= size) say(t('import_reading'), 'info');
        }));
        sentBefore += size;
        done += batch.length;
        lastImport.lines.push(...lines);
        if (ctx.live()) show(lastImport);
        progress(0);
        batch = [];
        batchBytes = 0;
      };
      for (const f of files) {
        if (batch.length && (batch.length >= IMPORT_BATCH_FILES || batchBytes + f.size > IMPORT_BATCH_BYTES)) await flush();
        batch.push(f);
        batchBytes += f.size;
      }
      await flush();
      const st = await api(`/api/v1/imports/${seg(job)}/finish`, { method: 'POST', body: {} });
      lastImport.summary = t('import_done', {
        counts: ['imported', 'duplicates', 'refused', 'embedded'].map((k) => tn(`import_n_${k}`, Number(st[k] ?? 0))).join(', '),
      });
      // Refusals are listed first, in red; the summary itself is not an error.
      lastImport.kind = (st.refused ?? 0) > 0 ? 'info' : 'ok';
      // The overview again, with its new counts; the report stays under it.
      if (ctx.live()) route();
    } catch (err) {
      lastImport.summary = t('import_failed', { reason: errorText(err) });
      lastImport.kind = 'error';
      if (ctx.live()) {
        show(lastImport);
        showError(err);
      }
    } finally {
      busy(false);
      bar.hidden = true;
    }
  };
  filesButton.addEventListener('click', () => pickFiles.click());
  folderButton.addEventListener('click', () => pickFolder.click());
  pickFiles.addEventListener('change', () => run(pickFiles.files).finally(() => { pickFiles.value = ''; }));
  pickFolder.addEventListener('change', () => run(pickFolder.files).finally(() => { pickFolder.value = ''; }));
  zone.addEventListener('dragover', (e) => {
    e.preventDefault();
    zone.classList.add('over');
  });
  zone.addEventListener('dragleave', () => zone.classList.remove('over'));
  zone.addEventListener('drop', async (e) => {
    e.preventDefault();
    zone.classList.remove('over');
    run(await droppedFiles(e.dataTransfer));
  });
  show(lastImport);
  return h('div', { class: 'import-form', testid: 'import-form' },
    zone, pickFiles, pickFolder,
    h('p', { class: 'muted small', text: t('import_help') }),
    bar, status, reportHead, report);
}

// The files of a drop, folders walked (their files carry their relative
// path, like a folder chosen with the picker).
async function droppedFiles(dt) {
  const items = Array.from(dt?.items || []).map((i) => (i.webkitGetAsEntry ? i.webkitGetAsEntry() : null));
  if (!items.length || items.some((e) => !e)) return Array.from(dt?.files || []);
  const out = [];
  const walk = async (entry, prefix) => {
    if (entry.isFile) {
      const file = await new Promise((res, rej) => entry.file(res, rej));
      out.push(new File([file], `${prefix}${file.name}`, { type: file.type, lastModified: file.lastModified }));
      return;
    }
    const reader = entry.createReader();
    for (;;) {
      const batch = await new Promise((res, rej) => reader.readEntries(res, rej));
      if (!batch.length) break;
      for (const child of batch) await walk(child, `${prefix}${entry.name}/`);
    }
  };
  for (const e of items) await walk(e, '');
  return out;
}

// Export (SPEC C5): the bundle `labfy export` writes, made by a job beside
// the requests; its fingerprint, its folder, its archive and the command
// that verifies it.
const EXPORT_POLL_MS = 500;

function renderExportForm(ctx, inv) {
  const button = h('button', { type: 'button', testid: 'export-start', text: t('export_start') });
  const status = h('p', { class: 'form-status', testid: 'export-status', role: 'status', hidden: true });
  const result = h('div', { testid: 'export-result' });
  const say = formSay(status);
  button.addEventListener('click', async () => {
    button.disabled = true;
    clear(result);
    say(t('export_running'), 'info');
    try {
      let j = await api(`/api/v1/investigations/${seg(inv)}/export`, { method: 'POST', body: {} });
      j = await api(`/api/v1/jobs/${seg(j.job)}`);
      while (j.status === 'RUNNING') {
        await new Promise((r) => setTimeout(r, EXPORT_POLL_MS));
        j = await api(`/api/v1/jobs/${seg(j.id)}`);
      }
      if (!ctx.live()) return;
      if (j.status !== 'SUCCEEDED') {
        say(t('export_failed', { reason: j.detail || j.status }), 'error');
        return;
      }
      const st = j.stats || {};
      say(t('export_done', { files: fmtNumber(st.files ?? 0) }), 'ok');
      result.append(dl([
        [t('export_fingerprint'), h('code', { class: 'hash', testid: 'export-fingerprint', text: String(st.fingerprint ?? '') }), 'export-fingerprint-row'],
        [t('export_dir'), h('code', { class: 'camp-url', testid: 'export-dir', text: String(st.dir ?? '') }), 'export-dir-row'],
        [t('export_verify'), h('code', { class: 'camp-url', testid: 'export-verify', text: `labfy verify ${st.dir ?? ''} --fingerprint ${st.fingerprint ?? ''}` }), 'export-verify-row'],
      ], 'export-meta'),
      h('p', null, h('a', { href: `/api/v1/exports/${encodeURIComponent(String(st.archive ?? ''))}`, download: '', testid: 'export-download', text: t('export_download') })));
    } catch (err) {
      if (!ctx.live()) return;
      say(t('export_failed', { reason: errorText(err) }), 'error');
      showError(err);
    } finally {
      button.disabled = false;
    }
  });
  return h('div', { class: 'extract-form', testid: 'export-form' },
    h('p', { class: 'muted small', text: t('export_help') }),
    h('div', { class: 'form-actions' }, button),
    status, result);
}

function renderNoteForm(inv) {
  const title = h('input', { id: 'note-title', type: 'text', testid: 'note-title', required: true, autocomplete: 'off', maxlength: String(NOTE_TITLE_MAX_CHARS) });
  const content = h('textarea', { id: 'note-content', rows: '5', testid: 'note-content', required: true });
  const submit = h('button', { type: 'submit', testid: 'note-submit', text: t('note_submit') });
  const status = h('p', { class: 'form-status', testid: 'note-status', role: 'status', hidden: true });
  const form = h('form', { class: 'note-form', testid: 'note-form', novalidate: true },
    h('label', { for: 'note-title', text: t('note_title') }), title,
    h('label', { for: 'note-content', text: t('note_content') }), content,
    h('p', { class: 'muted small', text: t('note_help') }),
    h('div', { class: 'form-actions' }, submit),
    status);
  const say = (text, kind) => {
    status.textContent = text;
    status.dataset.kind = kind;
    status.hidden = !text;
  };
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const body = { title: title.value.trim(), content: content.value, source: NOTE_SOURCE };
    if (!body.title || !body.content.trim()) {
      say(t('note_missing'), 'error');
      return;
    }
    submit.disabled = true;
    say(t('note_saving'), 'info');
    try {
      const created = await api(`/api/v1/investigations/${seg(inv)}/evidence`, { method: 'POST', body });
      say(t('note_saved', { title: created.title ?? body.title }), 'ok');
      form.reset();
      setStatusAfterRoute(t('note_saved', { title: created.title ?? body.title }), 'ok');
      location.hash = hrefFor(created.id, 'evidence');
    } catch (err) {
      say(errorText(err), 'error');
      showError(err);
    } finally {
      submit.disabled = false;
    }
  });
  return form;
}

// A message to show once the next view has started (beginView clears it).
let pendingStatus = null;
function setStatusAfterRoute(text, kind) {
  pendingStatus = { text, kind };
}
function flushPendingStatus() {
  if (pendingStatus) {
    setStatus(pendingStatus.text, pendingStatus.kind);
    pendingStatus = null;
  }
}

// ---------------------------------------------------------------------------
// Evidence reader

// How egress fetched an evidence item (SPEC E5): every value is the fetch's
// provenance as stored — untrusted text — and the body as received, to
// download (SPEC C3: kept whatever its type).
function renderFetch(f, ev) {
  const list = (xs) => (Array.isArray(xs) && xs.length
    ? h('ol', { class: 'agent-exclusion-list' }, xs.map((x) => h('li', null, h('code', { class: 'camp-url', text: Array.isArray(x) ? `${x[0]}: ${x[1]}` : String(x) }))))
    : t('res_none'));
  return section('fetch_heading', 'evidence-fetch',
    ev && ev.original
      ? h('p', null, h('a', { href: `/api/v1/evidence/${seg(ev.id)}/original`, download: '', testid: 'evidence-fetch-download', text: t('import_download') }))
      : null,
    dl([
    [t('fetch_url'), h('code', { class: 'camp-url', text: String(f.url ?? '') }), 'evidence-fetch-url'],
    [t('fetch_final_url'), h('code', { class: 'camp-url', text: String(f.final_url ?? '') }), 'evidence-fetch-final-url'],
    [t('fetch_redirects'), list(f.redirects), 'evidence-fetch-redirects'],
    [t('fetch_http'), String(f.http_status ?? '—'), 'evidence-fetch-http'],
    [t('fetch_content_type'), String(f.content_type ?? '—'), 'evidence-fetch-content-type'],
    [t('fetch_started'), timeEl(f.started_at), 'evidence-fetch-started'],
    [t('fetch_elapsed'), t('fetch_elapsed_value', { ms: fmtNumber(countOf(f.elapsed_ms)) }), 'evidence-fetch-elapsed'],
    [t('meta_sha256'), h('code', { class: 'hash', text: String(f.body_sha256 ?? '') }), 'evidence-fetch-sha256'],
    [t('fetch_isolation'), h('code', { class: 'hash', text: String(f.isolation ?? '') }), 'evidence-fetch-isolation'],
    [t('fetch_route'), enumLabel('route', f.route), 'evidence-fetch-route'],
    [t('fetch_campaign'), refLink(f.campaign, 'evidence-fetch-campaign'), 'evidence-fetch-campaign-row'],
    [t('fetch_grant'), refLink(f.grant, 'evidence-fetch-grant'), 'evidence-fetch-grant-row'],
    [t('fetch_headers'), list(f.headers), 'evidence-fetch-headers'],
  ], 'evidence-fetch-meta'));
}

// Each import of an evidence item's bytes (SPEC C2): the file it came from,
// how the confined parser read it, and the original to download.
function renderImports(ev) {
  const imports = Array.isArray(ev.imports) ? ev.imports : [];
  if (!imports.length) return null;
  return section('import_heading', 'evidence-imports',
    ev.original
      ? h('p', null, h('a', { href: `/api/v1/evidence/${seg(ev.id)}/original`, download: '', testid: 'evidence-download', text: t('import_download') }))
      : null,
    ...imports.map((i) => dl([
      [t('import_name'), String(i.original_name ?? ''), 'evidence-import-name'],
      [t('import_path'), h('code', { class: 'camp-url', text: String(i.original_path ?? '') }), 'evidence-import-path'],
      [t('import_size'), t('import_bytes', { bytes: fmtNumber(i.byte_len ?? 0) }), 'evidence-import-size'],
      [t('import_format'), enumLabel('format', i.format), 'evidence-import-format'],
      i.encoding ? [t('import_encoding'), String(i.encoding), 'evidence-import-encoding'] : null,
      Array.isArray(i.notes) && i.notes.length
        ? [t('import_notes'), h('ul', null, i.notes.map((n) => h('li', { text: importPhrase(n) }))), 'evidence-import-notes']
        : null,
      [t('import_by'), enumLabel('actor', i.imported_by), 'evidence-import-by'],
      [t('import_at'), timeEl(i.imported_at), 'evidence-import-at'],
    ].filter(Boolean), 'evidence-import')));
}

async function renderEvidence(ref) {
  const ctx = beginView('view-evidence', 'evidence');
  setTitle(t('evidence_heading'));
  let ev;
  try {
    ev = await api(`/api/v1/evidence/${seg(ref)}`);
  } catch (err) {
    failView(ctx, err);
    return;
  }
  if (!ctx.live()) return;
  setTitle(ev.title, t('evidence_heading'));

  const pre = h('pre', { class: 'reader-text', testid: 'evidence-text', dataset: { state: 'loading' } });
  const progress = h('p', { class: 'muted small', testid: 'evidence-progress' });
  const more = h('button', { type: 'button', class: 'more', testid: 'evidence-more', text: t('reader_more'), hidden: true });
  const readerError = h('p', { class: 'error-box', testid: 'evidence-text-error', hidden: true });

  const entities = Array.isArray(ev.entities) ? ev.entities : [];
  const size = t('size_value', { bytes: fmtNumber(ev.byte_len ?? 0), chars: fmtNumber(ev.char_len ?? 0) });

  const shown = finishView(ctx,
    h('article', { class: 'evidence', testid: 'evidence-view', dataset: { ref: String(ev.id ?? ref) } },
      h('header', { class: 'view-head' },
        h('p', { class: 'eyebrow', text: t('evidence_heading') }),
        h('h1', { testid: 'evidence-title', text: ev.title ?? ev.id }),
        h('nav', { class: 'links', 'aria-label': t('view_links') },
          h('a', { href: `#/node/${seg(ev.id ?? ref)}`, testid: 'evidence-neighbours-link', text: t('link_neighbours') }),
          h('a', { href: `#/provenance/${seg(ev.id ?? ref)}`, testid: 'evidence-provenance-link', text: t('link_provenance') }))),
      dl([
        [t('meta_source'), ev.source ?? '—', 'evidence-source'],
        [t('meta_collected'), timeEl(ev.collected_at), 'evidence-collected'],
        [t('meta_created'), timeEl(ev.created_at), 'evidence-created'],
        [t('meta_mime'), ev.mime ?? '—', 'evidence-mime'],
        [t('meta_size'), size, 'evidence-size'],
        [t('meta_sha256'), h('code', { class: 'hash', text: ev.sha256 ?? '—' }), 'evidence-sha256'],
        [t('meta_id'), h('code', { class: 'hash', text: ev.id ?? ref }), 'evidence-id'],
      ], 'evidence-meta'),
      ev.fetch && typeof ev.fetch === 'object' ? renderFetch(ev.fetch, ev) : null,
      renderImports(ev),
      h('div', { class: 'reader' },
        h('section', { class: 'panel reader-main', testid: 'evidence-reader' },
          h('h2', { text: t('reader_text') }), pre, readerError,
          h('div', { class: 'reader-foot' }, progress, more)),
        h('section', { class: 'panel reader-side', testid: 'evidence-entities-panel' },
          h('h2', { text: t('reader_entities') }),
          entities.length
            ? h('ol', { class: 'rows', testid: 'evidence-entities' },
              entities.map((e) => h('li', null,
                objectLink({ id: e.id, kind: e.kind, label: e.name }, 'evidence-entity'),
                e.relation ? h('span', { class: 'muted small', text: enumLabel('rel', e.relation) }) : null)))
            : emptyNote('reader_no_entities', 'evidence-entities-empty')))));
  if (!shown) return;

  let offset = 0;
  let total = Number(ev.char_len ?? 0);
  const loadPage = async () => {
    more.disabled = true;
    readerError.hidden = true;
    pre.dataset.state = 'loading';
    try {
      const page = await api(`/api/v1/evidence/${seg(ev.id ?? ref)}/excerpt?offset=${offset}&length=${EXCERPT_PAGE}`);
      if (!ctx.live()) return;
      const text = String(page.text ?? '');
      pre.append(document.createTextNode(text));
      const got = Number.isInteger(page.length) ? page.length : Array.from(text).length;
      offset = (Number.isInteger(page.offset) ? page.offset : offset) + got;
      if (Number.isFinite(Number(page.total_chars))) total = Number(page.total_chars);
      more.hidden = !(page.truncated && got > 0);
      pre.dataset.state = more.hidden ? 'complete' : 'partial';
      progress.textContent = total === 0 && offset === 0
        ? t('reader_empty')
        : t('reader_progress', { shown: fmtNumber(Math.min(offset, total || offset)), total: fmtNumber(total || offset) });
    } catch (err) {
      if (!ctx.live()) return;
      pre.dataset.state = 'error';
      readerError.textContent = errorText(err);
      readerError.hidden = false;
      more.hidden = offset === 0;
      showError(err);
    } finally {
      more.disabled = false;
    }
  };
  more.addEventListener('click', loadPage);
  await loadPage();
}

// ---------------------------------------------------------------------------
// Node view

async function renderNode(ref) {
  const ctx = beginView('view-node', 'node');
  setTitle(t('node_heading'));
  let node;
  let nb;
  let limit = NEIGHBOURS_PAGE;
  const nbUrl = () => `/api/v1/graph/nodes/${seg(ref)}/neighbors?limit=${limit}`;
  try {
    [node, nb] = await Promise.all([api(`/api/v1/graph/nodes/${seg(ref)}`), api(nbUrl())]);
  } catch (err) {
    failView(ctx, err);
    return;
  }
  if (!ctx.live()) return;
  setTitle(node.label, t('node_heading'));

  const list = h('ol', { class: 'rows neighbours', testid: 'neighbours' });
  const count = h('p', { class: 'muted small', testid: 'neighbours-total' });
  const more = h('button', { type: 'button', class: 'more', testid: 'neighbours-more', text: t('neighbours_more'), hidden: true });
  const nbError = h('p', { class: 'error-box', hidden: true });

  const fill = (data) => {
    const items = Array.isArray(data.neighbors) ? data.neighbors : [];
    const total = Number(data.total ?? items.length);
    clear(list);
    if (items.length === 0) list.append(h('li', { class: 'muted empty', testid: 'neighbours-empty', text: t('neighbours_none') }));
    for (const item of items) {
      const rel = item.relation || {};
      const other = item.node || {};
      const out = rel.direction !== 'in';
      const conf = Number(rel.confidence);
      list.append(h('li', { class: 'neighbour-row' },
        h('span', { class: `dir dir-${out ? 'out' : 'in'}`, title: t(out ? 'dir_out' : 'dir_in'), 'aria-label': t(out ? 'dir_out' : 'dir_in'), text: out ? '→' : '←' }),
        h('span', { class: 'rel', testid: 'neighbour-relation', text: enumLabel('rel', rel.kind) }),
        objectLink(other, 'neighbour'),
        Number.isFinite(conf) && rel.confidence !== null
          ? h('span', { class: 'muted small conf', text: t('confidence', { v: fmtNumber(conf) }) })
          : null));
    }
    count.dataset.total = String(total);
    count.dataset.shown = String(items.length);
    count.textContent = t('neighbours_count', { shown: fmtNumber(items.length), total: fmtNumber(total) });
    more.hidden = items.length >= total || items.length < limit || limit >= NEIGHBOURS_MAX;
  };

  more.addEventListener('click', async () => {
    more.disabled = true;
    nbError.hidden = true;
    limit = Math.min(limit + NEIGHBOURS_PAGE, NEIGHBOURS_MAX);
    try {
      const data = await api(nbUrl());
      if (!ctx.live()) return;
      fill(data);
    } catch (err) {
      if (!ctx.live()) return;
      limit = Math.max(NEIGHBOURS_PAGE, limit - NEIGHBOURS_PAGE);
      nbError.textContent = errorText(err);
      nbError.hidden = false;
      showError(err);
    } finally {
      more.disabled = false;
    }
  });

  const details = node.details && typeof node.details === 'object' ? Object.entries(node.details) : [];
  const id = node.id ?? ref;
  // The drawing (SPEC U1) beside the list it draws.
  const graph = node.kind === 'entity' || node.kind === 'evidence' ? egoGraph(graphUi(ctx), id) : null;
  if (graph) state.leaveView.push(graph.destroy);
  const shown = finishView(ctx,
    h('article', { class: 'node', testid: 'node-view', dataset: { ref: String(id), kind: String(node.kind ?? '') } },
      h('header', { class: 'view-head' },
        h('p', { class: 'eyebrow' },
          h('span', { class: `kind kind-${cssToken(displayKind(node))}`, testid: 'node-kind', text: enumLabel('kind', displayKind(node)) }),
          node.subkind && displayKind(node) !== node.subkind
            ? h('span', { class: 'muted', testid: 'node-subkind', text: ` · ${node.subkind}` })
            : null),
        h('h1', { testid: 'node-label', text: node.label ?? id }),
        h('nav', { class: 'links', 'aria-label': t('view_links') },
          isEvidence(id, node.kind)
            ? h('a', { href: `#/evidence/${seg(id)}`, testid: 'node-open-evidence', text: t('link_open_evidence') })
            : null,
          h('a', { href: `#/provenance/${seg(id)}`, testid: 'node-provenance-link', text: t('link_provenance') }))),
      h('div', { class: graph ? 'graph-row' : 'grid' },
        graph ? graph.el : null,
        h('div', { class: 'col col-wide' },
          h('section', { class: 'panel neighbours-panel', testid: 'neighbours-panel' },
            h('h2', { text: t('neighbours') }), count, list, nbError, more))),
      h('div', { class: 'grid node-facts' },
        h('div', { class: 'col' },
          h('section', { class: 'panel', testid: 'node-details-panel' },
            h('h2', { text: t('node_details') }),
            dl([
              [t('meta_id'), h('code', { class: 'hash', text: id })],
              ...(node.degree !== undefined ? [[t('node_degree'), fmtNumber(node.degree)]] : []),
              ...details.map(([k, v]) => [enumLabel('detail', k), detailValue(k, v)]),
            ], 'node-details'),
            details.length === 0 ? emptyNote('node_no_details') : null)),
        node.kind === 'entity' ? h('div', { class: 'col' }, renderEntityEdit(ctx, node)) : null)));
  if (!shown) return;
  fill(nb);
}

// What graph.js needs from this page: its helpers, and whether the view it
// was drawn for is still the one shown.
function graphUi(ctx) {
  return {
    api, t, h, clear, enumLabel, fmtNumber, hrefFor, seg, errorText, shown,
    live: ctx.live,
    onError: showError,
    go: (href) => { location.hash = href; },
  };
}

const RELATION_KINDS = ['linked_to', 'mentions', 'works_for', 'owns_domain', 'uses_email', 'uses_phone', 'located_in', 'derived_from'];

// The analyst's hand on an entity (SPEC C4): rename, merge into another,
// link to another object, delete. Each change goes through the API (audited,
// provenance `analyst`) and the view reloads with the result.
function renderEntityEdit(ctx, node) {
  const id = String(node.id);
  const status = h('p', { class: 'form-status', testid: 'edit-status', role: 'status', hidden: true });
  const say = (text, kind) => {
    status.textContent = text;
    status.dataset.kind = kind;
    status.hidden = !text;
  };
  const act = async (button, call, done) => {
    button.disabled = true;
    say('', 'info');
    try {
      const out = await call();
      if (!ctx.live()) return;
      done(out);
    } catch (err) {
      say(errorText(err), 'error');
    } finally {
      button.disabled = false;
    }
  };
  const name = h('input', { type: 'text', id: 'edit-name', testid: 'edit-name', value: String(node.label ?? ''), autocomplete: 'off' });
  const rename = h('button', { type: 'button', testid: 'edit-rename', text: t('edit_rename') });
  rename.addEventListener('click', () => act(rename,
    () => api(`/api/v1/entities/${seg(id)}/rename`, { method: 'POST', body: { name: name.value } }),
    () => { setStatusAfterRoute(t('edit_renamed'), 'ok'); route(); }));
  const into = h('input', { type: 'text', id: 'edit-merge', testid: 'edit-merge-into', placeholder: 'entity:…', autocomplete: 'off' });
  const merge = h('button', { type: 'button', testid: 'edit-merge', text: t('edit_merge') });
  merge.addEventListener('click', () => act(merge,
    () => api(`/api/v1/entities/${seg(id)}/merge`, { method: 'POST', body: { into: into.value.trim() } }),
    (kept) => { setStatusAfterRoute(t('edit_merged'), 'ok'); location.hash = hrefFor(kept.id, 'entity'); }));
  const relKind = h('select', { testid: 'edit-link-kind', 'aria-label': t('edit_link') },
    RELATION_KINDS.map((k) => h('option', { value: k, text: enumLabel('rel', k) })));
  const target = h('input', { type: 'text', id: 'edit-link', testid: 'edit-link-target', placeholder: 'entity:… / evidence:…', autocomplete: 'off' });
  const link = h('button', { type: 'button', testid: 'edit-link', text: t('edit_link') });
  link.addEventListener('click', () => act(link,
    () => api(`/api/v1/investigations/${seg(state.investigationId)}/relations`, { method: 'POST', body: { kind: relKind.value, src: id, dst: target.value.trim() } }),
    () => { setStatusAfterRoute(t('edit_linked'), 'ok'); route(); }));
  const del = h('button', { type: 'button', class: 'danger', testid: 'edit-delete', text: t('edit_delete') });
  let armed = false;
  del.addEventListener('click', () => {
    if (!armed) {
      armed = true;
      del.textContent = t('edit_delete_confirm');
      return;
    }
    act(del, () => api(`/api/v1/entities/${seg(id)}`, { method: 'DELETE' }), () => {
      setStatusAfterRoute(t('edit_deleted', { name: node.label ?? id }), 'ok');
      location.hash = '#/';
    });
  });
  return h('section', { class: 'panel entity-edit', testid: 'entity-edit' },
    h('h2', { text: t('edit_heading') }),
    h('label', { for: 'edit-name', text: t('edit_rename') }), h('div', { class: 'form-actions' }, name, rename),
    h('label', { for: 'edit-merge', text: t('edit_merge_label') }), h('div', { class: 'form-actions' }, into, merge),
    h('label', { for: 'edit-link', text: t('edit_link_label') }), h('div', { class: 'form-actions' }, relKind, target, link),
    h('div', { class: 'form-actions' }, del),
    status);
}

// ---------------------------------------------------------------------------
// Provenance trail

async function renderProvenance(ref) {
  const ctx = beginView('view-provenance', 'provenance');
  setTitle(t('prov_heading'));
  let data;
  try {
    data = await api(`/api/v1/provenance/${seg(ref)}?depth=${PROVENANCE_DEPTH}`);
  } catch (err) {
    failView(ctx, err);
    return;
  }
  if (!ctx.live()) return;
  const records = (Array.isArray(data.records) ? data.records : [])
    .map((r, i) => ({ r, i }))
    .sort((a, b) => (Number(a.r.depth ?? 0) - Number(b.r.depth ?? 0)) || (a.i - b.i))
    .map((x) => x.r);
  const rootRecord = records.find((r) => r.object && r.object.id === (data.root ?? ref));
  const rootLabel = rootRecord && rootRecord.object.label ? rootRecord.object.label : (data.root ?? ref);
  setTitle(rootLabel, t('prov_heading'));
  const rootKind = rootRecord && rootRecord.object ? rootRecord.object.kind : undefined;

  finishView(ctx,
    h('article', { class: 'provenance', testid: 'provenance-view', dataset: { ref: String(data.root ?? ref) } },
      h('header', { class: 'view-head' },
        h('p', { class: 'eyebrow', text: t('prov_heading') }),
        h('h1', { testid: 'provenance-title', text: t('prov_of', { label: rootLabel }) }),
        h('nav', { class: 'links', 'aria-label': t('view_links') },
          h('a', { href: hrefFor(data.root ?? ref, rootKind), testid: 'provenance-root-link', text: rootLabel }))),
      records.length === 0
        ? emptyNote('prov_empty', 'provenance-empty')
        : h('ol', { class: 'trail', testid: 'provenance-records' },
          records.map((r) => {
            const inputs = Array.isArray(r.inputs) ? r.inputs : [];
            const obj = r.object || {};
            return h('li', { class: 'trail-step', testid: 'provenance-record', dataset: { depth: String(r.depth ?? 0) } },
              h('div', { class: 'trail-head' },
                h('span', { class: 'pill depth', text: t('prov_depth', { n: fmtNumber(r.depth ?? 0) }) }),
                obj.id ? objectLink(obj, 'provenance-object') : null),
              dl([
                [t('prov_producer'), r.producer ?? '—'],
                [t('prov_activity'), r.activity ?? '—'],
                [t('prov_time'), timeEl(r.created_at)],
                [t('prov_inputs'), inputs.length
                  ? h('ul', { class: 'inline-list' }, inputs.map((inp) => h('li', null, objectLink(inp, 'provenance-input'))))
                  : h('span', { class: 'muted', text: t('prov_no_inputs') })],
              ]));
          })),
      data.truncated ? h('p', { class: 'muted small', testid: 'provenance-truncated', text: t('prov_truncated', { n: PROVENANCE_DEPTH }) }) : null));
}

// ---------------------------------------------------------------------------
// Agent panel (SPEC G, M6–M10): the agent's mode (the runtime's status), the
// tool catalog, a question, and the runtime turn it starts — the
// deterministic demo agent or the local model, driven by the server's
// AgentRuntime. The runtime turn (status, rounds, tool calls, repairs,
// summary, error) and its events are polled; the plan, tool results and
// tool activity come from the gateway turn it drives (its event log), and
// the human decision on the research the agent prepares goes through the
// research routes, then the runtime resumes the turn. Questions, plans,
// observations, diagnostics, artifacts, event lines, errors and summaries
// come from the agent, the model, the tools or evidence: all of it is text
// (textContent), and object_refs only ever become links to this page's own
// views of existing objects. The runtime exposes no prompt and no private
// reasoning, and none is shown.

const AGENT_POLL_MS = 1000;
const AGENT_STATUS_RETRY_MS = 5000; // a local model not ready yet is asked again this often
const RT_EVENTS_PAGE = 128; // the runtime's MAX_EVENTS_PER_POLL
const RT_BOOT_PAGES = 3; // the runtime keeps 256 events: two pages, and one to spare
const RT_BUSY = new Set(['QUEUED', 'RUNNING']);
const RT_LIVE = new Set(['QUEUED', 'RUNNING', 'AUTHORIZATION_REQUIRED']);
const RT_END_ERRORS = new Set(['FAILED', 'CANCELLED', 'MODEL_UNAVAILABLE', 'MODEL_PROTOCOL_ERROR', 'BUDGET_EXHAUSTED']);
const AGENT_AFTER_ACTION_POLLS = 3; // polls after an action, even when idle
const AGENT_QUESTION_MAX = 512;
const AGENT_EXCLUSIONS_MAX = 8;
const AGENT_ACTIVITY_MAX = 200;
const AGENT_ARTIFACT_PREVIEW = 4000;
const GRANT_HOSTS_MAX = 16;
const GRANT_URLS_MAX = 32; // the store's MAX_CAMPAIGN_URLS
const FINGERPRINT_PREFIX = 16;
const CAMPAIGN_POLL_MS = 2000; // a campaign that has not ended is read again this often
const CAMPAIGN_LIVE = new Set(['PENDING', 'ADMITTED', 'RUNNING']);

const agent = {
  status: null, // the runtime's status: { driver, label, ready, detail, queued, closed }
  statusError: null,
  statusTimer: null,
  catalog: null,
  catalogError: null,
  rt: null, // the current runtime turn: the API's RuntimeTurn, refreshed by polling
  rtCursor: 0, // runtime event log cursor
  rtSeen: new Set(), // runtime event sequences of the current turn
  fetchRt: false, // the current runtime turn must be read again
  resumed: false, // a resume was queued: when it settles, the review and overview are read again
  resumeRefused: null, // the detail of a `turn.resume_refused` event
  cancel: '', // '' | 'pending' | 'done' | 'error': the Cancel request of the current turn
  startKey: null, // { key, sig }: the idempotency key of a submission still waiting for its answer
  cursor: 0, // gateway event log cursor
  gwFrom: 0, // gateway cursor when the current runtime turn was started: its gateway events follow it
  gen: 0, // bumped when the current turn changes; stale polls are dropped
  rev: 0, // bumped when an action (cancel, resume) changes the runtime turn; polls read before are dropped
  timer: null,
  polling: false,
  afterPolls: 0,
  pollError: null,
  missed: false,
  starting: false,
  turn: null, // the gateway turn the runtime turn drives: { turn_id, status, … } kept up to date by its events
  seen: new Set(), // gateway event sequences of the current turn
  plan: null, // { steps, done }
  cards: [], // agent.tool.completed payloads
  activity: [], // gateway and runtime events of the current turn
  results: new Map(), // result_id → { open, loading, data, error }
  review: null, // { id, loading, request, fingerprint, risk, error, note }
  campaignTimer: null, // the next read of a campaign that has not ended
  riskHint: null,
  formNote: null, // { kind, text: () => string }
};

// The runtime turn waits for the worker or runs: it can be cancelled.
function rtBusy() {
  return Boolean(agent.rt) && !agent.rt.lost && RT_BUSY.has(agent.rt.status);
}

// The runtime turn is not over (it may still change): it is polled, and a
// turn started elsewhere does not replace it.
function rtLive() {
  return Boolean(agent.rt) && !agent.rt.lost && RT_LIVE.has(agent.rt.status);
}

// A fresh idempotency key (M6): one per submission.
function newIdempotencyKey() {
  if (window.crypto && typeof window.crypto.randomUUID === 'function') return `ui-${window.crypto.randomUUID()}`;
  const bytes = new Uint8Array(16);
  window.crypto.getRandomValues(bytes);
  return `ui-${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

function lines(text, max) {
  return String(text ?? '').split('\n').map((x) => x.trim()).filter(Boolean).slice(0, max);
}

function refKind(ref) {
  const s = String(ref ?? '');
  const i = s.indexOf(':');
  return i > 0 ? s.slice(0, i) : '';
}

// An object reference: a link to its view when the reader has one
// (evidence, entity), else the reference as code.
function refLink(ref, testid = 'agent-ref') {
  const s = String(ref ?? '');
  const kind = refKind(s);
  if (kind === 'evidence' || kind === 'entity') {
    return h('a', { href: hrefFor(s, kind), class: 'agent-ref', testid, dataset: { ref: s, kind }, text: s });
  }
  return h('code', { class: 'agent-ref hash', testid, dataset: { ref: s, kind }, text: s });
}

function refList(refs, testid) {
  const items = Array.isArray(refs) ? refs : [];
  if (items.length === 0) return h('span', { class: 'muted', testid, text: t('agent_result_none') });
  return h('ul', { class: 'inline-list agent-refs', testid }, items.map((r) => h('li', null, refLink(r))));
}

function fingerprintEl(fp, testid) {
  const full = String(fp ?? '');
  return h('code', { class: 'hash', testid, title: full, dataset: { full }, text: full.slice(0, FINGERPRINT_PREFIX) });
}

// A risk level in the chosen language (SPEC U4); the level itself stays in
// `data-risk` for scripts.
function riskPill(level, testid, title = t('agent_risk_title')) {
  const l = String(level ?? '?');
  return h('span', { class: `pill risk risk-${cssToken(l)}`, testid, title, dataset: { risk: l }, text: enumLabel('risk', l) });
}

// The selection by title (SPEC U5): each reference's label, read once from
// the graph and kept while the page lives; the id until it is known.
const refLabels = new Map();
async function loadRefLabels(refs) {
  const missing = (Array.isArray(refs) ? refs : []).map(String)
    .filter((r) => !refLabels.has(r) && (refKind(r) === 'evidence' || refKind(r) === 'entity'));
  if (missing.length === 0) return false;
  await Promise.all(missing.map(async (r) => {
    try {
      const node = await api(`/api/v1/graph/nodes/${seg(r)}`);
      refLabels.set(r, { label: String(node.label ?? r), kind: displayKind(node) });
    } catch {
      refLabels.set(r, { label: r, kind: '' });
    }
  }));
  return true;
}

function selectionList(refs, testid) {
  const items = Array.isArray(refs) ? refs.map(String) : [];
  if (items.length === 0) return h('span', { class: 'muted', testid, text: t('agent_result_none') });
  return h('ul', { class: 'agent-selection', testid }, items.map((r) => {
    const known = refLabels.get(r);
    return h('li', null,
      labelLink(r, known ? known.label : r, 'agent-ref'),
      known && known.kind ? h('span', { class: `kind kind-${cssToken(known.kind)}`, text: enumLabel('kind', known.kind) }) : null);
  }));
}

function statusPill(prefix, value, testid) {
  const v = String(value ?? '');
  return h('span', { class: `pill status-${cssToken(v)}`, testid, dataset: { status: v }, text: enumLabel(prefix, v) });
}

function clockTime(value) {
  const d = new Date(value);
  if (Number.isNaN(d.getTime())) return h('time', { text: String(value ?? '') });
  const el = h('time', { text: new Intl.DateTimeFormat(LOCALES[lang], { timeStyle: 'medium' }).format(d) });
  el.setAttribute('datetime', String(value));
  el.title = String(value);
  return el;
}

function noteEl(el, note) {
  el.textContent = note ? note.text() : '';
  el.dataset.kind = note ? note.kind : '';
  el.hidden = !note;
}

// ----- state changes

// Makes `rt` (a runtime turn) the current one. Its gateway events are read
// from `gwFrom` once the runtime says which gateway turn it drives.
function agentSetRuntimeTurn(rt, gwFrom) {
  agent.gen += 1;
  agent.rt = { ...rt, turn_id: String(rt.turn_id ?? '') };
  agent.rtSeen = new Set();
  agent.fetchRt = false;
  agent.resumed = false;
  agent.resumeRefused = null;
  agent.cancel = '';
  agent.gwFrom = gwFrom;
  agent.turn = null;
  agent.seen = new Set();
  agent.plan = null;
  agent.cards = [];
  agent.activity = [];
  agent.results = new Map();
  agent.review = null;
  agent.riskHint = null;
  agent.missed = false;
}

function pushActivity(item) {
  agent.activity.push(item);
  if (agent.activity.length > AGENT_ACTIVITY_MAX) agent.activity.splice(0, agent.activity.length - AGENT_ACTIVITY_MAX);
}

// Applies one runtime event (`{seq, turn_id, kind, detail, at}`) to the
// current turn. Returns true when something shown changed.
function rtIngest(ev) {
  if (!ev || typeof ev !== 'object') return false;
  const turnId = String(ev.turn_id ?? '');
  const kind = String(ev.kind ?? '');
  if (!agent.rt || turnId !== agent.rt.turn_id) {
    // A turn started elsewhere (another tab, an API client) becomes the
    // current one only while ours is idle.
    if (kind !== 'turn.queued' || !turnId || agent.starting || rtLive()) return false;
    agentSetRuntimeTurn({ turn_id: turnId, status: 'QUEUED' }, 0);
    agent.fetchRt = true;
  }
  const seq = Number(ev.seq);
  if (agent.rtSeen.has(seq)) return false;
  agent.rtSeen.add(seq);
  const detail = String(ev.detail ?? '');
  pushActivity({ source: 'runtime', type: kind, sequence: seq, timestamp: String(ev.at ?? ''), detail });
  if (kind === 'turn.resume_refused') agent.resumeRefused = detail;
  return true;
}

// Applies one gateway event to the gateway turn the current runtime turn
// drives (others are not ours). Returns true when something shown changed.
function agentIngest(ev) {
  if (!ev || typeof ev !== 'object') return false;
  const turnId = String(ev.turn_id ?? '');
  if (!agent.turn || turnId !== agent.turn.turn_id) return false;
  const seq = Number(ev.sequence);
  if (agent.seen.has(seq)) return false;
  agent.seen.add(seq);
  pushActivity({ ...ev, source: 'gateway' });
  const p = ev.payload && typeof ev.payload === 'object' ? ev.payload : {};
  const turn = agent.turn;
  switch (ev.type) {
    case 'agent.plan.updated':
      agent.plan = { steps: Array.isArray(p.steps) ? p.steps.map((x) => String(x)) : [], done: Number(p.done ?? 0) };
      break;
    case 'agent.tool.completed':
      agent.cards.push({
        sequence: seq,
        tool_id: String(p.tool_id ?? ''),
        status: String(p.status ?? ''),
        result_id: p.result_id ? String(p.result_id) : null,
        observations: Array.isArray(p.observations) ? p.observations.map((x) => String(x)) : [],
        diagnostic: p.diagnostic === null || p.diagnostic === undefined ? null : String(p.diagnostic),
        refs: Array.isArray(ev.refs) ? ev.refs : [],
      });
      break;
    case 'agent.authorization.required':
      turn.status = 'AUTHORIZATION_REQUIRED';
      if (p.research_request) turn.research_request = String(p.research_request);
      if (p.risk_level) agent.riskHint = String(p.risk_level);
      break;
    case 'agent.turn.completed':
      turn.status = 'COMPLETED';
      turn.summary = String(p.summary ?? '');
      turn.summary_refs = Array.isArray(ev.refs) ? ev.refs : [];
      break;
    case 'agent.error':
      turn.status = 'FAILED';
      turn.error = String(p.message ?? '');
      break;
    default:
      break;
  }
  return true;
}

// ----- polling (no SSE: the runtime's and the gateway's event logs are
// polled while a turn is live)

// `data-polling` on the panel: true while a poll is scheduled or running.
function setPollingAttr() {
  $('agent-panel').dataset.polling = String(Boolean(agent.timer) || agent.polling);
}

function agentSchedule() {
  if (!agent.timer && !agent.polling && !agent.pollError) {
    if (rtLive()) {
      agent.timer = setTimeout(agentPoll, AGENT_POLL_MS);
    } else if (agent.afterPolls > 0) {
      agent.afterPolls -= 1;
      agent.timer = setTimeout(agentPoll, AGENT_POLL_MS);
    }
  }
  setPollingAttr();
}

function agentKick() {
  if (agent.timer) {
    clearTimeout(agent.timer);
    agent.timer = null;
  }
  agent.pollError = null;
  agent.afterPolls = AGENT_AFTER_ACTION_POLLS;
  if (!agent.polling) agentPoll();
}

// One poll: the runtime turn (while it moves), the runtime's events, then
// the events of the gateway turn it drives — in this order, so that the
// events shown are at least as new as the turn's state. Everything is read
// first and applied at once: a turn shown paused or completed already has
// its events, plan and tool cards.
async function agentPoll() {
  agent.timer = null;
  if (agent.polling) return;
  agent.polling = true;
  setPollingAttr();
  const gen = agent.gen;
  const rev = agent.rev;
  const rt = agent.rt;
  let rtPage;
  let fresh = null;
  let lost = false;
  let gwPage = null;
  let bind = null;
  let gwCursor = agent.cursor;
  let late = false;
  const readTurn = async () => {
    try {
      return await api(`/api/v1/agent-runtime/turns/${seg(rt.turn_id)}`);
    } catch (err) {
      // Evicted (the runtime keeps a bounded number of turns): the last
      // state read stays shown, and the turn is no longer followed.
      if (!(err instanceof ApiError && err.status === 404)) throw err;
      lost = true;
      return null;
    }
  };
  try {
    const follow = Boolean(rt) && !rt.lost;
    if (follow && (agent.fetchRt || RT_BUSY.has(rt.status))) fresh = await readTurn();
    rtPage = await api(`/api/v1/agent-runtime/events?cursor=${agent.rtCursor}&limit=${RT_EVENTS_PAGE}`);
    const rtEvents = Array.isArray(rtPage.events) ? rtPage.events : [];
    if (follow && !fresh && !lost
      && (rtPage.missed || rtEvents.some((e) => e && String(e.turn_id ?? '') === rt.turn_id))) {
      // A paused or ended turn moved (resumed elsewhere): its state may be
      // newer than these events, so one more poll follows.
      fresh = await readTurn();
      late = true;
    }
    const gw = (fresh ?? rt)?.gateway_turn_id;
    if (gw && !lost) {
      if (!agent.turn || agent.turn.turn_id !== String(gw)) {
        bind = String(gw);
        gwCursor = Math.min(agent.cursor, agent.gwFrom);
      }
      gwPage = await api(`/api/v1/agent-tools/events?cursor=${gwCursor}`);
    }
  } catch (err) {
    agent.polling = false;
    // Stop on any error (a lost session, a server restart): no retry loop
    // behind the analyst's back; the panel says so and offers to resume.
    agent.pollError = err;
    agent.afterPolls = 0;
    setPollingAttr();
    renderAgentError();
    return;
  }
  agent.polling = false;
  if (gen !== agent.gen || rev !== agent.rev) {
    // The current turn changed while this poll ran (another turn, or a
    // cancel or resume answered meanwhile): it is read again from the
    // right cursors.
    agentSchedule();
    return;
  }
  const wasBusy = Boolean(rt) && RT_BUSY.has(rt.status);
  let changed = false;
  for (const ev of Array.isArray(rtPage.events) ? rtPage.events : []) changed = rtIngest(ev) || changed;
  const rtNext = Number(rtPage.next_cursor);
  if (Number.isSafeInteger(rtNext) && rtNext >= 0) agent.rtCursor = rtNext;
  if (rtPage.missed && !agent.missed) {
    agent.missed = true;
    changed = true;
  }
  if (agent.rt !== rt) {
    // A turn started elsewhere became the current one: read it at once.
    agent.afterPolls = Math.max(agent.afterPolls, 1);
  } else if (rt) {
    if (fresh) {
      Object.assign(rt, fresh, { turn_id: rt.turn_id });
      agent.fetchRt = false;
      changed = true;
    }
    if (late) agent.afterPolls = Math.max(agent.afterPolls, 1);
    if (lost) {
      rt.lost = true;
      agent.formNote = { kind: 'error', text: () => t('agent_turn_lost') };
      changed = true;
    }
    if (bind) {
      agent.turn = { turn_id: bind, status: 'RUNNING' };
      agent.seen = new Set();
      changed = true;
    }
    if (gwPage) {
      for (const ev of Array.isArray(gwPage.events) ? gwPage.events : []) changed = agentIngest(ev) || changed;
      const next = Number(gwPage.next_cursor);
      if (Number.isSafeInteger(next) && next >= 0) agent.cursor = next;
      if (gwPage.missed && !agent.missed) {
        agent.missed = true;
        changed = true;
      }
    }
    if (wasBusy && !RT_BUSY.has(rt.status)) agentSettled(rt);
  }
  if (changed) renderAgent();
  const cur = agent.rt;
  if (cur && cur.research_request && cur.status === 'AUTHORIZATION_REQUIRED'
    && (!agent.review || agent.review.id !== String(cur.research_request))) {
    loadReview();
  }
  agentSchedule();
}

// The runtime turn left QUEUED/RUNNING (paused, completed or ended).
function agentSettled(rt) {
  if (agent.resumed) {
    agent.resumed = false;
    const status = String(rt.status ?? '');
    if (status === 'AUTHORIZATION_REQUIRED' && agent.resumeRefused !== null) {
      const message = agent.resumeRefused;
      reviewNote('error', () => t('agent_resume_refused', { message }));
    } else {
      reviewNote('ok', () => t('agent_resumed', { status: enumLabel('turn', status) }));
    }
    loadReview(true);
    // New evidence (a synthetic campaign's pages) shows in the overview.
    const { name } = parseHash();
    if (name === '' || name === 'overview') route();
  }
  // A turn that could not reach the model: the mode line says why.
  if (rt.status === 'MODEL_UNAVAILABLE') agentLoadStatus();
}

// ----- actions

// Starts a runtime turn (M6). The idempotency key is fresh for each
// submission and kept until the server answers it: a second submission
// meanwhile is ignored, and a retry of the same question after no answer
// (network, timeout, 5xx) reuses it, so it cannot start a second turn.
async function agentStart(ev) {
  ev.preventDefault();
  if (agent.starting) return undefined;
  const question = $('agent-question').value.trim();
  const exclusions = String($('agent-exclusions').value).split('\n').map((x) => x.trim()).filter(Boolean);
  const say = (key, kind, vars) => {
    agent.formNote = { kind, text: () => t(key, vars) };
    renderAgentForm();
  };
  if (!question) return say('agent_question_missing', 'error');
  if (Array.from(question).length > AGENT_QUESTION_MAX) return say('agent_question_too_long', 'error', { n: AGENT_QUESTION_MAX });
  if (exclusions.length > AGENT_EXCLUSIONS_MAX) return say('agent_exclusions_too_many', 'error', { n: AGENT_EXCLUSIONS_MAX });
  // The analyst's language: the demo agent plans and sums up in it (SPEC U4).
  const body = { question, exclusions, lang };
  if (state.investigationId) body.investigation_id = state.investigationId;
  // Read only (a local model's turn): the catalog's read tools, nothing
  // that prepares, proposes or reaches out (SPEC M: the turn's `tools`).
  if (localModel() && $('agent-readonly').checked) {
    const tools = agent.catalog && Array.isArray(agent.catalog.tools) ? agent.catalog.tools : [];
    const read = tools.filter((x) => x && ['read', 'meta'].includes(x.action_class)).map((x) => String(x.tool_id));
    if (read.length === 0) return say('agent_readonly_no_catalog', 'error');
    body.tools = read;
  }
  const sig = JSON.stringify(body);
  if (!agent.startKey || agent.startKey.sig !== sig) agent.startKey = { key: newIdempotencyKey(), sig };
  body.idempotency_key = agent.startKey.key;
  const run = $('agent-run');
  run.disabled = true;
  agent.starting = true;
  agent.gen += 1; // drop whatever a poll in flight brings back
  const gwFrom = agent.cursor; // this turn's gateway events come after it
  say('agent_running', 'info');
  let turn = null;
  try {
    turn = await api('/api/v1/agent-runtime/turns', { method: 'POST', body });
    agent.startKey = null;
  } catch (err) {
    // A refusal is an answer (nothing started): the next submission gets a
    // new key. Without an answer the key stays for a retry.
    if (err instanceof ApiError && err.status < 500) agent.startKey = null;
    agent.formNote = { kind: 'error', text: () => errorText(err) };
  } finally {
    agent.starting = false;
    run.disabled = false;
  }
  if (turn) {
    agentSetRuntimeTurn(turn, gwFrom);
    const status = String(turn.status ?? '');
    // The note follows the turn: it reads its current status at each render.
    agent.formNote = {
      kind: 'ok',
      text: () => t('agent_started', { status: enumLabel('turn', String(agent.rt?.status ?? status)) }),
    };
  }
  renderAgent();
  agentKick();
  return undefined;
}

// Cancels the current runtime turn (M8): a queued turn never runs, a
// running one has every later effect blocked.
async function agentCancel() {
  const rt = agent.rt;
  if (!rt || agent.cancel === 'pending') return;
  const gen = agent.gen;
  agent.cancel = 'pending';
  agent.rev += 1;
  agent.formNote = { kind: 'info', text: () => t('agent_cancelling') };
  renderAgent();
  try {
    const updated = await api(`/api/v1/agent-runtime/turns/${seg(rt.turn_id)}/cancel`, { method: 'POST', body: {} });
    if (gen !== agent.gen) return;
    agent.rev += 1;
    Object.assign(rt, updated, { turn_id: rt.turn_id });
    agent.cancel = 'done';
    agent.formNote = { kind: 'ok', text: () => t('agent_cancelled') };
  } catch (err) {
    if (gen !== agent.gen) return;
    agent.rev += 1;
    // Already ended (409), or no answer: the next poll says where it stands.
    agent.cancel = 'error';
    agent.fetchRt = true;
    agent.formNote = { kind: 'error', text: () => errorText(err) };
  }
  renderAgent();
  agentKick();
}

function resetGrantForm() {
  $('agent-grant-form').reset();
  $('agent-refuse-form').reset();
}

// The grant form starts from the addresses research.prepare proposed (SPEC
// F1), once per request: the human edits them; only the final list is sent.
function prefillGrant(r) {
  const c = r && r.candidates && typeof r.candidates === 'object' ? r.candidates : null;
  if (!c) return;
  const urls = (Array.isArray(c.urls) ? c.urls : []).map((u) => String(u && u.url ? u.url : '')).filter(Boolean);
  const hosts = (Array.isArray(c.hosts) ? c.hosts : []).map(String).filter(Boolean);
  if (hosts.length) $('agent-grant-hosts').value = hosts.slice(0, GRANT_HOSTS_MAX).join('\n');
  if (urls.length) {
    $('agent-grant-urls').value = urls.slice(0, GRANT_URLS_MAX).join('\n');
    const requests = $('agent-grant-requests');
    if (Number(requests.value) < urls.length) requests.value = String(Math.min(urls.length, GRANT_URLS_MAX));
  }
}

// A link to an object named by its title or name (the reference stays in
// its data and tooltip, not in the text).
function labelLink(ref, label, testid) {
  const s = String(ref ?? '');
  const kind = refKind(s);
  const text = String(label || s);
  if (kind === 'evidence' || kind === 'entity') {
    return h('a', { href: hrefFor(s, kind), class: 'agent-ref', testid, title: s, dataset: { ref: s, kind }, text });
  }
  return h('span', { testid, title: s, text });
}

// Why an address is proposed, in words, with the object it came through.
function candidateWhy(u) {
  const origin = String(u.origin ?? '');
  const why = t(`cand_${origin}`, { relation: u.relation ? enumLabel('rel', u.relation) : '' });
  return [h('span', { class: 'muted', text: t('cand_why', { why }) }), labelLink(u.via ?? u.selected, u.label, 'agent-candidate-source')];
}

function skipWhy(s) {
  const reason = String(s.reason ?? '');
  let detail = String(s.detail ?? '');
  if (reason === 'private_address') detail = t(`addr_${detail}`);
  if (reason === 'onion') detail = t(`onion_${detail}`);
  return t(`skip_${reason}`, { detail });
}

// What research.prepare proposed (SPEC F1): each address with why, then
// what it left out and why.
function candidatesEl(c, pending) {
  const urls = Array.isArray(c.urls) ? c.urls : [];
  const skipped = Array.isArray(c.skipped) ? c.skipped : [];
  const box = h('div', { class: 'candidates', testid: 'agent-candidates', dataset: { count: String(urls.length) } });
  if (urls.length === 0) {
    box.append(h('p', { class: 'muted', testid: 'agent-candidates-none', text: t('candidates_none') }));
  } else {
    if (pending) box.append(h('p', { class: 'muted small', text: t('candidates_help') }));
    box.append(h('ul', { class: 'candidate-list' }, urls.map((u) => h('li',
      { testid: 'agent-candidate', dataset: { url: String(u.url ?? ''), origin: String(u.origin ?? '') } },
      h('code', { class: 'candidate-url', text: String(u.url ?? '') }),
      u.host_unicode ? h('span', { class: 'muted small', text: ` (${u.host_unicode})` }) : null,
      h('div', { class: 'candidate-why small' }, candidateWhy(u))))));
    const more = Number(c.more ?? 0);
    if (more > 0) box.append(h('p', { class: 'muted small', testid: 'agent-candidates-more', text: tn('candidates_more', more) }));
  }
  if (skipped.length) {
    const total = Math.max(Number(c.skipped_total ?? 0), skipped.length);
    box.append(h('details', { class: 'candidate-skipped', testid: 'agent-candidates-skipped' },
      h('summary', { text: tn('candidates_skipped', total) }),
      h('ul', null, skipped.map((x) => h('li', { testid: 'agent-candidate-skipped', dataset: { reason: String(x.reason ?? '') } },
        h('code', { class: 'candidate-url', text: String(x.value ?? '') }),
        h('div', { class: 'muted small', text: skipWhy(x) }))))));
  }
  return box;
}

async function loadReview(force = false) {
  const rt = agent.rt;
  const id = rt && rt.research_request ? String(rt.research_request) : null;
  if (!id) return;
  const fresh = !agent.review || agent.review.id !== id;
  if (!fresh && agent.review.loading) return;
  if (!fresh && !force) return;
  if (fresh) resetGrantForm();
  campaignStop();
  const before = fresh ? '' : campaignStatus(agent.review.request);
  const decided = !fresh && agent.review.request && agent.review.request.status !== 'PENDING';
  agent.review = { ...(fresh ? {} : agent.review), id, loading: true, error: null };
  renderReview();
  const gen = agent.gen;
  try {
    let request = null;
    let fingerprint = agent.review.fingerprint ?? null;
    let risk = agent.review.risk ?? agent.riskHint;
    if (!decided) {
      const list = await api('/api/v1/research/requests');
      request = (Array.isArray(list.requests) ? list.requests : []).find((r) => r && r.id === id) ?? null;
      fingerprint = list.current_contract_fingerprint ?? null;
      risk = list.risk_level ?? risk;
    }
    if (!request) {
      // No longer pending: read it on its own (granted, refused or void),
      // with its campaign's progress.
      const one = await api(`/api/v1/research/requests/${seg(id)}`);
      request = one.request ?? null;
      fingerprint = one.current_contract_fingerprint ?? fingerprint;
    }
    // A REAL grant waiting for its confirmation (T2): where to confirm it,
    // as egress says (a fresh one-time link at each read).
    let confirmation = null;
    const grantId = request && request.grant ? String(request.grant.id ?? '') : '';
    // Past the confirmation: egress's own log of the grant's fetches (T2).
    let fetchLog = null;
    if (isRealWorkspace() && grantId && campaignStatus(request) === 'PENDING') {
      confirmation = await api(`/api/v1/grants/${seg(grantId)}/confirmation`).catch(() => null);
    } else if (isRealWorkspace() && grantId && campaignStatus(request)) {
      fetchLog = await api(`/api/v1/grants/${seg(grantId)}/fetch-log`).catch(() => null);
    }
    // The selection's titles (read once each; a failure leaves the id).
    if (request) await loadRefLabels(request.selection);
    if (gen !== agent.gen) return;
    Object.assign(agent.review, { loading: false, request, fingerprint, risk, confirmation, fetchLog });
    if (request && request.status === 'PENDING' && !agent.review.prefilled) {
      prefillGrant(request);
      agent.review.prefilled = true;
    }
    if (agent.review.noteUntilConfirmed && campaignStatus(request) && campaignStatus(request) !== 'PENDING') {
      Object.assign(agent.review, { note: null, noteUntilConfirmed: false });
    }
  } catch (err) {
    if (gen !== agent.gen) return;
    Object.assign(agent.review, { loading: false, error: err });
  }
  renderReview();
  const after = campaignStatus(agent.review.request);
  if (CAMPAIGN_LIVE.has(before) && after && !CAMPAIGN_LIVE.has(after)) {
    // The campaign ended: its pages are evidence now.
    const { name } = parseHash();
    if (name === '' || name === 'overview') route();
  }
  campaignSchedule();
}

// The status of a request's campaign, or ''.
function campaignStatus(request) {
  const c = request && typeof request === 'object' ? request.campaign : null;
  return c && typeof c === 'object' ? String(c.status ?? '') : '';
}

// A campaign that has not ended is read again (while the page is visible
// and the last read succeeded): its progress bar and items follow it.
function campaignSchedule() {
  const rv = agent.review;
  if (agent.campaignTimer || !rv || rv.error || rv.loading || document.hidden) return;
  if (!CAMPAIGN_LIVE.has(campaignStatus(rv.request))) return;
  agent.campaignTimer = setTimeout(() => {
    agent.campaignTimer = null;
    loadReview(true);
  }, CAMPAIGN_POLL_MS);
}

function campaignStop() {
  if (agent.campaignTimer) {
    clearTimeout(agent.campaignTimer);
    agent.campaignTimer = null;
  }
}

function reviewNote(kind, text) {
  if (agent.review) agent.review.note = { kind, text };
  noteEl($('agent-review-status'), agent.review ? agent.review.note : null);
}

function positiveInt(el, labelKey) {
  const raw = String(el.value ?? '').trim();
  if (!/^[0-9]{1,10}$/.test(raw) || Number(raw) < 1) {
    reviewNote('error', () => t('agent_grant_number', { field: t(labelKey) }));
    return null;
  }
  return Number(raw);
}

async function agentGrant(ev) {
  ev.preventDefault();
  const r = agent.review && agent.review.request;
  if (!r) return;
  const hosts = String($('agent-grant-hosts').value).split('\n').map((x) => x.trim()).filter(Boolean);
  if (hosts.length === 0) return reviewNote('error', () => t('agent_grant_hosts_missing'));
  if (hosts.length > GRANT_HOSTS_MAX) return reviewNote('error', () => t('agent_grant_hosts_too_many', { n: GRANT_HOSTS_MAX }));
  const maxRequests = positiveInt($('agent-grant-requests'), 'agent_grant_requests');
  if (maxRequests === null) return undefined;
  const maxBytes = positiveInt($('agent-grant-bytes'), 'agent_grant_bytes');
  if (maxBytes === null) return undefined;
  const minutes = positiveInt($('agent-grant-minutes'), 'agent_grant_minutes');
  if (minutes === null) return undefined;
  const body = { scope: { hosts }, budget: { max_requests: maxRequests, max_bytes: maxBytes }, expires_in_minutes: minutes };
  if (isRealWorkspace()) {
    // REAL: the exact addresses the campaign fetches (the server checks
    // each against the scope; nothing else is ever fetched).
    const urls = lines($('agent-grant-urls').value, GRANT_URLS_MAX + 1);
    if (urls.length === 0) return reviewNote('error', () => t('agent_grant_urls_missing'));
    if (urls.length > GRANT_URLS_MAX) return reviewNote('error', () => t('agent_grant_urls_too_many', { n: GRANT_URLS_MAX }));
    body.urls = urls;
  }
  setReviewBusy(true);
  reviewNote('info', () => t('agent_granting'));
  try {
    const out = await api(`/api/v1/research/requests/${seg(r.id)}/grant`, { method: 'POST', body });
    const grant = String(out.grant ?? '');
    const campaign = String(out.campaign ?? '');
    // REAL: a proposal until a human confirms it outside the server (T2).
    const key = out.confirmation ? 'agent_granted_confirm' : 'agent_granted';
    reviewNote('ok', () => t(key, { grant, campaign }));
    // « Confirmez-la » holds only until the confirmation (see loadReview).
    if (out.confirmation && agent.review) agent.review.noteUntilConfirmed = true;
    await loadReview(true);
  } catch (err) {
    reviewNote('error', () => errorText(err));
  } finally {
    setReviewBusy(false);
  }
  return undefined;
}

async function agentRefuse(ev) {
  ev.preventDefault();
  const r = agent.review && agent.review.request;
  if (!r) return;
  const reason = String($('agent-refuse-reason').value).trim();
  if (!reason) {
    reviewNote('error', () => t('agent_refuse_missing'));
    return;
  }
  setReviewBusy(true);
  reviewNote('info', () => t('agent_refusing'));
  try {
    await api(`/api/v1/research/requests/${seg(r.id)}/refuse`, { method: 'POST', body: { reason } });
    reviewNote('ok', () => t('agent_refused'));
    await loadReview(true);
  } catch (err) {
    reviewNote('error', () => errorText(err));
  } finally {
    setReviewBusy(false);
  }
}

// Resumes the paused runtime turn (M8) once the request is decided: the
// runtime queues it, the gateway checks the grant and rereads the research
// state; polling follows it to its summary.
async function agentResume() {
  const rt = agent.rt;
  if (!rt) return;
  setReviewBusy(true);
  reviewNote('info', () => t('agent_resuming'));
  const gen = agent.gen;
  agent.rev += 1;
  try {
    const updated = await api(`/api/v1/agent-runtime/turns/${seg(rt.turn_id)}/resume`, { method: 'POST', body: {} });
    if (gen !== agent.gen) return;
    agent.rev += 1;
    Object.assign(rt, updated, { turn_id: rt.turn_id });
    agent.resumed = true;
    agent.resumeRefused = null;
    const status = String(updated.status ?? '');
    reviewNote('info', () => t('agent_resume_queued', { status: enumLabel('turn', status) }));
    renderAgent();
    agentKick();
  } catch (err) {
    reviewNote('error', () => errorText(err));
  } finally {
    setReviewBusy(false);
  }
}

// Revokes the request's grant: the store stops its campaign, the server
// tells egress; the review is read again.
async function agentRevoke() {
  const r = agent.review && agent.review.request;
  const grant = r && r.grant ? String(r.grant.id ?? '') : '';
  if (!grant) return;
  setReviewBusy(true);
  reviewNote('info', () => t('agent_revoking'));
  try {
    await api(`/api/v1/grants/${seg(grant)}/revoke`, { method: 'POST', body: {} });
    reviewNote('ok', () => t('agent_revoked'));
    await loadReview(true);
  } catch (err) {
    reviewNote('error', () => errorText(err));
  } finally {
    setReviewBusy(false);
  }
}

function setReviewBusy(busy) {
  for (const id of ['agent-grant', 'agent-refuse', 'agent-resume', 'agent-revoke']) $(id).disabled = busy;
  $('agent-review').dataset.busy = String(busy);
}

async function toggleResult(card) {
  const id = card.result_id;
  if (!id) return;
  let entry = agent.results.get(id);
  if (entry && entry.open) {
    entry.open = false;
    renderCards();
    return;
  }
  if (!entry) {
    entry = { open: true, loading: true, data: null, error: null };
    agent.results.set(id, entry);
  }
  entry.open = true;
  renderCards();
  if (entry.data) return;
  entry.loading = true;
  try {
    entry.data = await api(`/api/v1/agent-tools/results/${seg(id)}`);
    entry.error = null;
  } catch (err) {
    entry.error = err;
  }
  entry.loading = false;
  renderCards();
}

// ----- rendering

function renderAgent() {
  const panel = $('agent-panel');
  const rt = agent.rt;
  panel.dataset.turnId = rt ? String(rt.turn_id ?? '') : '';
  panel.dataset.turnStatus = rt ? String(rt.status ?? '') : '';
  panel.dataset.gatewayTurnId = agent.turn ? String(agent.turn.turn_id ?? '') : '';
  panel.dataset.cancel = agent.cancel;
  // The same status on the panel and on the top bar's button, which also
  // says when the agent waits for the analyst (the drawer may be closed).
  for (const pill of [$('agent-turn-status'), $('agent-toggle-status')]) {
    if (rt && rt.status) {
      pill.textContent = enumLabel('turn', rt.status);
      pill.className = `pill status-${cssToken(rt.status)}`;
      pill.dataset.status = String(rt.status);
      pill.hidden = false;
    } else {
      pill.hidden = true;
    }
  }
  const waiting = Boolean(rt && rt.status === 'AUTHORIZATION_REQUIRED');
  $('agent-toggle').dataset.attention = String(waiting);
  if (waiting) $('agent-toggle').title = t('agent_needs_you');
  else $('agent-toggle').removeAttribute('title');
  renderAgentMode();
  renderAgentTools();
  renderAgentForm();
  renderAgentError();
  renderSummary();
  renderReview();
  renderPlan();
  renderCards();
  renderActivity();
}

// The mode line (M10) says which agent the runtime drives, as its status
// says: the demo agent, the local model, or why the local model cannot run
// now. Nothing here falls back to the demo agent's name.
function renderAgentMode() {
  const el = $('agent-mode');
  const st = agent.status;
  if (agent.statusError) {
    el.textContent = t('agent_unavailable', { message: errorText(agent.statusError) });
    el.dataset.mode = 'unavailable';
    el.dataset.ready = 'false';
    return;
  }
  if (!st) {
    el.textContent = t('loading');
    el.dataset.mode = '';
    el.dataset.ready = '';
    return;
  }
  const driver = String(st.driver ?? '');
  const label = String(st.label ?? '');
  const detail = st.detail === null || st.detail === undefined ? '' : String(st.detail);
  let text = driver === 'demo' ? t('agent_demo') : (label || driver);
  if (detail) text = t('agent_mode_detail', { label: text, detail });
  if (st.closed) text = t('agent_mode_closed', { label: text });
  el.textContent = shown(text);
  el.dataset.mode = driver;
  el.dataset.ready = String(st.ready === true);
}

function renderAgentTools() {
  const list = clear($('agent-tools'));
  const summary = $('agent-tools-summary');
  const tools = agent.catalog && Array.isArray(agent.catalog.tools) ? agent.catalog.tools : [];
  if (tools.length === 0) {
    summary.textContent = agent.catalogError ? t('agent_mode_detail', { label: t('agent_tools'), detail: errorText(agent.catalogError) }) : t('agent_tools');
    return;
  }
  const unavailable = tools.filter((x) => x && x.availability && x.availability.status !== 'AVAILABLE').length;
  summary.textContent = t('agent_tools_count', { n: fmtNumber(tools.length), u: fmtNumber(unavailable) });
  for (const tool of tools) {
    const av = tool.availability || {};
    const status = String(av.status ?? '');
    const reason = av.reason === null || av.reason === undefined ? '' : String(av.reason);
    list.append(h('li', { class: 'agent-tool', testid: 'agent-tool', dataset: { tool: String(tool.tool_id ?? ''), availability: status, risk: String(tool.risk_level ?? '') } },
      h('code', { class: 'agent-tool-id', text: tool.tool_id ?? '?' }),
      riskPill(tool.risk_level, 'agent-tool-risk'),
      h('span', { class: `pill avail-${cssToken(status)}`, testid: 'agent-tool-availability', text: enumLabel('agent_tool', status) }),
      reason ? h('span', { class: status === 'AVAILABLE' ? 'muted small' : 'small agent-tool-reason', testid: 'agent-tool-reason', text: reason }) : null));
  }
}

// Whether the runtime drives a local model (only its turns take `tools`).
function localModel() {
  return agent.status?.driver === 'local_model';
}

function renderAgentForm() {
  const q = $('agent-question');
  $('agent-readonly-row').hidden = !localModel();
  $('agent-question-count').textContent = t('agent_question_count', { n: fmtNumber(Array.from(q.value).length), max: fmtNumber(AGENT_QUESTION_MAX) });
  noteEl($('agent-form-status'), agent.formNote);
  const cancel = $('agent-cancel');
  cancel.hidden = !rtBusy();
  cancel.disabled = agent.cancel === 'pending';
  const counters = $('agent-turn-counters');
  const rt = agent.rt;
  if (!rt) {
    counters.textContent = '';
    counters.hidden = true;
    return;
  }
  const n = (x) => (Number.isSafeInteger(Number(x)) ? Number(x) : 0);
  const rounds = n(rt.rounds);
  const calls = n(rt.tool_calls);
  const repairs = n(rt.repairs);
  const line = t('agent_counters', { rounds: fmtNumber(rounds), calls: fmtNumber(calls), repairs: fmtNumber(repairs) });
  counters.textContent = rt.driver === 'local_model' && rt.model ? `${t('agent_local', { model: String(rt.model) })} — ${line}` : line;
  Object.assign(counters.dataset, { rounds: String(rounds), toolCalls: String(calls), repairs: String(repairs), driver: String(rt.driver ?? '') });
  counters.hidden = false;
}

function renderAgentError() {
  const box = clear($('agent-error'));
  if (!agent.pollError) {
    box.hidden = true;
    return;
  }
  const retry = h('button', { type: 'button', class: 'more', testid: 'agent-poll-retry', text: t('agent_poll_retry') });
  retry.addEventListener('click', () => agentKick());
  box.append(h('p', { text: t('agent_poll_stopped', { message: errorText(agent.pollError) }) }), retry);
  box.hidden = false;
}

// The runtime turn's summary once COMPLETED, or one short sentence with its
// error when it ended otherwise.
function renderSummary() {
  const box = $('agent-summary-box');
  const text = $('agent-summary');
  const refs = clear($('agent-summary-refs'));
  const rt = agent.rt;
  const status = rt ? String(rt.status ?? '') : '';
  if (status === 'COMPLETED' && rt.summary) {
    text.textContent = shown(rt.summary);
    text.dataset.status = status;
    text.className = 'agent-summary';
    for (const r of Array.isArray(rt.summary_refs) ? rt.summary_refs : []) refs.append(h('li', null, refLink(r, 'agent-summary-ref')));
    box.dataset.status = status;
    box.hidden = false;
  } else if (RT_END_ERRORS.has(status)) {
    text.textContent = t(`agent_end_${status}`, { message: runtimeDetail(String(rt.error ?? '')) });
    text.dataset.status = status;
    text.className = 'agent-summary error-box';
    box.dataset.status = status;
    box.hidden = false;
  } else {
    text.textContent = '';
    text.dataset.status = '';
    box.dataset.status = '';
    box.hidden = true;
  }
}

function renderReview() {
  const box = $('agent-review');
  const details = clear($('agent-review-details'));
  const rv = agent.review;
  const rt = agent.rt;
  // A cancelled turn cannot resume: its request is not offered here.
  if (!rv || !rt || rv.id !== String(rt.research_request ?? '') || rt.status === 'CANCELLED') {
    box.hidden = true;
    box.dataset.requestId = '';
    box.dataset.requestStatus = '';
    return;
  }
  box.hidden = false;
  box.dataset.requestId = rv.id;
  const r = rv.request;
  const pending = Boolean(r) && r.status === 'PENDING';
  box.dataset.requestStatus = r ? String(r.status ?? '') : '';
  $('agent-grant-form').hidden = !pending;
  $('agent-grant-urls-box').hidden = !(pending && isRealWorkspace());
  $('agent-refuse-form').hidden = !pending;
  // A campaign that has not ended is waited for: the resumed turn reads its
  // outcome (the pages fetched), not a campaign half done.
  const waiting = Boolean(r) && CAMPAIGN_LIVE.has(campaignStatus(r));
  // A revoked or expired grant cannot resume the turn (M8): cancel it instead.
  const lapsed = Boolean(r) && r.status === 'GRANTED' && r.grant_active === false;
  const resumable = r && !pending && !lapsed && rt.status === 'AUTHORIZATION_REQUIRED' && !rt.lost;
  $('agent-resume').hidden = !(resumable && !waiting);
  // An active grant can be revoked at any time (SPEC E3, W4): its campaign
  // stops at once.
  $('agent-revoke').hidden = !(r && r.status === 'GRANTED' && r.grant_active === true && r.grant && r.grant.id);
  box.dataset.campaignStatus = r ? campaignStatus(r) : '';
  noteEl($('agent-review-status'), rv.note ?? null);
  if (rv.loading && !r) {
    details.append(h('p', { class: 'muted', text: t('agent_review_loading') }));
    return;
  }
  if (rv.error) details.append(h('p', { class: 'error-box', testid: 'agent-review-error', text: errorText(rv.error) }));
  if (!r) return;
  const exclusions = Array.isArray(r.exclusions) ? r.exclusions : [];
  const stale = rv.fingerprint && r.contract_fingerprint && rv.fingerprint !== r.contract_fingerprint;
  const c = r.campaign && typeof r.campaign === 'object' ? r.campaign : null;
  const rows = [
    [t('agent_review_status'), statusPill('req', r.status, 'agent-review-request-status'), 'agent-review-status-row'],
    [t('agent_review_question'), h('span', { class: 'agent-question-text', text: r.question ?? '' }), 'agent-review-question'],
    [t('agent_review_selection'), selectionList(r.selection, 'agent-review-selection'), 'agent-review-selection-row'],
    [t('agent_review_exclusions'), exclusions.length
      ? h('ul', { class: 'agent-exclusion-list' }, exclusions.map((x) => h('li', { text: x })))
      : h('span', { class: 'muted', text: t('agent_review_none') }), 'agent-review-exclusions'],
  ];
  if (r.candidates && typeof r.candidates === 'object') {
    rows.push([t('agent_review_candidates'), candidatesEl(r.candidates, pending), 'agent-review-candidates-row']);
  }
  rows.push(
    // What granting does: fetch pages through Tor — outbound and observable
    // by the sites asked (SPEC R6), whatever the preparing tool declared.
    [t('agent_review_outbound_risk'), h('span', null,
      riskPill('high', 'agent-review-outbound-risk', t('agent_review_outbound_title')), ' ',
      h('span', { class: 'muted small', text: t('agent_review_outbound_why') })), 'agent-review-outbound-row'],
    [t('agent_review_risk'), riskPill(rv.risk ?? agent.riskHint, 'agent-review-risk'), 'agent-review-risk-row'],
    [t('agent_review_requested_by'), h('span', { text: r.requested_by ?? '' }), 'agent-review-requested-by'],
    [t('agent_review_created'), timeEl(r.created_at), 'agent-review-created'],
  );
  if (stale) rows.push([t('agent_review_fingerprint'), h('span', { class: 'error-box agent-stale', testid: 'agent-review-stale', text: t('agent_review_fingerprint_stale') }), 'agent-review-stale-row']);
  if (r.decision_note) rows.push([t('agent_review_note'), h('span', { text: r.decision_note }), 'agent-review-decision-note']);
  const confirming = Boolean(rv.confirmation) && Boolean(c) && campaignStatus(r) === 'PENDING';
  if (c) rows.push([t('agent_review_campaign'), renderCampaign(c, { confirming: confirming && rv.confirmation.phase === 'PROPOSED' }), 'agent-review-campaign-row']);
  if (confirming) details.append(confirmBox(rv.confirmation));
  details.append(dl(rows, 'agent-review-meta'));
  // The references an audit needs, out of the way (SPEC U5: the screen
  // speaks in titles).
  details.append(h('details', { class: 'agent-tech', testid: 'agent-review-tech' },
    h('summary', { text: t('agent_review_tech') }),
    dl([
      [t('agent_review_id'), h('code', { class: 'hash', text: r.id ?? rv.id }), 'agent-review-id'],
      [t('agent_review_fingerprint'), fingerprintEl(r.contract_fingerprint, 'agent-review-fingerprint'), 'agent-review-fingerprint-row'],
    ])));
  if (rv.fetchLog && c && !confirming) details.append(fetchLogBox(rv.fetchLog));
  if (resumable && waiting) details.append(h('p', { class: 'muted small', testid: 'agent-resume-wait', text: t('agent_resume_after_campaign') }));
}

// Where a REAL grant is confirmed (SPEC T2): egress's page on its own
// loopback port (a link, opened in a new tab), or the terminal. The server
// only relays what egress says; it cannot confirm anything itself.
function confirmBox(cf) {
  const box = h('div', { class: 'confirm-box', testid: 'grant-confirmation', 'data-phase': String(cf.phase ?? '') },
    h('p', { class: 'confirm-title', text: t('confirm_title') }),
    h('p', { class: 'small', text: t('confirm_why') }));
  const link = String(cf.confirm_url ?? '');
  if (/^http:\/\/(127\.0\.0\.1|localhost):[0-9]{1,5}\//.test(link)) {
    box.append(h('a', { class: 'button primary confirm-link', href: link, target: '_blank', rel: 'noopener noreferrer',
      testid: 'grant-confirm-link', text: t('confirm_open') }));
  }
  if (cf.available === false) box.append(h('p', { class: 'error-box', testid: 'grant-confirm-unavailable', text: t('confirm_unavailable') }));
  box.append(h('p', { class: 'small confirm-terminal' }, t('confirm_terminal'), ' ',
    h('code', { testid: 'grant-confirm-command', text: String(cf.command ?? '') })));
  return box;
}

// Egress's append-only log of a grant's fetches (T2), as egress keeps it:
// every request, refusals included, newest last.
function fetchLogBox(log) {
  if (log.available === false) {
    return h('p', { class: 'muted small', testid: 'egress-fetch-log-unavailable', text: t('flog_unavailable', { detail: String(log.detail ?? '') }) });
  }
  const entries = Array.isArray(log.entries) ? log.entries : [];
  const rows = entries.map((e) => h('tr', { testid: 'egress-fetch-log-entry', dataset: { status: String(e.status ?? '') } },
    h('td', null, timeEl(e.at)),
    h('td', null, h('code', { class: 'camp-url', text: String(e.url ?? '') }),
      e.reason ? h('span', { class: 'camp-reason small', text: String(e.reason) }) : null),
    h('td', null, statusPill('item', e.status, 'egress-fetch-log-status')),
    h('td', { class: 'num', text: e.http_status ? String(e.http_status) : t('res_none') }),
    h('td', { class: 'num', text: fmtNumber(countOf(e.bytes)) })));
  return h('details', { class: 'flog', testid: 'egress-fetch-log', dataset: { count: String(entries.length) } },
    h('summary', { class: 'small', text: t('flog_title', { n: fmtNumber(entries.length) }) }),
    rows.length ? resTable('egress-fetch-log-table', ['flog_col_time', 'flog_col_url', 'camp_col_status', 'camp_col_http', 'camp_col_bytes'], rows, [3, 4]) : null);
}

function isRealWorkspace() {
  return Boolean(state.workspace) && String(state.workspace.class ?? '') === 'REAL';
}

function countOf(v) {
  const n = Number(v);
  return Number.isFinite(n) && n > 0 ? Math.floor(n) : 0;
}

// "durée 12 s": from the campaign's start to its end, or to now while it runs.
function campaignElapsed(c) {
  const start = Date.parse(String(c.started_at ?? ''));
  if (!Number.isFinite(start)) return t('camp_not_started');
  const endAt = c.finished_at ? Date.parse(String(c.finished_at)) : Date.now();
  const end = Number.isFinite(endAt) ? endAt : Date.now();
  return t('camp_elapsed', { s: fmtNumber(Math.max(0, Math.round((end - start) / 1000))) });
}

// The progress bar: fetched, failed, remaining, as shares of the items —
// an SVG built element by element (no inline style).
function campaignBar(done, failed, rest) {
  const total = done + failed + rest;
  const label = t('camp_progress_label', { done: fmtNumber(done), failed: fmtNumber(failed), rest: fmtNumber(rest) });
  const bar = svgEl('svg', {
    class: 'camp-bar', viewBox: '0 0 100 6', preserveAspectRatio: 'none', role: 'img', 'aria-label': label,
    testid: 'campaign-bar', 'data-done': done, 'data-failed': failed, 'data-remaining': rest, 'data-total': total,
  }, svgEl('title', { text: label }));
  let x = 0;
  for (const [n, cls] of [[done, 'camp-bar-done'], [failed, 'camp-bar-failed'], [rest, 'camp-bar-rest']]) {
    if (n === 0) continue;
    const width = (100 * n) / total;
    bar.append(svgEl('rect', { x, y: 0, width, height: 6, class: cls }));
    x += width;
  }
  if (total === 0) bar.append(svgEl('rect', { x: 0, y: 0, width: 100, height: 6, class: 'camp-bar-rest' }));
  return bar;
}

// The campaign runner's detail lines (the store keeps them in English, as
// the agent reads them), worded in the UI's language when their shape is
// known; the stored line stays in the tooltip.
const CAMPAIGN_DETAILS = [
  [/^(\d+) of (\d+) pages fetched over Tor and stored as evidence, (\d+) not, (\d+) bytes$/,
    (m) => t('camp_detail_done', { done: fmtNumber(Number(m[1])), total: fmtNumber(Number(m[2])), failed: fmtNumber(Number(m[3])), bytes: fmtBytes(Number(m[4])) })],
  [/^no page fetched: every one of its (\d+) items failed or was refused$/, (m) => t('camp_detail_none', { n: fmtNumber(Number(m[1])) })],
  [/^grant revoked by (.+)$/, (m) => t('camp_detail_revoked', { who: m[1] })],
  [/^stopped by the resource governor: .*stopped under pressure after (\d+) samples/, (m) => t('camp_detail_pressure', { n: fmtNumber(Number(m[1])) })],
  [/^stopped by the resource governor: .*lease .* lapsed/, () => t('camp_detail_lapsed')],
  [/^stopped by the resource governor: /, () => t('camp_detail_governor')],
  [/^Tor unavailable: .*; nothing was fetched in clear$/, () => t('camp_detail_tor')],
  [/^refused by the governor: /, () => t('camp_detail_refused')],
  [/^synthetic campaign \(SPECIMEN\): (\d+) pages written, (\d+) over budget, no network$/,
    (m) => t('camp_detail_synthetic', { done: fmtNumber(Number(m[1])), over: fmtNumber(Number(m[2])) })],
  [/^synthetic campaign \(SPECIMEN\): no network$/, () => t('camp_detail_synthetic_admitted')],
];

function campaignDetail(raw) {
  // In either language, a sentence of the catalogue (SPEC U4); the
  // runner's own line in the tooltip.
  const known = CAMPAIGN_DETAILS.find(([re]) => re.test(raw)) ?? null;
  const text = known ? known[1](raw.match(known[0])) : raw;
  return h('p', { class: 'small muted camp-detail', testid: 'campaign-detail', title: known ? raw : null, dataset: { raw }, text });
}

// A campaign: its status, progress (bar, counts, bytes, time) and detail,
// then each address with its outcome and the evidence it became. URLs,
// reasons and details are text.
// `confirming`: a REAL campaign whose grant waits for the human's
// confirmation outside the server (T2): said so instead of « admission ».
function renderCampaign(c, { confirming = false } = {}) {
  const status = String(c.status ?? '');
  const total = countOf(c.items_total);
  const done = countOf(c.items_done);
  const failed = countOf(c.items_failed);
  const rest = Math.max(0, total - done - failed);
  const items = Array.isArray(c.items) ? c.items : [];
  const head = h('span', {
    class: 'camp-head', testid: 'agent-review-campaign',
    dataset: { status, done: String(done), failed: String(failed), total: String(total), synthetic: String(Boolean(c.synthetic)) },
  }, refLink(c.id), ' ', statusPill('camp', confirming ? 'CONFIRMING' : status, 'campaign-status'),
  c.synthetic ? h('span', { class: 'muted small', text: ` (${t('agent_review_synthetic')})` }) : null);
  const progress = h('p', {
    class: 'small camp-progress', testid: 'campaign-progress',
    text: t('camp_progress', {
      done: fmtNumber(done), failed: fmtNumber(failed), rest: fmtNumber(rest), total: fmtNumber(total),
      bytes: fmtBytes(countOf(c.bytes)), elapsed: campaignElapsed(c),
    }),
  });
  const detail = c.detail && !confirming ? campaignDetail(String(c.detail)) : null;
  const rows = items.map((it) => {
    const st = String(it.status ?? '');
    const ev = it.evidence ? String(it.evidence) : '';
    // The address, with the outcome's reason under it (both text).
    const where = h('td', null, h('code', { class: 'camp-url', testid: 'campaign-item-url', text: String(it.url ?? '') }),
      it.reason ? h('span', { class: 'camp-reason small', testid: 'campaign-item-reason', text: String(it.reason) }) : null);
    // The evidence it became: a link that selects it in the reader.
    const link = ev
      ? h('a', { href: hrefFor(ev, 'evidence'), class: 'agent-ref', testid: 'campaign-item-evidence', title: ev, dataset: { ref: ev, kind: 'evidence' }, text: t('camp_open_evidence') })
      : t('res_none');
    return h('tr', { testid: 'campaign-item', dataset: { position: String(it.position ?? ''), status: st } },
      h('td', { class: 'num', text: fmtNumber(countOf(it.position) + 1) }),
      where,
      h('td', null, statusPill('item', st, 'campaign-item-status')),
      h('td', { class: 'num', testid: 'campaign-item-http', text: it.http_status ? String(it.http_status) : t('res_none') }),
      h('td', { class: 'num', text: fmtNumber(countOf(it.bytes)) }),
      h('td', null, link));
  });
  // Scrolled sideways where it is narrower than its columns (the drawer),
  // never clipped (SPEC U7).
  const table = rows.length ? h('div', { class: 'table-wrap' }, resTable('campaign-items',
    ['camp_col_pos', 'camp_col_url', 'camp_col_status', 'camp_col_http', 'camp_col_bytes', 'camp_col_evidence'],
    rows, [0, 3, 4])) : null;
  return h('div', { class: 'camp', testid: 'campaign', dataset: { status, live: String(CAMPAIGN_LIVE.has(status)) } },
    head, campaignBar(done, failed, rest), progress, detail, table);
}

function renderPlan() {
  const box = $('agent-plan-box');
  const list = clear($('agent-plan'));
  const plan = agent.plan;
  const progress = $('agent-plan-progress');
  if (!plan) {
    box.hidden = true;
    return;
  }
  const total = plan.steps.length;
  const done = Math.max(0, Math.min(total, Number.isFinite(plan.done) ? plan.done : 0));
  progress.textContent = t('agent_plan_progress', { done: fmtNumber(done), total: fmtNumber(total) });
  progress.dataset.done = String(done);
  progress.dataset.total = String(total);
  plan.steps.forEach((step, i) => {
    const st = i < done ? 'done' : (i === done ? 'current' : 'todo');
    list.append(h('li', { class: `agent-step step-${st}`, testid: 'agent-plan-step', dataset: { state: st }, text: step }));
  });
  box.hidden = false;
}

function renderCards() {
  const box = $('agent-cards-box');
  const list = clear($('agent-cards'));
  if (agent.cards.length === 0) {
    box.hidden = true;
    return;
  }
  box.hidden = false;
  for (const card of agent.cards) {
    const entry = card.result_id ? agent.results.get(card.result_id) : null;
    const open = Boolean(entry && entry.open);
    const toggle = card.result_id
      ? h('button', { type: 'button', class: 'more agent-card-open', testid: 'agent-card-open', 'aria-expanded': String(open), text: t(open ? 'agent_card_close' : 'agent_card_open') })
      : null;
    if (toggle) toggle.addEventListener('click', () => toggleResult(card));
    list.append(h('li', { class: 'agent-card', testid: 'agent-card', dataset: { tool: card.tool_id, status: card.status, resultId: card.result_id ?? '' } },
      h('div', { class: 'agent-card-head' },
        h('code', { class: 'agent-card-tool', testid: 'agent-card-tool', text: card.tool_id }),
        statusPill('rs', card.status, 'agent-card-status'),
        toggle),
      card.observations.length
        ? h('ul', { class: 'agent-observations', testid: 'agent-card-observations' }, card.observations.map((o) => h('li', { text: o })))
        : null,
      card.diagnostic
        ? h('p', { class: 'small agent-diagnostic', testid: 'agent-card-diagnostic' },
          h('span', { class: 'muted', text: `${t('agent_card_diagnostic')} : ` }), card.diagnostic)
        : null,
      open ? renderResult(entry) : null));
  }
}

function artifactText(a) {
  const d = a ? a.data : null;
  if (a && a.kind === 'excerpt' && d && typeof d.text === 'string') return d.text;
  let s;
  try {
    s = JSON.stringify(d, null, 2) ?? '';
  } catch {
    s = String(d);
  }
  return s.length > AGENT_ARTIFACT_PREVIEW ? `${s.slice(0, AGENT_ARTIFACT_PREVIEW)}\n${t('agent_result_truncated')}` : s;
}

// A sandbox run (SPEC X1): how it ended, what it used, its inputs, its
// streams and the files it left — all untrusted, all shown as text.
function renderSandboxRun(data) {
  const run = data?.run ?? {};
  const end = run.end ?? {};
  const endText = end.kind === 'exited' ? t('sbx_end_exited', { code: String(end.code) })
    : end.kind === 'signalled' ? t('sbx_end_signalled', { signal: String(end.signal) })
      : t('sbx_end_stopped', { reason: String(end.reason ?? '') });
  const stream = (s, testid) => {
    const text = String(s?.text ?? '');
    const cut = s?.truncated ? `\n${t('sbx_stream_cut', { bytes: fmtBytes(Number(s.bytes) || 0) })}` : '';
    return h('pre', { class: 'agent-artifact-text', testid, text: text ? text + cut : t('sbx_empty') });
  };
  const inputs = Array.isArray(data?.inputs) ? data.inputs : [];
  const files = Array.isArray(run.files) ? run.files : [];
  const box = h('div', { class: 'sandbox-run', testid: 'sandbox-run', dataset: { end: String(end.kind ?? '') } },
    dl([
      [t('sbx_program'), h('code', { text: String(run.program ?? '') })],
      [t('sbx_end'), h('span', { testid: 'sandbox-end', text: endText })],
      [t('sbx_usage'), t('sbx_usage_line', { ms: fmtNumber(Number(run.duration_ms) || 0), mem: fmtBytes(Number(run.peak_memory_bytes) || 0), cpu: fmtNumber(Number(run.cpu_ms) || 0) })],
      [t('sbx_inputs'), inputs.length
        ? h('ul', { class: 'sandbox-list small' }, inputs.map((i) => h('li', null, h('code', { text: String(i.path ?? '') }), ' ', refList([i.evidence_id]))))
        : t('sbx_empty')],
    ], 'sandbox-meta'),
    h('p', { class: 'small muted', text: t('sbx_stdout') }), stream(run.stdout, 'sandbox-stdout'),
    h('p', { class: 'small muted', text: t('sbx_stderr') }), stream(run.stderr, 'sandbox-stderr'));
  if (files.length) {
    box.append(h('p', { class: 'small muted', text: t('sbx_files') }),
      h('ul', { class: 'sandbox-list small', testid: 'sandbox-files' }, files.map((f) => h('li', { testid: 'sandbox-file' },
        h('details', null,
          h('summary', null, h('code', { text: String(f.name ?? '') }), ` · ${fmtBytes(Number(f.size) || 0)} · `, fingerprintEl(f.sha256)),
          h('pre', { class: 'agent-artifact-text', text: typeof f.text === 'string' ? f.text : t('sbx_no_text') }))))));
  }
  if (Number(run.files_unlisted) > 0) box.append(h('p', { class: 'small muted', text: t('sbx_files_more', { n: fmtNumber(Number(run.files_unlisted)) }) }));
  return box;
}

function renderResult(entry) {
  const box = h('div', { class: 'agent-result', testid: 'agent-result' });
  if (entry.loading && !entry.data) {
    box.append(h('p', { class: 'muted small', text: t('agent_result_loading') }));
    return box;
  }
  if (entry.error) {
    box.append(h('p', { class: 'error-box', testid: 'agent-result-error', text: errorText(entry.error) }));
    return box;
  }
  const r = entry.data || {};
  box.dataset.resultId = String(r.result_id ?? '');
  box.append(dl([
    [t('agent_result_refs'), refList(r.object_refs, 'agent-result-refs')],
    [t('agent_result_provenance'), refList(r.provenance_refs, 'agent-result-provenance')],
    [t('agent_review_risk'), riskPill(r.risk_level)],
    [t('agent_review_fingerprint'), fingerprintEl(r.contract_fingerprint)],
  ], 'agent-result-meta'));
  for (const a of Array.isArray(r.artifacts) ? r.artifacts : []) {
    const untrusted = a && a.trust === 'UNTRUSTED_DATA';
    box.append(h('div', { class: 'agent-artifact', dataset: { kind: String(a?.kind ?? ''), trust: String(a?.trust ?? '') } },
      h('p', { class: 'small' },
        h('span', { class: 'pill', text: String(a?.kind ?? '?') }), ' ',
        h('span', { class: `pill ${untrusted ? 'trust-untrusted' : 'trust-labfy'}`, text: t(untrusted ? 'agent_result_untrusted' : 'agent_result_trusted') })),
      a?.kind === 'sandbox_output'
        ? renderSandboxRun(a.data)
        : h('pre', { class: 'agent-artifact-text', testid: 'agent-artifact-text', text: artifactText(a) })));
  }
  return box;
}

// The runtime's fixed lines in the chosen language (SPEC U4); tool ids,
// codes and reasons stay as written.
const RUNTIME_DETAILS = [
  [/^the demo agent made (\d+) calls through the gateway$/, (m) => t('rtd_demo_calls', { n: fmtNumber(Number(m[1])) })],
  [/^cancelled by the analyst$/, () => t('rtd_cancelled_by_analyst')],
  [/^the agent runtime closed$/, () => t('rtd_runtime_closed')],
  [/^interrupted by restart$/, () => t('rtd_interrupted')],
  [/^start$/, () => t('rtd_start')],
  [/^resume$/, () => t('rtd_resume')],
  [/^Demo$/, () => t('rtd_driver_demo')],
  [/^LocalModel$/, () => t('rtd_driver_local')],
  [/^refused: the resume summary is the gateway's$/, () => t('rtd_answer_refused')],
  [/^no answer: the resume summary is the gateway's$/, () => t('rtd_answer_none')],
  // `tool.result`: "<tool>: <ResultStatus>[ — diagnostic]" (the runtime
  // writes the status as its Rust name); the tool id and diagnostic stay.
  [/^([a-z][a-z0-9_.]*): (Completed|Failed|Denied|AuthorizationRequired|Unavailable|Cancelled)(?: — ([\s\S]*))?$/,
    (m) => t('rtd_tool_result', { tool: m[1], status: enumLabel('rs', screaming(m[2])) }) + (m[3] !== undefined ? ` — ${m[3]}` : '')],
  // A turn's end: "<RuntimeStatus>: <summary or reason>".
  [/^(Completed|Failed|AuthorizationRequired|Cancelled|ModelUnavailable|ModelProtocolError|BudgetExhausted): ([\s\S]*)$/,
    (m) => t('rtd_turn_end', { status: capitalise(enumLabel('turn', screaming(m[1]))), detail: m[2] })],
];

// `AuthorizationRequired` → `AUTHORIZATION_REQUIRED`.
function screaming(name) {
  return name.replace(/([a-z])([A-Z])/g, '$1_$2').toUpperCase();
}

function capitalise(s) {
  return s ? s[0].toUpperCase() + s.slice(1) : s;
}

function runtimeDetail(raw) {
  const known = RUNTIME_DETAILS.find(([re]) => re.test(raw));
  return known ? known[1](raw.match(known[0])) : raw;
}

function eventDetail(ev) {
  if (ev.source === 'runtime') return runtimeDetail(String(ev.detail ?? ''));
  const p = ev.payload && typeof ev.payload === 'object' ? ev.payload : {};
  switch (ev.type) {
    case 'agent.turn.started':
      return String(p.question ?? '');
    case 'agent.plan.updated':
      return t('agent_plan_progress', { done: fmtNumber(p.done ?? 0), total: fmtNumber(Array.isArray(p.steps) ? p.steps.length : 0) });
    case 'agent.tool.requested':
      return [p.tool_id, p.purpose].filter((x) => x !== null && x !== undefined && x !== '').map(String).join(' — ');
    case 'agent.tool.started':
      return String(p.tool_id ?? '');
    case 'agent.tool.completed':
      return `${String(p.tool_id ?? '')} → ${enumLabel('rs', p.status)}`;
    case 'agent.authorization.required':
      return [p.research_request, p.message].filter(Boolean).map(String).join(' — ');
    case 'agent.turn.completed':
      return String(p.summary ?? '');
    case 'agent.error':
      return runtimeDetail(String(p.message ?? ''));
    default:
      return '';
  }
}

function renderActivity() {
  const box = $('agent-activity-box');
  const list = clear($('agent-activity'));
  if (agent.activity.length === 0 && !agent.missed) {
    box.hidden = true;
    return;
  }
  box.hidden = false;
  // The runtime's and the gateway's events, by time (a stable sort keeps
  // each log's own order); newest first.
  const when = (ev) => {
    const ms = Date.parse(String(ev.timestamp ?? ''));
    return Number.isNaN(ms) ? 0 : ms;
  };
  const items = agent.activity.slice().sort((a, b) => when(a) - when(b));
  for (let i = items.length - 1; i >= 0; i--) {
    const ev = items[i];
    const type = String(ev.type ?? '');
    const source = ev.source === 'runtime' ? 'runtime' : 'gateway';
    const key = source === 'runtime' ? `evrt_${type}` : `ev_${type}`;
    list.append(h('li', { class: `agent-activity-item source-${source}`, testid: 'agent-activity-item', dataset: { type, source, sequence: String(ev.sequence ?? '') } },
      clockTime(ev.timestamp),
      h('span', { class: 'agent-activity-type', text: hasLabel(key) ? t(key) : type }),
      h('span', { class: 'agent-activity-detail', text: eventDetail(ev) })));
  }
  if (agent.missed) list.append(h('li', { class: 'muted small', testid: 'agent-missed', text: t('agent_missed') }));
}

// ----- start

// The drawer (SPEC U3): open or closed as the analyst last left it; on a
// first visit, open only where it fits beside the page.
const AGENT_OPEN_KEY = 'labfy.agent.open';
const AGENT_DOCK_MIN_WIDTH = 1600; // from here the drawer sits beside the page (app.css)

function agentDrawerRemembered() {
  try {
    const v = window.localStorage.getItem(AGENT_OPEN_KEY);
    if (v === '1' || v === '0') return v === '1';
  } catch {
    // Storage may be disabled: the first-visit rule.
  }
  return window.innerWidth >= AGENT_DOCK_MIN_WIDTH;
}

// `remember`: the analyst chose (the first-visit rule is not a choice).
function setAgentOpen(open, { focus = false, remember = true } = {}) {
  $('agent-dock').hidden = !open;
  $('agent-toggle').setAttribute('aria-expanded', String(open));
  document.body.classList.toggle('agent-open', open);
  if (remember) {
    try {
      window.localStorage.setItem(AGENT_OPEN_KEY, open ? '1' : '0');
    } catch {
      // Not remembered; the choice still holds on this page.
    }
  }
  if (focus) (open ? $('agent-question') : $('agent-toggle')).focus();
}

function bindAgent() {
  setAgentOpen(agentDrawerRemembered(), { remember: false });
  $('agent-toggle').addEventListener('click', () => setAgentOpen($('agent-dock').hidden, { focus: true }));
  $('agent-close').addEventListener('click', () => setAgentOpen(false, { focus: true }));
  $('agent-dock').addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape') setAgentOpen(false, { focus: true });
  });
  $('agent-form').addEventListener('submit', agentStart);
  $('agent-question').addEventListener('input', renderAgentForm);
  $('agent-cancel').addEventListener('click', agentCancel);
  $('agent-grant-form').addEventListener('submit', agentGrant);
  $('agent-refuse-form').addEventListener('submit', agentRefuse);
  $('agent-resume').addEventListener('click', agentResume);
  $('agent-revoke').addEventListener('click', agentRevoke);
}

// The runtime's status: the mode line. A local model that is not ready
// (loading, down) is asked again now and then, so the line follows it.
async function agentLoadStatus() {
  if (agent.statusTimer) {
    clearTimeout(agent.statusTimer);
    agent.statusTimer = null;
  }
  try {
    agent.status = await api('/api/v1/agent-runtime/status');
    agent.statusError = null;
  } catch (err) {
    agent.statusError = err;
  }
  renderAgentMode();
  const st = agent.status;
  if (!agent.statusError && st && st.driver === 'local_model' && st.ready !== true && !st.closed) {
    agent.statusTimer = setTimeout(agentLoadStatus, AGENT_STATUS_RETRY_MS);
  }
}

async function agentBoot() {
  renderAgent();
  agentLoadStatus();
  try {
    agent.catalog = await api('/api/v1/agent-tools/catalog');
    agent.catalogError = null;
  } catch (err) {
    agent.catalogError = err;
  }
  // The latest runtime turn of this workspace, from the runtime's event log
  // (read to its end, bounded), so that a reload finds a pending
  // authorization again.
  try {
    const events = [];
    let cursor = 0;
    let missed = false;
    for (let i = 0; i < RT_BOOT_PAGES; i++) {
      const page = await api(`/api/v1/agent-runtime/events?cursor=${cursor}&limit=${RT_EVENTS_PAGE}`);
      const got = Array.isArray(page.events) ? page.events : [];
      events.push(...got);
      missed = missed || Boolean(page.missed);
      const next = Number(page.next_cursor);
      if (!Number.isSafeInteger(next) || next < cursor) break;
      cursor = next;
      if (got.length < RT_EVENTS_PAGE) break;
    }
    const last = events.length ? String(events[events.length - 1].turn_id ?? '') : '';
    if (last && !agent.rt && !agent.starting) {
      let rt = null;
      try {
        rt = await api(`/api/v1/agent-runtime/turns/${seg(last)}`);
      } catch (err) {
        // Evicted since: nothing to show.
        if (!(err instanceof ApiError && err.status === 404)) throw err;
      }
      if (rt && !agent.rt && !agent.starting) {
        agentSetRuntimeTurn(rt, 0);
        for (const ev of events) if (String(ev.turn_id ?? '') === last) rtIngest(ev);
        if (missed) agent.missed = true;
      }
    }
    if (cursor > agent.rtCursor) agent.rtCursor = cursor;
  } catch (err) {
    agent.pollError = err;
  }
  renderAgent();
  // One poll reads its gateway turn's plan and cards; it goes on while the
  // turn is live.
  if (agent.rt && !agent.pollError) agentPoll();
  else agentSchedule();
}

// ---------------------------------------------------------------------------
// arti's bootstrap phase (`BootstrapStatus`, English: `15%: connecting
// successfully; directory is fetching a consensus`) in the chosen language
// (SPEC U4): the percentage it repeats goes, each known fragment is
// translated, an unknown one stays as arti wrote it.
const TOR_PHASES_FR = [
  [/^handshaking with Tor relays$/, 'négociation avec les relais Tor'],
  [/^connecting successfully$/, 'connexion établie'],
  [/^connecting to the internet$/, 'connexion à Internet'],
  [/^not connected to the internet$/, 'pas de connexion à Internet'],
  [/^directory is fetching a consensus$/, 'l’annuaire télécharge un consensus'],
  [/^directory is fetching authority certificates \((\d+)\/(\d+)\)$/, 'l’annuaire télécharge les certificats des autorités ($1/$2)'],
  [/^directory is fetching microdescriptors \((\d+)\/(\d+)\)$/, 'l’annuaire télécharge les microdescripteurs ($1/$2)'],
  [/^directory is usable$/, 'l’annuaire est utilisable'],
];

function torPhase(phase) {
  const raw = String(phase ?? '').replace(/^\d+%:\s*/, '');
  if (lang !== 'fr') return raw;
  return raw.split(/;\s*/).map((part) => {
    const hit = TOR_PHASES_FR.find(([re]) => re.test(part));
    return hit ? part.replace(hit[0], hit[1]) : part;
  }).join(' ; ');
}

// Tor status line (SPEC E1): egress's bootstrap progress and phase, in the
// header, from GET /api/v1/egress — polled while the page is visible, more
// often while Tor is not ready. Egress's phase, errors and reasons are text.

const EGRESS_POLL_MS = 3000;
const EGRESS_POLL_READY_MS = 15000;

const eg = {
  booted: false,
  timer: null,
  polling: false,
  last: null, // { available: true, ready, bootstrap_percent, phase, … } | { available: false, detail }
  error: null, // a failed poll: polling stops until the page is shown again
};

function egressSchedule() {
  if (eg.timer || eg.polling || eg.error || !eg.booted || document.hidden) return;
  const ready = Boolean(eg.last && eg.last.available && eg.last.ready === true);
  eg.timer = setTimeout(egressPoll, ready ? EGRESS_POLL_READY_MS : EGRESS_POLL_MS);
}

function egressStop() {
  if (eg.timer) {
    clearTimeout(eg.timer);
    eg.timer = null;
  }
}

async function egressPoll() {
  eg.timer = null;
  if (eg.polling) return;
  eg.polling = true;
  try {
    eg.last = await api('/api/v1/egress');
    eg.error = null;
  } catch (err) {
    // A lost session or a stopped server: say so and stop (no retry loop
    // behind the analyst's back); showing the page again asks once more.
    eg.error = err;
  }
  eg.polling = false;
  renderEgress();
  egressSchedule();
}

function renderEgress() {
  const el = $('egress-status');
  if (!eg.booted) {
    el.hidden = true;
    return;
  }
  const e = eg.last;
  let st;
  let text;
  let title = '';
  if (eg.error) {
    st = 'error';
    text = t('egress_poll_error', { message: errorText(eg.error) });
  } else if (!e) {
    st = 'loading';
    text = t('egress_loading');
  } else if (e.available !== true) {
    st = 'unavailable';
    text = t('egress_unavailable', { reason: String(e.detail ?? '') });
  } else {
    const c = e.counts && typeof e.counts === 'object' ? e.counts : {};
    title = t('egress_title', {
      n: fmtNumber(countOf(e.in_flight)), fetched: fmtNumber(countOf(c.fetched)), refused: fmtNumber(countOf(c.refused)),
      unavailable: fmtNumber(countOf(c.unavailable)), failed: fmtNumber(countOf(c.failed)), stopped: fmtNumber(countOf(c.stopped)),
    });
    if (e.ready === true) {
      st = 'ready';
      text = t('egress_ready');
    } else {
      st = 'bootstrapping';
      text = t('egress_bootstrap', { p: fmtNumber(Math.min(100, countOf(e.bootstrap_percent))), phase: torPhase(e.phase) });
      // arti's error is its own English text: named in the badge, shown
      // whole in its tooltip (SPEC U4).
      if (e.last_error) {
        text = `${text} · ${t('egress_error_reported')}`;
        title = `${title}\n${t('egress_arti_error', { error: String(e.last_error) })}`;
      }
    }
  }
  el.textContent = shown(text);
  el.title = shown(title);
  el.className = `badge egress-badge egress-${st}`;
  el.dataset.state = st;
  el.dataset.percent = e && e.available === true ? String(Math.min(100, countOf(e.bootstrap_percent))) : '';
  el.hidden = false;
}

function bindEgress() {
  document.addEventListener('visibilitychange', () => {
    if (document.hidden) {
      egressStop();
    } else if (eg.booted && !eg.timer && !eg.polling) {
      eg.error = null;
      egressPoll();
    }
    if (!document.hidden) campaignSchedule();
  });
}

function egressBoot() {
  eg.booted = true;
  renderEgress();
  egressPoll();
}

// ---------------------------------------------------------------------------
// Start

async function boot() {
  bindChrome();
  bindAgent();
  bindResources();
  bindEgress();
  applyChrome();
  try {
    const session = await api('/api/v1/session');
    setCsrf((typeof session.csrf_token === 'string' && session.csrf_token) || metaToken());
    state.workspaceId = session.workspace_id ?? null;
    state.isolation = session.isolation ?? null;
    const { workspaces = [] } = await api('/api/v1/workspaces');
    state.workspace = workspaces.find((w) => w.id === state.workspaceId) ?? workspaces[0] ?? null;
    if (!state.workspaceId && state.workspace) state.workspaceId = state.workspace.id;
    if (state.workspaceId) {
      const { investigations = [] } = await api(`/api/v1/workspaces/${seg(state.workspaceId)}/investigations`);
      state.investigations = investigations;
      const inUse = investigations.filter((i) => !i.archived_at);
      state.investigationId = (inUse[0] ?? investigations[0])?.id ?? null;
    }
  } catch (err) {
    state.bootError = err;
  }
  state.booted = true;
  renderWorkspace();
  document.body.dataset.ready = 'true';
  route();
  if (state.bootError) {
    agent.catalogError = state.bootError;
    agent.statusError = state.bootError;
  }
  else {
    agentBoot();
    resBoot();
    egressBoot();
  }
  renderAgent();
}

if (document.readyState === 'loading') {
  document.addEventListener('DOMContentLoaded', boot, { once: true });
} else {
  boot();
}
