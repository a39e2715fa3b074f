// Labfy browser UI: an investigation browser for the analyst.
//
// Rules this file keeps (SPEC S4 and the page's Content-Security-Policy):
// - every string that comes from the API reaches the DOM through
//   `textContent` or `createTextNode`; no innerHTML, insertAdjacentHTML,
//   outerHTML, document.write or eval anywhere;
// - no inline style: looks come from classes in app.css;
// - links only ever point at this page's own `#/...` routes.
//
// Single page with hash routing so the back button works:
//   #/                      overview of the current investigation
//   #/evidence/<ref>        evidence reader
//   #/node/<ref>            a graph node and its neighbours
//   #/provenance/<ref>      the provenance trail of an object

const LANG_KEY = 'labfy.lang';
const LANGS = ['fr', 'en'];
const LOCALES = { fr: 'fr-FR', en: 'en-GB' };
const EXCERPT_PAGE = 4000;
const NEIGHBOURS_PAGE = 50;
const NEIGHBOURS_MAX = 500; // the server's bound on `limit`
const SEARCH_LIMIT = 20;
const SEARCH_MAX_CHARS = 256;
const NOTE_TITLE_MAX_CHARS = 200;
const NOTE_SOURCE = 'analyste:navigateur';
const CORRELATIONS_LIMIT = 20;
const PROVENANCE_DEPTH = 8;
const REQUEST_TIMEOUT_MS = 20000;
const MARK_START = '\uE000';
const MARK_END = '\uE001';

// All UI labels, French first. `{name}` is replaced by `t(key, {name})`.
const I18N = {
  fr: {
    lang_group: 'Langue',
    class_SPECIMEN: 'SPECIMEN — données synthétiques',
    class_REAL: 'RÉEL',
    isolated: 'isolé du réseau',
    not_isolated: 'NON ISOLÉ',
    investigation_label: 'Enquête',
    search_label: 'Rechercher dans les pièces',
    search_placeholder: 'Mots, nom, domaine…',
    search_button: 'Rechercher',
    search_hint: 'Saisissez un terme pour chercher dans les pièces de l’enquête.',
    search_loading: 'Recherche de « {q} »…',
    search_hits_one: '{n} résultat pour « {q} »',
    search_hits_other: '{n} résultats pour « {q} »',
    search_none: 'Aucun résultat pour « {q} ».',
    search_truncated: 'Liste tronquée : précisez la recherche.',
    search_too_long: 'La recherche est limitée à {n} caractères.',
    search_no_investigation: 'Aucune enquête ouverte : recherche impossible.',
    nav_overview: 'Vue d’ensemble',
    loading: 'Chargement…',
    empty: 'Rien à afficher.',
    unknown_route: 'Page inconnue : retour à la vue d’ensemble.',
    view_failed: 'Cette page n’a pas pu être chargée (voir le message ci-dessus).',
    back_overview: 'Retour à la vue d’ensemble',
    no_workspace: 'Aucun espace de travail pour cette session.',
    no_investigation: 'Aucune enquête dans cet espace de travail.',
    overview_heading: 'Enquête',
    created_label: 'Créée le',
    counts_heading: 'Volumes',
    count_evidence: 'Pièces',
    count_entities: 'Entités',
    count_relations: 'Relations',
    count_provenance: 'Traces de provenance',
    count_jobs: 'Tâches',
    section_entity_kinds: 'Types d’entités',
    section_top_entities: 'Entités principales',
    section_correlations: 'Entités partagées entre pièces',
    section_recent_evidence: 'Pièces récentes',
    section_jobs: 'Tâches',
    section_processes: 'Processus',
    role_server: 'serveur de travail',
    role_governor: 'gouverneur de ressources',
    role_egress: 'egress (Tor)',
    processes_none: 'Non supervisé : {detail}',
    restarts: '{n} redémarrage(s)',
    section_note: 'Ajouter une note',
    in_evidence_one: 'citée dans {n} pièce',
    in_evidence_other: 'citée dans {n} pièces',
    job_progress: 'Avancement',
    note_title: 'Titre',
    note_content: 'Contenu',
    note_submit: 'Enregistrer la note',
    note_saving: 'Enregistrement de la note…',
    note_saved: 'Note « {title} » enregistrée.',
    note_missing: 'Le titre et le contenu sont obligatoires.',
    note_help: 'La note devient une nouvelle pièce de l’enquête, avec son empreinte SHA-256.',
    evidence_heading: 'Pièce',
    meta_id: 'Identifiant',
    meta_source: 'Source',
    meta_mime: 'Type MIME',
    meta_sha256: 'SHA-256',
    meta_size: 'Taille',
    meta_collected: 'Collectée le',
    meta_created: 'Enregistrée le',
    size_value: '{bytes} octets · {chars} caractères',
    reader_text: 'Texte',
    reader_more: 'Suite',
    reader_progress: '{shown} caractères affichés sur {total}',
    reader_empty: 'Cette pièce ne contient pas de texte.',
    reader_entities: 'Entités mentionnées',
    reader_no_entities: 'Aucune entité extraite de cette pièce.',
    link_neighbours: 'Voisins',
    link_provenance: 'Provenance',
    link_open_evidence: 'Ouvrir la pièce',
    node_heading: 'Nœud',
    node_details: 'Détails',
    node_degree: 'Degré',
    node_no_details: 'Aucun détail.',
    neighbours: 'Voisins',
    neighbours_count: '{shown} affichés sur {total}',
    neighbours_more: 'Afficher plus',
    neighbours_none: 'Aucun voisin.',
    dir_out: 'relation sortante',
    dir_in: 'relation entrante',
    confidence: 'confiance {v}',
    prov_heading: 'Provenance',
    prov_of: 'Provenance de « {label} »',
    prov_depth: 'Niveau {n}',
    prov_producer: 'Producteur',
    prov_activity: 'Activité',
    prov_time: 'Date',
    prov_inputs: 'Entrées',
    prov_no_inputs: 'aucune',
    prov_truncated: 'Trace tronquée : la profondeur maximale ({n}) est atteinte.',
    prov_empty: 'Aucun enregistrement de provenance.',
    err_api: 'Erreur {status} ({code}) : {message}',
    err_session: 'Session expirée (le serveur a sans doute redémarré) : rechargez la page.',
    err_rate: 'Trop de requêtes (429) : {message} Réessayez dans {s} s.',
    err_network: 'Serveur injoignable : {message}',
    err_timeout: 'Le serveur n’a pas répondu à temps.',
    err_unexpected: 'Réponse inattendue du serveur.',
    detail_source: 'Source',
    detail_sha256: 'SHA-256',
    detail_byte_len: 'Taille (octets)',
    detail_char_len: 'Taille (caractères)',
    detail_collected_at: 'Collectée le',
    detail_created_at: 'Créé le',
    detail_evidence_count: 'Pièces qui le citent',
    detail_summary: 'Résumé',
    detail_form: 'Forme juridique',
    detail_registration: 'Immatriculation',
    detail_name: 'Nom',
    detail_mime: 'Type MIME',
    kind_person: 'personne',
    kind_organisation: 'organisation',
    kind_domain: 'domaine',
    kind_email: 'courriel',
    kind_location: 'lieu',
    kind_phone: 'téléphone',
    kind_evidence: 'pièce',
    kind_entity: 'entité',
    kind_investigation: 'enquête',
    kind_workspace: 'espace de travail',
    kind_job: 'tâche',
    rel_mentions: 'mentionne',
    rel_works_for: 'travaille pour',
    rel_owns_domain: 'possède le domaine',
    rel_uses_email: 'utilise le courriel',
    rel_located_in: 'situé à',
    rel_linked_to: 'lié à',
    rel_derived_from: 'dérivé de',
    status_queued: 'en attente',
    status_pending: 'en attente',
    status_running: 'en cours',
    status_done: 'terminée',
    status_succeeded: 'terminée',
    status_completed: 'terminée',
    status_failed: 'en échec',
    status_cancelled: 'annulée',
    status_canceled: 'annulée',
    status_active: 'actif',
  },
  en: {
    lang_group: 'Language',
    class_SPECIMEN: 'SPECIMEN — synthetic data',
    class_REAL: 'REAL',
    isolated: 'network-isolated',
    not_isolated: 'NOT ISOLATED',
    investigation_label: 'Investigation',
    search_label: 'Search the evidence',
    search_placeholder: 'Words, name, domain…',
    search_button: 'Search',
    search_hint: 'Type a term to search this investigation’s evidence.',
    search_loading: 'Searching for “{q}”…',
    search_hits_one: '{n} result for “{q}”',
    search_hits_other: '{n} results for “{q}”',
    search_none: 'No results for “{q}”.',
    search_truncated: 'List truncated: refine the search.',
    search_too_long: 'Searches are limited to {n} characters.',
    search_no_investigation: 'No open investigation: cannot search.',
    nav_overview: 'Overview',
    loading: 'Loading…',
    empty: 'Nothing to show.',
    unknown_route: 'Unknown page: back to the overview.',
    view_failed: 'This page could not be loaded (see the message above).',
    back_overview: 'Back to the overview',
    no_workspace: 'No workspace for this session.',
    no_investigation: 'No investigation in this workspace.',
    overview_heading: 'Investigation',
    created_label: 'Created',
    counts_heading: 'Volumes',
    count_evidence: 'Evidence',
    count_entities: 'Entities',
    count_relations: 'Relations',
    count_provenance: 'Provenance records',
    count_jobs: 'Jobs',
    section_entity_kinds: 'Entity kinds',
    section_top_entities: 'Top entities',
    section_correlations: 'Entities shared across evidence',
    section_recent_evidence: 'Recent evidence',
    section_jobs: 'Jobs',
    section_processes: 'Processes',
    role_server: 'workspace server',
    role_governor: 'resource governor',
    role_egress: 'egress (Tor)',
    processes_none: 'Not supervised: {detail}',
    restarts: '{n} restart(s)',
    section_note: 'Add a note',
    in_evidence_one: 'in {n} evidence item',
    in_evidence_other: 'in {n} evidence items',
    job_progress: 'Progress',
    note_title: 'Title',
    note_content: 'Content',
    note_submit: 'Save note',
    note_saving: 'Saving the note…',
    note_saved: 'Note “{title}” saved.',
    note_missing: 'Title and content are required.',
    note_help: 'The note becomes a new evidence item of the investigation, with its SHA-256 fingerprint.',
    evidence_heading: 'Evidence',
    meta_id: 'Identifier',
    meta_source: 'Source',
    meta_mime: 'MIME type',
    meta_sha256: 'SHA-256',
    meta_size: 'Size',
    meta_collected: 'Collected',
    meta_created: 'Recorded',
    size_value: '{bytes} bytes · {chars} characters',
    reader_text: 'Text',
    reader_more: 'More',
    reader_progress: '{shown} of {total} characters shown',
    reader_empty: 'This evidence item has no text.',
    reader_entities: 'Entities mentioned',
    reader_no_entities: 'No entity extracted from this evidence.',
    link_neighbours: 'Neighbours',
    link_provenance: 'Provenance',
    link_open_evidence: 'Open evidence',
    node_heading: 'Node',
    node_details: 'Details',
    node_degree: 'Degree',
    node_no_details: 'No details.',
    neighbours: 'Neighbours',
    neighbours_count: '{shown} shown of {total}',
    neighbours_more: 'Show more',
    neighbours_none: 'No neighbours.',
    dir_out: 'outgoing relation',
    dir_in: 'incoming relation',
    confidence: 'confidence {v}',
    prov_heading: 'Provenance',
    prov_of: 'Provenance of “{label}”',
    prov_depth: 'Depth {n}',
    prov_producer: 'Producer',
    prov_activity: 'Activity',
    prov_time: 'Time',
    prov_inputs: 'Inputs',
    prov_no_inputs: 'none',
    prov_truncated: 'Trail truncated: the maximum depth ({n}) was reached.',
    prov_empty: 'No provenance record.',
    err_api: 'Error {status} ({code}): {message}',
    err_session: 'Session expired (the server probably restarted): reload the page.',
    err_rate: 'Too many requests (429): {message} Retry in {s} s.',
    err_network: 'Server unreachable: {message}',
    err_timeout: 'The server did not answer in time.',
    err_unexpected: 'Unexpected answer from the server.',
    detail_source: 'Source',
    detail_sha256: 'SHA-256',
    detail_byte_len: 'Size (bytes)',
    detail_char_len: 'Size (characters)',
    detail_collected_at: 'Collected',
    detail_created_at: 'Created',
    detail_evidence_count: 'Evidence citing it',
    detail_summary: 'Summary',
    detail_form: 'Legal form',
    detail_registration: 'Registration',
    detail_name: 'Name',
    detail_mime: 'MIME type',
    kind_person: 'person',
    kind_organisation: 'organisation',
    kind_domain: 'domain',
    kind_email: 'email',
    kind_location: 'location',
    kind_phone: 'phone',
    kind_evidence: 'evidence',
    kind_entity: 'entity',
    kind_investigation: 'investigation',
    kind_workspace: 'workspace',
    kind_job: 'job',
    rel_mentions: 'mentions',
    rel_works_for: 'works for',
    rel_owns_domain: 'owns domain',
    rel_uses_email: 'uses email',
    rel_located_in: 'located in',
    rel_linked_to: 'linked to',
    rel_derived_from: 'derived from',
    status_queued: 'queued',
    status_pending: 'pending',
    status_running: 'running',
    status_done: 'done',
    status_succeeded: 'succeeded',
    status_completed: 'completed',
    status_failed: 'failed',
    status_cancelled: 'cancelled',
    status_canceled: 'cancelled',
    status_active: 'active',
  },
};

// ---------------------------------------------------------------------------
// Language

function loadLang() {
  try {
    const stored = window.localStorage.getItem(LANG_KEY);
    if (LANGS.includes(stored)) return stored;
  } catch {
    // Storage may be disabled; French is the default.
  }
  return 'fr';
}

let lang = loadLang();

function hasLabel(key) {
  return Object.prototype.hasOwnProperty.call(I18N[lang], key);
}

function t(key, vars) {
  let s = hasLabel(key) ? I18N[lang][key] : (I18N.fr[key] ?? key);
  if (vars) {
    s = s.replace(/\{(\w+)\}/g, (m, name) =>
      Object.prototype.hasOwnProperty.call(vars, name) ? String(vars[name]) : m);
  }
  return s;
}

// Plural-aware label: `key_one` / `key_other`.
function tn(key, n, vars) {
  const form = new Intl.PluralRules(LOCALES[lang]).select(n) === 'one' ? 'one' : 'other';
  return t(`${key}_${form}`, { n: fmtNumber(n), ...vars });
}

// Label of an API enum value (kind, relation, status) or the raw value.
function enumLabel(prefix, value) {
  const raw = String(value ?? '');
  for (const key of [`${prefix}_${raw}`, `${prefix}_${raw.toLowerCase()}`]) {
    if (hasLabel(key)) return t(key);
  }
  return raw;
}

function setLang(next) {
  if (!LANGS.includes(next) || next === lang) return;
  lang = next;
  try {
    window.localStorage.setItem(LANG_KEY, lang);
  } catch {
    // Not persisted; the choice still applies to this page.
  }
  applyChrome();
  renderSearchResults();
  route();
}

// ---------------------------------------------------------------------------
// Formatting

function fmtNumber(n) {
  const v = Number(n);
  return Number.isFinite(v) ? new Intl.NumberFormat(LOCALES[lang]).format(v) : String(n ?? '');
}

function fmtDate(value) {
  if (value === null || value === undefined || value === '') return '—';
  const d = new Date(value);
  if (Number.isNaN(d.getTime())) return String(value);
  return new Intl.DateTimeFormat(LOCALES[lang], { dateStyle: 'medium', timeStyle: 'short' }).format(d);
}

// A <time> element: readable text, raw value in `datetime` and as a tooltip.
function timeEl(value) {
  const el = h('time', { text: fmtDate(value) });
  if (typeof value === 'string' && value) {
    el.setAttribute('datetime', value);
    el.title = value;
  }
  return el;
}

// ---------------------------------------------------------------------------
// DOM helpers. Text only ever goes through createTextNode / textContent.

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [name, value] of Object.entries(attrs)) {
      if (value === undefined || value === null || value === false) continue;
      if (name === 'text') el.textContent = String(value);
      else if (name === 'class') el.className = value;
      else if (name === 'testid') el.dataset.testid = value;
      else if (name === 'dataset') Object.assign(el.dataset, value);
      else if (name === 'hidden') el.hidden = Boolean(value);
      else if (name === 'href') el.setAttribute('href', value);
      else el.setAttribute(name, value === true ? '' : String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function clear(el) {
  el.replaceChildren();
  return el;
}

const $ = (id) => document.getElementById(id);

// Keep the `:` of object refs readable in URLs; escape everything else.
function seg(ref) {
  return encodeURIComponent(String(ref)).replace(/%3A/gi, ':');
}

function isEvidence(ref, kind) {
  return kind === 'evidence' || String(ref).startsWith('evidence:');
}

function hrefFor(ref, kind) {
  return isEvidence(ref, kind) ? `#/evidence/${seg(ref)}` : `#/node/${seg(ref)}`;
}

// The kind to show for a graph object. Graph nodes say `kind: "entity"`
// with the entity kind (person, domain…) in `subkind`; evidence nodes carry
// their MIME type in `subkind`.
function displayKind(obj) {
  if (!obj) return '';
  return obj.kind === 'entity' && obj.subkind ? obj.subkind : (obj.kind ?? '');
}

// A link to an object: its label, then its kind in a muted tag.
function objectLink(obj, testid) {
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
function detailValue(key, value) {
  if (value === null || value === undefined) return '—';
  if (typeof value === 'number') return fmtNumber(value);
  if (typeof value === 'object') return JSON.stringify(value);
  if (/_at$/.test(key)) return timeEl(value);
  if (key === 'sha256') return h('code', { class: 'hash', text: value });
  return String(value);
}

function cssToken(s) {
  return String(s).toLowerCase().replace(/[^a-z0-9_-]/g, '');
}

function section(titleKey, testid, ...children) {
  return h('section', { class: 'panel', testid },
    h('h3', { text: t(titleKey) }), ...children);
}

function emptyNote(key = 'empty', testid) {
  return h('p', { class: 'muted empty', testid, text: t(key) });
}

function dl(rows, testid) {
  const list = h('dl', { class: 'meta', testid });
  for (const [label, value, rowTestid] of rows) {
    list.append(h('dt', { text: label }), h('dd', { testid: rowTestid }, value));
  }
  return list;
}

// ---------------------------------------------------------------------------
// Status line

function setStatus(text, kind = 'info') {
  const el = $('status');
  el.textContent = text || '';
  el.dataset.kind = kind;
  el.hidden = !text;
}

function clearStatus() {
  setStatus('');
}

function showError(err) {
  setStatus(errorText(err), 'error');
}

// ---------------------------------------------------------------------------
// API

class ApiError extends Error {
  constructor(status, code, message, retryAfter) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.retryAfter = retryAfter;
  }
}

function errorText(err) {
  if (err instanceof ApiError) {
    if (err.status === 401) return t('err_session');
    if (err.status === 429) {
      return t('err_rate', { message: err.message, s: err.retryAfter || '?' });
    }
    return t('err_api', { status: err.status, code: err.code, message: err.message });
  }
  if (err && err.name === 'AbortError') return t('err_timeout');
  if (err && err.name === 'TypeError') return t('err_network', { message: err.message });
  return t('err_unexpected');
}

function metaToken() {
  const meta = document.querySelector('meta[name="csrf-token"]');
  const value = meta ? meta.getAttribute('content') : '';
  return value && !value.includes('{{') ? value : null;
}

async function api(path, { method = 'GET', body } = {}) {
  const headers = { Accept: 'application/json' };
  if (method !== 'GET') {
    headers['Content-Type'] = 'application/json';
    const token = state.csrf || metaToken();
    if (token) headers['X-CSRF-Token'] = token;
  }
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), REQUEST_TIMEOUT_MS);
  let res;
  try {
    res = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
      cache: 'no-store',
      redirect: 'error',
      signal: controller.signal,
    });
  } finally {
    clearTimeout(timer);
  }
  let data = null;
  const text = await res.text();
  if (text) {
    try {
      data = JSON.parse(text);
    } catch {
      data = null;
    }
  }
  if (!res.ok) {
    const e = data && typeof data === 'object' && data.error ? data.error : {};
    throw new ApiError(res.status, String(e.code ?? 'http_error'),
      String(e.message ?? res.statusText ?? ''), res.headers.get('Retry-After'));
  }
  if (data === null || typeof data !== 'object') {
    throw new ApiError(res.status, 'bad_response', t('err_unexpected'));
  }
  return data;
}

// ---------------------------------------------------------------------------
// State

const state = {
  csrf: null,
  workspaceId: null,
  isolation: null, // { isolated, detail } from the server, a kernel fact
  workspace: null,
  investigations: [],
  investigationId: null,
  bootError: null,
  booted: false,
  gen: 0, // bumped on every route; stale renders check it and stop
  search: null, // { q, gen, loading, data, error }
  searchGen: 0,
};

// ---------------------------------------------------------------------------
// Chrome: header, labels, search box

function applyChrome() {
  document.documentElement.lang = lang;
  for (const el of document.querySelectorAll('[data-i18n]')) el.textContent = t(el.dataset.i18n);
  for (const el of document.querySelectorAll('[data-i18n-placeholder]')) el.placeholder = t(el.dataset.i18nPlaceholder);
  for (const el of document.querySelectorAll('[data-i18n-aria-label]')) el.setAttribute('aria-label', t(el.dataset.i18nAriaLabel));
  for (const btn of document.querySelectorAll('button[data-lang]')) {
    btn.setAttribute('aria-pressed', String(btn.dataset.lang === lang));
  }
  renderWorkspace();
}

function renderWorkspace() {
  const ws = state.workspace;
  $('workspace-name').textContent = ws ? String(ws.name ?? '') : '';
  const badge = $('workspace-class');
  if (ws && ws.class) {
    const cls = String(ws.class);
    badge.textContent = hasLabel(`class_${cls}`) ? t(`class_${cls}`) : cls;
    badge.className = `badge badge-${cssToken(cls)}`;
    badge.dataset.class = cls;
    badge.hidden = false;
  } else {
    badge.hidden = true;
  }
  const iso = $('isolation');
  if (state.isolation && typeof state.isolation.isolated === 'boolean') {
    iso.textContent = t(state.isolation.isolated ? 'isolated' : 'not_isolated');
    iso.title = String(state.isolation.detail ?? '');
    iso.className = `badge ${state.isolation.isolated ? 'badge-isolated' : 'badge-not-isolated'}`;
    iso.dataset.isolated = String(state.isolation.isolated);
    iso.hidden = false;
  } else {
    iso.hidden = true;
  }
  const picker = $('investigation-picker');
  const select = $('investigation-select');
  if (state.investigations.length > 1) {
    clear(select);
    for (const inv of state.investigations) {
      const opt = h('option', { value: String(inv.id), text: inv.title ?? inv.id });
      opt.selected = inv.id === state.investigationId;
      select.append(opt);
    }
    picker.hidden = false;
  } else {
    picker.hidden = true;
  }
}

function bindChrome() {
  for (const btn of document.querySelectorAll('button[data-lang]')) {
    btn.addEventListener('click', () => setLang(btn.dataset.lang));
  }
  $('investigation-select').addEventListener('change', (ev) => {
    state.investigationId = ev.target.value;
    state.search = null;
    renderSearchResults();
    if (location.hash === '#/' || location.hash === '') route();
    else location.hash = '#/';
  });
  $('search-form').addEventListener('submit', (ev) => {
    ev.preventDefault();
    runSearch($('search-input').value);
  });
  window.addEventListener('hashchange', route);
}

// ---------------------------------------------------------------------------
// Search

async function runSearch(raw) {
  const q = raw.trim();
  const gen = ++state.searchGen;
  if (!q) {
    state.search = null;
    renderSearchResults();
    return;
  }
  if (Array.from(q).length > SEARCH_MAX_CHARS) {
    state.search = { q, loading: false, error: null, tooLong: true };
    renderSearchResults();
    return;
  }
  if (!state.investigationId) {
    state.search = { q, loading: false, error: null, noInvestigation: true };
    renderSearchResults();
    return;
  }
  state.search = { q, loading: true, data: null, error: null };
  renderSearchResults();
  try {
    const data = await api(`/api/v1/investigations/${seg(state.investigationId)}/search?q=${encodeURIComponent(q)}&limit=${SEARCH_LIMIT}`);
    if (gen !== state.searchGen) return;
    state.search = { q, loading: false, data, error: null };
  } catch (err) {
    if (gen !== state.searchGen) return;
    state.search = { q, loading: false, data: null, error: err };
    showError(err);
  }
  renderSearchResults();
}

// Split a snippet on U+E000 (match start) / U+E001 (match end) into text
// nodes and <mark> elements. Unbalanced markers are tolerated.
function snippetNodes(snippet) {
  const out = [];
  let buf = '';
  let inMark = false;
  const flush = () => {
    if (!buf) return;
    out.push(inMark ? h('mark', { text: buf }) : document.createTextNode(buf));
    buf = '';
  };
  for (const ch of String(snippet ?? '')) {
    if (ch === MARK_START) {
      flush();
      inMark = true;
    } else if (ch === MARK_END) {
      flush();
      inMark = false;
    } else {
      buf += ch;
    }
  }
  flush();
  return out;
}

function renderSearchResults() {
  const summary = $('search-summary');
  const list = clear($('search-results'));
  const s = state.search;
  summary.dataset.state = 'idle';
  if (!s) {
    summary.textContent = t('search_hint');
    return;
  }
  if (s.tooLong) {
    summary.textContent = t('search_too_long', { n: SEARCH_MAX_CHARS });
    summary.dataset.state = 'error';
    return;
  }
  if (s.noInvestigation) {
    summary.textContent = t('search_no_investigation');
    summary.dataset.state = 'error';
    return;
  }
  if (s.loading) {
    summary.textContent = t('search_loading', { q: s.q });
    summary.dataset.state = 'loading';
    return;
  }
  if (s.error) {
    summary.textContent = errorText(s.error);
    summary.dataset.state = 'error';
    return;
  }
  const hits = Array.isArray(s.data.hits) ? s.data.hits : [];
  summary.dataset.state = 'done';
  summary.textContent = hits.length ? tn('search_hits', hits.length, { q: s.q }) : t('search_none', { q: s.q });
  for (const hit of hits) {
    const metaParts = [hit.source, hit.mime].filter((x) => x !== null && x !== undefined && x !== '');
    list.append(h('li', null,
      h('a', { href: hrefFor(hit.id, 'evidence'), class: 'hit', testid: 'search-hit', dataset: { ref: String(hit.id) } },
        h('span', { class: 'hit-title', testid: 'search-hit-title', text: hit.title ?? hit.id }),
        h('span', { class: 'hit-meta' },
          h('span', { class: 'hit-source', text: metaParts.join(' · ') }),
          hit.collected_at ? timeEl(hit.collected_at) : null),
        h('span', { class: 'hit-snippet', testid: 'search-hit-snippet' }, snippetNodes(hit.snippet)))));
  }
  if (s.data.truncated) {
    list.append(h('li', { class: 'muted small', text: t('search_truncated') }));
  }
}

// ---------------------------------------------------------------------------
// Routing

function parseHash() {
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

function beginView(className, testid) {
  const gen = ++state.gen;
  clearStatus();
  const view = clear($('view'));
  view.className = `view ${className}`;
  view.dataset.view = testid;
  view.dataset.state = 'loading';
  view.append(h('p', { class: 'muted loading', testid: 'loading', text: t('loading') }));
  return { gen, view, live: () => gen === state.gen };
}

function finishView(ctx, ...children) {
  if (!ctx.live()) return false;
  clear(ctx.view);
  append(ctx.view, children);
  ctx.view.dataset.state = 'ready';
  return true;
}

function failView(ctx, err) {
  if (!ctx.live()) return;
  clear(ctx.view);
  ctx.view.dataset.state = 'error';
  ctx.view.append(h('div', { class: 'error-box', testid: 'view-error' },
    h('p', { text: t('view_failed') }),
    h('a', { href: '#/', text: t('back_overview') })));
  showError(err);
}

function route() {
  if (!state.booted) return;
  const { name, arg } = parseHash();
  switch (name) {
    case '':
    case 'overview':
      return renderOverview();
    case 'evidence':
      return arg ? renderEvidence(arg) : renderOverview();
    case 'node':
      return arg ? renderNode(arg) : renderOverview();
    case 'provenance':
      return arg ? renderProvenance(arg) : renderOverview();
    default:
      renderOverview();
      setStatus(t('unknown_route'), 'info');
      return undefined;
  }
}

function setTitle(...parts) {
  document.title = [...parts.filter(Boolean), 'Labfy'].join(' — ');
}

// ---------------------------------------------------------------------------
// Overview

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
      return h('li', { class: 'process', testid: 'process', dataset: { role, state } },
        h('strong', { text: hasLabel(`role_${role}`) ? t(`role_${role}`) : role }), ' ',
        h('span', { class: `badge badge-state-${cssToken(state)}`, text: state }), ' ',
        h('span', { class: 'muted small', text: t('restarts', { n: String(p.restarts ?? 0) }) }),
        p.detail ? h('p', { class: 'muted small', text: String(p.detail) }) : null);
    }));
}

async function renderOverview() {
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
    renderWorkspace();
  }
  const info = data.investigation || {};
  setTitle(info.title, t('nav_overview'));

  const correlations = h('div', { class: 'panel-body', testid: 'correlations' },
    h('p', { class: 'muted', text: t('loading') }));
  const processes = h('div', { class: 'panel-body', testid: 'processes' },
    h('p', { class: 'muted', text: t('loading') }));

  finishView(ctx,
    h('article', { class: 'overview', testid: 'overview', dataset: { investigation: String(info.id ?? inv) } },
      h('header', { class: 'view-head' },
        h('p', { class: 'eyebrow', text: t('overview_heading') }),
        h('h2', { testid: 'overview-title', text: info.title ?? inv }),
        info.summary ? h('p', { class: 'summary', testid: 'overview-summary', text: info.summary }) : null,
        info.created_at ? h('p', { class: 'muted small' }, t('created_label'), ' ', timeEl(info.created_at)) : null),
      renderCounts(data.counts || {}),
      h('div', { class: 'grid' },
        h('div', { class: 'col' },
          section('section_top_entities', 'top-entities-panel', renderTopEntities(data.top_entities)),
          section('section_correlations', 'correlations-panel', correlations),
          section('section_entity_kinds', 'entity-kinds-panel', renderEntityKinds(data.entity_kinds))),
        h('div', { class: 'col' },
          section('section_recent_evidence', 'recent-evidence-panel', renderRecentEvidence(data.recent_evidence)),
          section('section_jobs', 'jobs-panel', renderJobs(data.jobs)),
          section('section_processes', 'processes-panel', processes),
          section('section_note', 'note-panel', renderNoteForm(inv))))));

  api('/api/v1/status').then((st) => {
    if (ctx.live()) clear(processes).append(renderProcesses(st));
  }, (err) => {
    if (ctx.live()) clear(processes).append(h('p', { class: 'error-box', text: errorText(err) }));
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
  return h('ul', { class: 'counts', testid: 'counts' },
    keys.map((k) => h('li', { class: 'count' },
      h('span', { class: 'count-value', testid: `count-${k}`, dataset: { value: String(Number(counts[k] ?? 0)) }, text: fmtNumber(counts[k] ?? 0) }),
      h('span', { class: 'count-label', text: t(`count_${k}`) }))));
}

function renderTopEntities(items) {
  if (!Array.isArray(items) || items.length === 0) return emptyNote('empty', 'top-entities-empty');
  return h('ol', { class: 'rows', testid: 'top-entities' },
    items.map((e) => h('li', null,
      objectLink({ id: e.id, kind: e.kind, label: e.name }, 'top-entity'),
      h('span', { class: 'muted small', text: tn('in_evidence', Number(e.evidence_count ?? 0)) }))));
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
      h('span', { text: enumLabel('kind', k.kind) }),
      h('span', { class: 'chip-count', text: fmtNumber(k.count) }))));
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
        h('span', { class: 'job-kind', text: j.kind ?? j.id }),
        h('span', { class: `pill status-${cssToken(j.status)}`, text: enumLabel('status', j.status) }),
        bar,
        j.detail ? h('span', { class: 'muted small job-detail', text: j.detail }) : null,
        j.updated_at ? h('span', { class: 'muted small' }, timeEl(j.updated_at)) : null);
    }));
}

function renderNoteForm(inv) {
  const title = h('input', { id: 'note-title', type: 'text', testid: 'note-title', required: true, autocomplete: 'off', maxlength: String(NOTE_TITLE_MAX_CHARS) });
  const content = h('textarea', { id: 'note-content', rows: '5', testid: 'note-content', required: true });
  const submit = h('button', { type: 'submit', testid: 'note-submit', text: t('note_submit') });
  const status = h('p', { class: 'form-status', testid: 'note-status', role: 'status', hidden: true });
  const form = h('form', { class: 'note-form', testid: 'note-form', novalidate: true },
    h('label', { for: 'note-title', text: t('note_title') }), title,
    h('label', { for: 'note-content', text: t('note_content') }), content,
    h('p', { class: 'muted small', text: t('note_help') }),
    h('div', { class: 'form-actions' }, submit),
    status);
  const say = (text, kind) => {
    status.textContent = text;
    status.dataset.kind = kind;
    status.hidden = !text;
  };
  form.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const body = { title: title.value.trim(), content: content.value, source: NOTE_SOURCE };
    if (!body.title || !body.content.trim()) {
      say(t('note_missing'), 'error');
      return;
    }
    submit.disabled = true;
    say(t('note_saving'), 'info');
    try {
      const created = await api(`/api/v1/investigations/${seg(inv)}/evidence`, { method: 'POST', body });
      say(t('note_saved', { title: created.title ?? body.title }), 'ok');
      form.reset();
      setStatusAfterRoute(t('note_saved', { title: created.title ?? body.title }), 'ok');
      location.hash = hrefFor(created.id, 'evidence');
    } catch (err) {
      say(errorText(err), 'error');
      showError(err);
    } finally {
      submit.disabled = false;
    }
  });
  return form;
}

// A message to show once the next view has started (beginView clears it).
let pendingStatus = null;
function setStatusAfterRoute(text, kind) {
  pendingStatus = { text, kind };
}
function flushPendingStatus() {
  if (pendingStatus) {
    setStatus(pendingStatus.text, pendingStatus.kind);
    pendingStatus = null;
  }
}

// ---------------------------------------------------------------------------
// Evidence reader

async function renderEvidence(ref) {
  const ctx = beginView('view-evidence', 'evidence');
  flushPendingStatus();
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

  const pre = h('pre', { class: 'reader-text', testid: 'evidence-text', dataset: { state: 'loading' } });
  const progress = h('p', { class: 'muted small', testid: 'evidence-progress' });
  const more = h('button', { type: 'button', class: 'more', testid: 'evidence-more', text: t('reader_more'), hidden: true });
  const readerError = h('p', { class: 'error-box', testid: 'evidence-text-error', hidden: true });

  const entities = Array.isArray(ev.entities) ? ev.entities : [];
  const size = t('size_value', { bytes: fmtNumber(ev.byte_len ?? 0), chars: fmtNumber(ev.char_len ?? 0) });

  const shown = finishView(ctx,
    h('article', { class: 'evidence', testid: 'evidence-view', dataset: { ref: String(ev.id ?? ref) } },
      h('header', { class: 'view-head' },
        h('p', { class: 'eyebrow', text: t('evidence_heading') }),
        h('h2', { testid: 'evidence-title', text: ev.title ?? ev.id }),
        h('nav', { class: 'links' },
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
      h('div', { class: 'reader' },
        h('section', { class: 'panel reader-main', testid: 'evidence-reader' },
          h('h3', { text: t('reader_text') }), pre, readerError,
          h('div', { class: 'reader-foot' }, progress, more)),
        h('section', { class: 'panel reader-side', testid: 'evidence-entities-panel' },
          h('h3', { text: t('reader_entities') }),
          entities.length
            ? h('ol', { class: 'rows', testid: 'evidence-entities' },
              entities.map((e) => h('li', null,
                objectLink({ id: e.id, kind: e.kind, label: e.name }, 'evidence-entity'),
                e.relation ? h('span', { class: 'muted small', text: enumLabel('rel', e.relation) }) : null)))
            : emptyNote('reader_no_entities', 'evidence-entities-empty')))));
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

// ---------------------------------------------------------------------------
// Node view

async function renderNode(ref) {
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
          ? h('span', { class: 'muted small', text: t('confidence', { v: fmtNumber(conf) }) })
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
  const shown = finishView(ctx,
    h('article', { class: 'node', testid: 'node-view', dataset: { ref: String(id), kind: String(node.kind ?? '') } },
      h('header', { class: 'view-head' },
        h('p', { class: 'eyebrow' },
          h('span', { class: `kind kind-${cssToken(displayKind(node))}`, testid: 'node-kind', text: enumLabel('kind', displayKind(node)) }),
          node.subkind && displayKind(node) !== node.subkind
            ? h('span', { class: 'muted', testid: 'node-subkind', text: ` · ${node.subkind}` })
            : null),
        h('h2', { testid: 'node-label', text: node.label ?? id }),
        h('nav', { class: 'links' },
          isEvidence(id, node.kind)
            ? h('a', { href: `#/evidence/${seg(id)}`, testid: 'node-open-evidence', text: t('link_open_evidence') })
            : null,
          h('a', { href: `#/provenance/${seg(id)}`, testid: 'node-provenance-link', text: t('link_provenance') }))),
      h('div', { class: 'grid' },
        h('div', { class: 'col col-wide' },
          h('section', { class: 'panel', testid: 'neighbours-panel' },
            h('h3', { text: t('neighbours') }), count, list, nbError, more)),
        h('div', { class: 'col col-narrow' },
          h('section', { class: 'panel', testid: 'node-details-panel' },
            h('h3', { text: t('node_details') }),
            dl([
              [t('meta_id'), h('code', { class: 'hash', text: id })],
              ...(node.degree !== undefined ? [[t('node_degree'), fmtNumber(node.degree)]] : []),
              ...details.map(([k, v]) => [enumLabel('detail', k), detailValue(k, v)]),
            ], 'node-details'),
            details.length === 0 ? emptyNote('node_no_details') : null)))));
  if (!shown) return;
  fill(nb);
}

// ---------------------------------------------------------------------------
// Provenance trail

async function renderProvenance(ref) {
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
        h('h2', { testid: 'provenance-title', text: t('prov_of', { label: rootLabel }) }),
        h('nav', { class: 'links' },
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
                [t('prov_producer'), r.producer ?? '—'],
                [t('prov_activity'), r.activity ?? '—'],
                [t('prov_time'), timeEl(r.created_at)],
                [t('prov_inputs'), inputs.length
                  ? h('ul', { class: 'inline-list' }, inputs.map((inp) => h('li', null, objectLink(inp, 'provenance-input'))))
                  : h('span', { class: 'muted', text: t('prov_no_inputs') })],
              ]));
          })),
      data.truncated ? h('p', { class: 'muted small', testid: 'provenance-truncated', text: t('prov_truncated', { n: PROVENANCE_DEPTH }) }) : null));
}

// ---------------------------------------------------------------------------
// Start

async function boot() {
  bindChrome();
  applyChrome();
  try {
    const session = await api('/api/v1/session');
    state.csrf = (typeof session.csrf_token === 'string' && session.csrf_token) || metaToken();
    state.workspaceId = session.workspace_id ?? null;
    state.isolation = session.isolation ?? null;
    const { workspaces = [] } = await api('/api/v1/workspaces');
    state.workspace = workspaces.find((w) => w.id === state.workspaceId) ?? workspaces[0] ?? null;
    if (!state.workspaceId && state.workspace) state.workspaceId = state.workspace.id;
    if (state.workspaceId) {
      const { investigations = [] } = await api(`/api/v1/workspaces/${seg(state.workspaceId)}/investigations`);
      state.investigations = investigations;
      state.investigationId = investigations.length ? investigations[0].id : null;
    }
  } catch (err) {
    state.csrf = state.csrf || metaToken();
    state.bootError = err;
  }
  state.booted = true;
  renderWorkspace();
  document.body.dataset.ready = 'true';
  route();
}

if (document.readyState === 'loading') {
  document.addEventListener('DOMContentLoaded', boot, { once: true });
} else {
  boot();
}
