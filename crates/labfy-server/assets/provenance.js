// The provenance trail of an object (SPEC W): who produced it, from what,
// followed back a bounded number of steps.

import { api } from './api.js';
import { $, dl, emptyNote, h, hrefFor, objectLink, seg, timeEl } from './dom.js';
import { enumLabel, fmtNumber, t } from './i18n.js';
import { beginView, failView, finishView, setTitle } from './page.js';

const PROVENANCE_DEPTH = 8;

// Who produced a record, in the analyst's language where Labfy wrote it
// (the analyst, its extraction); any other producer as stored.
function producerLabel(p) {
  const raw = String(p ?? '');
  if (raw === 'analyst') return t('prov_producer_analyst');
  const extract = /^labfy-extract\/(\d+)$/.exec(raw);
  if (extract) return t('prov_producer_extract', { n: extract[1] });
  return raw || '—';
}


export async function renderProvenance(ref) {
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
                [t('prov_producer'), producerLabel(r.producer), 'provenance-producer'],
                [t('prov_activity'), r.activity ? enumLabel('activity', r.activity) : '—', 'provenance-activity'],
                [t('prov_time'), timeEl(r.created_at)],
                [t('prov_inputs'), inputs.length
                  ? h('ul', { class: 'inline-list' }, inputs.map((inp) => h('li', null, objectLink(inp, 'provenance-input'))))
                  : h('span', { class: 'muted', text: t('prov_no_inputs') })],
              ]));
          })),
      data.truncated ? h('p', { class: 'muted small', testid: 'provenance-truncated', text: t('prov_truncated', { n: PROVENANCE_DEPTH }) }) : null));
}
