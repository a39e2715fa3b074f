// The page's frame, shared by every view (SPEC U9): its state (the
// workspace and investigation shown), the status line, the router and each
// view's life (begin, finish, fail), the document title.

import { errorText } from './api.js';
import { $, append, clear, h } from './dom.js';
import { t } from './i18n.js';

// Status line

export function setStatus(text, kind = 'info') {
  const el = $('status');
  el.textContent = text || '';
  el.dataset.kind = kind;
  el.hidden = !text;
}

function clearStatus() {
  setStatus('');
}

export function showError(err) {
  setStatus(errorText(err), 'error');
}


// State

export const state = {
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


// Routing

// The investigation the analyst chose stays chosen across reloads and
// restarts (SPEC I5): one key per workspace, in this origin's storage.
const investigationKey = (ws) => `labfy.investigation.${ws}`;

export function chooseInvestigation(id) {
  state.investigationId = id;
  try {
    if (state.workspaceId && id) window.localStorage.setItem(investigationKey(state.workspaceId), id);
  } catch {
    // Storage refused (private mode): the choice lasts this page only.
  }
}

export function rememberedInvestigation(ws) {
  try {
    return window.localStorage.getItem(investigationKey(ws));
  } catch {
    return null;
  }
}

export function parseHash() {
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

export function beginView(className, testid) {
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

export function finishView(ctx, ...children) {
  if (!ctx.live()) return false;
  clear(ctx.view);
  append(ctx.view, children);
  ctx.view.dataset.state = 'ready';
  return true;
}

export function failView(ctx, err) {
  if (!ctx.live()) return;
  clear(ctx.view);
  ctx.view.dataset.state = 'error';
  ctx.view.append(h('div', { class: 'error-box', testid: 'view-error' },
    h('p', { text: t('view_failed') }),
    h('a', { href: '#/', text: t('back_overview') })));
  showError(err);
}

// The views, by name (`registerViews`, from app.js): `overview`, `evidence`,
// `node`, `provenance`, `cases`, `list`, `timeline`. A view that needs another shows it
// through here, so views import no view they lead to.
const views = {};

export function registerViews(named) {
  Object.assign(views, named);
}

export function render(name, arg) {
  return views[name](arg);
}

// What the page's chrome redraws when a view changes the workspace (set by
// app.js, which draws the header and the search results).
export const chrome = { renderWorkspace: () => {}, renderSearchResults: () => {} };

export function route() {
  if (!state.booted) return;
  const { name, arg } = parseHash();
  switch (name) {
    case '':
    case 'overview':
      return render('overview');
    case 'evidence':
    case 'node':
    case 'provenance':
      return arg ? render(name, arg) : render('overview');
    case 'cases':
      return render('cases');
    case 'list':
      return render('list');
    case 'timeline':
      return render('timeline', arg);
    default:
      render('overview');
      setStatus(t('unknown_route'), 'info');
      return undefined;
  }
}

export function setTitle(...parts) {
  document.title = [...parts.filter(Boolean), 'Labfy'].join(' — ');
}

export function formSay(status) {
  return (text, kind) => {
    status.textContent = text;
    status.dataset.kind = kind;
    status.hidden = !text;
  };
}

// A message to show once the next view has started (beginView clears it).
let pendingStatus = null;
export function setStatusAfterRoute(text, kind) {
  pendingStatus = { text, kind };
}
function flushPendingStatus() {
  if (pendingStatus) {
    setStatus(pendingStatus.text, pendingStatus.kind);
    pendingStatus = null;
  }
}
