//! The ledger of reservations and admission (SPEC Q2, Q4).
//!
//! Every run the governor admits holds a reservation: bytes of GPU memory,
//! RAM, swap and scratch, a priority, and either a lease that lapses or the
//! life of a process. An ask is admitted only if, for every resource,
//!
//! ```text
//! asked ≤ free − headroom − Σ outstanding
//! ```
//!
//! where `free` comes from the latest sample (RAM *available*, swap free, GPU
//! memory free summed over GPUs — VRAM, plus GTT on a UMA APU — scratch free)
//! and `outstanding` is, per reservation, what it reserved and does not use
//! yet (`reserved − measured now`, at least 0): a model that has loaded its
//! weights already shows in `free`, and must not be counted twice.
//!
//! The check and the insertion happen under one lock, so two asks can never
//! both take the last headroom. No sample, a stale sample, or memory pressure
//! (swap use or PSI over a threshold) refuse everything: the governor never
//! admits on a guess it could not make. Every decision is logged with its
//! reason and, on refusal, `blocked_by`: the owners of the reservations that
//! hold the missing resource, `usage outside Labfy`, `headroom`, `pressure`.

use std::collections::VecDeque;
use std::sync::Mutex;

use labfy_ipc::messages::governor::{
    Amounts, Decision, DecisionOutcome, Gauge, GpuSample, History, HistoryPoint, Refusal, Reservation, ReservationKind,
    Sample,
};

/// Decisions kept for the log (oldest dropped first).
pub const MAX_DECISIONS: usize = 64;
/// Reservations held at once (asks past it are refused).
pub const MAX_RESERVATIONS: usize = 64;
/// Longest owner label kept, in characters.
pub const MAX_OWNER_CHARS: usize = 120;
/// A sample older than this many sampling periods is stale: no admission.
pub const STALE_PERIODS: u64 = 5;

const MIB: u64 = 1024 * 1024;

/// Bytes kept free per resource, and the pressure thresholds.
#[derive(Debug, Clone, PartialEq)]
pub struct LedgerConfig {
    /// Never handed out: kept for the desktop, the kernel, the unexpected.
    pub headroom: Amounts,
    /// Swap in use, percent of swap total, above which admissions stop.
    pub swap_pressure_percent: u8,
    /// PSI `some avg10` (percent) above which admissions stop.
    pub psi_some_pressure: f64,
    /// Sampling period, milliseconds (staleness is counted in periods).
    pub sample_period_ms: u64,
    /// CPU cores the governor hands out to work that holds cores (parser
    /// workers, sandbox runs; SPEC A1): the machine's, or fewer set by the
    /// operator to keep some for the desktop.
    pub cores: u32,
}

/// The cores this process may run on (its CPU affinity), at least 1.
pub fn available_cores() -> u32 {
    std::thread::available_parallelism().map_or(1, |n| u32::try_from(n.get()).unwrap_or(u32::MAX))
}

impl Default for LedgerConfig {
    fn default() -> Self {
        Self {
            headroom: Amounts { vram: 512 * MIB, ram: 1024 * MIB, swap: 0, scratch: 1024 * MIB },
            swap_pressure_percent: 50,
            psi_some_pressure: 20.0,
            sample_period_ms: 1000,
            cores: available_cores(),
        }
    }
}

/// What asks for admission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    /// Who (`model:<file>`, `campaign:<uuid>`), bounded.
    pub owner: String,
    /// For what.
    pub kind: ReservationKind,
    /// Bytes per resource.
    pub amounts: Amounts,
    /// CPU cores held (0: none counted).
    pub cores: u32,
    /// Higher is more important.
    pub priority: u8,
    /// Lease length in milliseconds; `None`: held until released.
    pub lease_ms: Option<u64>,
}

#[derive(Debug, Clone)]
struct Entry {
    view: Reservation,
    /// Measured usage now (what the reservation already shows in `free`).
    current: Amounts,
    /// The process that asked for it, when it is to be released with that
    /// process (a campaign's: its workspace server, SPEC K3).
    holder: Option<Holder>,
}

/// A process as the kernel names it for good (`labfy_core::process`).
pub use labfy_core::process::Holder;

#[derive(Debug, Default)]
struct Inner {
    sample: Option<Sample>,
    reservations: Vec<Entry>,
    decisions: VecDeque<Decision>,
    pressure: Option<String>,
    /// Reservations gone lately and why, oldest first (at most
    /// [`MAX_GONE`]): a renewal names the reason (SPEC F5).
    gone: VecDeque<(String, String)>,
    /// The chart's history (SPEC U6), oldest first, at most
    /// [`HISTORY_POINTS`]; one point every [`Ledger::history_stride`]
    /// samples.
    history: VecDeque<HistoryPoint>,
    /// Samples seen, to keep one in `history_stride`.
    samples_seen: u64,
}

/// Points of history kept: an hour at [`HISTORY_STEP_MS`].
pub const HISTORY_POINTS: usize = 720;
/// Wanted time between two history points; the stride is this over the
/// sampling period, rounded up.
pub const HISTORY_STEP_MS: u64 = 5_000;

/// Gone reservations whose reason a renewal can still tell.
const MAX_GONE: usize = 256;

fn remember_gone(g: &mut Inner, id: &str, why: String) {
    if g.gone.len() == MAX_GONE {
        g.gone.pop_front();
    }
    g.gone.push_back((id.to_owned(), why));
}

/// The ledger; shared by the sampling loop and the request handlers.
#[derive(Debug)]
pub struct Ledger {
    config: LedgerConfig,
    inner: Mutex<Inner>,
}

/// Reads one resource out of [`Amounts`].
type Getter = fn(&Amounts) -> u64;

/// The four resources, with their names for reasons.
const RESOURCES: [(&str, Getter); 4] =
    [("GPU memory", |a| a.vram), ("RAM", |a| a.ram), ("swap", |a| a.swap), ("scratch", |a| a.scratch)];

/// Free bytes per resource in a sample (see the module doc). A resource the
/// sample cannot tell (no GPU, no scratch figure) is 0: nothing to hand out.
pub fn free_in(sample: &Sample) -> Amounts {
    let h = &sample.host;
    let gpu: u64 = sample
        .gpus
        .iter()
        .map(|g| {
            let vram = g.vram_total.zip(g.vram_used).map_or(0, |(t, u)| t.saturating_sub(u));
            let gtt = if g.uma { g.gtt_total.zip(g.gtt_used).map_or(0, |(t, u)| t.saturating_sub(u)) } else { 0 };
            vram + gtt
        })
        .sum();
    Amounts {
        vram: gpu,
        ram: h.ram_available,
        swap: h.swap_total.saturating_sub(h.swap_used),
        scratch: sample.scratch.as_ref().map_or(0, |s| s.free),
    }
}

/// `1 core`, `3 cores`.
fn cores_text(n: u32) -> String {
    if n == 1 { "1 core".into() } else { format!("{n} cores") }
}

/// Formats bytes for reasons: `512 MiB`, `1.5 GiB`.
pub fn human(bytes: u64) -> String {
    if bytes >= 10 * 1024 * MIB || (bytes >= 1024 * MIB && bytes % (1024 * MIB) != 0) {
        format!("{:.1} GiB", bytes as f64 / (1024 * MIB) as f64)
    } else if bytes >= 1024 * MIB {
        format!("{} GiB", bytes / (1024 * MIB))
    } else if bytes >= MIB {
        format!("{} MiB", bytes / MIB)
    } else {
        format!("{bytes} B")
    }
}

impl Ledger {
    /// An empty ledger: it refuses everything until [`Ledger::observe`] gets a sample.
    pub fn new(config: LedgerConfig) -> Self {
        Self { config, inner: Mutex::new(Inner::default()) }
    }

    /// The configuration.
    pub fn config(&self) -> &LedgerConfig {
        &self.config
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Takes a new sample: drops lapsed leases and re-evaluates pressure
    /// (SPEC Q4). Returns the pressure reason when there is pressure.
    pub fn observe(&self, sample: Sample, now_ms: u64) -> Option<String> {
        let pressure = self.pressure_in(&sample);
        let mut g = self.lock();
        if g.samples_seen % self.history_stride() == 0 {
            let point = history_point(&sample, &g.reservations);
            if g.history.len() == HISTORY_POINTS {
                g.history.pop_front();
            }
            g.history.push_back(point);
        }
        g.samples_seen += 1;
        g.sample = Some(sample);
        g.pressure = pressure.clone();
        let lapsed: Vec<Reservation> = g
            .reservations
            .iter()
            .filter(|e| e.view.lease_expires_ms.is_some_and(|t| t <= now_ms))
            .map(|e| e.view.clone())
            .collect();
        for r in lapsed {
            g.reservations.retain(|e| e.view.id != r.id);
            remember_gone(&mut g, &r.id, format!("the lease of {} lapsed (not renewed in time)", r.id));
            push_decision(
                &mut g,
                Decision {
                    at_ms: now_ms,
                    owner: r.owner,
                    kind: r.kind,
                    asked: r.reserved,
                    outcome: DecisionOutcome::Lapsed,
                    reason: format!("lease of {} lapsed: released", r.id),
                    blocked_by: Vec::new(),
                },
            );
        }
        pressure
    }

    /// Pressure in a sample: swap use or PSI over the thresholds.
    fn pressure_in(&self, sample: &Sample) -> Option<String> {
        let h = &sample.host;
        let mut why = Vec::new();
        if h.swap_total > 0 {
            let percent = h.swap_used as f64 * 100.0 / h.swap_total as f64;
            if percent > f64::from(self.config.swap_pressure_percent) {
                why.push(format!("swap {percent:.0} % used (threshold {} %)", self.config.swap_pressure_percent));
            }
        }
        if let Some(psi) = h.psi {
            if psi.some_avg10 > self.config.psi_some_pressure {
                why.push(format!(
                    "memory pressure {:.1} % (PSI some avg10; threshold {:.1} %)",
                    psi.some_avg10, self.config.psi_some_pressure
                ));
            }
        }
        if why.is_empty() { None } else { Some(why.join("; ")) }
    }

    /// Admits `ask` or refuses it with a reason (SPEC Q2). Atomic: the
    /// check and the reservation happen under one lock.
    pub fn admit(&self, ask: Ask, now_ms: u64) -> Result<Reservation, Refusal> {
        let mut g = self.lock();
        self.admit_in(&mut g, ask, now_ms)
    }

    fn admit_in(&self, g: &mut Inner, ask: Ask, now_ms: u64) -> Result<Reservation, Refusal> {
        let owner: String = ask.owner.chars().take(MAX_OWNER_CHARS).collect();
        let verdict = self.check(g, &ask, now_ms);
        let decision = |outcome: DecisionOutcome, reason: String, blocked_by: Vec<String>| Decision {
            at_ms: now_ms,
            owner: owner.clone(),
            kind: ask.kind,
            asked: ask.amounts,
            outcome,
            reason,
            blocked_by,
        };
        match verdict {
            Ok(()) => {
                let view = Reservation {
                    id: format!("res-{}", uuid::Uuid::new_v4()),
                    owner: owner.clone(),
                    kind: ask.kind,
                    reserved: ask.amounts,
                    cores: ask.cores,
                    measured_peak: None,
                    priority: ask.priority,
                    lease_expires_ms: ask.lease_ms.map(|l| now_ms.saturating_add(l)),
                    admitted_ms: now_ms,
                };
                g.reservations.push(Entry { view: view.clone(), current: Amounts::default(), holder: None });
                let reason = if view.cores > 0 {
                    format!("admitted as {} ({})", view.id, cores_text(view.cores))
                } else {
                    format!("admitted as {}", view.id)
                };
                push_decision(g, decision(DecisionOutcome::Admitted, reason, Vec::new()));
                Ok(view)
            }
            Err(refusal) => {
                push_decision(
                    g,
                    decision(DecisionOutcome::Refused, refusal.reason.clone(), refusal.blocked_by.clone()),
                );
                Err(refusal)
            }
        }
    }

    fn check(&self, g: &Inner, ask: &Ask, now_ms: u64) -> Result<(), Refusal> {
        let refuse = |reason: String, blocked_by: Vec<String>| Err(Refusal { reason, blocked_by });
        let Some(sample) = &g.sample else {
            return refuse("no sample yet: the governor does not admit on a guess".into(), vec!["no sample".into()]);
        };
        let age = now_ms.saturating_sub(sample.at_ms);
        if age > STALE_PERIODS * self.config.sample_period_ms {
            return refuse(
                format!("the latest sample is {age} ms old: the governor does not admit on a stale figure"),
                vec!["stale sample".into()],
            );
        }
        if let Some(p) = &g.pressure {
            return refuse(format!("memory pressure: {p}; no new admission until it eases"), vec!["pressure".into()]);
        }
        if g.reservations.len() >= MAX_RESERVATIONS {
            return refuse(format!("{MAX_RESERVATIONS} reservations are held already"), vec!["ledger full".into()]);
        }
        if ask.amounts.vram > 0 && sample.gpus.is_empty() {
            return refuse(
                format!("{} of GPU memory asked, and no GPU was found", human(ask.amounts.vram)),
                vec!["no GPU".into()],
            );
        }
        let free = free_in(sample);
        let mut reasons = Vec::new();
        let mut blocked_by: Vec<String> = Vec::new();
        for (name, get) in RESOURCES {
            let asked = get(&ask.amounts);
            if asked == 0 {
                continue;
            }
            let outstanding: u64 =
                g.reservations.iter().map(|e| get(&e.view.reserved).saturating_sub(get(&e.current))).sum();
            let headroom = get(&self.config.headroom);
            let admissible = get(&free).saturating_sub(headroom).saturating_sub(outstanding);
            if asked <= admissible {
                continue;
            }
            reasons.push(format!(
                "{name}: {} asked, {} admissible ({} free − {} headroom − {} reserved)",
                human(asked),
                human(admissible),
                human(get(&free)),
                human(headroom),
                human(outstanding)
            ));
            let mut holders: Vec<String> = g
                .reservations
                .iter()
                .filter(|e| get(&e.view.reserved) > 0)
                .map(|e| format!("{} ({})", e.view.owner, e.view.id))
                .collect();
            // Without the reservations the ask would still not fit: the
            // rest is held outside Labfy (or by the headroom).
            if asked > get(&free).saturating_sub(headroom) {
                holders.push(if asked <= get(&free) { "headroom".into() } else { "usage outside Labfy".into() });
            }
            for h in holders {
                if !blocked_by.contains(&h) {
                    blocked_by.push(h);
                }
            }
        }
        if ask.cores > 0 {
            let held: u32 = g.reservations.iter().map(|e| e.view.cores).sum();
            let admissible = self.config.cores.saturating_sub(held);
            if ask.cores > admissible {
                reasons.push(format!(
                    "CPU: {} asked, {admissible} admissible ({} counted − {held} held)",
                    cores_text(ask.cores),
                    cores_text(self.config.cores)
                ));
                for e in g.reservations.iter().filter(|e| e.view.cores > 0) {
                    let h = format!("{} ({})", e.view.owner, e.view.id);
                    if !blocked_by.contains(&h) {
                        blocked_by.push(h);
                    }
                }
                if held == 0 {
                    blocked_by.push("cores counted".into());
                }
            }
        }
        if reasons.is_empty() { Ok(()) } else { refuse(reasons.join("; "), blocked_by) }
    }

    /// Admits work made of like workers (SPEC A1: parser workers): as many
    /// as fit, from `most` down to `fewest`, each holding one core and
    /// `per_worker`; `ask`'s own amounts and cores are replaced. Atomic like
    /// [`Ledger::admit`]; a refusal gives the reason for `fewest`. Returns
    /// the reservation (its `cores` is the number of workers).
    pub fn admit_workers(
        &self,
        ask: Ask,
        per_worker: Amounts,
        most: u32,
        fewest: u32,
        now_ms: u64,
    ) -> Result<Reservation, Refusal> {
        let fewest = fewest.clamp(1, most.max(1));
        let sized = |n: u32| Ask {
            amounts: Amounts {
                vram: per_worker.vram.saturating_mul(u64::from(n)),
                ram: per_worker.ram.saturating_mul(u64::from(n)),
                swap: per_worker.swap.saturating_mul(u64::from(n)),
                scratch: per_worker.scratch.saturating_mul(u64::from(n)),
            },
            cores: n,
            ..ask.clone()
        };
        let mut g = self.lock();
        let n =
            (fewest..=most.max(fewest)).rev().find(|&n| self.check(&g, &sized(n), now_ms).is_ok()).unwrap_or(fewest);
        self.admit_in(&mut g, sized(n), now_ms)
    }

    /// Ties reservation `id` to the process that holds it: it is released
    /// when that process dies ([`Ledger::release_orphans`]). False when there
    /// is no such reservation.
    pub fn tie_to(&self, id: &str, holder: Holder) -> bool {
        let mut g = self.lock();
        let Some(e) = g.reservations.iter_mut().find(|e| e.view.id == id) else { return false };
        e.holder = Some(holder);
        true
    }

    /// Releases every reservation whose holder is gone (`alive` says), with
    /// the reason; the ids released (SPEC K3: a killed server's campaign
    /// holds nothing until its lease would have lapsed).
    pub fn release_orphans(&self, alive: impl Fn(&Holder) -> bool, now_ms: u64) -> Vec<String> {
        let orphans: Vec<(String, Holder)> = self
            .lock()
            .reservations
            .iter()
            .filter_map(|e| e.holder.filter(|h| !alive(h)).map(|h| (e.view.id.clone(), h)))
            .collect();
        orphans
            .into_iter()
            .filter(|(id, h)| self.release(id, &format!("its holder (pid {}) is gone", h.pid), now_ms))
            .map(|(id, _)| id)
            .collect()
    }

    /// Releases a reservation; false when there was none with that id.
    pub fn release(&self, id: &str, why: &str, now_ms: u64) -> bool {
        let mut g = self.lock();
        let Some(pos) = g.reservations.iter().position(|e| e.view.id == id) else { return false };
        let e = g.reservations.remove(pos);
        remember_gone(&mut g, id, format!("{id} was released: {why}"));
        push_decision(
            &mut g,
            Decision {
                at_ms: now_ms,
                owner: e.view.owner,
                kind: e.view.kind,
                asked: e.view.reserved,
                outcome: DecisionOutcome::Released,
                reason: format!("{} released: {why}", e.view.id),
                blocked_by: Vec::new(),
            },
        );
        true
    }

    /// Records what runs under a reservation uses now; the peak is kept
    /// beside the estimate so the estimate can be checked (SPEC Q2).
    pub fn record_usage(&self, id: &str, now: Amounts) -> bool {
        let mut g = self.lock();
        let Some(e) = g.reservations.iter_mut().find(|e| e.view.id == id) else { return false };
        e.current = now;
        let peak = e.view.measured_peak.get_or_insert_with(Amounts::default);
        peak.vram = peak.vram.max(now.vram);
        peak.ram = peak.ram.max(now.ram);
        peak.swap = peak.swap.max(now.swap);
        peak.scratch = peak.scratch.max(now.scratch);
        true
    }

    /// Extends a lease; returns when it lapses now. When the reservation is
    /// gone, the error says why (released, and the reason; its lease
    /// lapsed; never held), so its holder can tell the analyst (SPEC F5).
    pub fn renew(&self, id: &str, lease_ms: u64, now_ms: u64) -> Result<u64, String> {
        let mut g = self.lock();
        match g.reservations.iter_mut().find(|e| e.view.id == id) {
            Some(e) if e.view.lease_expires_ms.is_some() => {
                let until = now_ms.saturating_add(lease_ms);
                e.view.lease_expires_ms = Some(until);
                Ok(until)
            }
            Some(_) => Err(format!("{id} has no lease to renew")),
            None => Err(g
                .gone
                .iter()
                .rev()
                .find(|(gone, _)| gone == id)
                .map_or_else(|| format!("no reservation {id}"), |(_, why)| why.clone())),
        }
    }

    /// Under pressure, the run to stop first: the lowest priority, the
    /// youngest among equals (SPEC Q4). `None` without pressure.
    pub fn pressure_victim(&self) -> Option<(Reservation, String)> {
        let g = self.lock();
        let why = g.pressure.clone()?;
        g.reservations
            .iter()
            .min_by_key(|e| (e.view.priority, std::cmp::Reverse(e.view.admitted_ms)))
            .map(|e| (e.view.clone(), why))
    }

    /// Logs a decision the governor took outside admission (a run stopped
    /// under pressure, an OOM kill).
    pub fn log(&self, decision: Decision) {
        push_decision(&mut self.lock(), decision);
    }

    /// What admission may hand out now per resource, after headroom and
    /// outstanding reservations (what the UI draws).
    pub fn admissible(&self) -> Amounts {
        let g = self.lock();
        let Some(sample) = &g.sample else { return Amounts::default() };
        let free = free_in(sample);
        let mut out = Amounts::default();
        let slots: [&mut u64; 4] = [&mut out.vram, &mut out.ram, &mut out.swap, &mut out.scratch];
        for ((_, get), slot) in RESOURCES.iter().zip(slots) {
            let outstanding: u64 =
                g.reservations.iter().map(|e| get(&e.view.reserved).saturating_sub(get(&e.current))).sum();
            *slot = get(&free).saturating_sub(get(&self.config.headroom)).saturating_sub(outstanding);
        }
        out
    }

    /// Samples per history point.
    pub fn history_stride(&self) -> u64 {
        HISTORY_STEP_MS.div_ceil(self.config.sample_period_ms.max(1)).max(1)
    }

    /// The recent history, oldest first (SPEC U6).
    pub fn history(&self) -> History {
        History {
            step_ms: self.history_stride() * self.config.sample_period_ms,
            points: self.lock().history.iter().cloned().collect(),
        }
    }

    /// The latest sample.
    pub fn sample(&self) -> Option<Sample> {
        self.lock().sample.clone()
    }

    /// Current reservations.
    pub fn reservations(&self) -> Vec<Reservation> {
        self.lock().reservations.iter().map(|e| e.view.clone()).collect()
    }

    /// One reservation.
    pub fn reservation(&self, id: &str) -> Option<Reservation> {
        self.lock().reservations.iter().find(|e| e.view.id == id).map(|e| e.view.clone())
    }

    /// The decision log, oldest first.
    pub fn decisions(&self) -> Vec<Decision> {
        self.lock().decisions.iter().cloned().collect()
    }

    /// The pressure reason, when there is pressure now.
    pub fn pressure(&self) -> Option<String> {
        self.lock().pressure.clone()
    }
}

/// What the chart draws of a sample: the use of each resource and what
/// the reservations hold ahead of their runs' measured peaks.
fn history_point(sample: &Sample, reservations: &[Entry]) -> HistoryPoint {
    let gauge = |used: u64, total: u64| (total > 0).then_some(Gauge { used, total });
    // The GPUs whose figure was read, summed.
    let sum = |pick: fn(&GpuSample) -> (Option<u64>, Option<u64>)| {
        let mut out: Option<Gauge> = None;
        for g in &sample.gpus {
            if let (Some(used), Some(total)) = pick(g) {
                let acc = out.get_or_insert(Gauge { used: 0, total: 0 });
                acc.used += used;
                acc.total += total;
            }
        }
        out.filter(|g| g.total > 0)
    };
    let mut ahead = Amounts::default();
    for e in reservations {
        let peak = e.view.measured_peak.unwrap_or_default();
        ahead.vram += e.view.reserved.vram.saturating_sub(peak.vram);
        ahead.ram += e.view.reserved.ram.saturating_sub(peak.ram);
        ahead.swap += e.view.reserved.swap.saturating_sub(peak.swap);
        ahead.scratch += e.view.reserved.scratch.saturating_sub(peak.scratch);
    }
    HistoryPoint {
        at_ms: sample.at_ms,
        ram: gauge(sample.host.ram_used, sample.host.ram_total),
        swap: gauge(sample.host.swap_used, sample.host.swap_total),
        vram: sum(|g| (g.vram_used, g.vram_total)),
        gtt: sum(|g| (g.gtt_used, g.gtt_total)),
        scratch: sample.scratch.as_ref().and_then(|s| gauge(s.labfy_used, s.total)),
        ahead,
    }
}

fn push_decision(g: &mut Inner, d: Decision) {
    if g.decisions.len() == MAX_DECISIONS {
        g.decisions.pop_front();
    }
    g.decisions.push_back(d);
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::sync::Arc;

    use labfy_ipc::messages::governor::{GpuSample, GpuVendor, HostSample, Psi, ScratchSample};

    use super::*;

    const GIB: u64 = 1024 * MIB;

    fn sample(ram_available: u64) -> Sample {
        Sample {
            at_ms: 1_000,
            host: HostSample {
                ram_total: 24 * GIB,
                ram_used: 24 * GIB - ram_available,
                ram_available,
                swap_total: 4 * GIB,
                swap_used: 0,
                psi: Some(Psi { some_avg10: 0.0, full_avg10: 0.0 }),
            },
            scratch: Some(ScratchSample { path: "/s".into(), total: 100 * GIB, free: 50 * GIB, labfy_used: GIB }),
            gpus: Vec::new(),
            facts: Vec::new(),
        }
    }

    fn ask(owner: &str, ram: u64) -> Ask {
        Ask {
            owner: owner.into(),
            kind: ReservationKind::Campaign,
            amounts: Amounts { ram, ..Amounts::default() },
            cores: 0,
            priority: 10,
            lease_ms: None,
        }
    }

    fn ledger() -> Ledger {
        Ledger::new(LedgerConfig::default())
    }

    #[test]
    fn history_keeps_one_point_in_a_stride_for_the_last_hour() {
        let l = ledger(); // samples every 1,000 ms: a point every 5
        assert_eq!(l.history_stride(), 5);
        assert!(l.history().points.is_empty());
        let at = |i: u64| Sample { at_ms: 1_000 + i * 1_000, ..sample(8 * GIB) };
        l.observe(at(0), 1_000);
        // A reservation whose run has used nothing yet: all of it is ahead.
        l.admit(ask("campaign:a", 3 * GIB), 1_000).unwrap();
        for i in 1..12 {
            l.observe(at(i), 1_000 + i * 1_000);
        }
        let h = l.history();
        assert_eq!(h.step_ms, 5_000);
        let times: Vec<u64> = h.points.iter().map(|p| p.at_ms).collect();
        assert_eq!(times, [1_000, 6_000, 11_000]);
        let last = &h.points[2];
        assert_eq!(last.ram, Some(Gauge { used: 16 * GIB, total: 24 * GIB }));
        assert_eq!(last.swap, Some(Gauge { used: 0, total: 4 * GIB }));
        assert_eq!((last.vram, last.gtt), (None, None), "no GPU read, no gauge");
        assert_eq!(last.scratch, Some(Gauge { used: GIB, total: 100 * GIB }));
        assert_eq!(h.points[0].ahead.ram, 0, "taken before the admission");
        assert_eq!(last.ahead.ram, 3 * GIB);
        // Bounded: the oldest go first.
        for i in 12..(12 + 5 * HISTORY_POINTS as u64) {
            l.observe(at(i), 1_000 + i * 1_000);
        }
        let h = l.history();
        assert_eq!(h.points.len(), HISTORY_POINTS);
        assert!(h.points.windows(2).all(|w| w[1].at_ms - w[0].at_ms == 5_000));
        assert!(h.points[0].at_ms > 11_000);
    }

    /// SPEC K3: a reservation tied to a process is released once that
    /// process is gone — and only then; an untied one waits for its holder
    /// or its lease.
    #[test]
    fn a_reservation_goes_with_the_process_that_held_it() {
        let l = ledger();
        l.observe(sample(8 * GIB), 1_000);
        let tied = l.admit(ask("campaign:a", MIB), 1_000).unwrap();
        let untied = l.admit(ask("campaign:b", MIB), 1_000).unwrap();
        // A real process: a child that lives, then dies.
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let holder = Holder::of(i32::try_from(child.id()).unwrap()).unwrap();
        assert!(holder.alive());
        assert!(l.tie_to(&tied.id, holder));
        assert!(!l.tie_to("res-none", holder));
        assert!(l.release_orphans(Holder::alive, 1_500).is_empty(), "its holder lives");
        child.kill().unwrap();
        // Not reaped yet: once the kill lands, the zombie is not alive.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while holder.alive() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(!holder.alive(), "a killed process, unreaped, is gone");
        child.wait().unwrap();
        assert!(!holder.alive());
        assert_eq!(l.release_orphans(Holder::alive, 2_000), std::slice::from_ref(&tied.id));
        let left: Vec<String> = l.reservations().into_iter().map(|r| r.id).collect();
        assert_eq!(left, [untied.id]);
        let last = l.decisions().pop().unwrap();
        assert_eq!(last.outcome, DecisionOutcome::Released);
        assert!(last.reason.contains("is gone"), "{}", last.reason);
        // A pid recycled by another process is not the holder.
        let me = Holder::of(i32::try_from(std::process::id()).unwrap()).unwrap();
        assert!(me.alive());
        assert!(!Holder { start: me.start + 1, ..me }.alive());
    }

    #[test]
    fn nothing_is_admitted_before_a_sample_or_on_a_stale_one() {
        let l = ledger();
        let r = l.admit(ask("a", MIB), 1_000).unwrap_err();
        assert!(r.reason.contains("no sample yet"), "{}", r.reason);
        l.observe(sample(8 * GIB), 1_000);
        assert!(l.admit(ask("a", MIB), 1_000 + STALE_PERIODS * 1000).is_ok());
        let r = l.admit(ask("b", MIB), 1_001 + STALE_PERIODS * 1000).unwrap_err();
        assert_eq!(r.blocked_by, ["stale sample"]);
    }

    #[test]
    fn headroom_and_reservations_bound_what_is_admitted() {
        let l = ledger();
        l.observe(sample(4 * GIB), 1_000);
        // 4 GiB available − 1 GiB headroom = 3 GiB admissible: exactly 3 GiB fits.
        let first = l.admit(ask("campaign:a", 2 * GIB), 1_000).unwrap();
        assert_eq!(l.admissible().ram, GIB);
        assert!(l.admit(ask("campaign:b", GIB), 1_000).is_ok());
        let refused = l.admit(ask("campaign:c", 1), 1_000).unwrap_err();
        assert!(refused.reason.starts_with("RAM: 1 B asked, 0 B admissible (4 GiB free − 1 GiB headroom − 3 GiB"));
        assert_eq!(refused.blocked_by.len(), 2);
        assert!(refused.blocked_by[0].starts_with("campaign:a (res-"), "{:?}", refused.blocked_by);
        // Measured usage already shows in `free`: only the rest stays outstanding.
        assert!(l.record_usage(&first.id, Amounts { ram: 2 * GIB, ..Amounts::default() }));
        l.observe(sample(2 * GIB), 1_000);
        assert_eq!(l.admissible().ram, 0);
        assert!(l.release(&first.id, "done", 1_000));
        assert!(!l.release(&first.id, "again", 1_000));
        // 2 GiB available − 1 GiB headroom − 1 GiB (b) = 0; then b goes too.
        assert_eq!(l.admissible().ram, 0);
        let log = l.decisions();
        assert_eq!(log.iter().filter(|d| d.outcome == DecisionOutcome::Admitted).count(), 2);
        assert!(log.last().unwrap().reason.contains("released: done"));
    }

    #[test]
    fn an_ask_larger_than_the_machine_names_usage_outside_labfy_or_headroom() {
        let l = ledger();
        l.observe(sample(4 * GIB), 1_000);
        let r = l.admit(ask("m", 5 * GIB), 1_000).unwrap_err();
        assert_eq!(r.blocked_by, ["usage outside Labfy"]);
        let r = l.admit(ask("m", 4 * GIB), 1_000).unwrap_err();
        assert_eq!(r.blocked_by, ["headroom"]);
    }

    #[test]
    fn gpu_memory_needs_a_gpu_and_counts_gtt_only_on_uma() {
        let l = ledger();
        l.observe(sample(8 * GIB), 1_000);
        let mut a = ask("model:x", 0);
        a.amounts.vram = GIB;
        assert_eq!(l.admit(a.clone(), 1_000).unwrap_err().blocked_by, ["no GPU"]);
        let mut s = sample(8 * GIB);
        let gpu = |uma| GpuSample {
            id: "card0".into(),
            vendor: GpuVendor::Amd,
            name: "0000:03:00.0".into(),
            uma,
            vram_total: Some(GIB),
            vram_used: Some(GIB / 2),
            gtt_total: Some(8 * GIB),
            gtt_used: Some(GIB),
            busy_percent: None,
            temperature_mc: None,
            power_uw: None,
            source: "amdgpu sysfs".into(),
        };
        s.gpus = vec![gpu(false)];
        assert_eq!(free_in(&s).vram, GIB / 2);
        s.gpus = vec![gpu(true)];
        assert_eq!(free_in(&s).vram, GIB / 2 + 7 * GIB);
        l.observe(s, 1_000);
        assert!(l.admit(a, 1_000).is_ok());
    }

    #[test]
    fn pressure_refuses_everything_and_names_the_lowest_priority_victim() {
        let l = ledger();
        l.observe(sample(8 * GIB), 1_000);
        let mut low = ask("campaign:low", MIB);
        low.priority = 1;
        let low = l.admit(low, 1_000).unwrap();
        l.admit(ask("model:high", MIB), 1_001).unwrap();
        assert!(l.pressure_victim().is_none());
        let mut s = sample(8 * GIB);
        s.host.swap_used = 3 * GIB;
        let why = l.observe(s.clone(), 1_000).unwrap();
        assert_eq!(why, "swap 75 % used (threshold 50 %)");
        let r = l.admit(ask("c", 1), 1_000).unwrap_err();
        assert_eq!(r.blocked_by, ["pressure"]);
        let (victim, reason) = l.pressure_victim().unwrap();
        assert_eq!(victim.id, low.id);
        assert!(reason.contains("swap 75 %"));
        s.host.swap_used = 0;
        s.host.psi = Some(Psi { some_avg10: 20.5, full_avg10: 3.0 });
        assert!(l.observe(s.clone(), 1_000).unwrap().contains("PSI some avg10"));
        s.host.psi = Some(Psi { some_avg10: 20.0, full_avg10: 3.0 });
        assert!(l.observe(s, 1_000).is_none(), "at the threshold is not over it");
        assert!(l.admit(ask("c", 1), 1_000).is_ok());
    }

    #[test]
    fn leases_lapse_and_can_be_renewed() {
        let l = ledger();
        l.observe(sample(8 * GIB), 1_000);
        let mut a = ask("campaign:x", GIB);
        a.lease_ms = Some(500);
        let r = l.admit(a, 1_000).unwrap();
        assert_eq!(r.lease_expires_ms, Some(1_500));
        assert_eq!(l.renew(&r.id, 1_000, 1_400), Ok(2_400));
        l.observe(sample(8 * GIB), 2_399);
        assert!(l.reservation(&r.id).is_some());
        l.observe(sample(8 * GIB), 2_400);
        assert!(l.reservation(&r.id).is_none());
        assert!(l.decisions().last().unwrap().reason.contains("lapsed"));
        // A late renewal is told why the reservation went (SPEC F5).
        let late = l.renew(&r.id, 1_000, 2_500).unwrap_err();
        assert!(late.contains("lapsed") && late.contains(&r.id), "{late}");
        assert!(l.renew("r-never", 1_000, 2_500).unwrap_err().contains("no reservation r-never"));
    }

    #[test]
    fn a_renewal_after_a_release_names_its_reason() {
        let l = ledger();
        l.observe(sample(8 * GIB), 1_000);
        let mut a = ask("campaign:y", GIB);
        a.lease_ms = Some(60_000);
        let r = l.admit(a, 1_000).unwrap();
        assert!(l.release(&r.id, "stopped under pressure after 3 samples: swap 90 % used", 1_100));
        let why = l.renew(&r.id, 60_000, 1_200).unwrap_err();
        assert!(why.contains("released: stopped under pressure") && why.contains("swap 90 %"), "{why}");
        // A reservation without a lease (the model's) is not renewed.
        let m = l.admit(ask("model", GIB), 1_300).unwrap();
        assert!(l.renew(&m.id, 60_000, 1_400).unwrap_err().contains("no lease"));
    }

    #[test]
    fn the_log_and_the_ledger_are_bounded() {
        let l = ledger();
        l.observe(sample(24 * GIB), 1_000);
        for i in 0..MAX_RESERVATIONS {
            l.admit(ask(&format!("c{i}"), 1), 1_000).unwrap();
        }
        assert_eq!(l.admit(ask("one more", 1), 1_000).unwrap_err().blocked_by, ["ledger full"]);
        assert_eq!(l.decisions().len(), MAX_DECISIONS);
        assert_eq!(l.decisions().last().unwrap().owner, "one more");
        let long = "x".repeat(MAX_OWNER_CHARS + 1);
        let l = ledger();
        l.observe(sample(24 * GIB), 1_000);
        assert_eq!(l.admit(ask(&long, 1), 1_000).unwrap().owner.chars().count(), MAX_OWNER_CHARS);
    }

    /// Many threads race for the last headroom: exactly as many as fit win.
    #[test]
    fn admission_is_atomic_under_concurrency() {
        let l = Arc::new(ledger());
        // 1 GiB headroom + 100 × 10 MiB admissible, asked by 400 threads.
        l.observe(sample(GIB + 1000 * MIB), 1_000);
        let threads: Vec<_> = (0..400)
            .map(|i| {
                let l = l.clone();
                std::thread::spawn(move || l.admit(ask(&format!("c{i}"), 10 * MIB), 1_000).is_ok())
            })
            .collect();
        let won = threads.into_iter().map(|t| t.join().unwrap()).filter(|ok| *ok).count();
        // MAX_RESERVATIONS (64) bounds it first; lift that by asking 40 MiB each.
        assert_eq!(won, MAX_RESERVATIONS.min(100));
        let l = Arc::new(ledger());
        l.observe(sample(GIB + 1000 * MIB), 1_000);
        let threads: Vec<_> = (0..200)
            .map(|i| {
                let l = l.clone();
                std::thread::spawn(move || l.admit(ask(&format!("c{i}"), 40 * MIB), 1_000).is_ok())
            })
            .collect();
        let won = threads.into_iter().map(|t| t.join().unwrap()).filter(|ok| *ok).count();
        assert_eq!(won, 25, "1000 MiB / 40 MiB");
        assert_eq!(l.admissible().ram, 0);
        let reserved: u64 = l.reservations().iter().map(|r| r.reserved.ram).sum();
        assert_eq!(reserved, 1000 * MIB);
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(3 * MIB), "3 MiB");
        assert_eq!(human(2 * GIB), "2 GiB");
        assert_eq!(human(3 * GIB / 2), "1.5 GiB");
        assert_eq!(human(12 * GIB), "12.0 GiB");
    }

    fn reading(owner: &str) -> Ask {
        Ask { kind: ReservationKind::Reading, lease_ms: Some(60_000), ..ask(owner, 0) }
    }

    #[test]
    fn workers_are_admitted_as_many_as_fit_each_a_core() {
        let l = Ledger::new(LedgerConfig { cores: 2, ..LedgerConfig::default() });
        l.observe(sample(8 * GIB), 1_000);
        let per = Amounts { ram: 512 * MIB, ..Amounts::default() };
        // Three asked, two cores counted: two.
        let first = l.admit_workers(reading("job:a"), per, 3, 1, 1_000).unwrap();
        assert_eq!((first.cores, first.reserved.ram), (2, GIB));
        assert_eq!(first.kind, ReservationKind::Reading);
        // None left: refused, with the reason and who holds them.
        let refused = l.admit_workers(reading("job:b"), per, 3, 1, 1_000).unwrap_err();
        assert_eq!(refused.reason, "CPU: 1 core asked, 0 admissible (2 cores counted − 2 held)");
        assert_eq!(refused.blocked_by, [format!("job:a ({})", first.id)]);
        // A sandbox run holds a core too.
        let sandbox = Ask { kind: ReservationKind::Sandbox, cores: 1, ..ask("sandbox:x", MIB) };
        assert!(l.admit(sandbox, 1_000).is_err());
        assert!(l.release(&first.id, "done", 1_000));
        // RAM decides too: 7 GiB admissible (8 free − 1 headroom), 3 GiB a
        // worker — two fit, not three, whatever the cores.
        let l = Ledger::new(LedgerConfig { cores: 8, ..LedgerConfig::default() });
        l.observe(sample(8 * GIB), 1_000);
        let big = Amounts { ram: 3 * GIB, ..Amounts::default() };
        let r = l.admit_workers(reading("job:c"), big, 3, 1, 1_000).unwrap();
        assert_eq!((r.cores, r.reserved.ram), (2, 6 * GIB));
        // Fewer than the fewest asked: refused for the fewest.
        let refused = l.admit_workers(reading("job:d"), big, 3, 1, 1_000).unwrap_err();
        assert!(refused.reason.starts_with("RAM: 3 GiB asked, 1 GiB admissible"), "{}", refused.reason);
        // The decision log says how many cores were admitted.
        assert!(l.decisions().iter().any(|d| d.reason == format!("admitted as {} (2 cores)", r.id)));
    }
}
