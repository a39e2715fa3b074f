// The node view (SPEC U1, C4): a graph object, its ego graph (graph.js)
// beside the list of its neighbours, and the analyst's hand on an entity
// (rename, merge, link, delete).

import { api, errorText } from './api.js';
import { $, clear, cssToken, detailValue, displayKind, dl, emptyNote, h, hrefFor, isEvidence, objectLink, seg, shown } from './dom.js';
import { egoGraph } from './graph.js';
import { enumLabel, fmtNumber, t } from './i18n.js';
import { RELATION_KINDS } from './lists.js';
import { picker } from './picker.js';
import { beginView, failView, finishView, route, setStatusAfterRoute, setTitle, showError, state } from './page.js';

const NEIGHBOURS_PAGE = 50;
const NEIGHBOURS_MAX = 500; // the server's bound on `limit`


export async function renderNode(ref) {
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
          h('a', { href: `#/provenance/${seg(id)}`, testid: 'node-provenance-link', text: t('link_provenance') }),
          node.kind === 'entity'
            ? h('a', { href: `#/timeline/${seg(id)}`, testid: 'node-timeline-link', text: t('timeline_link_entity') })
            : null)),
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
  // Merged into another of its kind, linked to any entity or piece: each
  // picked by its name (SPEC A3).
  const into = picker({ id: 'edit-merge', testid: 'edit-merge-into', what: 'entities', kind: node.subkind ?? null, exclude: id, label: t('edit_merge_label') });
  const merge = h('button', { type: 'button', testid: 'edit-merge', text: t('edit_merge') });
  merge.addEventListener('click', () => act(merge,
    () => api(`/api/v1/entities/${seg(id)}/merge`, { method: 'POST', body: { into: into.value() } }),
    (kept) => { setStatusAfterRoute(t('edit_merged'), 'ok'); location.hash = hrefFor(kept.id, 'entity'); }));
  const relKind = h('select', { testid: 'edit-link-kind', 'aria-label': t('edit_link') },
    RELATION_KINDS.map((k) => h('option', { value: k, text: enumLabel('rel', k) })));
  const target = picker({ id: 'edit-link', testid: 'edit-link-target', what: 'any', exclude: id, label: t('edit_link_label') });
  const link = h('button', { type: 'button', testid: 'edit-link', text: t('edit_link') });
  link.addEventListener('click', () => act(link,
    () => api(`/api/v1/investigations/${seg(state.investigationId)}/relations`, { method: 'POST', body: { kind: relKind.value, src: id, dst: target.value() } }),
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
    h('label', { for: 'edit-merge', text: t('edit_merge_label') }), h('div', { class: 'form-actions' }, into.el, merge),
    h('label', { for: 'edit-link', text: t('edit_link_label') }), h('div', { class: 'form-actions' }, relKind, target.el, link),
    h('div', { class: 'form-actions' }, del),
    status);
}
