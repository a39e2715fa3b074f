// Agent panel (SPEC G, M6–M10): the agent's mode (the runtime's status), the
// tool catalog, a question, and the runtime turn it starts — the
// deterministic demo agent or the local model, driven by the server's
// AgentRuntime. The runtime turn (status, rounds, tool calls, repairs,
// summary, error) and its events are polled; the plan, tool results and
// tool activity come from the gateway turn it drives (its event log), and
// the human decision on the research the agent prepares goes through the
// research routes, then the runtime resumes the turn. Questions, plans,
// observations, diagnostics, artifacts, event lines, errors and summaries
// come from the agent, the model, the tools or evidence: all of it is text
// (textContent), and object_refs only ever become links to this page's own
// views of existing objects. The runtime exposes no prompt and no private
// reasoning, and none is shown.


import { ApiError, api, errorText } from './api.js';
import { $, clear, countOf, cssToken, displayKind, dl, h, hrefFor, refKind, refLink, seg, shown, svgEl, timeEl } from './dom.js';
import { LOCALES, enumLabel, fmtBytes, fmtNumber, hasLabel, lang, t, tn } from './i18n.js';
import { resTable } from './resources.js';
import { observationText } from './observations.js';
import { isToolRequest, loadToolReview, renderToolReview } from './toolreview.js';
const AGENT_POLL_MS = 1000;
const AGENT_STATUS_RETRY_MS = 5000; // a local model not ready yet is asked again this often
const RT_EVENTS_PAGE = 128; // the runtime's MAX_EVENTS_PER_POLL
const RT_BOOT_PAGES = 3; // the runtime keeps 256 events: two pages, and one to spare
const RT_BUSY = new Set(['QUEUED', 'RUNNING']);
const RT_LIVE = new Set(['QUEUED', 'RUNNING', 'AUTHORIZATION_REQUIRED']);
const RT_END_ERRORS = new Set(['FAILED', 'CANCELLED', 'MODEL_UNAVAILABLE', 'MODEL_PROTOCOL_ERROR', 'BUDGET_EXHAUSTED']);
const AGENT_AFTER_ACTION_POLLS = 3; // polls after an action, even when idle
const AGENT_QUESTION_MAX = 512;
const AGENT_EXCLUSIONS_MAX = 8;
const AGENT_ACTIVITY_MAX = 200;
const AGENT_ARTIFACT_PREVIEW = 4000;
const GRANT_HOSTS_MAX = 16;
const GRANT_URLS_MAX = 32; // the store's MAX_CAMPAIGN_URLS
const FINGERPRINT_PREFIX = 16;
const CAMPAIGN_POLL_MS = 2000; // a campaign that has not ended is read again this often
const CAMPAIGN_LIVE = new Set(['PENDING', 'ADMITTED', 'RUNNING']);

const agent = {
  status: null, // the runtime's status: { driver, label, ready, detail, queued, closed }
  statusError: null,
  statusTimer: null,
  catalog: null,
  catalogError: null,
  rt: null, // the current runtime turn: the API's RuntimeTurn, refreshed by polling
  rtCursor: 0, // runtime event log cursor
  rtSeen: new Set(), // runtime event sequences of the current turn
  fetchRt: false, // the current runtime turn must be read again
  resumed: false, // a resume was queued: when it settles, the review and overview are read again
  resumeRefused: null, // the detail of a `turn.resume_refused` event
  resumeNote: null, // where a resume's outcome is said (the tool request's panel), else the research review
  cancel: '', // '' | 'pending' | 'done' | 'error': the Cancel request of the current turn
  startKey: null, // { key, sig }: the idempotency key of a submission still waiting for its answer
  cursor: 0, // gateway event log cursor
  gwFrom: 0, // gateway cursor when the current runtime turn was started: its gateway events follow it
  gen: 0, // bumped when the current turn changes; stale polls are dropped
  rev: 0, // bumped when an action (cancel, resume) changes the runtime turn; polls read before are dropped
  timer: null,
  polling: false,
  afterPolls: 0,
  pollError: null,
  missed: false,
  starting: false,
  turn: null, // the gateway turn the runtime turn drives: { turn_id, status, … } kept up to date by its events
  seen: new Set(), // gateway event sequences of the current turn
  plan: null, // { steps, done }
  cards: [], // agent.tool.completed payloads
  activity: [], // gateway and runtime events of the current turn
  results: new Map(), // result_id → { open, loading, data, error }
  review: null, // { id, loading, request, fingerprint, risk, error, note }
  campaignTimer: null, // the next read of a campaign that has not ended
  riskHint: null,
  formNote: null, // { kind, text: () => string }
};

// The runtime turn waits for the worker or runs: it can be cancelled.
function rtBusy() {
  return Boolean(agent.rt) && !agent.rt.lost && RT_BUSY.has(agent.rt.status);
}

// The runtime turn is not over (it may still change): it is polled, and a
// turn started elsewhere does not replace it.
function rtLive() {
  return Boolean(agent.rt) && !agent.rt.lost && RT_LIVE.has(agent.rt.status);
}

// A fresh idempotency key (M6): one per submission.
function newIdempotencyKey() {
  if (window.crypto && typeof window.crypto.randomUUID === 'function') return `ui-${window.crypto.randomUUID()}`;
  const bytes = new Uint8Array(16);
  window.crypto.getRandomValues(bytes);
  return `ui-${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`;
}

function lines(text, max) {
  return String(text ?? '').split('\n').map((x) => x.trim()).filter(Boolean).slice(0, max);
}

function refList(refs, testid) {
  const items = Array.isArray(refs) ? refs : [];
  if (items.length === 0) return h('span', { class: 'muted', testid, text: t('agent_result_none') });
  return h('ul', { class: 'inline-list agent-refs', testid }, items.map((r) => h('li', null, refLink(r))));
}

function fingerprintEl(fp, testid) {
  const full = String(fp ?? '');
  return h('code', { class: 'hash', testid, title: full, dataset: { full }, text: full.slice(0, FINGERPRINT_PREFIX) });
}

// A risk level in the chosen language (SPEC U4); the level itself stays in
// `data-risk` for scripts.
function riskPill(level, testid, title = t('agent_risk_title')) {
  const l = String(level ?? '?');
  return h('span', { class: `pill risk risk-${cssToken(l)}`, testid, title, dataset: { risk: l }, text: enumLabel('risk', l) });
}

// The selection by title (SPEC U5): each reference's label, read once from
// the graph and kept while the page lives; the id until it is known.
const refLabels = new Map();
async function loadRefLabels(refs) {
  const missing = (Array.isArray(refs) ? refs : []).map(String)
    .filter((r) => !refLabels.has(r) && (refKind(r) === 'evidence' || refKind(r) === 'entity'));
  if (missing.length === 0) return false;
  await Promise.all(missing.map(async (r) => {
    try {
      const node = await api(`/api/v1/graph/nodes/${seg(r)}`);
      refLabels.set(r, { label: String(node.label ?? r), kind: displayKind(node) });
    } catch {
      refLabels.set(r, { label: r, kind: '' });
    }
  }));
  return true;
}

function selectionList(refs, testid) {
  const items = Array.isArray(refs) ? refs.map(String) : [];
  if (items.length === 0) return h('span', { class: 'muted', testid, text: t('agent_result_none') });
  return h('ul', { class: 'agent-selection', testid }, items.map((r) => {
    const known = refLabels.get(r);
    return h('li', null,
      labelLink(r, known ? known.label : r, 'agent-ref'),
      known && known.kind ? h('span', { class: `kind kind-${cssToken(known.kind)}`, text: enumLabel('kind', known.kind) }) : null);
  }));
}

function statusPill(prefix, value, testid) {
  const v = String(value ?? '');
  return h('span', { class: `pill status-${cssToken(v)}`, testid, dataset: { status: v }, text: enumLabel(prefix, v) });
}

function clockTime(value) {
  const d = new Date(value);
  if (Number.isNaN(d.getTime())) return h('time', { text: String(value ?? '') });
  const el = h('time', { text: new Intl.DateTimeFormat(LOCALES[lang], { timeStyle: 'medium' }).format(d) });
  el.setAttribute('datetime', String(value));
  el.title = String(value);
  return el;
}

function noteEl(el, note) {
  el.textContent = note ? note.text() : '';
  el.dataset.kind = note ? note.kind : '';
  el.hidden = !note;
}

// ----- state changes

// Makes `rt` (a runtime turn) the current one. Its gateway events are read
// from `gwFrom` once the runtime says which gateway turn it drives.
function agentSetRuntimeTurn(rt, gwFrom) {
  agent.gen += 1;
  agent.rt = { ...rt, turn_id: String(rt.turn_id ?? '') };
  agent.rtSeen = new Set();
  agent.fetchRt = false;
  agent.resumed = false;
  agent.resumeRefused = null;
  agent.cancel = '';
  agent.gwFrom = gwFrom;
  agent.turn = null;
  agent.seen = new Set();
  agent.plan = null;
  agent.cards = [];
  agent.activity = [];
  agent.results = new Map();
  agent.review = null;
  agent.riskHint = null;
  agent.missed = false;
}

function pushActivity(item) {
  agent.activity.push(item);
  if (agent.activity.length > AGENT_ACTIVITY_MAX) agent.activity.splice(0, agent.activity.length - AGENT_ACTIVITY_MAX);
}

// Applies one runtime event (`{seq, turn_id, kind, detail, at}`) to the
// current turn. Returns true when something shown changed.
function rtIngest(ev) {
  if (!ev || typeof ev !== 'object') return false;
  const turnId = String(ev.turn_id ?? '');
  const kind = String(ev.kind ?? '');
  if (!agent.rt || turnId !== agent.rt.turn_id) {
    // A turn started elsewhere (another tab, an API client) becomes the
    // current one only while ours is idle.
    if (kind !== 'turn.queued' || !turnId || agent.starting || rtLive()) return false;
    agentSetRuntimeTurn({ turn_id: turnId, status: 'QUEUED' }, 0);
    agent.fetchRt = true;
  }
  const seq = Number(ev.seq);
  if (agent.rtSeen.has(seq)) return false;
  agent.rtSeen.add(seq);
  const detail = String(ev.detail ?? '');
  pushActivity({ source: 'runtime', type: kind, sequence: seq, timestamp: String(ev.at ?? ''), detail });
  if (kind === 'turn.resume_refused') agent.resumeRefused = detail;
  return true;
}

// Applies one gateway event to the gateway turn the current runtime turn
// drives (others are not ours). Returns true when something shown changed.
function agentIngest(ev) {
  if (!ev || typeof ev !== 'object') return false;
  const turnId = String(ev.turn_id ?? '');
  if (!agent.turn || turnId !== agent.turn.turn_id) return false;
  const seq = Number(ev.sequence);
  if (agent.seen.has(seq)) return false;
  agent.seen.add(seq);
  pushActivity({ ...ev, source: 'gateway' });
  const p = ev.payload && typeof ev.payload === 'object' ? ev.payload : {};
  const turn = agent.turn;
  switch (ev.type) {
    case 'agent.plan.updated':
      agent.plan = { steps: Array.isArray(p.steps) ? p.steps.map((x) => String(x)) : [], done: Number(p.done ?? 0) };
      break;
    case 'agent.tool.completed':
      agent.cards.push({
        sequence: seq,
        tool_id: String(p.tool_id ?? ''),
        status: String(p.status ?? ''),
        result_id: p.result_id ? String(p.result_id) : null,
        observations: Array.isArray(p.observations) ? p.observations.map((x) => String(x)) : [],
        diagnostic: p.diagnostic === null || p.diagnostic === undefined ? null : String(p.diagnostic),
        refs: Array.isArray(ev.refs) ? ev.refs : [],
      });
      break;
    case 'agent.authorization.required':
      turn.status = 'AUTHORIZATION_REQUIRED';
      if (p.research_request) turn.research_request = String(p.research_request);
      if (p.risk_level) agent.riskHint = String(p.risk_level);
      break;
    case 'agent.turn.completed':
      turn.status = 'COMPLETED';
      turn.summary = String(p.summary ?? '');
      turn.summary_refs = Array.isArray(ev.refs) ? ev.refs : [];
      break;
    case 'agent.error':
      turn.status = 'FAILED';
      turn.error = String(p.message ?? '');
      break;
    default:
      break;
  }
  return true;
}

// ----- polling (no SSE: the runtime's and the gateway's event logs are
// polled while a turn is live)

// `data-polling` on the panel: true while a poll is scheduled or running.
function setPollingAttr() {
  $('agent-panel').dataset.polling = String(Boolean(agent.timer) || agent.polling);
}

function agentSchedule() {
  if (!agent.timer && !agent.polling && !agent.pollError) {
    if (rtLive()) {
      agent.timer = setTimeout(agentPoll, AGENT_POLL_MS);
    } else if (agent.afterPolls > 0) {
      agent.afterPolls -= 1;
      agent.timer = setTimeout(agentPoll, AGENT_POLL_MS);
    }
  }
  setPollingAttr();
}

function agentKick() {
  if (agent.timer) {
    clearTimeout(agent.timer);
    agent.timer = null;
  }
  agent.pollError = null;
  agent.afterPolls = AGENT_AFTER_ACTION_POLLS;
  if (!agent.polling) agentPoll();
}

// One poll: the runtime turn (while it moves), the runtime's events, then
// the events of the gateway turn it drives — in this order, so that the
// events shown are at least as new as the turn's host.state. Everything is read
// first and applied at once: a turn shown paused or completed already has
// its events, plan and tool cards.
async function agentPoll() {
  agent.timer = null;
  if (agent.polling) return;
  agent.polling = true;
  setPollingAttr();
  const gen = agent.gen;
  const rev = agent.rev;
  const rt = agent.rt;
  let rtPage;
  let fresh = null;
  let lost = false;
  let gwPage = null;
  let bind = null;
  let gwCursor = agent.cursor;
  let late = false;
  const readTurn = async () => {
    try {
      return await api(`/api/v1/agent-runtime/turns/${seg(rt.turn_id)}`);
    } catch (err) {
      // Evicted (the runtime keeps a bounded number of turns): the last
      // state read stays shown, and the turn is no longer followed.
      if (!(err instanceof ApiError && err.status === 404)) throw err;
      lost = true;
      return null;
    }
  };
  try {
    const follow = Boolean(rt) && !rt.lost;
    if (follow && (agent.fetchRt || RT_BUSY.has(rt.status))) fresh = await readTurn();
    rtPage = await api(`/api/v1/agent-runtime/events?cursor=${agent.rtCursor}&limit=${RT_EVENTS_PAGE}`);
    const rtEvents = Array.isArray(rtPage.events) ? rtPage.events : [];
    if (follow && !fresh && !lost
      && (rtPage.missed || rtEvents.some((e) => e && String(e.turn_id ?? '') === rt.turn_id))) {
      // A paused or ended turn moved (resumed elsewhere): its state may be
      // newer than these events, so one more poll follows.
      fresh = await readTurn();
      late = true;
    }
    const gw = (fresh ?? rt)?.gateway_turn_id;
    if (gw && !lost) {
      if (!agent.turn || agent.turn.turn_id !== String(gw)) {
        bind = String(gw);
        gwCursor = Math.min(agent.cursor, agent.gwFrom);
      }
      gwPage = await api(`/api/v1/agent-tools/events?cursor=${gwCursor}`);
    }
  } catch (err) {
    agent.polling = false;
    // Stop on any error (a lost session, a server restart): no retry loop
    // behind the analyst's back; the panel says so and offers to resume.
    agent.pollError = err;
    agent.afterPolls = 0;
    setPollingAttr();
    renderAgentError();
    return;
  }
  agent.polling = false;
  if (gen !== agent.gen || rev !== agent.rev) {
    // The current turn changed while this poll ran (another turn, or a
    // cancel or resume answered meanwhile): it is read again from the
    // right cursors.
    agentSchedule();
    return;
  }
  const wasBusy = Boolean(rt) && RT_BUSY.has(rt.status);
  let changed = false;
  for (const ev of Array.isArray(rtPage.events) ? rtPage.events : []) changed = rtIngest(ev) || changed;
  const rtNext = Number(rtPage.next_cursor);
  if (Number.isSafeInteger(rtNext) && rtNext >= 0) agent.rtCursor = rtNext;
  if (rtPage.missed && !agent.missed) {
    agent.missed = true;
    changed = true;
  }
  if (agent.rt !== rt) {
    // A turn started elsewhere became the current one: read it at once.
    agent.afterPolls = Math.max(agent.afterPolls, 1);
  } else if (rt) {
    if (fresh) {
      Object.assign(rt, fresh, { turn_id: rt.turn_id });
      agent.fetchRt = false;
      changed = true;
    }
    if (late) agent.afterPolls = Math.max(agent.afterPolls, 1);
    if (lost) {
      rt.lost = true;
      agent.formNote = { kind: 'error', text: () => t('agent_turn_lost') };
      changed = true;
    }
    if (bind) {
      agent.turn = { turn_id: bind, status: 'RUNNING' };
      agent.seen = new Set();
      changed = true;
    }
    if (gwPage) {
      for (const ev of Array.isArray(gwPage.events) ? gwPage.events : []) changed = agentIngest(ev) || changed;
      const next = Number(gwPage.next_cursor);
      if (Number.isSafeInteger(next) && next >= 0) agent.cursor = next;
      if (gwPage.missed && !agent.missed) {
        agent.missed = true;
        changed = true;
      }
    }
    if (wasBusy && !RT_BUSY.has(rt.status)) agentSettled(rt);
  }
  if (changed) renderAgent();
  const cur = agent.rt;
  if (cur && cur.research_request && cur.status === 'AUTHORIZATION_REQUIRED') {
    // A tool request (SPEC X2) has its own panel.
    if (isToolRequest(cur.research_request)) loadToolReview(String(cur.research_request), renderToolPanel);
    else if (!agent.review || agent.review.id !== String(cur.research_request)) loadReview();
  }
  agentSchedule();
}

// The runtime turn left QUEUED/RUNNING (paused, completed or ended).
function agentSettled(rt) {
  if (agent.resumed) {
    agent.resumed = false;
    const status = String(rt.status ?? '');
    const note = agent.resumeNote ?? reviewNote;
    agent.resumeNote = null;
    if (status === 'AUTHORIZATION_REQUIRED' && agent.resumeRefused !== null) {
      const message = agent.resumeRefused;
      note('error', () => t('agent_resume_refused', { message }));
    } else {
      note('ok', () => t('agent_resumed', { status: enumLabel('turn', status) }));
    }
    if (isToolRequest(rt.research_request)) loadToolReview(String(rt.research_request), renderToolPanel, true);
    else loadReview(true);
    // New evidence (a synthetic campaign's pages) shows in the overview.
    const { name } = host.parseHash();
    if (name === '' || name === 'overview') host.route();
  }
  // A turn that could not reach the model: the mode line says why.
  if (rt.status === 'MODEL_UNAVAILABLE') agentLoadStatus();
}

// ----- actions

// Starts a runtime turn (M6). The idempotency key is fresh for each
// submission and kept until the server answers it: a second submission
// meanwhile is ignored, and a retry of the same question after no answer
// (network, timeout, 5xx) reuses it, so it cannot start a second turn.
async function agentStart(ev) {
  ev.preventDefault();
  if (agent.starting) return undefined;
  const question = $('agent-question').value.trim();
  const exclusions = String($('agent-exclusions').value).split('\n').map((x) => x.trim()).filter(Boolean);
  const say = (key, kind, vars) => {
    agent.formNote = { kind, text: () => t(key, vars) };
    renderAgentForm();
  };
  if (!question) return say('agent_question_missing', 'error');
  if (Array.from(question).length > AGENT_QUESTION_MAX) return say('agent_question_too_long', 'error', { n: AGENT_QUESTION_MAX });
  if (exclusions.length > AGENT_EXCLUSIONS_MAX) return say('agent_exclusions_too_many', 'error', { n: AGENT_EXCLUSIONS_MAX });
  // The analyst's language: the demo agent plans and sums up in it (SPEC U4).
  const body = { question, exclusions, lang };
  if (host.state.investigationId) body.investigation_id = host.state.investigationId;
  // Read only (a local model's turn): the catalog's read tools, nothing
  // that prepares, proposes or reaches out (SPEC M: the turn's `tools`).
  if (localModel() && $('agent-readonly').checked) {
    const tools = agent.catalog && Array.isArray(agent.catalog.tools) ? agent.catalog.tools : [];
    const read = tools.filter((x) => x && ['read', 'meta'].includes(x.action_class)).map((x) => String(x.tool_id));
    if (read.length === 0) return say('agent_readonly_no_catalog', 'error');
    body.tools = read;
  }
  const sig = JSON.stringify(body);
  if (!agent.startKey || agent.startKey.sig !== sig) agent.startKey = { key: newIdempotencyKey(), sig };
  body.idempotency_key = agent.startKey.key;
  const run = $('agent-run');
  run.disabled = true;
  agent.starting = true;
  agent.gen += 1; // drop whatever a poll in flight brings back
  const gwFrom = agent.cursor; // this turn's gateway events come after it
  say('agent_running', 'info');
  let turn = null;
  try {
    turn = await api('/api/v1/agent-runtime/turns', { method: 'POST', body });
    agent.startKey = null;
  } catch (err) {
    // A refusal is an answer (nothing started): the next submission gets a
    // new key. Without an answer the key stays for a retry.
    if (err instanceof ApiError && err.status < 500) agent.startKey = null;
    agent.formNote = { kind: 'error', text: () => errorText(err) };
  } finally {
    agent.starting = false;
    run.disabled = false;
  }
  if (turn) {
    agentSetRuntimeTurn(turn, gwFrom);
    const status = String(turn.status ?? '');
    // The note follows the turn: it reads its current status at each render.
    agent.formNote = {
      kind: 'ok',
      text: () => t('agent_started', { status: enumLabel('turn', String(agent.rt?.status ?? status)) }),
    };
  }
  renderAgent();
  agentKick();
  return undefined;
}

// Cancels the current runtime turn (M8): a queued turn never runs, a
// running one has every later effect blocked.
async function agentCancel() {
  const rt = agent.rt;
  if (!rt || agent.cancel === 'pending') return;
  const gen = agent.gen;
  agent.cancel = 'pending';
  agent.rev += 1;
  agent.formNote = { kind: 'info', text: () => t('agent_cancelling') };
  renderAgent();
  try {
    const updated = await api(`/api/v1/agent-runtime/turns/${seg(rt.turn_id)}/cancel`, { method: 'POST', body: {} });
    if (gen !== agent.gen) return;
    agent.rev += 1;
    Object.assign(rt, updated, { turn_id: rt.turn_id });
    agent.cancel = 'done';
    agent.formNote = { kind: 'ok', text: () => t('agent_cancelled') };
  } catch (err) {
    if (gen !== agent.gen) return;
    agent.rev += 1;
    // Already ended (409), or no answer: the next poll says where it stands.
    agent.cancel = 'error';
    agent.fetchRt = true;
    agent.formNote = { kind: 'error', text: () => errorText(err) };
  }
  renderAgent();
  agentKick();
}

function resetGrantForm() {
  $('agent-grant-form').reset();
  $('agent-refuse-form').reset();
}

// The grant form starts from the addresses research.prepare proposed (SPEC
// F1), once per request: the human edits them; only the final list is sent.
function prefillGrant(r) {
  const c = r && r.candidates && typeof r.candidates === 'object' ? r.candidates : null;
  if (!c) return;
  const urls = (Array.isArray(c.urls) ? c.urls : []).map((u) => String(u && u.url ? u.url : '')).filter(Boolean);
  const hosts = (Array.isArray(c.hosts) ? c.hosts : []).map(String).filter(Boolean);
  if (hosts.length) $('agent-grant-hosts').value = hosts.slice(0, GRANT_HOSTS_MAX).join('\n');
  if (urls.length) {
    $('agent-grant-urls').value = urls.slice(0, GRANT_URLS_MAX).join('\n');
    const requests = $('agent-grant-requests');
    if (Number(requests.value) < urls.length) requests.value = String(Math.min(urls.length, GRANT_URLS_MAX));
  }
}

// A link to an object named by its title or name (the reference stays in
// its data and tooltip, not in the text).
function labelLink(ref, label, testid) {
  const s = String(ref ?? '');
  const kind = refKind(s);
  const text = String(label || s);
  if (kind === 'evidence' || kind === 'entity') {
    return h('a', { href: hrefFor(s, kind), class: 'agent-ref', testid, title: s, dataset: { ref: s, kind }, text });
  }
  return h('span', { testid, title: s, text });
}

// Why an address is proposed, in words, with the object it came through.
function candidateWhy(u) {
  const origin = String(u.origin ?? '');
  const why = t(`cand_${origin}`, { relation: u.relation ? enumLabel('rel', u.relation) : '' });
  return [h('span', { class: 'muted', text: t('cand_why', { why }) }), labelLink(u.via ?? u.selected, u.label, 'agent-candidate-source')];
}

function skipWhy(s) {
  const reason = String(s.reason ?? '');
  let detail = String(s.detail ?? '');
  if (reason === 'private_address') detail = t(`addr_${detail}`);
  if (reason === 'onion') detail = t(`onion_${detail}`);
  return t(`skip_${reason}`, { detail });
}

// What research.prepare proposed (SPEC F1): each address with why, then
// what it left out and why.
function candidatesEl(c, pending) {
  const urls = Array.isArray(c.urls) ? c.urls : [];
  const skipped = Array.isArray(c.skipped) ? c.skipped : [];
  const box = h('div', { class: 'candidates', testid: 'agent-candidates', dataset: { count: String(urls.length) } });
  if (urls.length === 0) {
    box.append(h('p', { class: 'muted', testid: 'agent-candidates-none', text: t('candidates_none') }));
  } else {
    if (pending) box.append(h('p', { class: 'muted small', text: t('candidates_help') }));
    box.append(h('ul', { class: 'candidate-list' }, urls.map((u) => h('li',
      { testid: 'agent-candidate', dataset: { url: String(u.url ?? ''), origin: String(u.origin ?? '') } },
      h('code', { class: 'candidate-url', text: String(u.url ?? '') }),
      u.host_unicode ? h('span', { class: 'muted small', text: ` (${u.host_unicode})` }) : null,
      h('div', { class: 'candidate-why small' }, candidateWhy(u))))));
    const more = Number(c.more ?? 0);
    if (more > 0) box.append(h('p', { class: 'muted small', testid: 'agent-candidates-more', text: tn('candidates_more', more) }));
  }
  if (skipped.length) {
    const total = Math.max(Number(c.skipped_total ?? 0), skipped.length);
    box.append(h('details', { class: 'candidate-skipped', testid: 'agent-candidates-skipped' },
      h('summary', { text: tn('candidates_skipped', total) }),
      h('ul', null, skipped.map((x) => h('li', { testid: 'agent-candidate-skipped', dataset: { reason: String(x.reason ?? '') } },
        h('code', { class: 'candidate-url', text: String(x.value ?? '') }),
        h('div', { class: 'muted small', text: skipWhy(x) }))))));
  }
  return box;
}

async function loadReview(force = false) {
  const rt = agent.rt;
  const id = rt && rt.research_request ? String(rt.research_request) : null;
  if (!id || isToolRequest(id)) return;
  const fresh = !agent.review || agent.review.id !== id;
  if (!fresh && agent.review.loading) return;
  if (!fresh && !force) return;
  if (fresh) resetGrantForm();
  campaignStop();
  const before = fresh ? '' : campaignStatus(agent.review.request);
  const decided = !fresh && agent.review.request && agent.review.request.status !== 'PENDING';
  agent.review = { ...(fresh ? {} : agent.review), id, loading: true, error: null };
  renderReview();
  const gen = agent.gen;
  try {
    let request = null;
    let fingerprint = agent.review.fingerprint ?? null;
    let risk = agent.review.risk ?? agent.riskHint;
    if (!decided) {
      const list = await api('/api/v1/research/requests');
      request = (Array.isArray(list.requests) ? list.requests : []).find((r) => r && r.id === id) ?? null;
      fingerprint = list.current_contract_fingerprint ?? null;
      risk = list.risk_level ?? risk;
    }
    if (!request) {
      // No longer pending: read it on its own (granted, refused or void),
      // with its campaign's progress.
      const one = await api(`/api/v1/research/requests/${seg(id)}`);
      request = one.request ?? null;
      fingerprint = one.current_contract_fingerprint ?? fingerprint;
    }
    // A REAL grant waiting for its confirmation (T2): where to confirm it,
    // as egress says (a fresh one-time link at each read).
    let confirmation = null;
    const grantId = request && request.grant ? String(request.grant.id ?? '') : '';
    // Past the confirmation: egress's own log of the grant's fetches (T2).
    let fetchLog = null;
    if (isRealWorkspace() && grantId && campaignStatus(request) === 'PENDING') {
      confirmation = await api(`/api/v1/grants/${seg(grantId)}/confirmation`).catch(() => null);
    } else if (isRealWorkspace() && grantId && campaignStatus(request)) {
      fetchLog = await api(`/api/v1/grants/${seg(grantId)}/fetch-log`).catch(() => null);
    }
    // The selection's titles (read once each; a failure leaves the id).
    if (request) await loadRefLabels(request.selection);
    if (gen !== agent.gen) return;
    Object.assign(agent.review, { loading: false, request, fingerprint, risk, confirmation, fetchLog });
    if (request && request.status === 'PENDING' && !agent.review.prefilled) {
      prefillGrant(request);
      agent.review.prefilled = true;
    }
    // Confirmed outside the server: the campaign may still wait (for Tor,
    // then its admission), but the « confirm it » note has done its work.
    const confirmed = Boolean(confirmation) && Boolean(confirmation.phase) && confirmation.phase !== 'PROPOSED';
    if (agent.review.noteUntilConfirmed && ((campaignStatus(request) && campaignStatus(request) !== 'PENDING') || confirmed)) {
      Object.assign(agent.review, { note: null, noteUntilConfirmed: false });
    }
  } catch (err) {
    if (gen !== agent.gen) return;
    Object.assign(agent.review, { loading: false, error: err });
  }
  renderReview();
  const after = campaignStatus(agent.review.request);
  if (CAMPAIGN_LIVE.has(before) && after && !CAMPAIGN_LIVE.has(after)) {
    // The campaign ended: its pages are evidence now.
    const { name } = host.parseHash();
    if (name === '' || name === 'overview') host.route();
  }
  campaignSchedule();
}

// The status of a request's campaign, or ''.
function campaignStatus(request) {
  const c = request && typeof request === 'object' ? request.campaign : null;
  return c && typeof c === 'object' ? String(c.status ?? '') : '';
}

// A campaign that has not ended is read again (while the page is visible
// and the last read succeeded): its progress bar and items follow it.
export function campaignSchedule() {
  const rv = agent.review;
  if (agent.campaignTimer || !rv || rv.error || rv.loading || document.hidden) return;
  if (!CAMPAIGN_LIVE.has(campaignStatus(rv.request))) return;
  agent.campaignTimer = setTimeout(() => {
    agent.campaignTimer = null;
    loadReview(true);
  }, CAMPAIGN_POLL_MS);
}

function campaignStop() {
  if (agent.campaignTimer) {
    clearTimeout(agent.campaignTimer);
    agent.campaignTimer = null;
  }
}

function reviewNote(kind, text) {
  if (agent.review) agent.review.note = { kind, text };
  noteEl($('agent-review-status'), agent.review ? agent.review.note : null);
}

function positiveInt(el, labelKey) {
  const raw = String(el.value ?? '').trim();
  if (!/^[0-9]{1,10}$/.test(raw) || Number(raw) < 1) {
    reviewNote('error', () => t('agent_grant_number', { field: t(labelKey) }));
    return null;
  }
  return Number(raw);
}

async function agentGrant(ev) {
  ev.preventDefault();
  const r = agent.review && agent.review.request;
  if (!r) return;
  const hosts = String($('agent-grant-hosts').value).split('\n').map((x) => x.trim()).filter(Boolean);
  if (hosts.length === 0) return reviewNote('error', () => t('agent_grant_hosts_missing'));
  if (hosts.length > GRANT_HOSTS_MAX) return reviewNote('error', () => t('agent_grant_hosts_too_many', { n: GRANT_HOSTS_MAX }));
  const maxRequests = positiveInt($('agent-grant-requests'), 'agent_grant_requests');
  if (maxRequests === null) return undefined;
  const maxBytes = positiveInt($('agent-grant-bytes'), 'agent_grant_bytes');
  if (maxBytes === null) return undefined;
  const minutes = positiveInt($('agent-grant-minutes'), 'agent_grant_minutes');
  if (minutes === null) return undefined;
  const body = { scope: { hosts }, budget: { max_requests: maxRequests, max_bytes: maxBytes }, expires_in_minutes: minutes };
  if (isRealWorkspace()) {
    // REAL: the exact addresses the campaign fetches (the server checks
    // each against the scope; nothing else is ever fetched).
    const urls = lines($('agent-grant-urls').value, GRANT_URLS_MAX + 1);
    if (urls.length === 0) return reviewNote('error', () => t('agent_grant_urls_missing'));
    if (urls.length > GRANT_URLS_MAX) return reviewNote('error', () => t('agent_grant_urls_too_many', { n: GRANT_URLS_MAX }));
    body.urls = urls;
  }
  setReviewBusy(true);
  reviewNote('info', () => t('agent_granting'));
  try {
    const out = await api(`/api/v1/research/requests/${seg(r.id)}/grant`, { method: 'POST', body });
    const grant = String(out.grant ?? '');
    const campaign = String(out.campaign ?? '');
    // REAL: a proposal until a human confirms it outside the server (T2).
    const key = out.confirmation ? 'agent_granted_confirm' : 'agent_granted';
    reviewNote('ok', () => t(key, { grant, campaign }));
    // « Confirmez-la » holds only until the confirmation (see loadReview).
    if (out.confirmation && agent.review) agent.review.noteUntilConfirmed = true;
    await loadReview(true);
  } catch (err) {
    reviewNote('error', () => errorText(err));
  } finally {
    setReviewBusy(false);
  }
  return undefined;
}

async function agentRefuse(ev) {
  ev.preventDefault();
  const r = agent.review && agent.review.request;
  if (!r) return;
  const reason = String($('agent-refuse-reason').value).trim();
  if (!reason) {
    reviewNote('error', () => t('agent_refuse_missing'));
    return;
  }
  setReviewBusy(true);
  reviewNote('info', () => t('agent_refusing'));
  try {
    await api(`/api/v1/research/requests/${seg(r.id)}/refuse`, { method: 'POST', body: { reason } });
    reviewNote('ok', () => t('agent_refused'));
    await loadReview(true);
  } catch (err) {
    reviewNote('error', () => errorText(err));
  } finally {
    setReviewBusy(false);
  }
}

// Resumes the paused runtime turn (M8) once the request is decided: the
// runtime queues it, the gateway checks the grant and rereads the research
// state; polling follows it to its summary.
async function agentResume(note = reviewNote) {
  const rt = agent.rt;
  if (!rt) return;
  setReviewBusy(true);
  agent.resumeNote = note === reviewNote ? null : note;
  note('info', () => t('agent_resuming'));
  const gen = agent.gen;
  agent.rev += 1;
  try {
    const updated = await api(`/api/v1/agent-runtime/turns/${seg(rt.turn_id)}/resume`, { method: 'POST', body: {} });
    if (gen !== agent.gen) return;
    agent.rev += 1;
    Object.assign(rt, updated, { turn_id: rt.turn_id });
    agent.resumed = true;
    agent.resumeRefused = null;
    const status = String(updated.status ?? '');
    note('info', () => t('agent_resume_queued', { status: enumLabel('turn', status) }));
    renderAgent();
    agentKick();
  } catch (err) {
    note('error', () => errorText(err));
  } finally {
    setReviewBusy(false);
  }
}

// Revokes the request's grant: the store stops its campaign, the server
// tells egress; the review is read again.
async function agentRevoke() {
  const r = agent.review && agent.review.request;
  const grant = r && r.grant ? String(r.grant.id ?? '') : '';
  if (!grant) return;
  setReviewBusy(true);
  reviewNote('info', () => t('agent_revoking'));
  try {
    await api(`/api/v1/grants/${seg(grant)}/revoke`, { method: 'POST', body: {} });
    reviewNote('ok', () => t('agent_revoked'));
    await loadReview(true);
  } catch (err) {
    reviewNote('error', () => errorText(err));
  } finally {
    setReviewBusy(false);
  }
}

function setReviewBusy(busy) {
  for (const id of ['agent-grant', 'agent-refuse', 'agent-resume', 'agent-revoke']) $(id).disabled = busy;
  $('agent-review').dataset.busy = String(busy);
}

async function toggleResult(card) {
  const id = card.result_id;
  if (!id) return;
  let entry = agent.results.get(id);
  if (entry && entry.open) {
    entry.open = false;
    renderCards();
    return;
  }
  if (!entry) {
    entry = { open: true, loading: true, data: null, error: null };
    agent.results.set(id, entry);
  }
  entry.open = true;
  renderCards();
  if (entry.data) return;
  entry.loading = true;
  try {
    entry.data = await api(`/api/v1/agent-tools/results/${seg(id)}`);
    entry.error = null;
  } catch (err) {
    entry.error = err;
  }
  entry.loading = false;
  renderCards();
}

// ----- rendering

export function renderAgent() {
  const panel = $('agent-panel');
  const rt = agent.rt;
  panel.dataset.turnId = rt ? String(rt.turn_id ?? '') : '';
  panel.dataset.turnStatus = rt ? String(rt.status ?? '') : '';
  panel.dataset.gatewayTurnId = agent.turn ? String(agent.turn.turn_id ?? '') : '';
  panel.dataset.cancel = agent.cancel;
  // The same status on the panel and on the top bar's button, which also
  // says when the agent waits for the analyst (the drawer may be closed).
  for (const pill of [$('agent-turn-status'), $('agent-toggle-status')]) {
    if (rt && rt.status) {
      pill.textContent = enumLabel('turn', rt.status);
      pill.className = `pill status-${cssToken(rt.status)}`;
      pill.dataset.status = String(rt.status);
      pill.hidden = false;
    } else {
      pill.hidden = true;
    }
  }
  const waiting = Boolean(rt && rt.status === 'AUTHORIZATION_REQUIRED');
  $('agent-toggle').dataset.attention = String(waiting);
  if (waiting) $('agent-toggle').title = t('agent_needs_you');
  else $('agent-toggle').removeAttribute('title');
  renderAgentMode();
  renderAgentTools();
  renderAgentForm();
  renderAgentError();
  renderSummary();
  renderReview();
  renderToolPanel();
  renderPlan();
  renderCards();
  renderActivity();
}

// The mode line (M10) says which agent the runtime drives, as its status
// says: the demo agent, the local model, or why the local model cannot run
// now. Nothing here falls back to the demo agent's name.
function renderAgentMode() {
  const el = $('agent-mode');
  const st = agent.status;
  if (agent.statusError) {
    el.textContent = t('agent_unavailable', { message: errorText(agent.statusError) });
    el.dataset.mode = 'unavailable';
    el.dataset.ready = 'false';
    return;
  }
  if (!st) {
    el.textContent = t('loading');
    el.dataset.mode = '';
    el.dataset.ready = '';
    return;
  }
  const driver = String(st.driver ?? '');
  const label = String(st.label ?? '');
  const detail = st.detail === null || st.detail === undefined ? '' : String(st.detail);
  let text = driver === 'demo' ? t('agent_demo') : (label || driver);
  if (detail) text = t('agent_mode_detail', { label: text, detail });
  if (st.closed) text = t('agent_mode_closed', { label: text });
  el.textContent = shown(text);
  el.dataset.mode = driver;
  el.dataset.ready = String(st.ready === true);
}

function renderAgentTools() {
  const list = clear($('agent-tools'));
  const summary = $('agent-tools-summary');
  const tools = agent.catalog && Array.isArray(agent.catalog.tools) ? agent.catalog.tools : [];
  if (tools.length === 0) {
    summary.textContent = agent.catalogError ? t('agent_mode_detail', { label: t('agent_tools'), detail: errorText(agent.catalogError) }) : t('agent_tools');
    return;
  }
  const unavailable = tools.filter((x) => x && x.availability && x.availability.status !== 'AVAILABLE').length;
  summary.textContent = t('agent_tools_count', { n: fmtNumber(tools.length), u: fmtNumber(unavailable) });
  for (const tool of tools) {
    const av = tool.availability || {};
    const status = String(av.status ?? '');
    const reason = av.reason === null || av.reason === undefined ? '' : String(av.reason);
    list.append(h('li', { class: 'agent-tool', testid: 'agent-tool', dataset: { tool: String(tool.tool_id ?? ''), availability: status, risk: String(tool.risk_level ?? '') } },
      h('code', { class: 'agent-tool-id', text: tool.tool_id ?? '?' }),
      riskPill(tool.risk_level, 'agent-tool-risk'),
      h('span', { class: `pill avail-${cssToken(status)}`, testid: 'agent-tool-availability', text: enumLabel('agent_tool', status) }),
      reason ? h('span', { class: status === 'AVAILABLE' ? 'muted small' : 'small agent-tool-reason', testid: 'agent-tool-reason', text: reason }) : null));
  }
}

// Whether the runtime drives a local model (only its turns take `tools`).
function localModel() {
  return agent.status?.driver === 'local_model';
}

function renderAgentForm() {
  const q = $('agent-question');
  $('agent-readonly-row').hidden = !localModel();
  $('agent-question-count').textContent = t('agent_question_count', { n: fmtNumber(Array.from(q.value).length), max: fmtNumber(AGENT_QUESTION_MAX) });
  noteEl($('agent-form-status'), agent.formNote);
  const cancel = $('agent-cancel');
  cancel.hidden = !rtBusy();
  cancel.disabled = agent.cancel === 'pending';
  const counters = $('agent-turn-counters');
  const rt = agent.rt;
  if (!rt) {
    counters.textContent = '';
    counters.hidden = true;
    return;
  }
  const n = (x) => (Number.isSafeInteger(Number(x)) ? Number(x) : 0);
  const rounds = n(rt.rounds);
  const calls = n(rt.tool_calls);
  const repairs = n(rt.repairs);
  const line = t('agent_counters', { rounds: fmtNumber(rounds), calls: fmtNumber(calls), repairs: fmtNumber(repairs) });
  counters.textContent = rt.driver === 'local_model' && rt.model ? `${t('agent_local', { model: String(rt.model) })} — ${line}` : line;
  Object.assign(counters.dataset, { rounds: String(rounds), toolCalls: String(calls), repairs: String(repairs), driver: String(rt.driver ?? '') });
  counters.hidden = false;
}

function renderAgentError() {
  const box = clear($('agent-error'));
  if (!agent.pollError) {
    box.hidden = true;
    return;
  }
  const retry = h('button', { type: 'button', class: 'more', testid: 'agent-poll-retry', text: t('agent_poll_retry') });
  retry.addEventListener('click', () => agentKick());
  box.append(h('p', { text: t('agent_poll_stopped', { message: errorText(agent.pollError) }) }), retry);
  box.hidden = false;
}

// The runtime turn's summary once COMPLETED, or one short sentence with its
// error when it ended otherwise.
function renderSummary() {
  const box = $('agent-summary-box');
  const text = $('agent-summary');
  const refs = clear($('agent-summary-refs'));
  const rt = agent.rt;
  const status = rt ? String(rt.status ?? '') : '';
  if (status === 'COMPLETED' && rt.summary) {
    text.textContent = shown(rt.summary);
    text.dataset.status = status;
    text.className = 'agent-summary';
    for (const r of Array.isArray(rt.summary_refs) ? rt.summary_refs : []) refs.append(h('li', null, refLink(r, 'agent-summary-ref')));
    box.dataset.status = status;
    box.hidden = false;
  } else if (RT_END_ERRORS.has(status)) {
    text.textContent = t(`agent_end_${status}`, { message: runtimeDetail(String(rt.error ?? '')) });
    text.dataset.status = status;
    text.className = 'agent-summary error-box';
    box.dataset.status = status;
    box.hidden = false;
  } else {
    text.textContent = '';
    text.dataset.status = '';
    box.dataset.status = '';
    box.hidden = true;
  }
}

// The tool request's panel (SPEC X2): its module draws it; a resume goes
// through this module's runtime resume, its notes to that panel.
const toolActions = {
  wired: false,
  render: () => renderToolPanel(),
  resume: (note) => agentResume(note),
};
function renderToolPanel() {
  renderToolReview(agent.rt, toolActions);
}

function renderReview() {
  const box = $('agent-review');
  const details = clear($('agent-review-details'));
  const rv = agent.review;
  const rt = agent.rt;
  // A cancelled turn cannot resume: its request is not offered here.
  if (!rv || !rt || rv.id !== String(rt.research_request ?? '') || rt.status === 'CANCELLED') {
    box.hidden = true;
    box.dataset.requestId = '';
    box.dataset.requestStatus = '';
    return;
  }
  box.hidden = false;
  box.dataset.requestId = rv.id;
  const r = rv.request;
  const pending = Boolean(r) && r.status === 'PENDING';
  box.dataset.requestStatus = r ? String(r.status ?? '') : '';
  $('agent-grant-form').hidden = !pending;
  $('agent-grant-urls-box').hidden = !(pending && isRealWorkspace());
  $('agent-refuse-form').hidden = !pending;
  // A campaign that has not ended is waited for: the resumed turn reads its
  // outcome (the pages fetched), not a campaign half done.
  const waiting = Boolean(r) && CAMPAIGN_LIVE.has(campaignStatus(r));
  // A revoked or expired grant cannot resume the turn (M8): cancel it instead.
  const lapsed = Boolean(r) && r.status === 'GRANTED' && r.grant_active === false;
  const resumable = r && !pending && !lapsed && rt.status === 'AUTHORIZATION_REQUIRED' && !rt.lost;
  $('agent-resume').hidden = !(resumable && !waiting);
  // An active grant can be revoked at any time (SPEC E3, W4): its campaign
  // stops at once.
  $('agent-revoke').hidden = !(r && r.status === 'GRANTED' && r.grant_active === true && r.grant && r.grant.id);
  box.dataset.campaignStatus = r ? campaignStatus(r) : '';
  noteEl($('agent-review-status'), rv.note ?? null);
  if (rv.loading && !r) {
    details.append(h('p', { class: 'muted', text: t('agent_review_loading') }));
    return;
  }
  if (rv.error) details.append(h('p', { class: 'error-box', testid: 'agent-review-error', text: errorText(rv.error) }));
  if (!r) return;
  const exclusions = Array.isArray(r.exclusions) ? r.exclusions : [];
  const stale = rv.fingerprint && r.contract_fingerprint && rv.fingerprint !== r.contract_fingerprint;
  const c = r.campaign && typeof r.campaign === 'object' ? r.campaign : null;
  const rows = [
    [t('agent_review_status'), statusPill('req', r.status, 'agent-review-request-status'), 'agent-review-status-row'],
    [t('agent_review_question'), h('span', { class: 'agent-question-text', text: r.question ?? '' }), 'agent-review-question'],
    [t('agent_review_selection'), selectionList(r.selection, 'agent-review-selection'), 'agent-review-selection-row'],
    [t('agent_review_exclusions'), exclusions.length
      ? h('ul', { class: 'agent-exclusion-list' }, exclusions.map((x) => h('li', { text: x })))
      : h('span', { class: 'muted', text: t('agent_review_none') }), 'agent-review-exclusions'],
  ];
  if (r.candidates && typeof r.candidates === 'object') {
    rows.push([t('agent_review_candidates'), candidatesEl(r.candidates, pending), 'agent-review-candidates-row']);
  }
  rows.push(
    // What granting does: fetch pages through Tor — outbound and observable
    // by the sites asked (SPEC R6), whatever the preparing tool declared.
    [t('agent_review_outbound_risk'), h('span', null,
      riskPill('high', 'agent-review-outbound-risk', t('agent_review_outbound_title')), ' ',
      h('span', { class: 'muted small', text: t('agent_review_outbound_why') })), 'agent-review-outbound-row'],
    [t('agent_review_risk'), riskPill(rv.risk ?? agent.riskHint, 'agent-review-risk'), 'agent-review-risk-row'],
    [t('agent_review_requested_by'), h('span', { text: r.requested_by ?? '' }), 'agent-review-requested-by'],
    [t('agent_review_created'), timeEl(r.created_at), 'agent-review-created'],
  );
  if (stale) rows.push([t('agent_review_fingerprint'), h('span', { class: 'error-box agent-stale', testid: 'agent-review-stale', text: t('agent_review_fingerprint_stale') }), 'agent-review-stale-row']);
  if (r.decision_note) rows.push([t('agent_review_note'), h('span', { text: r.decision_note }), 'agent-review-decision-note']);
  const confirming = Boolean(rv.confirmation) && Boolean(c) && campaignStatus(r) === 'PENDING';
  if (c) rows.push([t('agent_review_campaign'), renderCampaign(c, { confirming: confirming && rv.confirmation.phase === 'PROPOSED' }), 'agent-review-campaign-row']);
  // Waiting for the human: where to confirm. Confirmed, the campaign waits
  // for Tor and its admission, within the grant's expiry (SPEC V8).
  if (confirming && rv.confirmation.phase === 'PROPOSED') details.append(confirmBox(rv.confirmation));
  else if (confirming && rv.confirmation.phase === 'APPROVED') {
    details.append(h('p', { class: 'muted small', testid: 'grant-confirmed-waiting', text: t('confirm_waiting') }));
  }
  details.append(dl(rows, 'agent-review-meta'));
  // The references an audit needs, out of the way (SPEC U5: the screen
  // speaks in titles).
  details.append(h('details', { class: 'agent-tech', testid: 'agent-review-tech' },
    h('summary', { text: t('agent_review_tech') }),
    dl([
      [t('agent_review_id'), h('code', { class: 'hash', text: r.id ?? rv.id }), 'agent-review-id'],
      [t('agent_review_fingerprint'), fingerprintEl(r.contract_fingerprint, 'agent-review-fingerprint'), 'agent-review-fingerprint-row'],
    ])));
  if (rv.fetchLog && c && !confirming) details.append(fetchLogBox(rv.fetchLog));
  if (resumable && waiting) details.append(h('p', { class: 'muted small', testid: 'agent-resume-wait', text: t('agent_resume_after_campaign') }));
}

// Where a REAL grant is confirmed (SPEC T2): egress's page on its own
// loopback port (a link, opened in a new tab), or the terminal. The server
// only relays what egress says; it cannot confirm anything itself.
function confirmBox(cf) {
  const box = h('div', { class: 'confirm-box', testid: 'grant-confirmation', 'data-phase': String(cf.phase ?? '') },
    h('p', { class: 'confirm-title', text: t('confirm_title') }),
    h('p', { class: 'small', text: t('confirm_why') }));
  const link = String(cf.confirm_url ?? '');
  if (/^http:\/\/(127\.0\.0\.1|localhost):[0-9]{1,5}\//.test(link)) {
    box.append(h('a', { class: 'button primary confirm-link', href: link, target: '_blank', rel: 'noopener noreferrer',
      testid: 'grant-confirm-link', text: t('confirm_open') }));
  }
  if (cf.available === false) box.append(h('p', { class: 'error-box', testid: 'grant-confirm-unavailable', text: t('confirm_unavailable') }));
  box.append(h('p', { class: 'small confirm-terminal' }, t('confirm_terminal'), ' ',
    h('code', { testid: 'grant-confirm-command', text: String(cf.command ?? '') })));
  return box;
}

// Egress's append-only log of a grant's fetches (T2), as egress keeps it:
// every request, refusals included, newest last.
function fetchLogBox(log) {
  if (log.available === false) {
    return h('p', { class: 'muted small', testid: 'egress-fetch-log-unavailable', text: t('flog_unavailable', { detail: String(log.detail ?? '') }) });
  }
  const entries = Array.isArray(log.entries) ? log.entries : [];
  const rows = entries.map((e) => h('tr', { testid: 'egress-fetch-log-entry', dataset: { status: String(e.status ?? '') } },
    h('td', null, timeEl(e.at)),
    h('td', null, h('code', { class: 'camp-url', text: String(e.url ?? '') }),
      e.reason ? h('span', { class: 'camp-reason small', text: String(e.reason) }) : null),
    h('td', null, statusPill('item', e.status, 'egress-fetch-log-status')),
    h('td', { class: 'num', text: e.http_status ? String(e.http_status) : t('res_none') }),
    h('td', { class: 'num', text: fmtNumber(countOf(e.bytes)) })));
  return h('details', { class: 'flog', testid: 'egress-fetch-log', dataset: { count: String(entries.length) } },
    h('summary', { class: 'small', text: t('flog_title', { n: fmtNumber(entries.length) }) }),
    rows.length ? resTable('egress-fetch-log-table', ['flog_col_time', 'flog_col_url', 'camp_col_status', 'camp_col_http', 'camp_col_bytes'], rows, [3, 4]) : null);
}

function isRealWorkspace() {
  return Boolean(host.state.workspace) && String(host.state.workspace.class ?? '') === 'REAL';
}

// "durée 12 s": from the campaign's start to its end, or to now while it runs.
function campaignElapsed(c) {
  const start = Date.parse(String(c.started_at ?? ''));
  if (!Number.isFinite(start)) return t('camp_not_started');
  const endAt = c.finished_at ? Date.parse(String(c.finished_at)) : Date.now();
  const end = Number.isFinite(endAt) ? endAt : Date.now();
  return t('camp_elapsed', { s: fmtNumber(Math.max(0, Math.round((end - start) / 1000))) });
}

// The progress bar: fetched, failed, remaining, as shares of the items —
// an SVG built element by element (no inline style).
function campaignBar(done, failed, rest) {
  const total = done + failed + rest;
  const label = t('camp_progress_label', { done: fmtNumber(done), failed: fmtNumber(failed), rest: fmtNumber(rest) });
  const bar = svgEl('svg', {
    class: 'camp-bar', viewBox: '0 0 100 6', preserveAspectRatio: 'none', role: 'img', 'aria-label': label,
    testid: 'campaign-bar', 'data-done': done, 'data-failed': failed, 'data-remaining': rest, 'data-total': total,
  }, svgEl('title', { text: label }));
  let x = 0;
  for (const [n, cls] of [[done, 'camp-bar-done'], [failed, 'camp-bar-failed'], [rest, 'camp-bar-rest']]) {
    if (n === 0) continue;
    const width = (100 * n) / total;
    bar.append(svgEl('rect', { x, y: 0, width, height: 6, class: cls }));
    x += width;
  }
  if (total === 0) bar.append(svgEl('rect', { x: 0, y: 0, width: 100, height: 6, class: 'camp-bar-rest' }));
  return bar;
}

// The campaign runner's detail lines (the store keeps them in English, as
// the agent reads them), worded in the UI's language when their shape is
// known; the stored line stays in the tooltip.
const CAMPAIGN_DETAILS = [
  [/^(\d+) of (\d+) pages fetched over Tor and stored as evidence, (\d+) not, (\d+) bytes$/,
    (m) => t('camp_detail_done', { done: fmtNumber(Number(m[1])), total: fmtNumber(Number(m[2])), failed: fmtNumber(Number(m[3])), bytes: fmtBytes(Number(m[4])) })],
  [/^no page fetched: every one of its (\d+) items failed or was refused$/, (m) => t('camp_detail_none', { n: fmtNumber(Number(m[1])) })],
  [/^grant revoked by (.+)$/, (m) => t('camp_detail_revoked', { who: m[1] })],
  [/^stopped by the resource governor: .*stopped under pressure after (\d+) samples/, (m) => t('camp_detail_pressure', { n: fmtNumber(Number(m[1])) })],
  [/^stopped by the resource governor: .*lease .* lapsed/, () => t('camp_detail_lapsed')],
  [/^stopped by the resource governor: /, () => t('camp_detail_governor')],
  [/^Tor unavailable: .*; nothing was fetched in clear$/, () => t('camp_detail_tor')],
  [/^refused by the governor: /, () => t('camp_detail_refused')],
  [/^synthetic campaign \(SPECIMEN\): (\d+) pages written, (\d+) over budget, no network$/,
    (m) => t('camp_detail_synthetic', { done: fmtNumber(Number(m[1])), over: fmtNumber(Number(m[2])) })],
  [/^synthetic campaign \(SPECIMEN\): no network$/, () => t('camp_detail_synthetic_admitted')],
];

function campaignDetail(raw) {
  // In either language, a sentence of the catalogue (SPEC U4); the
  // runner's own line in the tooltip.
  const known = CAMPAIGN_DETAILS.find(([re]) => re.test(raw)) ?? null;
  const text = known ? known[1](raw.match(known[0])) : raw;
  return h('p', { class: 'small muted camp-detail', testid: 'campaign-detail', title: known ? raw : null, dataset: { raw }, text });
}

// A campaign: its status, progress (bar, counts, bytes, time) and detail,
// then each address with its outcome and the evidence it became. URLs,
// reasons and details are text.
// `confirming`: a REAL campaign whose grant waits for the human's
// confirmation outside the server (T2): said so instead of « admission ».
function renderCampaign(c, { confirming = false } = {}) {
  const status = String(c.status ?? '');
  const total = countOf(c.items_total);
  const done = countOf(c.items_done);
  const failed = countOf(c.items_failed);
  const rest = Math.max(0, total - done - failed);
  const items = Array.isArray(c.items) ? c.items : [];
  const head = h('span', {
    class: 'camp-head', testid: 'agent-review-campaign',
    dataset: { status, done: String(done), failed: String(failed), total: String(total), synthetic: String(Boolean(c.synthetic)) },
  }, refLink(c.id), ' ', statusPill('camp', confirming ? 'CONFIRMING' : status, 'campaign-status'),
  c.synthetic ? h('span', { class: 'muted small', text: ` (${t('agent_review_synthetic')})` }) : null);
  const progress = h('p', {
    class: 'small camp-progress', testid: 'campaign-progress',
    text: t('camp_progress', {
      done: fmtNumber(done), failed: fmtNumber(failed), rest: fmtNumber(rest), total: fmtNumber(total),
      bytes: fmtBytes(countOf(c.bytes)), elapsed: campaignElapsed(c),
    }),
  });
  const detail = c.detail && !confirming ? campaignDetail(String(c.detail)) : null;
  const rows = items.map((it) => {
    const st = String(it.status ?? '');
    const ev = it.evidence ? String(it.evidence) : '';
    // The address, with the outcome's reason under it (both text).
    const where = h('td', null, h('code', { class: 'camp-url', testid: 'campaign-item-url', text: String(it.url ?? '') }),
      it.reason ? h('span', { class: 'camp-reason small', testid: 'campaign-item-reason', text: String(it.reason) }) : null);
    // The evidence it became: a link that selects it in the reader.
    const link = ev
      ? h('a', { href: hrefFor(ev, 'evidence'), class: 'agent-ref', testid: 'campaign-item-evidence', title: ev, dataset: { ref: ev, kind: 'evidence' }, text: t('camp_open_evidence') })
      : t('res_none');
    return h('tr', { testid: 'campaign-item', dataset: { position: String(it.position ?? ''), status: st } },
      h('td', { class: 'num', text: fmtNumber(countOf(it.position) + 1) }),
      where,
      h('td', null, statusPill('item', st, 'campaign-item-status')),
      h('td', { class: 'num', testid: 'campaign-item-http', text: it.http_status ? String(it.http_status) : t('res_none') }),
      h('td', { class: 'num', text: fmtNumber(countOf(it.bytes)) }),
      h('td', null, link));
  });
  // Scrolled sideways where it is narrower than its columns (the drawer),
  // never clipped (SPEC U7).
  const table = rows.length ? h('div', { class: 'table-wrap' }, resTable('campaign-items',
    ['camp_col_pos', 'camp_col_url', 'camp_col_status', 'camp_col_http', 'camp_col_bytes', 'camp_col_evidence'],
    rows, [0, 3, 4])) : null;
  return h('div', { class: 'camp', testid: 'campaign', dataset: { status, live: String(CAMPAIGN_LIVE.has(status)) } },
    head, campaignBar(done, failed, rest), progress, detail, table);
}

function renderPlan() {
  const box = $('agent-plan-box');
  const list = clear($('agent-plan'));
  const plan = agent.plan;
  const progress = $('agent-plan-progress');
  if (!plan) {
    box.hidden = true;
    return;
  }
  const total = plan.steps.length;
  const done = Math.max(0, Math.min(total, Number.isFinite(plan.done) ? plan.done : 0));
  progress.textContent = t('agent_plan_progress', { done: fmtNumber(done), total: fmtNumber(total) });
  progress.dataset.done = String(done);
  progress.dataset.total = String(total);
  plan.steps.forEach((step, i) => {
    const st = i < done ? 'done' : (i === done ? 'current' : 'todo');
    list.append(h('li', { class: `agent-step step-${st}`, testid: 'agent-plan-step', dataset: { state: st }, text: step }));
  });
  box.hidden = false;
}

function renderCards() {
  const box = $('agent-cards-box');
  const list = clear($('agent-cards'));
  if (agent.cards.length === 0) {
    box.hidden = true;
    return;
  }
  box.hidden = false;
  for (const card of agent.cards) {
    const entry = card.result_id ? agent.results.get(card.result_id) : null;
    const open = Boolean(entry && entry.open);
    const toggle = card.result_id
      ? h('button', { type: 'button', class: 'more agent-card-open', testid: 'agent-card-open', 'aria-expanded': String(open), text: t(open ? 'agent_card_close' : 'agent_card_open') })
      : null;
    if (toggle) toggle.addEventListener('click', () => toggleResult(card));
    list.append(h('li', { class: 'agent-card', testid: 'agent-card', dataset: { tool: card.tool_id, status: card.status, resultId: card.result_id ?? '' } },
      h('div', { class: 'agent-card-head' },
        h('code', { class: 'agent-card-tool', testid: 'agent-card-tool', text: card.tool_id }),
        statusPill('rs', card.status, 'agent-card-status'),
        toggle),
      card.observations.length
        ? h('ul', { class: 'agent-observations', testid: 'agent-card-observations' }, card.observations.map((o) => {
          // In the analyst's language (SPEC U4); the tool's own words in the title.
          const said = observationText(o);
          return h('li', { text: said.text, title: said.known ? o : undefined, dataset: { raw: o } });
        }))
        : null,
      card.diagnostic
        ? h('p', { class: 'small agent-diagnostic', testid: 'agent-card-diagnostic' },
          h('span', { class: 'muted', text: `${t('agent_card_diagnostic')} : ` }), observationText(card.diagnostic).text)
        : null,
      open ? renderResult(entry) : null));
  }
}

function artifactText(a) {
  const d = a ? a.data : null;
  if (a && a.kind === 'excerpt' && d && typeof d.text === 'string') return d.text;
  let s;
  try {
    s = JSON.stringify(d, null, 2) ?? '';
  } catch {
    s = String(d);
  }
  return s.length > AGENT_ARTIFACT_PREVIEW ? `${s.slice(0, AGENT_ARTIFACT_PREVIEW)}\n${t('agent_result_truncated')}` : s;
}

// A sandbox run (SPEC X1): how it ended, what it used, its inputs, its
// streams and the files it left — all untrusted, all shown as text. A file
// whose text the report carries can be kept as a piece of the open
// investigation: the analyst's decision, never the model's.
function renderSandboxRun(data, resultId) {
  const run = data?.run ?? {};
  const end = run.end ?? {};
  const endText = end.kind === 'exited' ? t('sbx_end_exited', { code: String(end.code) })
    : end.kind === 'signalled' ? t('sbx_end_signalled', { signal: String(end.signal) })
      : t('sbx_end_stopped', { reason: String(end.reason ?? '') });
  const stream = (s, testid) => {
    const text = String(s?.text ?? '');
    const cut = s?.truncated ? `\n${t('sbx_stream_cut', { bytes: fmtBytes(Number(s.bytes) || 0) })}` : '';
    return h('pre', { class: 'agent-artifact-text', testid, text: text ? text + cut : t('sbx_empty') });
  };
  const inputs = Array.isArray(data?.inputs) ? data.inputs : [];
  const files = Array.isArray(run.files) ? run.files : [];
  const box = h('div', { class: 'sandbox-run', testid: 'sandbox-run', dataset: { end: String(end.kind ?? '') } },
    dl([
      [t('sbx_program'), h('code', { text: String(run.program ?? '') })],
      [t('sbx_end'), h('span', { testid: 'sandbox-end', text: endText })],
      [t('sbx_usage'), t('sbx_usage_line', { ms: fmtNumber(Number(run.duration_ms) || 0), mem: fmtBytes(Number(run.peak_memory_bytes) || 0), cpu: fmtNumber(Number(run.cpu_ms) || 0) })],
      [t('sbx_inputs'), inputs.length
        ? h('ul', { class: 'sandbox-list small' }, inputs.map((i) => h('li', null, h('code', { text: String(i.path ?? '') }), ' ', refList([i.evidence_id]))))
        : t('sbx_empty')],
    ], 'sandbox-meta'),
    h('p', { class: 'small muted', text: t('sbx_stdout') }), stream(run.stdout, 'sandbox-stdout'),
    h('p', { class: 'small muted', text: t('sbx_stderr') }), stream(run.stderr, 'sandbox-stderr'));
  if (files.length) {
    box.append(h('p', { class: 'small muted', text: t('sbx_files') }),
      h('ul', { class: 'sandbox-list small', testid: 'sandbox-files' }, files.map((f) => h('li', { testid: 'sandbox-file' },
        h('details', null,
          h('summary', null, h('code', { text: String(f.name ?? '') }), ` · ${fmtBytes(Number(f.size) || 0)} · `, fingerprintEl(f.sha256)),
          h('pre', { class: 'agent-artifact-text', text: typeof f.text === 'string' ? f.text : t('sbx_no_text') })),
        typeof f.text === 'string' && resultId && host.state.investigationId ? keepFileControl(resultId, f) : null))));
  }
  if (Number(run.files_unlisted) > 0) box.append(h('p', { class: 'small muted', text: t('sbx_files_more', { n: fmtNumber(Number(run.files_unlisted)) }) }));
  return box;
}

// « Garder comme pièce »: the file becomes evidence, its provenance naming
// the run (POST …/keep-file; once — a second click finds the same piece).
function keepFileControl(resultId, file) {
  const out = h('span', { class: 'small sandbox-keep-out', testid: 'sandbox-keep-out', 'aria-live': 'polite' });
  const button = h('button', { type: 'button', class: 'secondary', testid: 'sandbox-keep', text: t('sbx_keep') });
  button.addEventListener('click', async () => {
    button.disabled = true;
    clear(out);
    try {
      const kept = await api(`/api/v1/agent-tools/results/${seg(resultId)}/keep-file`, {
        method: 'POST',
        body: { name: String(file.name ?? ''), investigation_id: String(host.state.investigationId) },
      });
      out.append(t(kept.created ? 'sbx_kept' : 'sbx_kept_before'), ' ', refList([kept.evidence_id], 'sandbox-kept'));
    } catch (err) {
      button.disabled = false;
      out.append(h('span', { class: 'error-text', testid: 'sandbox-keep-error', text: errorText(err) }));
    }
  });
  return h('div', { class: 'sandbox-keep' }, button, ' ', out);
}

function renderResult(entry) {
  const box = h('div', { class: 'agent-result', testid: 'agent-result' });
  if (entry.loading && !entry.data) {
    box.append(h('p', { class: 'muted small', text: t('agent_result_loading') }));
    return box;
  }
  if (entry.error) {
    box.append(h('p', { class: 'error-box', testid: 'agent-result-error', text: errorText(entry.error) }));
    return box;
  }
  const r = entry.data || {};
  box.dataset.resultId = String(r.result_id ?? '');
  box.append(dl([
    [t('agent_result_refs'), refList(r.object_refs, 'agent-result-refs')],
    [t('agent_result_provenance'), refList(r.provenance_refs, 'agent-result-provenance')],
    [t('agent_review_risk'), riskPill(r.risk_level)],
    [t('agent_review_fingerprint'), fingerprintEl(r.contract_fingerprint)],
  ], 'agent-result-meta'));
  for (const a of Array.isArray(r.artifacts) ? r.artifacts : []) {
    const untrusted = a && a.trust === 'UNTRUSTED_DATA';
    box.append(h('div', { class: 'agent-artifact', dataset: { kind: String(a?.kind ?? ''), trust: String(a?.trust ?? '') } },
      h('p', { class: 'small' },
        h('span', { class: 'pill', text: String(a?.kind ?? '?') }), ' ',
        h('span', { class: `pill ${untrusted ? 'trust-untrusted' : 'trust-labfy'}`, text: t(untrusted ? 'agent_result_untrusted' : 'agent_result_trusted') })),
      a?.kind === 'sandbox_output'
        ? renderSandboxRun(a.data, r.result_id)
        : h('pre', { class: 'agent-artifact-text', testid: 'agent-artifact-text', text: artifactText(a) })));
  }
  return box;
}

// The runtime's fixed lines in the chosen language (SPEC U4); tool ids,
// codes and reasons stay as written.
const RUNTIME_DETAILS = [
  [/^the demo agent made (\d+) calls through the gateway$/, (m) => t('rtd_demo_calls', { n: fmtNumber(Number(m[1])) })],
  [/^cancelled by the analyst$/, () => t('rtd_cancelled_by_analyst')],
  [/^the agent runtime closed$/, () => t('rtd_runtime_closed')],
  [/^interrupted by restart$/, () => t('rtd_interrupted')],
  [/^start$/, () => t('rtd_start')],
  [/^resume$/, () => t('rtd_resume')],
  [/^Demo$/, () => t('rtd_driver_demo')],
  [/^LocalModel$/, () => t('rtd_driver_local')],
  [/^refused: the resume summary is the gateway's$/, () => t('rtd_answer_refused')],
  [/^no answer: the resume summary is the gateway's$/, () => t('rtd_answer_none')],
  // `tool.result`: "<tool>: <ResultStatus>[ — diagnostic]" (the runtime
  // writes the status as its Rust name); the tool id and diagnostic stay.
  [/^([a-z][a-z0-9_.]*): (Completed|Failed|Denied|AuthorizationRequired|Unavailable|Cancelled)(?: — ([\s\S]*))?$/,
    (m) => t('rtd_tool_result', { tool: m[1], status: enumLabel('rs', screaming(m[2])) }) + (m[3] !== undefined ? ` — ${m[3]}` : '')],
  // A turn's end: "<RuntimeStatus>: <summary or reason>".
  [/^(Completed|Failed|AuthorizationRequired|Cancelled|ModelUnavailable|ModelProtocolError|BudgetExhausted): ([\s\S]*)$/,
    (m) => t('rtd_turn_end', { status: capitalise(enumLabel('turn', screaming(m[1]))), detail: m[2] })],
];

// `AuthorizationRequired` → `AUTHORIZATION_REQUIRED`.
function screaming(name) {
  return name.replace(/([a-z])([A-Z])/g, '$1_$2').toUpperCase();
}

function capitalise(s) {
  return s ? s[0].toUpperCase() + s.slice(1) : s;
}

function runtimeDetail(raw) {
  const known = RUNTIME_DETAILS.find(([re]) => re.test(raw));
  return known ? known[1](raw.match(known[0])) : raw;
}

function eventDetail(ev) {
  if (ev.source === 'runtime') return runtimeDetail(String(ev.detail ?? ''));
  const p = ev.payload && typeof ev.payload === 'object' ? ev.payload : {};
  switch (ev.type) {
    case 'agent.turn.started':
      return String(p.question ?? '');
    case 'agent.plan.updated':
      return t('agent_plan_progress', { done: fmtNumber(p.done ?? 0), total: fmtNumber(Array.isArray(p.steps) ? p.steps.length : 0) });
    case 'agent.tool.requested':
      return [p.tool_id, p.purpose].filter((x) => x !== null && x !== undefined && x !== '').map(String).join(' — ');
    case 'agent.tool.started':
      return String(p.tool_id ?? '');
    case 'agent.tool.completed':
      return `${String(p.tool_id ?? '')} → ${enumLabel('rs', p.status)}`;
    case 'agent.authorization.required':
      return [p.research_request, p.message].filter(Boolean).map(String).join(' — ');
    case 'agent.turn.completed':
      return String(p.summary ?? '');
    case 'agent.error':
      return runtimeDetail(String(p.message ?? ''));
    default:
      return '';
  }
}

function renderActivity() {
  const box = $('agent-activity-box');
  const list = clear($('agent-activity'));
  if (agent.activity.length === 0 && !agent.missed) {
    box.hidden = true;
    return;
  }
  box.hidden = false;
  // The runtime's and the gateway's events, by time (a stable sort keeps
  // each log's own order); newest first.
  const when = (ev) => {
    const ms = Date.parse(String(ev.timestamp ?? ''));
    return Number.isNaN(ms) ? 0 : ms;
  };
  const items = agent.activity.slice().sort((a, b) => when(a) - when(b));
  for (let i = items.length - 1; i >= 0; i--) {
    const ev = items[i];
    const type = String(ev.type ?? '');
    const source = ev.source === 'runtime' ? 'runtime' : 'gateway';
    const key = source === 'runtime' ? `evrt_${type}` : `ev_${type}`;
    list.append(h('li', { class: `agent-activity-item source-${source}`, testid: 'agent-activity-item', dataset: { type, source, sequence: String(ev.sequence ?? '') } },
      clockTime(ev.timestamp),
      h('span', { class: 'agent-activity-type', text: hasLabel(key) ? t(key) : type }),
      h('span', { class: 'agent-activity-detail', text: eventDetail(ev) })));
  }
  if (agent.missed) list.append(h('li', { class: 'muted small', testid: 'agent-missed', text: t('agent_missed') }));
}

// ----- start

// The drawer (SPEC U3): open or closed as the analyst last left it; on a
// first visit, open only where it fits beside the page.
const AGENT_OPEN_KEY = 'labfy.agent.open';
const AGENT_DOCK_MIN_WIDTH = 1600; // from here the drawer sits beside the page (app.css)

function agentDrawerRemembered() {
  try {
    const v = window.localStorage.getItem(AGENT_OPEN_KEY);
    if (v === '1' || v === '0') return v === '1';
  } catch {
    // Storage may be disabled: the first-visit rule.
  }
  return window.innerWidth >= AGENT_DOCK_MIN_WIDTH;
}

// `remember`: the analyst chose (the first-visit rule is not a choice).
function setAgentOpen(open, { focus = false, remember = true } = {}) {
  $('agent-dock').hidden = !open;
  $('agent-toggle').setAttribute('aria-expanded', String(open));
  document.body.classList.toggle('agent-open', open);
  if (remember) {
    try {
      window.localStorage.setItem(AGENT_OPEN_KEY, open ? '1' : '0');
    } catch {
      // Not remembered; the choice still holds on this page.
    }
  }
  if (focus) (open ? $('agent-question') : $('agent-toggle')).focus();
}

// What the page lends this panel (`bindAgent`): its state (the workspace
// and investigation shown), its router, and how it reads the address.
let host = null;

// The panel when the page could not start (no session, no server): both
// the catalog and the status say why.
export function agentBootFailed(err) {
  agent.catalogError = err;
  agent.statusError = err;
}

export function bindAgent(page) {
  host = page;
  setAgentOpen(agentDrawerRemembered(), { remember: false });
  $('agent-toggle').addEventListener('click', () => setAgentOpen($('agent-dock').hidden, { focus: true }));
  $('agent-close').addEventListener('click', () => setAgentOpen(false, { focus: true }));
  $('agent-dock').addEventListener('keydown', (ev) => {
    if (ev.key === 'Escape') setAgentOpen(false, { focus: true });
  });
  $('agent-form').addEventListener('submit', agentStart);
  $('agent-question').addEventListener('input', renderAgentForm);
  $('agent-cancel').addEventListener('click', agentCancel);
  $('agent-grant-form').addEventListener('submit', agentGrant);
  $('agent-refuse-form').addEventListener('submit', agentRefuse);
  $('agent-resume').addEventListener('click', () => agentResume());
  $('agent-revoke').addEventListener('click', agentRevoke);
}

// The runtime's status: the mode line. A local model that is not ready
// (loading, down) is asked again now and then, so the line follows it.
async function agentLoadStatus() {
  if (agent.statusTimer) {
    clearTimeout(agent.statusTimer);
    agent.statusTimer = null;
  }
  try {
    agent.status = await api('/api/v1/agent-runtime/status');
    agent.statusError = null;
  } catch (err) {
    agent.statusError = err;
  }
  renderAgentMode();
  const st = agent.status;
  if (!agent.statusError && st && st.driver === 'local_model' && st.ready !== true && !st.closed) {
    agent.statusTimer = setTimeout(agentLoadStatus, AGENT_STATUS_RETRY_MS);
  }
}

export async function agentBoot() {
  renderAgent();
  agentLoadStatus();
  try {
    agent.catalog = await api('/api/v1/agent-tools/catalog');
    agent.catalogError = null;
  } catch (err) {
    agent.catalogError = err;
  }
  // The latest runtime turn of this workspace, from the runtime's event log
  // (read to its end, bounded), so that a reload finds a pending
  // authorization again.
  try {
    const events = [];
    let cursor = 0;
    let missed = false;
    for (let i = 0; i < RT_BOOT_PAGES; i++) {
      const page = await api(`/api/v1/agent-runtime/events?cursor=${cursor}&limit=${RT_EVENTS_PAGE}`);
      const got = Array.isArray(page.events) ? page.events : [];
      events.push(...got);
      missed = missed || Boolean(page.missed);
      const next = Number(page.next_cursor);
      if (!Number.isSafeInteger(next) || next < cursor) break;
      cursor = next;
      if (got.length < RT_EVENTS_PAGE) break;
    }
    const last = events.length ? String(events[events.length - 1].turn_id ?? '') : '';
    if (last && !agent.rt && !agent.starting) {
      let rt = null;
      try {
        rt = await api(`/api/v1/agent-runtime/turns/${seg(last)}`);
      } catch (err) {
        // Evicted since: nothing to show.
        if (!(err instanceof ApiError && err.status === 404)) throw err;
      }
      if (rt && !agent.rt && !agent.starting) {
        agentSetRuntimeTurn(rt, 0);
        for (const ev of events) if (String(ev.turn_id ?? '') === last) rtIngest(ev);
        if (missed) agent.missed = true;
      }
    }
    if (cursor > agent.rtCursor) agent.rtCursor = cursor;
  } catch (err) {
    agent.pollError = err;
  }
  renderAgent();
  // One poll reads its gateway turn's plan and cards; it goes on while the
  // turn is live.
  if (agent.rt && !agent.pollError) agentPoll();
  else agentSchedule();
}

