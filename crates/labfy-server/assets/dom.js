// The page's DOM helpers (SPEC S4): text only ever goes through
// createTextNode / textContent, through `shown`; elements are built by `h`;
// links only point at this page's own `#/...` routes.

import { enumLabel, fmtDate, fmtNumber, t } from './i18n.js';

// A <time> element: readable text, raw value in `datetime` and as a tooltip.
export function timeEl(value) {
  const el = h('time', { text: fmtDate(value) });
  if (typeof value === 'string' && value) {
    el.setAttribute('datetime', value);
    el.title = value;
  }
  return el;
}

// ---------------------------------------------------------------------------
// DOM helpers. Text only ever goes through createTextNode / textContent.

// Bidirectional overrides, embeddings and isolates (U+202A–U+202E,
// U+2066–U+2069) in text from outside would reorder what the analyst reads:
// `facture<U+202E>fdp.exe` displays as `factureexe.pdf`, and the override
// runs on into the rest of the line (issue 19's corpus). Every string the
// UI shows goes through here and shows them as `[U+202E]`; legitimate
// right-to-left text needs none of them.
const BIDI_CONTROLS = /[\u202A-\u202E\u2066-\u2069]/g;

export function shown(value) {
  return String(value).replace(BIDI_CONTROLS, (c) => `[U+${c.codePointAt(0).toString(16).toUpperCase()}]`);
}

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [name, value] of Object.entries(attrs)) {
      if (value === undefined || value === null || value === false) continue;
      if (name === 'text') el.textContent = shown(value);
      else if (name === 'class') el.className = value;
      else if (name === 'testid') el.dataset.testid = value;
      else if (name === 'dataset') Object.assign(el.dataset, value);
      else if (name === 'hidden') el.hidden = Boolean(value);
      else if (name === 'href') el.setAttribute('href', value);
      else el.setAttribute(name, value === true ? '' : shown(value));
    }
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(shown(child)));
  }
  return el;
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

export const $ = (id) => document.getElementById(id);

// Keep the `:` of object refs readable in URLs; escape everything else.
export function seg(ref) {
  return encodeURIComponent(String(ref)).replace(/%3A/gi, ':');
}

export function isEvidence(ref, kind) {
  return kind === 'evidence' || String(ref).startsWith('evidence:');
}

export function hrefFor(ref, kind) {
  return isEvidence(ref, kind) ? `#/evidence/${seg(ref)}` : `#/node/${seg(ref)}`;
}

// The kind to show for a graph object. Graph nodes say `kind: "entity"`
// with the entity kind (person, domain…) in `subkind`; evidence nodes carry
// their MIME type in `subkind`.
export function displayKind(obj) {
  if (!obj) return '';
  return obj.kind === 'entity' && obj.subkind ? obj.subkind : (obj.kind ?? '');
}

// A link to an object: its label, then its kind in a muted tag.
export function objectLink(obj, testid) {
  const label = obj.label ?? obj.name ?? obj.title ?? obj.id;
  const kind = displayKind(obj);
  return h('a', {
    href: hrefFor(obj.id, obj.kind),
    class: 'obj',
    testid,
    dataset: { ref: String(obj.id), kind: String(obj.kind ?? ''), subkind: String(obj.subkind ?? '') },
  },
  h('span', { class: 'obj-label', text: label }),
  kind ? h('span', { class: `kind kind-${cssToken(kind)}`, text: enumLabel('kind', kind) }) : null);
}

// A node detail value: dates and numbers formatted, anything else as text.
export function detailValue(key, value) {
  if (value === null || value === undefined) return '—';
  if (typeof value === 'number') return fmtNumber(value);
  if (typeof value === 'object') return JSON.stringify(value);
  if (/_at$/.test(key)) return timeEl(value);
  if (key === 'sha256') return h('code', { class: 'hash', text: value });
  return String(value);
}

export function cssToken(s) {
  return String(s).toLowerCase().replace(/[^a-z0-9_-]/g, '');
}

export function section(titleKey, testid, ...children) {
  return h('section', { class: 'panel', testid },
    h('h2', { text: t(titleKey) }), ...children);
}

export function emptyNote(key = 'empty', testid) {
  return h('p', { class: 'muted empty', testid, text: t(key) });
}

export function dl(rows, testid) {
  const list = h('dl', { class: 'meta', testid });
  for (const [label, value, rowTestid] of rows) {
    list.append(h('dt', { text: label }), h('dd', { testid: rowTestid }, value));
  }
  return list;
}

const SVG_NS = 'http://www.w3.org/2000/svg';

// An SVG element, built as `h` builds HTML ones.
export function svgEl(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (name === 'text') el.textContent = shown(value);
    else if (name === 'testid') el.setAttribute('data-testid', String(value));
    else el.setAttribute(name, String(value));
  }
  for (const child of children.flat(Infinity)) if (child) el.append(child);
  return el;
}

// The kind of an object reference (`evidence:…` → `evidence`).
export function refKind(ref) {
  const s = String(ref ?? '');
  const i = s.indexOf(':');
  return i > 0 ? s.slice(0, i) : '';
}

// An object reference: a link to its view when the reader has one
// (evidence, entity), else the reference as code.
export function refLink(ref, testid = 'agent-ref') {
  const s = String(ref ?? '');
  const kind = refKind(s);
  if (kind === 'evidence' || kind === 'entity') {
    return h('a', { href: hrefFor(s, kind), class: 'agent-ref', testid, dataset: { ref: s, kind }, text: s });
  }
  return h('code', { class: 'agent-ref hash', testid, dataset: { ref: s, kind }, text: s });
}

export function countOf(v) {
  const n = Number(v);
  return Number.isFinite(n) && n > 0 ? Math.floor(n) : 0;
}
