// Resources panel (SPEC Q5): the Resource Governor's state, polled while the
// panel is open and the page visible, drawn as a live chart — an SVG built element by element,
// no library — with the reservations against usage, then the current
// figures, the governor's facts, the reservations, the local model and the
// admission log. Every string from the governor is text (textContent).
//
// The chart: one solid line per resource, its use as a share of its total
// (0–100 %): RAM used, swap used, VRAM and GTT used summed over the GPUs
// (only when a GPU reports them), the scratch space Labfy itself holds. A
// dashed line of the same colour, while some reservation holds that
// resource, is where use would stand if every reservation grew to what it
// reserved: (used + Σ max(0, reserved − measured peak)) / total — the whole
// reservation while nothing is measured. GTT has no ledger amount, so no
// dashes. A point is one governor sample (deduplicated on its time), so the
// chart keeps the governor's pace; a gap in the samples is a gap in the line.

import { api, errorText } from './api.js';
import { $, append, clear, cssToken, dl, h, section, svgEl } from './dom.js';
import { LOCALES, enumLabel, fmtBytes, fmtDecimal, fmtNumber, fmtPercent, lang, num, t, tn } from './i18n.js';

const RES_POLL_MS = 2000;
// The chart shows the last 30 minutes: the governor's history (a point every
// 5 s, kept by the governor for an hour: SPEC U6) up to the page's first
// poll, then each sample polled.
const RES_WINDOW_MS = 30 * 60 * 1000;
const RES_HISTORY_MAX = 1500; // points kept in memory (30 min of 2 s polls, and history)
const RES_GRID_STEP_MIN = 5; // a grid line every 5 minutes
const RES_STALE_MIN_MS = 10000; // a sample older than this (or 3 periods) is old
const RES_STALE_PERIODS = 3;
const RES_LOG_MAX = 100; // admission decisions shown, latest first
const RES_SERIES = ['ram', 'swap', 'vram', 'gtt', 'scratch'];
const RES_LEDGER = ['vram', 'ram', 'swap', 'scratch']; // the governor's `Amounts`
const CHART = { w: 720, h: 210, left: 46, right: 10, top: 10, bottom: 24 };

const res = {
  booted: false, // the session is up: polls may start
  timer: null,
  polling: false,
  points: [], // { at, values: { ram: { use, line } | null, … } }, oldest first
  history: null, // null: not asked yet; then the number of points the governor gave
  last: null, // { available: true, state } | { available: false, detail }
  error: null, // a failed poll: tracking stops until the analyst resumes it
  now: null, // while a drawing runs: the one time its freshness is judged at
};

function ratio(used, total) {
  if (used === null || total === null || total <= 0) return null;
  return Math.min(1, Math.max(0, used / total));
}

// A <time> for a Unix time in milliseconds.
function msTime(ms, withDate = false) {
  const d = new Date(Number(ms));
  if (Number.isNaN(d.getTime())) return h('time', { text: String(ms ?? '') });
  const opts = withDate ? { dateStyle: 'short', timeStyle: 'medium' } : { timeStyle: 'medium' };
  const iso = d.toISOString();
  return h('time', { datetime: iso, title: iso, text: new Intl.DateTimeFormat(LOCALES[lang], opts).format(d) });
}

// Non-zero amounts of a ledger `Amounts`, as text.
function amountsText(a) {
  if (!a || typeof a !== 'object') return t('res_none');
  const parts = RES_LEDGER.filter((k) => num(a[k])).map((k) => `${t(`res_amount_${k}`)} ${fmtBytes(a[k])}`);
  return parts.length ? parts.join(' · ') : t('res_none');
}

function resList(value) {
  return Array.isArray(value) ? value.filter((x) => x && typeof x === 'object') : [];
}

// Used / total / reservations of each charted resource in one state; a
// resource the sample does not report is null.
function resFigures(st) {
  const sample = st && st.sample && typeof st.sample === 'object' ? st.sample : null;
  const reserved = { vram: 0, ram: 0, swap: 0, scratch: 0 };
  const ahead = { vram: 0, ram: 0, swap: 0, scratch: 0 };
  for (const r of resList(st?.reservations)) {
    for (const k of RES_LEDGER) {
      const amount = num(r.reserved?.[k]) ?? 0;
      reserved[k] += amount;
      ahead[k] += Math.max(0, amount - (num(r.measured_peak?.[k]) ?? 0));
    }
  }
  const admissible = st?.admissible && typeof st.admissible === 'object' ? st.admissible : {};
  const fig = (key, used, total, extra) => (used === null || total === null || total <= 0 ? null : {
    key, used, total, reserved: reserved[key] ?? null, ahead: ahead[key] ?? 0, admissible: num(admissible[key]), ...extra,
  });
  const out = { ram: null, swap: null, vram: null, gtt: null, scratch: null };
  if (!sample) return out;
  const host = sample.host || {};
  out.ram = fig('ram', num(host.ram_used), num(host.ram_total));
  out.swap = fig('swap', num(host.swap_used), num(host.swap_total));
  let vu = null; let vt = null; let gu = null; let gt = null;
  for (const g of resList(sample.gpus)) {
    if (num(g.vram_used) !== null && num(g.vram_total) !== null) {
      vu = (vu ?? 0) + num(g.vram_used);
      vt = (vt ?? 0) + num(g.vram_total);
    }
    if (num(g.gtt_used) !== null && num(g.gtt_total) !== null) {
      gu = (gu ?? 0) + num(g.gtt_used);
      gt = (gt ?? 0) + num(g.gtt_total);
    }
  }
  out.vram = fig('vram', vu, vt);
  out.gtt = fig('gtt', gu, gt, { reserved: null, ahead: 0, admissible: null });
  const sc = sample.scratch && typeof sample.scratch === 'object' ? sample.scratch : null;
  if (sc) out.scratch = fig('scratch', num(sc.labfy_used), num(sc.total), { free: num(sc.free), path: String(sc.path ?? '') });
  return out;
}

function resPointValues(st) {
  const figures = resFigures(st);
  const values = {};
  for (const k of RES_SERIES) {
    const f = figures[k];
    values[k] = f ? {
      use: ratio(f.used, f.total),
      line: f.reserved ? ratio(f.used + f.ahead, f.total) : null,
    } : null;
  }
  return values;
}

function resPeriod() {
  const p = num(res.last?.state?.sample_period_ms);
  return p && p > 0 ? p : RES_POLL_MS;
}

// How long without a sample before a line breaks or a sample is called old.
function resStaleMs() {
  return Math.max(RES_STALE_MIN_MS, RES_STALE_PERIODS * Math.max(resPeriod(), RES_POLL_MS));
}

// ----- polling

function resIngest(data) {
  if (data && data.available === true && data.state && typeof data.state === 'object') {
    res.last = { available: true, state: data.state };
    const sample = data.state.sample;
    const at = num(sample?.at_ms);
    if (sample && typeof sample === 'object' && at !== null) {
      const prev = res.points[res.points.length - 1];
      if (prev && at < prev.at) res.points = []; // the clock went back: start over
      if (!prev || at !== prev.at) {
        res.points.push({ at, values: resPointValues(data.state) });
        if (res.points.length > RES_HISTORY_MAX) res.points.splice(0, res.points.length - RES_HISTORY_MAX);
      }
    }
  } else {
    res.last = { available: false, detail: String(data?.detail ?? '') };
  }
}

// The governor's history points, as the chart's points: before the first
// polled one, never replacing it. The dashed line shows where some of a
// reservation is still ahead of its run's use.
function resSeed(data) {
  const points = data && data.available === true ? resList(data.history?.points) : [];
  const first = res.points.length ? res.points[0].at : Infinity;
  const seeded = [];
  for (const p of points) {
    const at = num(p.at_ms);
    if (at === null || at >= first) continue;
    const values = {};
    for (const key of RES_SERIES) {
      const g = p[key];
      const used = num(g?.used);
      const total = num(g?.total);
      if (used === null || total === null || total <= 0) {
        values[key] = null;
        continue;
      }
      const ahead = key === 'gtt' ? 0 : (num(p.ahead?.[key]) ?? 0);
      values[key] = { use: ratio(used, total), line: ahead > 0 ? ratio(used + ahead, total) : null };
    }
    seeded.push({ at, values });
  }
  res.history = seeded.length;
  res.points = [...seeded, ...res.points].slice(-RES_HISTORY_MAX);
}

function resSetPollingAttr() {
  $('resources-panel').dataset.polling = String(Boolean(res.timer) || res.polling);
}

// Polling runs only while someone can see it: the panel open, the page visible.
function resWatched() {
  return res.booted && $('resources-panel').open && !document.hidden;
}

function resSchedule() {
  if (!res.timer && !res.polling && !res.error && resWatched()) {
    res.timer = setTimeout(resPoll, RES_POLL_MS);
  }
  resSetPollingAttr();
}

function resStop() {
  if (res.timer) {
    clearTimeout(res.timer);
    res.timer = null;
  }
  resSetPollingAttr();
}

function resKick() {
  resStop();
  res.error = null;
  if (!res.polling) resPoll();
}

async function resPoll() {
  res.timer = null;
  if (res.polling || !resWatched()) {
    resSetPollingAttr();
    return;
  }
  res.polling = true;
  resSetPollingAttr();
  // Once per page: the governor's past, so the chart does not start empty.
  if (res.history === null) {
    res.history = 0;
    try {
      resSeed(await api('/api/v1/resources/history'));
    } catch {
      // No past: the chart starts with the first poll, as before.
    }
  }
  let data;
  try {
    data = await api('/api/v1/resources');
  } catch (err) {
    // A lost session or a stopped server: say so and stop, like the agent
    // panel; an absent governor is not an error (`available: false`).
    res.polling = false;
    res.error = err;
    resSetPollingAttr();
    renderResources();
    return;
  }
  res.polling = false;
  resIngest(data);
  renderResources();
  resSchedule();
}

// ----- rendering

// Whether the latest sample is fresh — judged once per drawing (`res.now`),
// so the status line, the chart and the figures never disagree about it.
function resFresh() {
  if (res.error || !res.last || !res.last.available) return false;
  const at = num(res.last.state?.sample?.at_ms);
  return at !== null && (res.now ?? Date.now()) - at <= resStaleMs();
}

function renderResChart() {
  const box = clear($('resources-chart'));
  const { w, h: height, left, right, top, bottom } = CHART;
  const pw = w - left - right;
  const ph = height - top - bottom;
  const now = Date.now();
  const from = now - RES_WINDOW_MS;
  const x = (at) => left + ((at - from) / RES_WINDOW_MS) * pw;
  const y = (v) => top + (1 - v) * ph;
  const fresh = resFresh();
  const minutes = Math.round(RES_WINDOW_MS / 60000);
  const chart = svgEl('svg', {
    class: `res-svg${fresh ? '' : ' is-stale'}`,
    viewBox: `0 0 ${w} ${height}`,
    role: 'img',
    'aria-label': t('res_chart_label', { n: minutes }),
    testid: 'resources-svg',
  }, svgEl('title', { text: t('res_chart_label', { n: minutes }) }));
  const grid = svgEl('g', { class: 'res-grid' });
  for (const v of [0, 0.25, 0.5, 0.75, 1]) {
    grid.append(svgEl('line', { x1: left, x2: w - right, y1: y(v), y2: y(v), class: v === 0 ? 'res-axis' : 'res-gridline' }),
      svgEl('text', { x: left - 6, y: y(v) + 4, 'text-anchor': 'end', class: 'res-label', text: fmtPercent(v) }));
  }
  for (let m = minutes; m >= 0; m -= RES_GRID_STEP_MIN) {
    const at = now - m * 60000;
    grid.append(svgEl('line', { x1: x(at), x2: x(at), y1: top, y2: top + ph, class: 'res-gridline' }),
      svgEl('text', {
        x: x(at), y: height - 6, 'text-anchor': m === 0 ? 'end' : (m === minutes ? 'start' : 'middle'),
        class: 'res-label', text: m === 0 ? t('res_now') : t('res_ago_min', { n: m }),
      }));
  }
  chart.append(grid);
  const visible = res.points.filter((p) => p.at >= from && p.at <= now + RES_POLL_MS);
  const breakMs = resStaleMs();
  let drawn = 0;
  for (const key of RES_SERIES) {
    for (const [field, cls] of [['line', 'res-reserved'], ['use', 'res-line']]) {
      // Runs of consecutive points that have a value and no gap between them.
      const runs = [];
      let run = [];
      let prevAt = null;
      for (const p of visible) {
        const v = p.values[key] ? p.values[key][field] : null;
        if (v === null || v === undefined || (prevAt !== null && p.at - prevAt > breakMs)) {
          if (run.length) runs.push(run);
          run = [];
        }
        if (v !== null && v !== undefined) run.push([x(Math.min(p.at, now)), y(v)]);
        prevAt = p.at;
      }
      if (run.length) runs.push(run);
      const g = svgEl('g', { class: `${cls} res-${key}`, 'data-series': key, 'data-kind': field });
      for (const r of runs) {
        if (r.length === 1) g.append(svgEl('circle', { cx: r[0][0], cy: r[0][1], r: 2 }));
        else g.append(svgEl('polyline', { points: r.map(([px, py]) => `${px.toFixed(1)},${py.toFixed(1)}`).join(' ') }));
      }
      if (runs.length) {
        chart.append(g);
        if (field === 'use') drawn += 1;
      }
    }
  }
  box.dataset.points = String(res.points.length);
  box.dataset.history = String(res.history ?? 0);
  box.dataset.oldest = res.points.length ? String(res.points[0].at) : '';
  box.dataset.visiblePoints = String(visible.length);
  box.dataset.series = String(drawn);
  box.dataset.fresh = String(fresh);
  box.append(chart);
}

function renderResLegend() {
  const list = clear($('resources-legend'));
  // The latest shares only while they are fresh: a past value is not shown as current.
  const last = resFresh() ? res.points[res.points.length - 1] : null;
  for (const key of RES_SERIES) {
    if (!res.points.some((p) => p.values[key])) continue;
    const v = last && last.values[key] ? last.values[key].use : null;
    list.append(h('li', { class: 'res-legend-item', testid: 'resources-legend-item', dataset: { series: key } },
      h('span', { class: `res-swatch res-${key}` }),
      h('span', { text: t(`res_series_${key}`) }),
      v === null ? null : h('span', { class: 'muted', text: fmtPercent(v, 1) })));
  }
  if (res.points.some((p) => RES_SERIES.some((k) => p.values[k] && p.values[k].line !== null))) {
    list.append(h('li', { class: 'res-legend-item', dataset: { series: 'reserved' } },
      h('span', { class: 'res-swatch res-swatch-dashed' }), h('span', { class: 'muted', text: t('res_legend_reserved') })));
  }
  if (res.points.length && !resFresh()) {
    list.append(h('li', { class: 'res-legend-item muted', dataset: { series: 'stale' } },
      h('span', { class: 'res-swatch res-swatch-stale' }), h('span', { text: t('res_legend_stale') })));
  }
}

// `numeric`: indexes of the columns aligned right.
export function resTable(testid, headKeys, rows, numeric = []) {
  return h('table', { class: 'res-table', testid },
    h('thead', null, h('tr', null, ...headKeys.map((k, i) => h('th', { scope: 'col', class: numeric.includes(i) ? 'num' : null, text: t(k) })))),
    h('tbody', null, ...rows));
}

function renderResFigures(st) {
  const figures = resFigures(st);
  const rows = [];
  for (const key of RES_SERIES) {
    const f = figures[key];
    if (!f) continue;
    const name = key === 'scratch' && f.path
      ? h('td', null, t('res_series_scratch'), h('div', { class: 'muted small', text: t('res_scratch_free', { path: f.path, free: fmtBytes(f.free) }) }))
      : h('td', { text: t(`res_series_${key}`) });
    rows.push(h('tr', { testid: `res-row-${key}`, dataset: { used: String(f.used), total: String(f.total) } },
      name,
      h('td', { class: 'num', text: fmtBytes(f.used) }),
      h('td', { class: 'num', testid: `res-total-${key}`, text: fmtBytes(f.total) }),
      h('td', { class: 'num', text: fmtPercent(ratio(f.used, f.total), 1) }),
      h('td', { class: 'num', text: f.reserved === null ? t('res_none') : fmtBytes(f.reserved) }),
      h('td', { class: 'num', text: f.admissible === null ? t('res_none') : fmtBytes(f.admissible) })));
  }
  if (!figures.swap && num(st?.sample?.host?.swap_total) === 0) {
    rows.splice(figures.ram ? 1 : 0, 0, h('tr', { testid: 'res-row-swap', dataset: { used: '0', total: '0' } },
      h('td', { text: t('res_series_swap') }), h('td', { class: 'muted', colspan: '5', text: t('res_no_swap') })));
  }
  const psi = st?.sample?.host?.psi;
  return [
    resTable('resources-figures', ['res_col_resource', 'res_col_used', 'res_col_total', 'res_col_share', 'res_col_reserved', 'res_col_admissible'], rows, [1, 2, 3, 4, 5]),
    h('p', { class: 'muted small', testid: 'resources-psi', text: psi && typeof psi === 'object'
      ? t('res_psi', { some: `${fmtDecimal(psi.some_avg10, 2)} %`, full: `${fmtDecimal(psi.full_avg10, 2)} %` })
      : t('res_psi_none') }),
  ];
}

function renderResGpus(st) {
  const gpus = resList(st?.sample?.gpus);
  if (!gpus.length) return h('p', { class: 'muted small', testid: 'resources-no-gpu', text: t('res_no_gpu') });
  const pair = (used, total) => `${fmtBytes(used)} / ${fmtBytes(total)}`;
  return resTable('resources-gpus', ['res_col_gpu', 'res_col_vram', 'res_col_gtt', 'res_col_busy', 'res_col_temp', 'res_col_power', 'res_col_source'],
    gpus.map((g) => {
      const temp = num(g.temperature_mc);
      const power = num(g.power_uw);
      const busy = num(g.busy_percent);
      return h('tr', { testid: 'res-gpu', dataset: { gpu: String(g.id ?? ''), vendor: String(g.vendor ?? '') } },
        h('td', null, h('strong', { text: String(g.id ?? '?') }), ' ', h('span', { class: 'muted small', text: `${String(g.vendor ?? '')} · ${String(g.name ?? '')}` }),
          g.uma ? h('div', { class: 'muted small', text: t('res_uma') }) : null),
        h('td', { class: 'num', text: pair(g.vram_used, g.vram_total) }),
        h('td', { class: 'num', text: pair(g.gtt_used, g.gtt_total) }),
        h('td', { class: 'num', text: busy === null ? t('res_none') : fmtPercent(busy / 100) }),
        h('td', { class: 'num', text: temp === null ? t('res_none') : `${fmtDecimal(temp / 1000)} °C` }),
        h('td', { class: 'num', text: power === null ? t('res_none') : `${fmtDecimal(power / 1e6)} W` }),
        h('td', { class: 'small', text: String(g.source ?? '') }));
    }), [1, 2, 3, 4, 5]);
}

function renderResFacts(st) {
  const facts = Array.isArray(st?.sample?.facts) ? st.sample.facts : [];
  if (!facts.length) return h('p', { class: 'muted small', testid: 'resources-facts', text: t('res_no_facts') });
  return h('ul', { class: 'res-facts', testid: 'resources-facts' },
    ...facts.map((f) => h('li', { testid: 'resources-fact', text: String(f) })));
}

function renderResReservations(st) {
  const list = resList(st?.reservations);
  if (!list.length) return h('p', { class: 'muted small', testid: 'resources-reservations', text: t('res_no_reservations') });
  return resTable('resources-reservations', ['res_col_owner', 'res_col_kind', 'res_col_reserved', 'res_col_peak', 'res_col_priority', 'res_col_lease'],
    list.map((r) => h('tr', { testid: 'res-reservation', dataset: { id: String(r.id ?? ''), kind: String(r.kind ?? '') } },
      h('td', null, h('code', { text: String(r.owner ?? '') })),
      h('td', { text: enumLabel('res_kind', r.kind) }),
      h('td', { text: num(r.cores) > 0 ? `${amountsText(r.reserved)} · ${tn('res_cores', num(r.cores))}` : amountsText(r.reserved) }),
      h('td', { text: r.measured_peak ? amountsText(r.measured_peak) : t('res_none') }),
      h('td', { class: 'num', text: fmtNumber(r.priority) }),
      h('td', null, num(r.lease_expires_ms) === null ? t('res_lease_process') : msTime(r.lease_expires_ms, true)))), [4]);
}

function renderResModel(st) {
  const m = st?.model;
  if (!m || typeof m !== 'object') return null;
  const e = m.estimate && typeof m.estimate === 'object' ? m.estimate : {};
  return section('res_model', 'resources-model', dl([
    [t('res_model_state'), h('span', { class: `pill status-${cssToken(m.state)}`, text: String(m.state ?? '') }), 'resources-model-state'],
    [t('res_model_endpoint'), m.endpoint ? h('code', { text: String(m.endpoint) }) : t('res_none')],
    [t('res_model_estimate'), [amountsText(e.reserved), h('div', { class: 'muted small', text: t('res_model_estimate_parts', {
      weights: fmtBytes(e.weights), kv: fmtBytes(e.kv_cache), overhead: fmtBytes(e.overhead), ctx: fmtNumber(e.context),
    }) })]],
    [t('res_model_peak'), fmtBytes(m.peak_memory)],
    [t('res_model_restarts'), fmtNumber(m.restarts ?? 0)],
    [t('res_model_detail'), String(m.detail ?? '')],
  ]));
}

function renderResLog(st) {
  const decisions = resList(st?.decisions).slice(-RES_LOG_MAX).reverse();
  if (!decisions.length) return h('p', { class: 'muted small', testid: 'resources-log', text: t('res_no_decisions') });
  return resTable('resources-log', ['res_col_time', 'res_col_owner', 'res_col_decision', 'res_col_asked', 'res_col_reason', 'res_col_blocked'],
    decisions.map((d) => {
      // What happened, in words that match it (SPEC U6): a reservation
      // released at the end of its run is not a refusal.
      const outcome = String(d.outcome ?? '');
      const blocked = Array.isArray(d.blocked_by) ? d.blocked_by.map((b) => String(b)) : [];
      return h('tr', { testid: 'res-decision', dataset: { outcome } },
        h('td', null, msTime(d.at_ms)),
        h('td', null, h('code', { text: String(d.owner ?? '') }), ' ', h('span', { class: 'muted small', text: enumLabel('res_kind', d.kind) })),
        h('td', null, h('span', { class: `pill res-outcome-${cssToken(outcome)}`, testid: 'res-outcome', text: enumLabel('res_outcome', outcome) })),
        h('td', { class: 'small', text: amountsText(d.asked) }),
        h('td', { text: String(d.reason ?? '') }),
        h('td', { class: 'small', text: blocked.length ? blocked.join(', ') : t('res_none') }));
    }));
}

function renderResStatus() {
  const el = clear($('resources-status'));
  el.className = 'small res-status';
  if (res.error) {
    el.dataset.state = 'error';
    el.classList.add('error-box');
    const retry = h('button', { type: 'button', class: 'more', testid: 'resources-retry', text: t('res_poll_retry') });
    retry.addEventListener('click', resKick);
    el.append(h('p', { text: t('res_poll_stopped', { message: errorText(res.error) }) }), retry);
  } else if (!res.last) {
    el.dataset.state = 'loading';
    el.classList.add('muted');
    el.textContent = t('loading');
  } else if (!res.last.available) {
    el.dataset.state = 'unavailable';
    el.classList.add('muted');
    el.textContent = t('res_unavailable', { detail: res.last.detail });
  } else {
    const st = res.last.state;
    const at = num(st.sample?.at_ms);
    if (at === null) {
      el.dataset.state = 'no-sample';
      el.classList.add('muted');
      el.textContent = t('res_no_sample');
    } else if (!resFresh()) {
      el.dataset.state = 'old';
      el.classList.add('error-box');
      el.textContent = t('res_sample_old', { age: fmtNumber(Math.round(((res.now ?? Date.now()) - at) / 1000)) });
    } else {
      el.dataset.state = 'fresh';
      el.classList.add('muted');
      append(el, resSampleLine(at));
    }
  }
}

// "Échantillon de <time> · période 2 s · …" with the time as a <time>.
function resSampleLine(at) {
  // `{time}` is left in place by t() (not in vars), then swapped for the element.
  const text = t('res_sample', { period: fmtDecimal(resPeriod() / 1000), n: fmtNumber(res.points.length) });
  const [before, after = ''] = text.split('{time}');
  return [before, msTime(at), after];
}

export function renderResources() {
  const panel = $('resources-panel');
  panel.dataset.available = res.last ? String(Boolean(res.last.available)) : '';
  if (!panel.open) return; // drawn when opened; the history is kept meanwhile
  res.now = Date.now();
  try {
    drawResources();
  } finally {
    res.now = null;
  }
}

function drawResources() {
  renderResStatus();
  renderResChart();
  renderResLegend();
  const details = clear($('resources-details'));
  const st = res.last && res.last.available ? res.last.state : null;
  details.dataset.fresh = String(resFresh());
  if (!st) return;
  const pressure = st.pressure === null || st.pressure === undefined ? null : String(st.pressure);
  // SPEC D1/D2: a governor that cannot confine says so here, never a silent
  // demo-only appliance. Its reason is the governor's own words.
  const conf = st.confinement && typeof st.confinement === 'object' ? st.confinement : null;
  append(details, [
    pressure ? h('p', { class: 'error-box', testid: 'resources-pressure', role: 'alert', text: t('res_pressure', { reason: pressure }) }) : null,
    conf && conf.ready === false ? h('div', { class: 'error-box', testid: 'resources-confinement', role: 'alert' },
      h('p', { text: t('res_no_confinement') }),
      h('p', null, h('code', { text: String(conf.detail ?? '') })),
      h('p', { class: 'small', text: t('res_no_confinement_hint') })) : null,
    section('res_figures', 'resources-figures-panel', renderResFigures(st)),
    section('res_gpus', 'resources-gpus-panel', renderResGpus(st)),
    section('res_facts', 'resources-facts-panel', renderResFacts(st)),
    section('res_reservations', 'resources-reservations-panel', renderResReservations(st)),
    renderResModel(st),
    section('res_log', 'resources-log-panel', renderResLog(st)),
  ]);
}

export function bindResources() {
  $('resources-panel').addEventListener('toggle', () => {
    // Opening asks at once (and retries after an error); closing stops.
    if (resWatched()) resKick();
    else resStop();
    renderResources();
  });
  document.addEventListener('visibilitychange', () => {
    if (!resWatched()) resStop();
    else if (!res.error) resKick();
  });
}

export function resBoot() {
  res.booted = true;
  renderResources();
  if (resWatched()) resKick();
}

