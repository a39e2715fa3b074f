// The evidence reader (SPEC E5, C2, C3): a piece's text, a page at a time,
// its metadata, how it was fetched or imported, its original to download
// and the entities it mentions — all of it text.

import { api, errorText } from './api.js';
import { $, countOf, dl, emptyNote, h, objectLink, refLink, section, seg, timeEl } from './dom.js';
import { downloadLink, importPhrase } from './forms.js';
import { enumLabel, fmtNumber, t } from './i18n.js';
import { ENTITY_KINDS } from './lists.js';
import { beginView, failView, finishView, route, setStatusAfterRoute, setTitle, showError } from './page.js';

const EXCERPT_PAGE = 4000;


// How egress fetched an evidence item (SPEC E5): every value is the fetch's
// provenance as stored — untrusted text — and the body as received, to
// download (SPEC C3: kept whatever its type).
function renderFetch(f, ev) {
  const list = (xs) => (Array.isArray(xs) && xs.length
    ? h('ol', { class: 'agent-exclusion-list' }, xs.map((x) => h('li', null, h('code', { class: 'camp-url', text: Array.isArray(x) ? `${x[0]}: ${x[1]}` : String(x) }))))
    : t('res_none'));
  return section('fetch_heading', 'evidence-fetch',
    ev && ev.original
      ? h('p', null, downloadLink(`/api/v1/evidence/${seg(ev.id)}/original`, 'evidence-fetch-download', t('import_download')))
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
      ? h('p', null, downloadLink(`/api/v1/evidence/${seg(ev.id)}/original`, 'evidence-download', t('import_download')))
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

// How the text shown was read, where it is partial, absent or read by OCR
// (SPEC A1): the notes of the latest import, right above the text.
function readingNotes(ev) {
  const imports = Array.isArray(ev.imports) ? ev.imports : [];
  const last = imports[imports.length - 1];
  const notes = last && Array.isArray(last.notes) ? last.notes : [];
  if (!notes.length) return null;
  return h('div', { class: 'reading-notes small', testid: 'evidence-reading-notes', role: 'note' },
    h('p', { text: t('reader_notes') }),
    h('ul', null, notes.map((n) => h('li', { text: importPhrase(n) }))));
}

export async function renderEvidence(ref) {
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

  // Focusable, so a selection can be made with the keyboard too.
  const pre = h('pre', { class: 'reader-text', testid: 'evidence-text', tabindex: '0', dataset: { state: 'loading' } });
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
          h('h2', { text: t('reader_text') }), readingNotes(ev), pre, readerError,
          h('div', { class: 'reader-foot' }, progress, more)),
        h('section', { class: 'panel reader-side', testid: 'evidence-entities-panel' },
          h('h2', { text: t('reader_entities') }),
          entities.length
            ? h('ol', { class: 'rows', testid: 'evidence-entities' },
              entities.map((e) => h('li', null,
                objectLink({ id: e.id, kind: e.kind, label: e.name }, 'evidence-entity'),
                e.relation ? h('span', { class: 'muted small', text: enumLabel('rel', e.relation) }) : null)))
            : emptyNote('reader_no_entities', 'evidence-entities-empty'),
          renderMarkPanel(ctx, ev.id ?? ref, pre)))));
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

// Naming what the analyst selects in the text (SPEC A3): the selection's
// place in the piece (characters, as the server counts them: Unicode scalar
// values), a kind, a name — the selection, spaces collapsed, which the
// analyst may correct — and the entity is made (or found) with its mention
// there. The last selection made inside the text is kept while the analyst
// moves to the form.
function renderMarkPanel(ctx, evidence, pre) {
  const quote = h('blockquote', { testid: 'mark-selection', hidden: true });
  const kind = h('select', { id: 'mark-kind', testid: 'mark-kind' },
    ENTITY_KINDS.map((k) => h('option', { value: k, text: enumLabel('kind', k) })));
  const name = h('input', { type: 'text', id: 'mark-name', testid: 'mark-name', autocomplete: 'off' });
  const submit = h('button', { type: 'button', testid: 'mark-submit', text: t('mark_submit'), disabled: true });
  const status = h('p', { class: 'form-status', testid: 'mark-status', role: 'status', hidden: true });
  let picked = null;
  const onSelection = () => {
    if (!ctx.live()) {
      document.removeEventListener('selectionchange', onSelection);
      return;
    }
    const sel = document.getSelection();
    if (!sel || sel.rangeCount === 0 || sel.isCollapsed) return;
    const range = sel.getRangeAt(0);
    if (!pre.contains(range.startContainer) || !pre.contains(range.endContainer)) return;
    const before = document.createRange();
    before.setStart(pre, 0);
    before.setEnd(range.startContainer, range.startOffset);
    const text = range.toString();
    const lead = Array.from(text).length - Array.from(text.trimStart()).length;
    const trimmed = text.trim();
    if (!trimmed) return;
    picked = { start: Array.from(before.toString()).length + lead, length: Array.from(trimmed).length };
    quote.textContent = trimmed;
    quote.hidden = false;
    name.value = trimmed.split(/\s+/).join(' ');
    submit.disabled = false;
    status.hidden = true;
  };
  document.addEventListener('selectionchange', onSelection);
  submit.addEventListener('click', async () => {
    if (!picked) return;
    submit.disabled = true;
    try {
      const out = await api(`/api/v1/evidence/${seg(evidence)}/mentions`, {
        method: 'POST', body: { kind: kind.value, name: name.value, start: picked.start, length: picked.length },
      });
      if (!ctx.live()) return;
      const label = out?.entity?.label ?? name.value;
      setStatusAfterRoute(t(out?.created ? 'mark_created' : 'mark_existing', { name: label }), 'ok');
      route();
    } catch (err) {
      status.textContent = errorText(err);
      status.dataset.kind = 'error';
      status.hidden = false;
      submit.disabled = false;
    }
  });
  return h('div', { class: 'mark-panel', testid: 'mark-panel' },
    h('h3', { text: t('mark_heading') }),
    h('p', { class: 'muted small', text: t('mark_help') }),
    quote,
    h('div', { class: 'form-grid' },
      h('label', { for: 'mark-kind', text: t('mark_kind') }), kind,
      h('label', { for: 'mark-name', text: t('mark_name') }), name),
    h('div', { class: 'form-actions' }, submit),
    status);
}
