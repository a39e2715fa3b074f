// The investigation's timeline (issue 44): its pieces in the order of what
// they date — a note of an event by the date the analyst gave it, a message
// by its Date:, a document by its file's creation date, anything else by
// when it was collected, and said which — oldest or
// newest first, a page at a time, and for one entity, picked by its name,
// the pieces that mention it.

import { api } from './api.js';
import { emptyNote, h, objectLink, seg } from './dom.js';
import { LOCALES, lang, t } from './i18n.js';
import { beginView, failView, finishView, setTitle, state } from './page.js';
import { picker } from './picker.js';

const TIMELINE_PAGE = 50;

// `#/timeline`, `#/timeline/<entity>`, each with `/desc` for newest first.
export async function renderTimeline(arg) {
  const parts = String(arg ?? '').split('/').filter(Boolean);
  const entity = parts.find((p) => p.startsWith('entity:')) ?? null;
  const newest = parts.includes('desc');
  const ctx = beginView('view-timeline', 'timeline');
  setTitle(t('timeline_heading'));
  const inv = state.investigationId;
  let entityNode = null;
  let first;
  try {
    if (entity) entityNode = await api(`/api/v1/graph/nodes/${seg(entity)}`);
    first = await api(timelinePath(inv, entity, newest, null));
  } catch (err) {
    failView(ctx, err);
    return;
  }
  if (!ctx.live()) return;
  const href = (ent, desc) => `#/timeline${ent ? `/${seg(ent)}` : ''}${desc ? '/desc' : ''}`;
  const rows = h('tbody', { testid: 'timeline-rows' });
  const more = h('button', { type: 'button', class: 'more', testid: 'timeline-more', text: t('timeline_more'), hidden: true });
  let next = null;
  const add = (page) => {
    const items = Array.isArray(page.items) ? page.items : [];
    for (const item of items) {
      rows.append(h('tr', { testid: 'timeline-row', dataset: { ref: String(item.id), kind: String(item.date_kind) } },
        h('td', { class: 'num' }, h('time', { datetime: String(item.date), text: dateText(item.date) })),
        h('td', { class: 'muted small', text: t(`timeline_date_${['document', 'event'].includes(item.date_kind) ? item.date_kind : 'collected'}`) }),
        h('td', null, objectLink({ id: item.id, kind: 'evidence', label: item.title }, 'timeline-piece')),
        h('td', { class: 'muted small', text: String(item.source ?? '') })));
    }
    next = page.next ?? null;
    more.hidden = !next;
  };
  add(first);
  more.addEventListener('click', async () => {
    more.disabled = true;
    try {
      const page = await api(timelinePath(inv, entity, newest, next));
      if (ctx.live()) add(page);
    } finally {
      more.disabled = false;
    }
  });
  // The entity filter: picked by its name; cleared by a link.
  const pick = picker({ id: 'timeline-entity', testid: 'timeline-entity', what: 'entities', label: t('timeline_filter') });
  const apply = h('button', { type: 'button', testid: 'timeline-filter', text: t('timeline_filter_apply') });
  apply.addEventListener('click', () => {
    const ref = pick.value();
    if (ref) location.hash = href(ref, newest);
  });
  const order = h('a', { href: href(entity, !newest), testid: 'timeline-order', text: t(newest ? 'timeline_oldest_first' : 'timeline_newest_first') });
  finishView(ctx,
    h('article', { class: 'timeline', testid: 'timeline-view' },
      h('header', { class: 'view-head' },
        h('p', { class: 'eyebrow', text: t('timeline_heading') }),
        h('h1', { testid: 'timeline-title', text: entityNode ? t('timeline_of', { name: entityNode.label ?? entity }) : t('timeline_all') }),
        h('nav', { class: 'links', 'aria-label': t('view_links') },
          order,
          entityNode ? h('a', { href: href(null, newest), testid: 'timeline-clear', text: t('timeline_clear') }) : null,
          entityNode ? h('a', { href: `#/node/${seg(entity)}`, testid: 'timeline-entity-link', text: entityNode.label ?? entity }) : null)),
      h('section', { class: 'panel' },
        h('label', { for: 'timeline-entity', text: t('timeline_filter') }),
        h('div', { class: 'form-actions timeline-filter' }, pick.el, apply)),
      h('section', { class: 'panel' },
        rows.children.length === 0 && !next
          ? emptyNote('timeline_empty', 'timeline-empty')
          : h('table', { class: 'list-table', testid: 'timeline-table' },
            h('thead', null, h('tr', null,
              h('th', { scope: 'col', text: t('timeline_col_date') }),
              h('th', { scope: 'col', text: t('timeline_col_what') }),
              h('th', { scope: 'col', text: t('timeline_col_piece') }),
              h('th', { scope: 'col', text: t('timeline_col_source') }))),
            rows),
        more)));
}

function timelinePath(inv, entity, newest, after) {
  const q = new URLSearchParams({ limit: String(TIMELINE_PAGE), order: newest ? 'desc' : 'asc' });
  if (entity) q.set('entity', entity);
  if (after) q.set('after', after);
  return `/api/v1/investigations/${seg(inv)}/timeline?${q}`;
}

// `YYYY-MM-DD HH:MM:SS` (UTC) in the analyst's language and time zone.
function dateText(value) {
  const d = new Date(`${String(value).replace(' ', 'T')}Z`);
  if (Number.isNaN(d.getTime())) return String(value ?? '');
  return new Intl.DateTimeFormat(LOCALES[lang], { dateStyle: 'medium', timeStyle: 'short' }).format(d);
}

