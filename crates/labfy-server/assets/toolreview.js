// The human decision on a tool request (SPEC X2, the seed's pauses A, B,
// C1, C2): what the agent proposes for a capability — install it, make it
// callable in this investigation, try a change, promote a tried change —
// shown as exactly what would be approved: the manifest (its program, its
// script, its closed input schema, its tests), for a change its diff and
// its tests' results in the sandbox, and what changed since the proposal.
// Approve or refuse goes through /api/v1/tool-requests (the analyst's
// session, CSRF); the agent's turn then resumes. Everything here comes
// from the agent or from a manifest: text only (textContent).

import { api, errorText } from './api.js';
import { $, clear, dl, h, seg, timeEl } from './dom.js';
import { enumLabel, t } from './i18n.js';

const FINGERPRINT_PREFIX = 16;
const NOTE_MAX = 500;

const review = {
  id: null, // the tool request shown
  request: null,
  now: null, // { contract_fingerprint, registry_fingerprint }: what holds now
  loading: false,
  error: null,
  note: null, // { kind, text() }
  busy: false,
  gen: 0,
};

export function isToolRequest(id) {
  return String(id ?? '').startsWith('tool_request:');
}

// Reads the request and what holds now; `force` reads it again.
export async function loadToolReview(id, render, force = false) {
  if (!isToolRequest(id)) return;
  if (review.id === id && (review.loading || !force)) return;
  if (review.id !== id) Object.assign(review, { request: null, now: null, note: null, error: null });
  review.id = id;
  review.loading = true;
  const gen = ++review.gen;
  render();
  try {
    const one = await api(`/api/v1/tool-requests/${seg(id)}`);
    if (gen !== review.gen) return;
    Object.assign(review, { request: one.request ?? null, now: one.now ?? null, error: null });
  } catch (err) {
    if (gen !== review.gen) return;
    review.error = err;
  } finally {
    if (gen === review.gen) review.loading = false;
  }
  render();
}

function setNote(kind, text) {
  review.note = { kind, text };
}

function fingerprint(fp, testid) {
  const full = String(fp ?? '');
  return h('code', { class: 'hash', testid, title: full, dataset: { full }, text: full.slice(0, FINGERPRINT_PREFIX) });
}

// A block scrolled in place: focusable, so the keyboard scrolls it too
// (SPEC U7), and named for a screen reader.
function pre(text, testid, label) {
  return h('pre', { class: 'tool-code', testid, tabindex: '0', 'aria-label': label, text: String(text ?? '') });
}

function testsEl(r) {
  const results = Array.isArray(r.detail && r.detail.tests) ? r.detail.tests : null;
  const declared = Array.isArray(r.manifest && r.manifest.tests) ? r.manifest.tests : [];
  if (results && results.length) {
    return h('ul', { class: 'tool-tests', testid: 'tool-review-tests' }, results.map((x) => h('li',
      { testid: 'tool-review-test', dataset: { passed: String(x.passed === true) } },
      h('span', { class: `pill status-${x.passed === true ? 'approved' : 'refused'}`, text: t(x.passed === true ? 'tool_test_passed' : 'tool_test_failed') }),
      ' ', h('span', { text: String(x.name ?? '') }), ' ',
      h('span', { class: 'muted small', text: Number.isInteger(x.exit) ? t('tool_test_exit', { code: x.exit }) : t('tool_test_stopped') }),
      // Why it failed, as the gateway words it (the raw text behind a toggle).
      Array.isArray(x.why) && x.why.length
        ? h('details', { class: 'small' }, h('summary', { text: t('tool_test_why') }), h('div', { class: 'muted', text: x.why.join(' · ') }))
        : null,
      x.stdout ? h('details', null, h('summary', { text: t('tool_test_output') }), pre(x.stdout, undefined, t('tool_test_output'))) : null)));
  }
  return h('ul', { class: 'tool-tests', testid: 'tool-review-tests' }, declared.map((x) => h('li',
    { testid: 'tool-review-test' }, h('span', { text: String(x.name ?? '') }),
    h('span', { class: 'muted small', text: ` — ${t('tool_test_expects', { text: String(x.stdout_contains ?? '') })}` }))));
}

// The rows of a request: the pause's question first, then exactly what is
// approved.
function details(r, now) {
  const m = r.manifest && typeof r.manifest === 'object' ? r.manifest : {};
  const pause = String(r.pause ?? '');
  const rows = [
    [t('tool_review_status'), h('span', { class: `pill status-${String(r.status ?? '').toLowerCase()}`, testid: 'tool-review-request-status',
      dataset: { status: String(r.status ?? '') }, text: enumLabel('toolreq', r.status) })],
    [t('tool_review_capability'), h('span', null, h('strong', { testid: 'tool-review-capability', text: String(r.capability_id ?? '') }),
      ' ', h('span', { class: 'muted', text: t('tool_review_version', { v: String(r.capability_version ?? '') }) }))],
    [t('tool_review_description'), h('span', { text: String(m.description ?? '') })],
    [t('tool_review_reason'), h('span', { class: 'agent-question-text', testid: 'tool-review-reason', text: String(r.reason ?? '') })],
    [t('tool_review_program'), h('span', null, h('code', { text: String(m.program ?? '') }), ' ',
      h('span', { class: 'muted small', text: t('tool_review_no_network') }))],
    [t('tool_review_risk'), h('span', { class: `pill risk risk-${String(m.risk_level ?? '')}`, testid: 'tool-review-risk',
      dataset: { risk: String(m.risk_level ?? '') }, text: enumLabel('risk', m.risk_level) })],
    [t('tool_review_requested_by'), h('span', { text: String(r.requested_by ?? '') })],
    [t('tool_review_created'), timeEl(r.created_at)],
  ];
  if (r.decision_note) rows.push([t('tool_review_note'), h('span', { testid: 'tool-review-decision-note', text: String(r.decision_note) })]);
  const out = [];
  const pending = r.status === 'PENDING';
  // What changed since the proposal: an approval would be void (R5).
  if (pending && now) {
    if ((pause === 'A' || pause === 'B') && now.allow_list_known === false) {
      out.push(h('p', { class: 'error-box', testid: 'tool-review-unchecked', text: t('tool_review_unchecked') }));
    } else if ((pause === 'A' || pause === 'B') && now.registry_fingerprint !== r.manifest_fingerprint) {
      out.push(h('p', { class: 'error-box', testid: 'tool-review-stale', text: now.registry_fingerprint ? t('tool_review_manifest_changed') : t('tool_review_manifest_gone') }));
    } else if (now.contract_fingerprint && now.contract_fingerprint !== r.contract_fingerprint) {
      out.push(h('p', { class: 'error-box', testid: 'tool-review-stale', text: t('tool_review_contract_changed') }));
    }
  }
  out.push(dl(rows, 'tool-review-meta'));
  const diff = r.detail && typeof r.detail.diff === 'string' ? r.detail.diff : '';
  if (diff) {
    out.push(h('details', { class: 'tool-diff', testid: 'tool-review-diff', open: pending },
      h('summary', { text: t('tool_review_diff') }), pre(diff, 'tool-review-diff-text', t('tool_review_diff'))));
  }
  out.push(h('details', { class: 'tool-script', testid: 'tool-review-script', open: pending && !diff },
    h('summary', { text: t('tool_review_script') }), pre(m.script, 'tool-review-script-text', t('tool_review_script'))));
  out.push(h('details', { class: 'tool-schema', testid: 'tool-review-schema' },
    h('summary', { text: t('tool_review_schema') }), pre(JSON.stringify(m.input_schema ?? {}, null, 2), undefined, t('tool_review_schema'))));
  out.push(h('div', { class: 'tool-tests-box' }, h('h4', { text: t(r.detail && Array.isArray(r.detail.tests) ? 'tool_review_tests_run' : 'tool_review_tests') }), testsEl(r)));
  out.push(h('details', { class: 'agent-tech', testid: 'tool-review-tech' },
    h('summary', { text: t('agent_review_tech') }),
    dl([
      [t('agent_review_id'), h('code', { class: 'hash', text: String(r.id ?? '') })],
      [t('tool_review_manifest_fp'), fingerprint(r.manifest_fingerprint, 'tool-review-fingerprint')],
      [t('agent_review_fingerprint'), fingerprint(r.contract_fingerprint, 'tool-review-contract')],
    ])));
  return out;
}

// Draws the panel for the runtime turn `rt` (hidden unless it waits on a
// tool request).
export function renderToolReview(rt, actions) {
  const box = $('agent-tool-review');
  const body = clear($('agent-tool-review-details'));
  const id = rt && rt.research_request ? String(rt.research_request) : '';
  // Shown while the turn waits on it or resumes from it; once the turn has
  // ended, its summary says what came of the decision.
  const live = rt && ['AUTHORIZATION_REQUIRED', 'QUEUED', 'RUNNING'].includes(String(rt.status ?? ''));
  if (!isToolRequest(id) || review.id !== id || !live) {
    box.hidden = true;
    box.dataset.requestId = '';
    return;
  }
  box.hidden = false;
  box.dataset.requestId = id;
  const r = review.request;
  const pause = r ? String(r.pause ?? '') : '';
  box.dataset.pause = pause;
  box.dataset.requestStatus = r ? String(r.status ?? '') : '';
  $('agent-tool-review-title').textContent = pause ? t(`tool_pause_${pause}`) : t('tool_review');
  const pending = Boolean(r) && r.status === 'PENDING';
  $('agent-tool-decide-form').hidden = !pending;
  const resumable = Boolean(r) && !pending && rt.status === 'AUTHORIZATION_REQUIRED' && !rt.lost;
  $('agent-tool-resume').hidden = !resumable;
  for (const b of [$('agent-tool-approve'), $('agent-tool-refuse'), $('agent-tool-resume')]) b.disabled = review.busy;
  const status = $('agent-tool-review-status');
  status.textContent = review.note ? review.note.text() : '';
  status.dataset.kind = review.note ? review.note.kind : '';
  status.hidden = !review.note;
  if (review.loading && !r) {
    body.append(h('p', { class: 'muted', text: t('agent_review_loading') }));
    return;
  }
  if (review.error) body.append(h('p', { class: 'error-box', testid: 'tool-review-error', text: errorText(review.error) }));
  if (r) body.append(h('p', { class: 'muted small', testid: 'tool-review-question', text: t(`tool_pause_${pause}_help`) }), ...details(r, review.now));
  if (!actions.wired) {
    actions.wired = true;
    $('agent-tool-decide-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      decide(true, actions);
    });
    $('agent-tool-refuse').addEventListener('click', () => decide(false, actions));
    $('agent-tool-resume').addEventListener('click', () => actions.resume((kind, text) => {
      setNote(kind, text);
      actions.render();
    }));
  }
}

async function decide(approve, actions) {
  const r = review.request;
  if (!r || review.busy) return;
  const note = String($('agent-tool-note').value ?? '').trim().slice(0, NOTE_MAX);
  if (!approve && !note) {
    setNote('error', () => t('tool_refuse_missing'));
    actions.render();
    return;
  }
  review.busy = true;
  setNote('info', () => t(approve ? 'tool_approving' : 'tool_refusing'));
  actions.render();
  try {
    const path = `/api/v1/tool-requests/${seg(r.id)}/${approve ? 'approve' : 'refuse'}`;
    const out = await api(path, { method: 'POST', body: approve ? (note ? { note } : {}) : { reason: note } });
    const decided = out.request ?? {};
    const status = String(decided.status ?? '');
    setNote(status === 'VOID' ? 'error' : 'ok', () => t(`tool_decided_${status}`, { why: String(decided.decision_note ?? '') }));
    $('agent-tool-note').value = '';
    review.busy = false;
    await loadToolReview(r.id, actions.render, true);
  } catch (err) {
    setNote('error', () => errorText(err));
  } finally {
    review.busy = false;
  }
  actions.render();
}
