// Picking a thing by its name (SPEC A3): a text field that searches as the
// analyst types — the investigation's entities first, then its pieces — and
// offers what it found in a list to choose from with the mouse or the
// keyboard (the ARIA combobox pattern). The chosen thing's reference is what
// the form sends; a reference typed or pasted whole (`entity:…`) is taken
// as it is. Nothing is sent until the form's own button.

import { api } from './api.js';
import { h, seg } from './dom.js';
import { enumLabel, t } from './i18n.js';
import { state } from './page.js';

const SEARCH_DELAY_MS = 200;
const SHOWN = 8;
let made = 0;

const REF = /^(entity|evidence):[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

// `what`: 'entities' (only entities; `kind` keeps one kind) or 'any'
// (entities and pieces). `exclude`: a reference never offered (the entity
// the form is about).
export function picker({ id, testid, what = 'any', kind = null, exclude = null, label }) {
  made += 1;
  const listId = `picker-list-${made}`;
  const input = h('input', {
    type: 'text', id, testid, autocomplete: 'off', role: 'combobox', 'aria-autocomplete': 'list',
    'aria-expanded': 'false', 'aria-controls': listId, placeholder: t(what === 'entities' ? 'picker_placeholder_entity' : 'picker_placeholder_any'),
    'aria-label': label,
  });
  const list = h('ul', { id: listId, role: 'listbox', class: 'picker-list', testid: `${testid}-options`, hidden: true });
  const note = h('span', { class: 'visually-hidden', 'aria-live': 'polite', testid: `${testid}-note` });
  const wrap = h('div', { class: 'picker' }, input, list, note);
  let chosen = null;
  let options = [];
  let active = -1;
  let timer = null;
  let asked = 0;

  const close = () => {
    list.hidden = true;
    input.setAttribute('aria-expanded', 'false');
    input.removeAttribute('aria-activedescendant');
    active = -1;
  };
  const highlight = (i) => {
    active = i;
    options.forEach((o, j) => o.el.setAttribute('aria-selected', String(j === i)));
    if (i >= 0) {
      input.setAttribute('aria-activedescendant', options[i].el.id);
      options[i].el.scrollIntoView({ block: 'nearest' });
    }
  };
  const choose = (o) => {
    chosen = o;
    input.value = o.label;
    input.dataset.ref = o.id;
    note.textContent = t('picker_chosen', { label: o.label });
    close();
  };
  const show = (found) => {
    list.replaceChildren();
    options = found.slice(0, SHOWN).map((o, i) => {
      const el = h('li', { id: `${listId}-${i}`, role: 'option', class: 'picker-option', testid: `${testid}-option`, 'aria-selected': 'false', dataset: { ref: o.id } },
        h('span', { class: 'picker-label', text: o.label }), ' ', h('span', { class: 'muted small', text: o.kindLabel }));
      // Chosen on mousedown, before the field loses its focus.
      el.addEventListener('mousedown', (e) => {
        e.preventDefault();
        choose(o);
      });
      return { ...o, el };
    });
    if (!options.length) {
      list.append(h('li', { class: 'muted small picker-none', role: 'presentation', text: t('picker_none') }));
    }
    list.append(...options.map((o) => o.el));
    list.hidden = false;
    input.setAttribute('aria-expanded', 'true');
    note.textContent = t('picker_found', { n: options.length });
    highlight(-1);
  };
  const search = async () => {
    const q = input.value.trim();
    if (q.length < 2 || REF.test(q)) {
      close();
      return;
    }
    const mine = ++asked;
    try {
      const res = await api(`/api/v1/investigations/${seg(state.investigationId)}/search?q=${encodeURIComponent(q)}&limit=${SHOWN}`);
      if (mine !== asked) return;
      const entities = (res?.entities?.items ?? [])
        .filter((e) => (!kind || e.kind === kind) && e.id !== exclude)
        .map((e) => ({ id: String(e.id), label: String(e.name ?? e.id), kindLabel: enumLabel('kind', e.kind) }));
      const pieces = what === 'any'
        ? (res?.hits ?? []).filter((p) => p.id !== exclude)
          .map((p) => ({ id: String(p.id), label: String(p.title ?? p.id), kindLabel: t('picker_piece') }))
        : [];
      show([...entities, ...pieces]);
    } catch {
      if (mine === asked) close();
    }
  };
  input.addEventListener('input', () => {
    chosen = null;
    delete input.dataset.ref;
    clearTimeout(timer);
    timer = setTimeout(search, SEARCH_DELAY_MS);
  });
  input.addEventListener('keydown', (e) => {
    if (list.hidden || !options.length) {
      if (e.key === 'Escape') close();
      return;
    }
    if (e.key === 'ArrowDown') {
      e.preventDefault();
      highlight((active + 1) % options.length);
    } else if (e.key === 'ArrowUp') {
      e.preventDefault();
      highlight(active <= 0 ? options.length - 1 : active - 1);
    } else if (e.key === 'Enter' && active >= 0) {
      e.preventDefault();
      choose(options[active]);
    } else if (e.key === 'Escape') {
      close();
    }
  });
  input.addEventListener('blur', () => setTimeout(close, 150));
  return {
    el: wrap,
    input,
    // The reference to send: the one chosen, or one typed whole.
    value: () => (chosen ? chosen.id : input.value.trim()),
  };
}
