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

import { agentBoot, agentBootFailed, bindAgent, renderAgent } from './agent.js';
import { adoptSession, api, ApiError, errorText, forgetSession, sessionToken, setCsrf } from './api.js';
import { renderCases } from './cases.js';
import { $, clear, cssToken, h, hrefFor, objectLink, seg, shown, timeEl } from './dom.js';
import { bindEgress, egressBoot, renderEgress } from './egress.js';
import { enumLabel, fmtNumber, hasLabel, lang, switchLang, t, tn } from './i18n.js';
import { renderList } from './lists.js';
import { renderNode } from './node.js';
import { renderOverview } from './overview.js';
import { chooseInvestigation, chrome, parseHash, registerViews, rememberedInvestigation, route, showError, state } from './page.js';
import { renderProvenance } from './provenance.js';
import { renderEvidence } from './reader.js';
import { bindResources, renderResources, resBoot } from './resources.js';
import { renderTimeline } from './timeline.js';

const SEARCH_LIMIT = 20;
const SEARCH_MAX_CHARS = 256;
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
  const wsName = $('workspace-name');
  wsName.textContent = ws ? String(ws.name ?? '') : '';
  wsName.title = wsName.textContent;
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
    chooseInvestigation(ev.target.value);
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
  // SPEC A5: entities whose name begins with the query, before the pieces,
  // with their kinds counted.
  const ents = s.data.entities && Array.isArray(s.data.entities.items) ? s.data.entities : null;
  if (ents && ents.items.length) {
    const kinds = Array.isArray(ents.kinds) ? ents.kinds : [];
    list.append(h('li', { class: 'search-entities', testid: 'search-entities' },
      h('p', { class: 'muted small', testid: 'search-entity-kinds',
        text: t('search_entities', { kinds: kinds.map((k) => `${fmtNumber(Number(k.count ?? 0))} ${enumLabel('kind', k.kind)}`).join(' · ') + (ents.more ? ' …' : '') }) }),
      h('ol', { class: 'rows' }, ...ents.items.map((e) => h('li', null,
        objectLink({ id: e.id, kind: e.kind, label: e.name }, 'search-entity'), ' ',
        h('span', { class: 'muted small', text: tn('in_evidence', Number(e.evidence_count ?? 0)) }))))));
  }
  // SPEC A5: the query read as a selector — its kind, its normalised value,
  // how many pieces mention it (they lead the list), its entity.
  const sel = s.data.selector;
  if (sel && typeof sel === 'object') {
    const entity = Array.isArray(sel.entities) && sel.entities.length ? String(sel.entities[0]) : null;
    const value = entity
      ? h('a', { href: hrefFor(entity, 'entity'), testid: 'search-selector-entity', text: String(sel.value ?? '') })
      : h('strong', { text: String(sel.value ?? '') });
    list.append(h('li', { class: 'muted small', testid: 'search-selector', dataset: { kind: String(sel.kind ?? '') } },
      `${enumLabel('kind', sel.kind)} `, value, ` — ${tn('search_selector_pieces', Number(sel.pieces ?? 0))}`));
  }
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
// Start

// The session (SPEC V1): a login link's answer hands it over once, and the
// page keeps it in this origin's storage; the link's code leaves the
// address bar. Without one, `/login` says how to get one.
function takeSession() {
  if (adoptSession() || location.pathname !== '/') {
    history.replaceState(null, '', `/${location.hash}`);
  }
  if (sessionToken()) return true;
  location.replace('/login');
  return false;
}

async function boot() {
  if (!takeSession()) return;
  registerViews({
    overview: renderOverview,
    evidence: renderEvidence,
    node: renderNode,
    provenance: renderProvenance,
    cases: renderCases,
    list: renderList,
    timeline: renderTimeline,
  });
  Object.assign(chrome, { renderWorkspace, renderSearchResults });
  bindChrome();
  bindAgent({ state, route, parseHash });
  bindResources();
  bindEgress();
  applyChrome();
  try {
    let session;
    try {
      session = await api('/api/v1/session');
    } catch (err) {
      // A session of another start of Labfy, or altered: forgotten, and
      // the login page says how to get a new one.
      if (err instanceof ApiError && err.status === 401) {
        forgetSession();
        location.replace('/login');
        return;
      }
      throw err;
    }
    setCsrf(typeof session.csrf_token === 'string' ? session.csrf_token : null);
    state.workspaceId = session.workspace_id ?? null;
    state.isolation = session.isolation ?? null;
    const { workspaces = [] } = await api('/api/v1/workspaces');
    state.workspace = workspaces.find((w) => w.id === state.workspaceId) ?? workspaces[0] ?? null;
    if (!state.workspaceId && state.workspace) state.workspaceId = state.workspace.id;
    if (state.workspaceId) {
      const { investigations = [] } = await api(`/api/v1/workspaces/${seg(state.workspaceId)}/investigations`);
      state.investigations = investigations;
      const inUse = investigations.filter((i) => !i.archived_at);
      // The one chosen last in this workspace, if it is still there.
      const remembered = rememberedInvestigation(state.workspaceId);
      const chosen = investigations.find((i) => i.id === remembered);
      state.investigationId = (chosen ?? inUse[0] ?? investigations[0])?.id ?? null;
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
