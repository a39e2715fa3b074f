//! The daemon (SPEC Q1–Q5): a sampling loop feeding the ledger, pressure
//! reaction, and the IPC handler shared by `governor.sock` (the workspace
//! server) and `governor.operator.sock` (the operator's `labfy` commands).

use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use labfy_ipc::auth::{HANDSHAKE_TIMEOUT, PeerPolicy};
use labfy_ipc::daemon;
use labfy_ipc::messages::governor::{
    Amounts, CampaignAsk, ConfinementStatus, Decision, DecisionOutcome, GovernorRequest, GovernorResponse,
    GovernorState, MAX_READING_WORKERS, ModelSpec, ReadingAsk, ReservationKind, SandboxRun, SandboxStatus,
};
use labfy_ipc::messages::{Boundary, Failure, FailureCode, Health, Role};
use labfy_ipc::server::{self, Stats};

use crate::config::GovernorConfig;
use crate::ledger::{Ask, Holder, Ledger, human};
use crate::model::{LocalModelSupervisor, StartError};
use crate::probe::Prober;
use crate::sandbox::{self, MEMORY_MAX, SANDBOX_PRIORITY, Stop};

/// Longest campaign lease, milliseconds (renewed by the runner while it runs).
pub const CAMPAIGN_LEASE_MS: u64 = 10 * 60 * 1000;
/// Most fetches in flight a campaign may ask for.
pub const MAX_CAMPAIGN_CONCURRENCY: u32 = 16;
/// RAM a campaign holds per fetch in flight, on top of what it asks
/// (buffers of one bounded response).
pub const CAMPAIGN_RAM_PER_FETCH: u64 = 16 * 1024 * 1024;
/// How long a `model_start` request waits for the model to be ready before
/// answering with its current state (it goes on loading).
pub const MODEL_START_WAIT: Duration = Duration::from_secs(240);
/// Stale cgroups (of a governor that died) are swept at start and then
/// every this many samples.
pub const SWEEP_EVERY_SAMPLES: u64 = 300;
/// A reading's lease, milliseconds: renewed by its holder while it reads,
/// so that one the governor took back under pressure is told so (F5's
/// rule for campaigns, SPEC A1).
pub const READING_LEASE_MS: u64 = 60 * 1000;
/// Most RAM one parser worker may ask for (SPEC A1): far above what a
/// worker and its tools are bounded to.
pub const MAX_READING_RAM_PER_WORKER: u64 = 16 * 1024 * 1024 * 1024;
/// Longest owner a sandbox run's reservation keeps.
const MAX_OWNER_CHARS: usize = 64;

/// Unix time, milliseconds.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

/// The running governor.
pub struct Governor {
    config: GovernorConfig,
    prober: Mutex<Prober>,
    /// The ledger.
    pub ledger: Arc<Ledger>,
    /// The local model.
    pub model: Arc<LocalModelSupervisor>,
    started: Instant,
    /// Samples in a row under pressure.
    pressured: Mutex<u32>,
    /// Sandbox runs going on, by reservation (a pressure stop reaches them).
    sandboxes: Mutex<std::collections::HashMap<String, Arc<Stop>>>,
    /// The cgroup tree as found at start (SPEC D2).
    confinement: ConfinementStatus,
}

/// Resolves the cgroup tree once (SPEC D2) and says whether runs can be
/// confined there: a tree that is not ours is kept as the reason every model
/// start and sandbox run is refused with.
fn confinement_status(spec: &crate::cgroup::TreeSpec) -> ConfinementStatus {
    let status = match crate::cgroup::install(spec) {
        Ok(tree) => match tree.prepare(&["memory", "cpu", "pids"]) {
            Ok(attached) => ConfinementStatus { ready: true, detail: format!("{tree} ({})", attached.join(", ")) },
            Err(error) => ConfinementStatus { ready: false, detail: error.to_string() },
        },
        Err(error) => ConfinementStatus { ready: false, detail: error.to_string() },
    };
    if status.ready {
        tracing::info!(detail = %status.detail, "cgroup tree ready");
    } else {
        tracing::warn!(reason = %status.detail, "no usable cgroup tree: model starts and sandbox runs will be refused");
    }
    status
}

/// The operator's last model start, kept where a governor restarted within
/// the same `labfy up` finds it: the runtime directory's operator folder
/// (masked from the workspace server, so it cannot plant a model to start).
/// Removed when the operator stops the model or pressure does; a new
/// `labfy up` has a new runtime directory, and no model.
pub fn wanted_model_file(runtime_dir: &std::path::Path) -> std::path::PathBuf {
    daemon::operator_dir(runtime_dir).join("governor.model.json")
}

fn read_wanted_model(runtime_dir: &std::path::Path) -> Option<ModelSpec> {
    let path = wanted_model_file(runtime_dir);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!(file = %path.display(), error = %e, "cannot read the model to start again");
            return None;
        }
    };
    match serde_json::from_slice(&bytes) {
        Ok(spec) => Some(spec),
        Err(e) => {
            tracing::warn!(file = %path.display(), error = %e, "the model to start again does not read; ignored");
            let _ = std::fs::remove_file(&path);
            None
        }
    }
}

fn failure(code: FailureCode, message: impl Into<String>) -> GovernorResponse {
    GovernorResponse::Failed(Failure::new(code, message))
}

impl Governor {
    /// A governor with no run yet.
    pub fn new(config: GovernorConfig) -> Arc<Self> {
        let ledger = Arc::new(Ledger::new(config.ledger.clone()));
        let model = LocalModelSupervisor::new(config.model.clone(), ledger.clone());
        let prober = Mutex::new(Prober::new(config.probe.clone()));
        let confinement = confinement_status(&config.cgroup_root);
        Arc::new(Self {
            config,
            prober,
            ledger,
            model,
            started: Instant::now(),
            pressured: Mutex::new(0),
            sandboxes: Mutex::default(),
            confinement,
        })
    }

    /// Keeps `spec` for a governor restarted in this session
    /// ([`wanted_model_file`]): written aside, then renamed, mode 0600.
    fn remember_model(&self, spec: &ModelSpec) {
        let path = wanted_model_file(&self.config.runtime_dir);
        let aside = path.with_extension("json.new");
        let written = serde_json::to_vec(spec).map_err(std::io::Error::other).and_then(|bytes| {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&aside)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            std::fs::rename(&aside, &path)
        });
        if let Err(e) = written {
            tracing::warn!(file = %path.display(), error = %e, "cannot keep the model for a restart");
        }
    }

    fn forget_model(&self) {
        let path = wanted_model_file(&self.config.runtime_dir);
        if let Err(e) = std::fs::remove_file(&path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(file = %path.display(), error = %e, "cannot forget the model kept for a restart");
            }
        }
    }

    /// A governor restarted while the operator's model ran (its
    /// llama-server died with the last one): the same start, admitted and
    /// checked like the first (the file's SHA-256 again). A refusal is
    /// logged and forgotten, so a bad start is not retried at every restart.
    async fn start_wanted_model(self: Arc<Self>, spec: ModelSpec) {
        tracing::info!(model = %spec.gguf, "starting the model again: it ran when the last governor stopped");
        match self.model.start(spec, MODEL_START_WAIT).await {
            Ok(status) => tracing::info!(state = %status.state, "the model was started again"),
            Err(e) => {
                tracing::warn!(error = %e, "the model could not be started again; start it with `labfy model start`");
                self.forget_model();
            }
        }
    }

    /// One sampling round: probes, ledger, pressure reaction (SPEC Q4).
    pub async fn sample_once(&self) {
        let sample = self.prober.lock().unwrap_or_else(std::sync::PoisonError::into_inner).sample();
        let pressure = self.ledger.observe(sample, now_ms());
        // A campaign whose server died (kill -9) holds nothing any more: its
        // reservation goes now, not when its lease would lapse (SPEC K3).
        for id in self.ledger.release_orphans(Holder::alive, now_ms()) {
            tracing::warn!(reservation = %id, "released: the process that held it is gone");
        }
        let rounds = {
            let mut p = self.pressured.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            *p = if pressure.is_some() { p.saturating_add(1) } else { 0 };
            *p
        };
        let stop_after = self.config.pressure_stop_after;
        if stop_after == 0 || rounds < stop_after {
            return;
        }
        let Some((victim, why)) = self.ledger.pressure_victim() else { return };
        let reason = format!("stopped under pressure after {rounds} samples: {why}");
        tracing::warn!(owner = %victim.owner, %reason, "stopping the lowest-priority run");
        self.ledger.log(Decision {
            at_ms: now_ms(),
            owner: victim.owner.clone(),
            kind: victim.kind,
            asked: victim.reserved,
            outcome: DecisionOutcome::Stopped,
            reason: reason.clone(),
            blocked_by: vec!["pressure".into()],
        });
        if self.model.holds(&victim.id) {
            self.model.stop(&reason).await;
            // Not started again by a later governor of this session either.
            self.forget_model();
        } else if let Some(run) = self.sandbox_run_of(&victim.id) {
            // A sandbox run: killed now; its end releases the reservation.
            run.stop(reason);
        } else {
            // A campaign: its runner's next renewal is told the reservation
            // went, with this reason, and stops the campaign (SPEC F5).
            self.ledger.release(&victim.id, &reason, now_ms());
        }
        *self.pressured.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = 0;
    }

    /// The health line.
    pub fn health(&self) -> (bool, String) {
        let Some(sample) = self.ledger.sample() else { return (false, "no sample yet".into()) };
        let model = self.model.status().map_or_else(|| "no model".into(), |m| format!("model {}", m.state));
        let pressure = self.ledger.pressure().map_or_else(String::new, |p| format!("; PRESSURE: {p}"));
        let pressure = if self.confinement.ready {
            pressure
        } else {
            format!("{pressure}; NO CONFINEMENT (model starts and sandbox runs refused): {}", self.confinement.detail)
        };
        (
            true,
            format!(
                "sampling every {} ms; {} GPU; RAM {} available; {} reservation(s); {model}{pressure}",
                self.config.sample_period.as_millis(),
                sample.gpus.len(),
                human(sample.host.ram_available),
                self.ledger.reservations().len()
            ),
        )
    }

    /// The whole state (SPEC Q5).
    pub fn state(&self) -> GovernorState {
        GovernorState {
            sample: self.ledger.sample(),
            admissible: self.ledger.admissible(),
            reservations: self.ledger.reservations(),
            decisions: self.ledger.decisions(),
            pressure: self.ledger.pressure(),
            model: self.model.status(),
            sample_period_ms: self.config.sample_period.as_millis() as u64,
            sandbox: self.sandbox_status(),
            confinement: self.confinement.clone(),
        }
    }

    /// The sandbox as offered now: the allow-list, unless runs cannot be
    /// confined here (SPEC X1, D2).
    fn sandbox_status(&self) -> SandboxStatus {
        match self.config.sandbox.status() {
            s if s.ready && !self.confinement.ready => SandboxStatus {
                ready: false,
                detail: format!("cannot confine a run: {}", self.confinement.detail),
                ..s
            },
            s => s,
        }
    }

    fn sandbox_run_of(&self, reservation: &str) -> Option<Arc<Stop>> {
        self.sandboxes.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(reservation).cloned()
    }

    /// One `sandbox.exec` run (SPEC X1): checked against the allow-list and
    /// bounds, admitted (its own reservation kind), confined, carried out,
    /// released with how it ended.
    async fn sandbox_run(&self, run: SandboxRun) -> GovernorResponse {
        let owner: String = run.owner.chars().take(MAX_OWNER_CHARS).collect();
        let checked = match sandbox::check(&self.config.sandbox, run) {
            Ok(c) => c,
            Err(e) => return failure(e.code, e.message),
        };
        let offered = self.sandbox_status();
        if !offered.ready {
            return failure(FailureCode::Unavailable, format!("no sandbox: {}", offered.detail));
        }
        let ask = Ask {
            owner,
            kind: ReservationKind::Sandbox,
            amounts: Amounts { vram: 0, ram: MEMORY_MAX, swap: 0, scratch: 0 },
            // A run is one process confined to a core's quota at most.
            cores: 1,
            priority: SANDBOX_PRIORITY,
            lease_ms: None,
        };
        let reservation = match self.ledger.admit(ask, now_ms()) {
            Ok(r) => r.id,
            Err(refusal) => return GovernorResponse::Refused(refusal),
        };
        let stop = Arc::new(Stop::default());
        self.sandboxes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(reservation.clone(), stop.clone());
        let outcome = sandbox::run(&self.config.sandbox, checked, &reservation, &stop).await;
        self.sandboxes.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&reservation);
        let why = match &outcome {
            Ok(report) => match &report.end {
                labfy_ipc::messages::governor::SandboxEnd::Exited { code } => format!("the run exited (code {code})"),
                labfy_ipc::messages::governor::SandboxEnd::Signalled { signal } => {
                    format!("the run ended by signal {signal}")
                }
                labfy_ipc::messages::governor::SandboxEnd::Stopped { reason } => {
                    format!("the run was stopped: {reason}")
                }
            },
            Err(e) => format!("the run could not start: {}", e.message),
        };
        self.ledger.release(&reservation, &why, now_ms());
        match outcome {
            Ok(report) => GovernorResponse::SandboxRan(Box::new(report)),
            Err(e) => failure(e.code, e.message),
        }
    }

    fn admit_campaign(&self, ask: CampaignAsk, asker: Option<Holder>) -> GovernorResponse {
        // `campaign:<uuid>` is the message's type (`CampaignRef`): a frame
        // naming anything else never decoded.
        if !(1..=MAX_CAMPAIGN_CONCURRENCY).contains(&ask.concurrency) {
            return failure(FailureCode::InvalidInput, format!("concurrency must be 1 to {MAX_CAMPAIGN_CONCURRENCY}"));
        }
        let ram = ask.ram_bytes.saturating_add(u64::from(ask.concurrency) * CAMPAIGN_RAM_PER_FETCH);
        let a = Ask {
            owner: ask.campaign.to_string(),
            kind: ReservationKind::Campaign,
            amounts: Amounts { vram: 0, ram, swap: 0, scratch: ask.scratch_bytes },
            // Fetches wait on Tor, not on a core.
            cores: 0,
            priority: ask.priority,
            lease_ms: Some(CAMPAIGN_LEASE_MS),
        };
        match self.ledger.admit(a, now_ms()) {
            Ok(r) => {
                // Released with the server that asked, should it die (K3).
                if let Some(h) = asker {
                    self.ledger.tie_to(&r.id, h);
                }
                GovernorResponse::Admitted { reservation: r.id }
            }
            Err(refusal) => GovernorResponse::Refused(refusal),
        }
    }

    /// Document reading (SPEC A1, I1): as many parser workers as fit, each a
    /// core and its RAM, held by the asking process under a lease it renews
    /// — released by it, when it dies, or when the lease lapses. With no process to hold it, nothing is admitted (a
    /// reservation no one releases would hold its cores for good).
    fn admit_reading(&self, ask: ReadingAsk, asker: Option<Holder>) -> GovernorResponse {
        if !(1..=MAX_READING_WORKERS).contains(&ask.workers) {
            return failure(FailureCode::InvalidInput, format!("workers must be 1 to {MAX_READING_WORKERS}"));
        }
        if !(1..=ask.workers).contains(&ask.min_workers) {
            return failure(FailureCode::InvalidInput, "min_workers must be 1 to workers");
        }
        if !(1..=MAX_READING_RAM_PER_WORKER).contains(&ask.ram_per_worker) {
            return failure(
                FailureCode::InvalidInput,
                format!("ram_per_worker must be 1 byte to {}", human(MAX_READING_RAM_PER_WORKER)),
            );
        }
        let Some(holder) = asker else {
            return failure(
                FailureCode::Unavailable,
                "the asking process could not be named: a reading's reservation is held by its process",
            );
        };
        let a = Ask {
            owner: ask.job.to_string(),
            kind: ReservationKind::Reading,
            amounts: Amounts::default(),
            cores: 0,
            priority: ask.priority,
            lease_ms: Some(READING_LEASE_MS),
        };
        let per_worker = Amounts { ram: ask.ram_per_worker, ..Amounts::default() };
        match self.ledger.admit_workers(a, per_worker, ask.workers, ask.min_workers, now_ms()) {
            Ok(r) => {
                self.ledger.tie_to(&r.id, holder);
                GovernorResponse::AdmittedReading { reservation: r.id, workers: r.cores }
            }
            Err(refusal) => GovernorResponse::Refused(refusal),
        }
    }

    /// Answers one request (both sockets), for no process in particular.
    pub async fn handle(self: &Arc<Self>, req: GovernorRequest) -> GovernorResponse {
        self.handle_from(req, None).await
    }

    /// Answers one request from the process `asker` (the socket's peer pid,
    /// when the kernel named it): a campaign's reservation is tied to it.
    pub async fn handle_from(self: &Arc<Self>, req: GovernorRequest, asker: Option<i32>) -> GovernorResponse {
        match req {
            GovernorRequest::Health {} => {
                let (ready, detail) = self.health();
                GovernorResponse::Health(Health {
                    role: Role::Governor,
                    pid: std::process::id(),
                    uptime_ms: self.started.elapsed().as_millis() as u64,
                    ready,
                    detail,
                    switch_to: None,
                })
            }
            GovernorRequest::State {} => GovernorResponse::State(Box::new(self.state())),
            GovernorRequest::History {} => GovernorResponse::History(Box::new(self.ledger.history())),
            GovernorRequest::ModelStart(spec) => match self.model.start(spec.clone(), MODEL_START_WAIT).await {
                Ok(status) => {
                    self.remember_model(&spec);
                    GovernorResponse::Model(Box::new(status))
                }
                Err(StartError::Refused(r)) => GovernorResponse::Refused(r),
                Err(e @ StartError::Invalid(_)) => failure(FailureCode::InvalidInput, e.to_string()),
                Err(e @ StartError::Busy(_)) => failure(FailureCode::Conflict, e.to_string()),
                Err(e @ StartError::Unavailable(_)) => failure(FailureCode::Unavailable, e.to_string()),
            },
            GovernorRequest::ModelStop {} => {
                if self.model.stop("asked by the operator").await {
                    self.forget_model();
                    GovernorResponse::ModelStopped {}
                } else {
                    failure(FailureCode::NotFound, "no model is running")
                }
            }
            GovernorRequest::AdmitCampaign(ask) => self.admit_campaign(ask, asker.and_then(Holder::of)),
            GovernorRequest::AdmitReading(ask) => self.admit_reading(ask, asker.and_then(Holder::of)),
            GovernorRequest::SandboxRun(run) => self.sandbox_run(*run).await,
            GovernorRequest::Release { reservation } => {
                if self.model.holds(&reservation) {
                    return failure(
                        FailureCode::InvalidInput,
                        "the model's reservation is released by stopping the model",
                    );
                }
                if self.sandbox_run_of(&reservation).is_some() {
                    return failure(FailureCode::InvalidInput, "a sandbox run's reservation is released when it ends");
                }
                if self.ledger.release(&reservation, "released by its holder", now_ms()) {
                    GovernorResponse::Released {}
                } else {
                    failure(FailureCode::NotFound, format!("no reservation {reservation}"))
                }
            }
            GovernorRequest::Renew { reservation } => {
                if self.model.holds(&reservation) || self.sandbox_run_of(&reservation).is_some() {
                    return failure(
                        FailureCode::InvalidInput,
                        "this reservation has no lease: it lasts while its model or sandbox run does",
                    );
                }
                let lease = match self.ledger.reservation(&reservation) {
                    Some(r) if r.kind == ReservationKind::Reading => READING_LEASE_MS,
                    _ => CAMPAIGN_LEASE_MS,
                };
                match self.ledger.renew(&reservation, lease, now_ms()) {
                    Ok(lease_expires_ms) => GovernorResponse::Renewed { lease_expires_ms },
                    Err(why) => failure(FailureCode::NotFound, why),
                }
            }
        }
    }
}

/// The daemon's life: control plane, both sockets, the sampling loop, until
/// a shutdown request or a signal; then the model is stopped.
pub async fn run(config: GovernorConfig) -> Result<(), labfy_ipc::IpcError> {
    let dir = config.runtime_dir.clone();
    let gov_slot: Arc<Mutex<Option<Arc<Governor>>>> = Arc::default();
    let for_health = gov_slot.clone();
    let plane = daemon::start_control(&dir, Role::Governor, daemon::ControlChannel::Socket, move || {
        for_health
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map_or((false, "starting".into()), |g| g.health())
    })?;
    // The scratch directory is Labfy's: create it (private) if missing.
    let scratch = &config.probe.scratch_dir;
    if let Err(e) = std::fs::DirBuilder::new().recursive(true).mode(0o700).create(scratch) {
        tracing::warn!(dir = %scratch.display(), error = %e, "cannot create the scratch directory");
    }
    let removed = crate::cgroup::sweep_stale();
    if !removed.is_empty() {
        tracing::warn!(?removed, "removed cgroups left by an earlier governor");
    }
    let runs = sandbox::sweep_stale(&config.sandbox.dir);
    if !runs.is_empty() {
        tracing::warn!(?runs, "removed sandbox run directories left by an earlier governor");
    }
    let period = config.sample_period;
    let gov = Governor::new(config);
    *gov_slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(gov.clone());
    gov.sample_once().await;
    if let Some(spec) = read_wanted_model(&dir) {
        tokio::spawn(gov.clone().start_wanted_model(spec));
    }

    let handler = {
        let gov = gov.clone();
        move |req: GovernorRequest, peer: labfy_ipc::auth::Peer| {
            let gov = gov.clone();
            async move { gov.handle_from(req, peer.pid).await }
        }
    };
    let service = server::bind(&daemon::service_socket(&dir, Boundary::Governor))?;
    tokio::spawn(server::serve(
        service,
        daemon::service_policy(&plane, Boundary::Governor),
        Arc::new(Stats::default()),
        handler.clone(),
    ));
    // The operator's socket: same uid and the secret, any pid; in a
    // directory the confined server's root masks.
    labfy_ipc::secret::create_private_dir(&daemon::operator_dir(&dir))?;
    let operator = server::bind(&daemon::operator_socket(&dir, Boundary::Governor))?;
    let operator_policy = PeerPolicy {
        boundary: Boundary::Governor,
        uid: daemon::euid(),
        pids: None,
        secret: plane.secret.clone(),
        handshake_timeout: HANDSHAKE_TIMEOUT,
    };
    tokio::spawn(server::serve(operator, operator_policy, Arc::new(Stats::default()), handler));
    let sampler = {
        let gov = gov.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            let mut n: u64 = 0;
            let mut last: Option<Instant> = None;
            loop {
                tick.tick().await;
                let started = Instant::now();
                gov.sample_once().await;
                // A late sample reads as "old" in the UI (SPEC Q5): say in
                // the log why, the round's own cost or the wait before it.
                let took = started.elapsed();
                let gap = last.map(|l| started.duration_since(l));
                if took > period || gap.is_some_and(|g| g > period * 3) {
                    tracing::warn!(
                        took_ms = took.as_millis() as u64,
                        gap_ms = gap.map(|g| g.as_millis() as u64),
                        "a late sample"
                    );
                }
                last = Some(started);
                n += 1;
                if n % SWEEP_EVERY_SAMPLES == 0 {
                    let removed = crate::cgroup::sweep_stale();
                    if !removed.is_empty() {
                        tracing::warn!(?removed, "removed cgroups left by an earlier governor");
                    }
                }
            }
        })
    };
    tracing::info!("governor serving");
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = plane.shutdown.notified() => tracing::info!("shutdown asked by the supervisor"),
        _ = term.recv() => tracing::info!("SIGTERM"),
        _ = tokio::signal::ctrl_c() => tracing::info!("SIGINT"),
    }
    sampler.abort();
    gov.model.stop("the governor is stopping").await;
    Ok(())
}
