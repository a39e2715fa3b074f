// The egress badge of the top bar (SPEC E1, E6, U6): whether Tor is ready,
// its bootstrap in the analyst's language, the fetches in flight; polled
// while the page is visible. A campaign that runs keeps the agent panel's
// review polling too.

import { campaignSchedule } from './agent.js';
import { api, errorText } from './api.js';
import { $, countOf, shown } from './dom.js';
import { fmtNumber, lang, t } from './i18n.js';

// arti's bootstrap phase (`BootstrapStatus`, English: `15%: connecting
// successfully; directory is fetching a consensus`) in the chosen language
// (SPEC U4): the percentage it repeats goes, each known fragment is
// translated, an unknown one stays as arti wrote it.
const TOR_PHASES_FR = [
  [/^handshaking with Tor relays$/, 'négociation avec les relais Tor'],
  [/^connecting successfully$/, 'connexion établie'],
  [/^connecting to the internet$/, 'connexion à Internet'],
  [/^not connected to the internet$/, 'pas de connexion à Internet'],
  [/^directory is fetching a consensus$/, 'l’annuaire télécharge un consensus'],
  [/^directory is fetching authority certificates \((\d+)\/(\d+)\)$/, 'l’annuaire télécharge les certificats des autorités ($1/$2)'],
  [/^directory is fetching microdescriptors \((\d+)\/(\d+)\)$/, 'l’annuaire télécharge les microdescripteurs ($1/$2)'],
  [/^directory is usable$/, 'l’annuaire est utilisable'],
];

function torPhase(phase) {
  const raw = String(phase ?? '').replace(/^\d+%:\s*/, '');
  if (lang !== 'fr') return raw;
  return raw.split(/;\s*/).map((part) => {
    const hit = TOR_PHASES_FR.find(([re]) => re.test(part));
    return hit ? part.replace(hit[0], hit[1]) : part;
  }).join(' ; ');
}

// Tor status line (SPEC E1): egress's bootstrap progress and phase, in the
// header, from GET /api/v1/egress — polled while the page is visible, more
// often while Tor is not ready. Egress's phase, errors and reasons are text.

const EGRESS_POLL_MS = 3000;
const EGRESS_POLL_READY_MS = 15000;

const eg = {
  booted: false,
  timer: null,
  polling: false,
  last: null, // { available: true, ready, bootstrap_percent, phase, … } | { available: false, detail }
  error: null, // a failed poll: polling stops until the page is shown again
};

function egressSchedule() {
  if (eg.timer || eg.polling || eg.error || !eg.booted || document.hidden) return;
  const ready = Boolean(eg.last && eg.last.available && eg.last.ready === true);
  eg.timer = setTimeout(egressPoll, ready ? EGRESS_POLL_READY_MS : EGRESS_POLL_MS);
}

function egressStop() {
  if (eg.timer) {
    clearTimeout(eg.timer);
    eg.timer = null;
  }
}

async function egressPoll() {
  eg.timer = null;
  if (eg.polling) return;
  eg.polling = true;
  try {
    eg.last = await api('/api/v1/egress');
    eg.error = null;
  } catch (err) {
    // A lost session or a stopped server: say so and stop (no retry loop
    // behind the analyst's back); showing the page again asks once more.
    eg.error = err;
  }
  eg.polling = false;
  renderEgress();
  egressSchedule();
}

export function renderEgress() {
  const el = $('egress-status');
  if (!eg.booted) {
    el.hidden = true;
    return;
  }
  const e = eg.last;
  let st;
  let text;
  let title = '';
  if (eg.error) {
    st = 'error';
    text = t('egress_poll_error', { message: errorText(eg.error) });
  } else if (!e) {
    st = 'loading';
    text = t('egress_loading');
  } else if (e.available !== true) {
    st = 'unavailable';
    text = t('egress_unavailable', { reason: String(e.detail ?? '') });
  } else {
    const c = e.counts && typeof e.counts === 'object' ? e.counts : {};
    title = t('egress_title', {
      n: fmtNumber(countOf(e.in_flight)), fetched: fmtNumber(countOf(c.fetched)), refused: fmtNumber(countOf(c.refused)),
      unavailable: fmtNumber(countOf(c.unavailable)), failed: fmtNumber(countOf(c.failed)), stopped: fmtNumber(countOf(c.stopped)),
    });
    if (e.ready === true) {
      st = 'ready';
      text = t('egress_ready');
    } else {
      st = 'bootstrapping';
      text = t('egress_bootstrap', { p: fmtNumber(Math.min(100, countOf(e.bootstrap_percent))), phase: torPhase(e.phase) });
      // arti's error is its own English text: named in the badge, shown
      // whole in its tooltip (SPEC U4).
      if (e.last_error) {
        text = `${text} · ${t('egress_error_reported')}`;
        title = `${title}\n${t('egress_arti_error', { error: String(e.last_error) })}`;
      }
    }
  }
  el.textContent = shown(text);
  el.title = shown(title);
  el.className = `badge egress-badge egress-${st}`;
  el.dataset.state = st;
  el.dataset.percent = e && e.available === true ? String(Math.min(100, countOf(e.bootstrap_percent))) : '';
  el.hidden = false;
}

export function bindEgress() {
  document.addEventListener('visibilitychange', () => {
    if (document.hidden) {
      egressStop();
    } else if (eg.booted && !eg.timer && !eg.polling) {
      eg.error = null;
      egressPoll();
    }
    if (!document.hidden) campaignSchedule();
  });
}

export function egressBoot() {
  eg.booted = true;
  renderEgress();
  egressPoll();
}

