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
import { enumLabel, fmtBytes, fmtNumber, hasLabel, lang, switchLang, t, tn } from './i18n.js';
import { $, append, clear, countOf, cssToken, detailValue, displayKind, dl, emptyNote, h, hrefFor, isEvidence, objectLink, refLink, section, seg, shown, timeEl } from './dom.js';
import { api, ApiError, csrfToken, errorText, metaToken, paced, setCsrf } from './api.js';
import { agentBoot, agentBootFailed, bindAgent, renderAgent } from './agent.js';
import { bindEgress, egressBoot, renderEgress } from './egress.js';
import { bindResources, renderResources, resBoot } from './resources.js';

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
// Start

async function boot() {
  bindChrome();
  bindAgent({ state, route, parseHash });
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
  if (state.bootError) agentBootFailed(state.bootError);
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
