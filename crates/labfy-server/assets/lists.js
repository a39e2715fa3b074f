// Lists (SPEC U2): every count opens its list — `#/list/{what}?kind=&sort=&
// order=&prefix=` — sorted by a column header, filtered by kind or by the
// start of a title or name, paginated by key (`after`: the last item shown;
// earlier pages are remembered while the view lives).

import { api, errorText } from './api.js';
import { $, clear, h, hrefFor, objectLink, seg, timeEl } from './dom.js';
import { enumLabel, fmtBytes, fmtNumber, t } from './i18n.js';
import { beginView, finishView, render, setStatus, setTitle, showError, state } from './page.js';

// The relation kinds, in the order the lists and the node view offer them.
export const RELATION_KINDS = ['linked_to', 'mentions', 'works_for', 'owns_domain', 'uses_email', 'uses_phone', 'located_in', 'derived_from',
  'sent_by', 'sent_to', 'copied_to', 'sent_from'];

export const LISTS = ['evidence', 'entities', 'relations'];
const LIST_PAGE = 50;
export const ENTITY_KINDS = ['person', 'organisation', 'location', 'domain', 'email', 'phone', 'url', 'ipv4', 'ipv6',
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

export function listHref(what, params = {}) {
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

export async function renderList() {
  const p = listParams();
  if (!LISTS.includes(p.what)) {
    render('overview');
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
