// Cases (SPEC C1): the investigations of the served workspace — created,
// renamed, archived, brought back, opened — the workspace renamed, a new
// REAL workspace created, another one opened, archived or brought back.

import { api, ApiError, errorText } from './api.js';
import { $, clear, h, section, seg, timeEl } from './dom.js';
import { hasLabel, t, tn } from './i18n.js';
import { beginView, chooseInvestigation, chrome, failView, finishView, formSay, setStatus, setStatusAfterRoute, setTitle, showError, state } from './page.js';

// How long the page waits for the server to come back on another workspace (SPEC C1).
const WORKSPACE_SWITCH_TIMEOUT_MS = 60000;

async function reloadInvestigations() {
  const { investigations = [] } = await api(`/api/v1/workspaces/${seg(state.workspaceId)}/investigations`);
  state.investigations = investigations;
  chrome.renderWorkspace();
}

function openInvestigation(id) {
  chooseInvestigation(id);
  state.search = null;
  chrome.renderSearchResults();
  chrome.renderWorkspace();
  location.hash = '#/';
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
  const received = inv.received && typeof inv.received === 'object' ? inv.received : null;
  const title = String(inv.title ?? inv.id);
  const rename = h('button', { type: 'button', class: 'secondary', testid: 'case-rename', text: t('cases_rename') });
  const archive = h('button', { type: 'button', class: 'secondary', testid: archived ? 'case-unarchive' : 'case-archive', text: t(archived ? 'cases_unarchive' : 'cases_archive') });
  const open = h('button', { type: 'button', testid: 'case-open', text: t('cases_open') });
  const row = h('li', { class: 'case', testid: 'case', dataset: { ref: String(inv.id), archived: String(archived) } },
    h('div', { class: 'case-head' },
      h('strong', { class: 'case-title', testid: 'case-title', text: title }),
      inv.id === state.investigationId ? h('span', { class: 'pill status-succeeded', text: t('cases_current') }) : null,
      archived ? h('span', { class: 'pill status-queued', testid: 'case-archived', text: t('cases_archived') }) : null,
      received ? h('span', { class: 'pill status-queued', testid: 'case-received', title: `${t('received_fingerprint')} ${received.fingerprint}`, text: t('cases_received') }) : null),
    inv.summary ? h('p', { class: 'muted small', text: String(inv.summary) }) : null,
    h('p', { class: 'muted small' }, tn('cases_items', Number(inv.evidence_count ?? 0)), ' · ', t('created_label'), ' ', timeEl(inv.created_at)),
    h('div', { class: 'form-actions case-actions' }, open, received ? null : rename, received ? null : archive));
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

export async function renderCases() {
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
      chrome.renderWorkspace();
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
