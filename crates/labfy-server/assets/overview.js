// The overview of the investigation shown (SPEC U3): counts that open
// their lists, top and shared entities, recent pieces, jobs and processes,
// and the forms that add to it (import, note, export).

import { api, errorText } from './api.js';
import { $, clear, cssToken, emptyNote, h, hrefFor, objectLink, section, seg, timeEl } from './dom.js';
import { renderExportForm, renderImportForm, renderNoteForm } from './forms.js';
import { enumLabel, fmtNumber, hasLabel, lang, t, tn } from './i18n.js';
import { ENTITY_KINDS, listHref, LISTS } from './lists.js';
import { beginView, chrome, failView, finishView, route, setStatusAfterRoute, setTitle, showError, state } from './page.js';

const CORRELATIONS_LIMIT = 20;


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

export async function renderOverview() {
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
    chrome.renderWorkspace();
  }
  const info = data.investigation || {};
  setTitle(info.title, t('nav_overview'));
  // Received from another appliance (SPEC I4): read as it came, never
  // changed here — the forms that would change it are not offered.
  const received = info.received && typeof info.received === 'object' ? info.received : null;

  const correlations = h('div', { class: 'panel-body', testid: 'correlations' },
    h('p', { class: 'muted', text: t('loading') }));
  const variants = h('div', { class: 'panel-body', testid: 'name-variants' },
    h('p', { class: 'muted', text: t('loading') }));
  const processes = h('div', { class: 'panel-body', testid: 'processes' },
    h('p', { class: 'muted', text: t('loading') }));

  finishView(ctx,
    h('article', { class: 'overview', testid: 'overview', dataset: { investigation: String(info.id ?? inv) } },
      h('header', { class: 'view-head' },
        h('p', { class: 'eyebrow', text: t('overview_heading') }),
        h('h1', { testid: 'overview-title', text: info.title ?? inv }),
        info.summary ? h('p', { class: 'summary', testid: 'overview-summary', text: info.summary }) : null,
        info.created_at ? h('p', { class: 'muted small' }, t('created_label'), ' ', timeEl(info.created_at)) : null,
        h('nav', { class: 'links', 'aria-label': t('view_links') },
          h('a', { href: '#/timeline', testid: 'overview-timeline-link', text: t('timeline_link') })),
        received ? h('p', { class: 'notice', testid: 'overview-received' },
          t('received_notice'), ' ', timeEl(received.received_at), '. ',
          t('received_fingerprint'), ' ', h('code', { class: 'fingerprint', text: String(received.fingerprint) })) : null),
      renderCounts(data.counts || {}),
      h('div', { class: 'grid' },
        h('div', { class: 'col' },
          section('section_top_entities', 'top-entities-panel', renderTopEntities(data.top_entities),
            received ? null : renderNewEntity(ctx, inv)),
          section('section_correlations', 'correlations-panel', correlations),
          section('section_name_variants', 'name-variants-panel', variants),
          section('section_entity_kinds', 'entity-kinds-panel', renderEntityKinds(data.entity_kinds))),
        h('div', { class: 'col' },
          section('section_recent_evidence', 'recent-evidence-panel', renderRecentEvidence(data.recent_evidence)),
          received ? null : section('section_import', 'import-panel', renderImportForm(ctx, inv, { specimen: state.workspace?.class === 'SPECIMEN' })),
          // A received investigation is exported where it came from (`labfy export` reads it as it is).
          received ? null : section('section_export', 'export-panel', renderExportForm(ctx, inv)),
          section('section_jobs', 'jobs-panel', renderJobs(data.jobs), received ? null : renderExtractForm(ctx, inv, data.jobs)),
          section('section_processes', 'processes-panel', processes),
          received ? null : section('section_note', 'note-panel', renderNoteForm(inv))))));

  api('/api/v1/status').then((st) => {
    if (ctx.live()) clear(processes).append(renderProcesses(st));
  }, (err) => {
    if (ctx.live()) clear(processes).append(h('p', { class: 'error-box', text: errorText(err) }));
  });

  api(`/api/v1/investigations/${seg(inv)}/name-variants?limit=${VARIANTS_LIMIT}`).then((v) => {
    if (ctx.live()) clear(variants).append(renderNameVariants(v.groups, ctx));
  }, (err) => {
    if (ctx.live()) clear(variants).append(h('p', { class: 'error-box', text: errorText(err) }));
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

// An entity made by hand, from its kind and its name (SPEC A3): the
// analyst names what no extractor found; its page opens.
function renderNewEntity(ctx, inv) {
  const kind = h('select', { id: 'new-entity-kind', testid: 'new-entity-kind', 'aria-label': t('mark_kind') },
    ENTITY_KINDS.map((k) => h('option', { value: k, text: enumLabel('kind', k) })));
  const name = h('input', { type: 'text', id: 'new-entity-name', testid: 'new-entity-name', autocomplete: 'off', 'aria-label': t('mark_name'), placeholder: t('mark_name') });
  const create = h('button', { type: 'button', testid: 'new-entity-submit', text: t('new_entity_submit') });
  create.addEventListener('click', async () => {
    create.disabled = true;
    try {
      const node = await api(`/api/v1/investigations/${seg(inv)}/entities`, { method: 'POST', body: { kind: kind.value, name: name.value } });
      if (!ctx.live()) return;
      setStatusAfterRoute(t('new_entity_created', { name: node?.label ?? name.value }), 'ok');
      location.hash = hrefFor(node.id, 'entity');
    } catch (err) {
      create.disabled = false;
      showError(err);
    }
  });
  return h('div', { class: 'new-entity', testid: 'new-entity' },
    h('h3', { text: t('new_entity_heading') }),
    h('div', { class: 'form-actions' }, kind, name, create));
}

const VARIANTS_LIMIT = 12;

// Names that may be one person or one organisation (SPEC A2), proposed,
// never merged: each name beside the first, the most mentioned, has its
// « Fusionner » button — the graph's merge, the old name kept as an alias.
function renderNameVariants(groups, ctx) {
  if (!Array.isArray(groups) || groups.length === 0) return emptyNote('name_variants_none', 'name-variants-empty');
  return h('ol', { class: 'rows', testid: 'name-variant-groups' },
    groups.map((g) => {
      const entities = Array.isArray(g.entities) ? g.entities : [];
      const keep = entities[0];
      return h('li', { class: 'name-variants', testid: 'name-variant-group', dataset: { reason: String(g.reason ?? '') } },
        h('span', { class: 'muted small', text: t(`name_variants_${g.reason}`) }),
        h('ul', { class: 'plain' }, entities.map((e, i) => h('li', null,
          objectLink({ id: e.id, kind: e.kind, label: e.name }, 'name-variant'),
          h('span', { class: 'muted small', text: ` ${tn('in_evidence', Number(e.evidence_count ?? 0))}` }),
          i > 0 && keep ? mergeButton(e, keep, ctx) : null,
          i > 0 && keep ? apartButton(e, keep, ctx) : null))));
    }));
}

// A proposed merge decided with one click (SPEC A2, A3): « Fusionner »
// merges (the old name kept as an alias), « Pas la même » sets the two
// apart for good.
function mergeButton(e, keep, ctx) {
  return variantButton('name-variant-merge', t('name_variants_merge', { name: keep.name }), ctx,
    () => api(`/api/v1/entities/${seg(e.id)}/merge`, { method: 'POST', body: { into: keep.id } }),
    t('name_variants_merged', { gone: e.name, kept: keep.name }));
}

function apartButton(e, keep, ctx) {
  return variantButton('name-variant-apart', t('name_variants_apart'), ctx,
    () => api(`/api/v1/entities/${seg(e.id)}/apart`, { method: 'POST', body: { from: keep.id } }),
    t('name_variants_set_apart', { one: e.name, other: keep.name }));
}

function variantButton(testid, text, ctx, call, said) {
  const b = h('button', { type: 'button', class: 'secondary small', testid, text });
  b.addEventListener('click', async () => {
    b.disabled = true;
    try {
      await call();
      setStatusAfterRoute(said, 'ok');
      if (ctx.live()) route();
    } catch (err) {
      b.disabled = false;
      showError(err);
    }
  });
  return b;
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
