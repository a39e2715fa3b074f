// The overview's forms: the import (SPEC C2), the analyst's note and the
// export (C5). An import sends the files dropped or chosen in batches as
// multipart/form-data to an import job; the bytes sent show as a progress
// bar, each file's outcome as a line of the report. The last report stays
// on the overview until another import starts.

import { api, ApiError, authHeaders, csrfToken, download, errorText, paced } from './api.js';
import { $, clear, cssToken, dl, h, hrefFor, seg } from './dom.js';
import { enumLabel, fmtBytes, fmtNumber, lang, t, tn } from './i18n.js';
import { formSay, route, setStatusAfterRoute, showError } from './page.js';

const NOTE_TITLE_MAX_CHARS = 200;
const NOTE_SOURCE = 'analyste:navigateur';


const IMPORT_BATCH_FILES = 50;
const IMPORT_BATCH_BYTES = 64 * 1024 * 1024;
const IMPORT_REQUEST_TIMEOUT_MS = 10 * 60 * 1000;
let lastImport = null; // { inv, lines: [{path, outcome, evidence, reason}], summary, kind, files }

// A link to a file the server sends (an export, an original): a click
// fetches it with the session (a plain link cannot carry it, SPEC V1) and
// hands it to the browser as a download.
export function downloadLink(path, testid, text) {
  const a = h('a', { href: path, download: '', testid, text });
  a.addEventListener('click', (e) => {
    e.preventDefault();
    download(path).catch((err) => showError(err));
  });
  return a;
}

// One batch, with the bytes sent reported as they go.
function uploadBatch(job, files, onProgress) {
  return new Promise((resolve, reject) => {
    const form = new FormData();
    for (const f of files) form.append('file', f, f.webkitRelativePath || f.name);
    const xhr = new XMLHttpRequest();
    xhr.open('POST', `/api/v1/imports/${seg(job)}/files`);
    xhr.setRequestHeader('Accept', 'application/json');
    for (const [name, value] of Object.entries(authHeaders())) xhr.setRequestHeader(name, value);
    const token = csrfToken();
    if (token) xhr.setRequestHeader('X-CSRF-Token', token);
    xhr.timeout = IMPORT_REQUEST_TIMEOUT_MS;
    xhr.upload.addEventListener('progress', (e) => onProgress(e.loaded));
    xhr.addEventListener('load', () => {
      let data = null;
      try {
        data = JSON.parse(xhr.responseText);
      } catch {
        data = null;
      }
      if (xhr.status >= 200 && xhr.status < 300 && data && Array.isArray(data.files)) {
        resolve(data.files);
      } else {
        const e = data && data.error ? data.error : {};
        reject(new ApiError(xhr.status, String(e.code ?? 'http_error'), String(e.message ?? xhr.statusText ?? ''), xhr.getResponseHeader('Retry-After')));
      }
    });
    xhr.addEventListener('error', () => reject(new ApiError(0, 'network', t('err_unexpected'), null)));
    xhr.addEventListener('timeout', () => reject(new ApiError(0, 'timeout', t('err_unexpected'), null)));
    xhr.send(form);
  });
}

// Refusal reasons and parser notes are written by Labfy's own code in
// English, in a fixed wording; in French each known one is said in French,
// its figures kept (an unknown one is shown as written).
const IMPORT_PHRASES = [
  [/^empty file \(0 bytes\)$/, () => 'fichier vide (0 octet)'],
  [/^larger than the bound of (\d+) bytes$/, (m) => `plus grand que la limite de ${fmtNumber(m[1])} octets`],
  [/^larger than the bound \((\d+) bytes > (\d+)\)$/, (m) => `plus grand que la limite (${fmtNumber(m[1])} octets > ${fmtNumber(m[2])})`],
  [/^(file name|path) contains control characters$/, (m) => `${m[1] === 'path' ? 'le chemin' : 'le nom'} contient des caractères de contrôle`],
  [/^(file name|path) contains a `\.\.` component$/, (m) => `${m[1] === 'path' ? 'le chemin' : 'le nom'} contient un composant « .. »`],
  [/^empty (file name|path)$/, () => 'nom de fichier vide'],
  [/^(file name|path) longer than (\d+) characters$/, (m) => `nom plus long que ${fmtNumber(m[2])} caractères`],
  [/^the disk is full$/, () => 'le disque est plein'],
  [/^symbolic link pointing outside the imported folder$/, () => 'lien symbolique vers l’extérieur du dossier importé'],
  [/^text not extracted: the PDF is encrypted and needs a password to be opened$/, () => 'texte non extrait : le PDF est chiffré et demande un mot de passe pour être ouvert'],
  [/^text not extracted: (.*)$/, (m) => `texte non extrait : ${m[1]}`],
  // How a PDF or an image was read (SPEC A1).
  [/^(page|pages) ([\d–, ]+) (?:has|have) no text layer: read by OCR \(tesseract, ([a-z+]+)\), which can misread words$/, (m) => (m[1] === 'page'
    ? `la page ${m[2]} n’a pas de couche texte : lue par OCR (tesseract, ${m[3]}), qui peut mal lire des mots`
    : `les pages ${m[2]} n’ont pas de couche texte : lues par OCR (tesseract, ${m[3]}), qui peut mal lire des mots`)],
  [/^(page|pages) ([\d–, ]+) (?:has|have) no text layer: not read \((.*)\)$/, (m) => (m[1] === 'page'
    ? `la page ${m[2]} n’a pas de couche texte : non lue (${unreadWhy(m[3])})`
    : `les pages ${m[2]} n’ont pas de couche texte : non lues (${unreadWhy(m[3])})`)],
  [/^text read by OCR \(tesseract, ([a-z+]+)\), which can misread words$/, (m) => `texte lu par OCR (tesseract, ${m[1]}), qui peut mal lire des mots`],
  [/^read by OCR \(tesseract, ([a-z+]+)\): no text found$/, (m) => `lu par OCR (tesseract, ${m[1]}) : aucun texte trouvé`],
  [/^not read by OCR: (.*)$/, (m) => `non lu par OCR : ${m[1]}`],
  [/^poppler could not read it \((.*)\): the built-in PDF reader was used, which can miss words$/, (m) => `poppler n’a pas pu le lire (${m[1]}) : le lecteur PDF intégré a été utilisé, qui peut manquer des mots`],
  [/^poppler-utils is not installed: the text was read by the built-in PDF reader, which can miss words$/, () => 'poppler-utils n’est pas installé : le texte a été lu par le lecteur PDF intégré, qui peut manquer des mots'],
  [/^(\d+) of (\d+) pages read$/, (m) => `${fmtNumber(m[1])} pages lues sur ${fmtNumber(m[2])}`],
  [/^text cut at (\d+) bytes$/, (m) => `texte coupé à ${fmtNumber(m[1])} octets`],
  [/^text cut at (\d+) bytes of (\d+)$/, (m) => `texte coupé à ${fmtNumber(m[1])} octets sur ${fmtNumber(m[2])}`],
  [/^no text layer \(a scan\?\)$/, () => 'pas de couche texte (un document numérisé ?)'],
  [/^only the first (\d+) (attachments|of (\d+) messages) were taken$/, (m) => (m[3]
    ? `seuls les ${m[1]} premiers des ${fmtNumber(m[3])} messages ont été pris`
    : `seules les ${m[1]} premières pièces jointes ont été prises`)],
  [/^inflated size above (\d+) bytes: text cut$/, (m) => `plus de ${fmtNumber(m[1])} octets une fois décompressé : texte coupé`],
  // Archives (SPEC I2).
  [/^inflated size above (\d+) bytes at (.*) \(a compression bomb\?\): the rest left out$/, (m) => `plus de ${fmtNumber(m[1])} octets une fois décompressée, à ${m[2]} (une bombe de décompression ?) : le reste est laissé de côté`],
  [/^only the first (\d+) of (\d+) members were taken$/, (m) => `seuls les ${fmtNumber(m[1])} premiers des ${fmtNumber(m[2])} fichiers de l’archive ont été pris`],
  [/^(\d+) members left out: (.*)$/, (m) => `${fmtNumber(m[1])} fichier(s) de l’archive laissé(s) de côté : ${m[2].replace(/climbs out of the archive \(`\.\.`\)/g, 'sort de l’archive (« .. »)').replace(/climbs out of the archive/g, 'sort de l’archive').replace(/a symbolic link/g, 'un lien symbolique').replace(/a link/g, 'un lien').replace(/not a regular file/g, 'pas un fichier ordinaire').replace(/an absolute path/g, 'un chemin absolu')}`],
];

// Why pages without text were not read by OCR, in French.
function unreadWhy(why) {
  const most = why.match(/^at most (\d+) pages of a document are read by OCR$/);
  if (most) return `au plus ${fmtNumber(most[1])} pages d’un document sont lues par OCR`;
  if (why === 'no time was left to read them') return 'il ne restait pas de temps pour les lire';
  if (why === 'OCR, tesseract-ocr with French or English, is not installed') {
    return 'l’OCR, tesseract-ocr en français ou en anglais, n’est pas installée';
  }
  return why;
}

export function importPhrase(text) {
  const raw = String(text ?? '');
  if (lang !== 'fr') return raw;
  for (const [re, say] of IMPORT_PHRASES) {
    const m = raw.match(re);
    if (m) return say(m);
  }
  return raw;
}

function importLine(l) {
  const outcome = String(l.outcome ?? '');
  return h('li', { class: `import-line outcome-${cssToken(outcome)}`, testid: 'import-line', dataset: { outcome } },
    h('span', { class: `pill status-${outcome === 'refused' ? 'failed' : (outcome === 'imported' ? 'succeeded' : 'queued')}`, text: enumLabel('import_outcome', outcome) }),
    l.evidence
      ? h('a', { href: hrefFor(l.evidence, 'evidence'), class: 'import-path', testid: 'import-line-link', text: String(l.path ?? '') })
      : h('span', { class: 'import-path', text: String(l.path ?? '') }),
    l.reason ? h('span', { class: 'muted small import-reason', testid: 'import-reason', text: importPhrase(l.reason) }) : null,
    // Text partial or absent, read by OCR: said on the file's line (SPEC A1).
    Array.isArray(l.notes) && l.notes.length
      ? h('span', { class: 'muted small import-reason', testid: 'import-notes', text: l.notes.map(importPhrase).join(' · ') })
      : null);
}

// `specimen`: the workspace holds synthetic data (SPEC I5): real files go
// into it only once the analyst ticks the box that says so.
export function renderImportForm(ctx, inv, { specimen = false } = {}) {
  const pickFiles = h('input', { type: 'file', multiple: true, hidden: true, testid: 'import-files' });
  const pickFolder = h('input', { type: 'file', multiple: true, hidden: true, testid: 'import-folder' });
  pickFolder.webkitdirectory = true;
  const filesButton = h('button', { type: 'button', testid: 'import-pick-files', text: t('import_pick_files') });
  const folderButton = h('button', { type: 'button', class: 'secondary', testid: 'import-pick-folder', text: t('import_pick_folder') });
  // A drop target for the mouse; the keyboard's way in is its two buttons
  // (a button holding buttons is not accessible: SPEC U7).
  const zone = h('div', { class: 'drop-zone', testid: 'import-drop', role: 'group', 'aria-label': t('import_drop') },
    h('p', { text: t('import_drop') }),
    h('p', { class: 'muted small', text: t('import_or') }),
    h('div', { class: 'form-actions' }, filesButton, folderButton));
  const bar = h('progress', { max: '1', value: '0', testid: 'import-progress', hidden: true });
  const status = h('p', { class: 'form-status', testid: 'import-status', role: 'status', hidden: true });
  const report = h('ol', { class: 'rows import-report', testid: 'import-report' });
  const reportHead = h('h3', { class: 'small', text: t('import_report'), hidden: true });
  // The files an import refused, sent again alone (SPEC I1): the page
  // still holds them, by the path each was sent with.
  const retry = h('button', { type: 'button', class: 'secondary', testid: 'import-retry', hidden: true });
  const say = formSay(status);
  const refusedFiles = (imp) => {
    if (!imp || !imp.files) return [];
    const refused = new Set(imp.lines.filter((l) => l.outcome === 'refused').map((l) => l.path));
    return imp.files.filter((f) => refused.has(f.webkitRelativePath || f.name));
  };
  const show = (imp) => {
    clear(report);
    reportHead.hidden = true;
    retry.hidden = true;
    if (!imp || imp.inv !== inv) return;
    const again = imp.summary ? refusedFiles(imp) : [];
    retry.hidden = !again.length;
    retry.textContent = tn('import_retry', again.length);
    // Refusals first: they are what needs the analyst's eye.
    const order = { refused: 0, imported: 1, duplicate: 2 };
    const sorted = [...imp.lines].sort((a, b) => (order[a.outcome] ?? 3) - (order[b.outcome] ?? 3));
    report.append(...sorted.map(importLine));
    reportHead.hidden = !sorted.length;
    if (imp.summary) say(imp.summary, imp.kind);
  };
  const ask = specimen ? h('input', { type: 'checkbox', testid: 'import-into-specimen', id: 'import-into-specimen' }) : null;
  const asked = () => !specimen || ask.checked;
  let running = false;
  const busy = (on) => {
    running = on;
    filesButton.disabled = on || !asked();
    folderButton.disabled = on || !asked();
    zone.classList.toggle('busy', on);
  };
  if (ask) ask.addEventListener('change', () => busy(running));
  busy(false);
  const run = async (list) => {
    const files = Array.from(list || []);
    if (!files.length) return;
    if (!asked()) {
      say(t('import_specimen_first'), 'error');
      return;
    }
    busy(true);
    lastImport = { inv, lines: [], summary: '', kind: 'info', files };
    show(lastImport);
    const total = files.reduce((n, f) => n + f.size, 0);
    let sentBefore = 0;
    let done = 0;
    let sentFiles = 0;
    const started = performance.now();
    bar.hidden = false;
    bar.max = String(Math.max(total, 1));
    bar.value = '0';
    // Each stage (sent; read, recorded and searched — one request does
    // those), files/s and the time left once a batch has come back.
    const progress = (sentNow) => {
      bar.value = String(Math.min(total, sentBefore + sentNow));
      const secs = (performance.now() - started) / 1000;
      const rate = done > 0 && secs > 0 ? done / secs : 0;
      const pace = rate > 0
        ? ` · ${t('import_pace', { rate: fmtNumber(Math.round(rate * 10) / 10), left: fmtNumber(Math.ceil((files.length - done) / rate)) })}`
        : '';
      say(`${t('import_sending', { sentFiles: fmtNumber(sentFiles), done: fmtNumber(done), total: fmtNumber(files.length), sent: fmtBytes(sentBefore + sentNow), bytes: fmtBytes(total) })}${pace}`, 'info');
    };
    try {
      const body = specimen ? { expected: files.length, into_specimen: true } : { expected: files.length };
      const { job } = await api(`/api/v1/investigations/${seg(inv)}/imports`, { method: 'POST', body });
      let batch = [];
      let batchBytes = 0;
      const flush = async () => {
        if (!batch.length) return;
        const size = batchBytes;
        progress(0);
        const lines = await paced(() => uploadBatch(job, batch, (n) => {
          if (n >= size) sentFiles = done + batch.length;
          progress(n);
        }));
        sentBefore += size;
        done += batch.length;
        lastImport.lines.push(...lines);
        if (ctx.live()) show(lastImport);
        progress(0);
        batch = [];
        batchBytes = 0;
      };
      for (const f of files) {
        if (batch.length && (batch.length >= IMPORT_BATCH_FILES || batchBytes + f.size > IMPORT_BATCH_BYTES)) await flush();
        batch.push(f);
        batchBytes += f.size;
      }
      await flush();
      const st = await api(`/api/v1/imports/${seg(job)}/finish`, { method: 'POST', body: {} });
      lastImport.summary = t('import_done', {
        counts: ['imported', 'duplicates', 'refused', 'embedded'].map((k) => tn(`import_n_${k}`, Number(st[k] ?? 0))).join(', '),
      });
      // Refusals are listed first, in red; the summary itself is not an error.
      lastImport.kind = (st.refused ?? 0) > 0 ? 'info' : 'ok';
      // The overview again, with its new counts; the report stays under it.
      if (ctx.live()) route();
    } catch (err) {
      lastImport.summary = t('import_failed', { reason: errorText(err) });
      lastImport.kind = 'error';
      if (ctx.live()) {
        show(lastImport);
        showError(err);
      }
    } finally {
      busy(false);
      bar.hidden = true;
    }
  };
  retry.addEventListener('click', () => {
    const again = refusedFiles(lastImport);
    if (again.length) run(again);
  });
  filesButton.addEventListener('click', () => pickFiles.click());
  folderButton.addEventListener('click', () => pickFolder.click());
  pickFiles.addEventListener('change', () => run(pickFiles.files).finally(() => { pickFiles.value = ''; }));
  pickFolder.addEventListener('change', () => run(pickFolder.files).finally(() => { pickFolder.value = ''; }));
  zone.addEventListener('dragover', (e) => {
    e.preventDefault();
    zone.classList.add('over');
  });
  zone.addEventListener('dragleave', () => zone.classList.remove('over'));
  zone.addEventListener('drop', async (e) => {
    e.preventDefault();
    zone.classList.remove('over');
    run(await droppedFiles(e.dataTransfer));
  });
  show(lastImport);
  return h('div', { class: 'import-form', testid: 'import-form' },
    ask ? h('p', { class: 'import-specimen small', testid: 'import-specimen' },
      ask, ' ', h('label', { for: 'import-into-specimen', text: t('import_specimen_ask') })) : null,
    zone, pickFiles, pickFolder,
    h('p', { class: 'muted small', text: t('import_help') }),
    bar, status, retry, reportHead, report);
}

// The files of a drop, folders walked (their files carry their relative
// path, like a folder chosen with the picker).
async function droppedFiles(dt) {
  const items = Array.from(dt?.items || []).map((i) => (i.webkitGetAsEntry ? i.webkitGetAsEntry() : null));
  if (!items.length || items.some((e) => !e)) return Array.from(dt?.files || []);
  const out = [];
  const walk = async (entry, prefix) => {
    if (entry.isFile) {
      const file = await new Promise((res, rej) => entry.file(res, rej));
      out.push(new File([file], `${prefix}${file.name}`, { type: file.type, lastModified: file.lastModified }));
      return;
    }
    const reader = entry.createReader();
    for (;;) {
      const batch = await new Promise((res, rej) => reader.readEntries(res, rej));
      if (!batch.length) break;
      for (const child of batch) await walk(child, `${prefix}${entry.name}/`);
    }
  };
  for (const e of items) await walk(e, '');
  return out;
}

// Export (SPEC C5): the bundle `labfy export` writes, made by a job beside
// the requests; its fingerprint, its folder, its archive and the command
// that verifies it.
const EXPORT_POLL_MS = 500;

export function renderExportForm(ctx, inv) {
  const button = h('button', { type: 'button', testid: 'export-start', text: t('export_start') });
  const status = h('p', { class: 'form-status', testid: 'export-status', role: 'status', hidden: true });
  const result = h('div', { testid: 'export-result' });
  const say = formSay(status);
  button.addEventListener('click', async () => {
    button.disabled = true;
    clear(result);
    say(t('export_running'), 'info');
    try {
      let j = await api(`/api/v1/investigations/${seg(inv)}/export`, { method: 'POST', body: {} });
      j = await api(`/api/v1/jobs/${seg(j.job)}`);
      while (j.status === 'RUNNING') {
        await new Promise((r) => setTimeout(r, EXPORT_POLL_MS));
        j = await api(`/api/v1/jobs/${seg(j.id)}`);
      }
      if (!ctx.live()) return;
      if (j.status !== 'SUCCEEDED') {
        say(t('export_failed', { reason: j.detail || j.status }), 'error');
        return;
      }
      const st = j.stats || {};
      say(t('export_done', { files: fmtNumber(st.files ?? 0) }), 'ok');
      result.append(dl([
        [t('export_fingerprint'), h('code', { class: 'hash', testid: 'export-fingerprint', text: String(st.fingerprint ?? '') }), 'export-fingerprint-row'],
        [t('export_dir'), h('code', { class: 'camp-url', testid: 'export-dir', text: String(st.dir ?? '') }), 'export-dir-row'],
        [t('export_verify'), h('code', { class: 'camp-url', testid: 'export-verify', text: `labfy verify ${st.dir ?? ''} --fingerprint ${st.fingerprint ?? ''}` }), 'export-verify-row'],
      ], 'export-meta'),
      h('p', null, downloadLink(`/api/v1/exports/${encodeURIComponent(String(st.archive ?? ''))}`, 'export-download', t('export_download'))));
    } catch (err) {
      if (!ctx.live()) return;
      say(t('export_failed', { reason: errorText(err) }), 'error');
      showError(err);
    } finally {
      button.disabled = false;
    }
  });
  return h('div', { class: 'extract-form', testid: 'export-form' },
    h('p', { class: 'muted small', text: t('export_help') }),
    h('div', { class: 'form-actions' }, button),
    status, result);
}

export function renderNoteForm(inv) {
  const title = h('input', { id: 'note-title', type: 'text', testid: 'note-title', required: true, autocomplete: 'off', maxlength: String(NOTE_TITLE_MAX_CHARS) });
  const content = h('textarea', { id: 'note-content', rows: '5', testid: 'note-content', required: true });
  // When what the note tells happened (optional): the timeline places the
  // note there (issue 44). Local time in the field, sent in UTC.
  const dated = h('input', { id: 'note-dated', type: 'datetime-local', testid: 'note-dated' });
  const submit = h('button', { type: 'submit', testid: 'note-submit', text: t('note_submit') });
  const status = h('p', { class: 'form-status', testid: 'note-status', role: 'status', hidden: true });
  const form = h('form', { class: 'note-form', testid: 'note-form', novalidate: true },
    h('label', { for: 'note-title', text: t('note_title') }), title,
    h('label', { for: 'note-content', text: t('note_content') }), content,
    h('label', { for: 'note-dated', text: t('note_dated') }), dated,
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
    if (dated.value) {
      const at = new Date(dated.value);
      if (!Number.isNaN(at.getTime())) body.dated_at = at.toISOString();
    }
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
