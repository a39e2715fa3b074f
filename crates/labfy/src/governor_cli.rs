//! `labfy resources` and `labfy model …`: the operator's view of the
//! governor of a running `labfy up`, over its operator socket (same uid and
//! the per-boot secret; SPEC Q5, M11).

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Subcommand;
use labfy::Failure;
use labfy_core::ErrorKind;
use labfy_ipc::messages::Boundary;
use labfy_ipc::messages::governor::{
    Amounts, DecisionOutcome, GovernorRequest, GovernorResponse, GovernorState, ModelSpec, ModelState, ModelStatus,
    ReservationKind,
};

/// How long `labfy model start` waits for the governor's answer (it hashes
/// the file, admits, starts and waits for `/health`).
pub const MODEL_START_TIMEOUT: Duration = Duration::from_secs(300);

/// `labfy model …`.
#[derive(Subcommand)]
pub enum ModelWhat {
    /// Check the GGUF file's SHA-256, ask admission and start the governor's
    /// own llama-server beside the workspace server.
    Start {
        /// The GGUF file (Labfy never downloads or converts weights).
        #[arg(long)]
        gguf: PathBuf,
        /// Its expected SHA-256 (64 hexadecimal digits).
        #[arg(long)]
        sha256: String,
        /// Context size (default: the governor's).
        #[arg(long)]
        ctx: Option<u32>,
        /// Layers offloaded to the GPU (0: all in RAM).
        #[arg(long, default_value_t = 0)]
        gpu_layers: u32,
        /// Runtime directory of the running `labfy up`.
        #[arg(long, env = "LABFY_RUNTIME_DIR")]
        runtime_dir: Option<PathBuf>,
    },
    /// Stop the local model and release its reservation.
    Stop {
        /// Runtime directory of the running `labfy up`.
        #[arg(long, env = "LABFY_RUNTIME_DIR")]
        runtime_dir: Option<PathBuf>,
    },
    /// Show the local model's state.
    Status {
        /// Runtime directory of the running `labfy up`.
        #[arg(long, env = "LABFY_RUNTIME_DIR")]
        runtime_dir: Option<PathBuf>,
        /// Print it as JSON.
        #[arg(long)]
        json: bool,
    },
}

fn ask(runtime_dir: Option<PathBuf>, request: GovernorRequest, timeout: Duration) -> Result<GovernorResponse, Failure> {
    crate::operator::call(runtime_dir, Boundary::Governor, "governor", request, timeout)
}

fn refused(r: GovernorResponse) -> Failure {
    match r {
        GovernorResponse::Refused(r) => Failure::new(
            ErrorKind::Unavailable,
            format!("refused by admission: {} (blocked by: {})", r.reason, r.blocked_by.join(", ")),
        ),
        GovernorResponse::Failed(f) => Failure::new(labfy::failure::error_kind(f.code), f.message),
        other => Failure::new(ErrorKind::Internal, format!("unexpected answer from the governor: {other:?}")),
    }
}

fn state(runtime_dir: Option<PathBuf>) -> Result<GovernorState, Failure> {
    match ask(runtime_dir, GovernorRequest::State {}, Duration::from_secs(5))? {
        GovernorResponse::State(s) => Ok(*s),
        other => Err(refused(other)),
    }
}

fn mib(b: u64) -> String {
    format!("{:.0} MiB", b as f64 / (1024.0 * 1024.0))
}

fn opt_mib(b: Option<u64>) -> String {
    b.map_or_else(|| "-".into(), mib)
}

fn amounts(a: &Amounts) -> String {
    let mut parts = Vec::new();
    for (name, v) in [("GPU", a.vram), ("RAM", a.ram), ("swap", a.swap), ("scratch", a.scratch)] {
        if v > 0 {
            parts.push(format!("{name} {}", mib(v)));
        }
    }
    if parts.is_empty() { "nothing".into() } else { parts.join(", ") }
}

/// `labfy resources [--json]`.
pub fn resources(runtime_dir: Option<PathBuf>, json: bool) -> Result<(), Failure> {
    let s = state(runtime_dir)?;
    if json {
        println!("{}", serde_json::to_string_pretty(&s).map_err(|e| Failure::new(ErrorKind::Internal, e.to_string()))?);
        return Ok(());
    }
    print!("{}", render(&s));
    Ok(())
}

/// The human table of `labfy resources`.
pub fn render(s: &GovernorState) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let Some(sample) = &s.sample else {
        return "no sample yet\n".into();
    };
    let h = &sample.host;
    let _ = writeln!(out, "{:<10} {:>12} {:>12} {:>12}", "resource", "used", "total", "admissible");
    let _ =
        writeln!(out, "{:<10} {:>12} {:>12} {:>12}", "RAM", mib(h.ram_used), mib(h.ram_total), mib(s.admissible.ram));
    let _ = writeln!(
        out,
        "{:<10} {:>12} {:>12} {:>12}",
        "swap",
        mib(h.swap_used),
        mib(h.swap_total),
        mib(s.admissible.swap)
    );
    match &sample.scratch {
        Some(sc) => {
            let _ = writeln!(
                out,
                "{:<10} {:>12} {:>12} {:>12}  (Labfy: {}, {})",
                "scratch",
                mib(sc.total.saturating_sub(sc.free)),
                mib(sc.total),
                mib(s.admissible.scratch),
                mib(sc.labfy_used),
                sc.path
            );
        }
        None => {
            let _ = writeln!(out, "{:<10} {:>12}", "scratch", "unreadable");
        }
    }
    for g in &sample.gpus {
        let _ = writeln!(
            out,
            "{:<10} {:>12} {:>12} {:>12}  (GTT {} / {}; {}; busy {}; {})",
            g.id,
            opt_mib(g.vram_used),
            opt_mib(g.vram_total),
            "",
            opt_mib(g.gtt_used),
            opt_mib(g.gtt_total),
            if g.uma { "UMA" } else { "discrete" },
            g.busy_percent.map_or_else(|| "-".into(), |b| format!("{b} %")),
            g.source
        );
    }
    if sample.gpus.is_empty() {
        let _ = writeln!(out, "GPU: none found");
    }
    if let Some(psi) = h.psi {
        let _ =
            writeln!(out, "memory pressure (PSI avg10): some {:.2} %, full {:.2} %", psi.some_avg10, psi.full_avg10);
    }
    if let Some(p) = &s.pressure {
        let _ = writeln!(out, "PRESSURE: {p} — new admissions are refused");
    }
    for f in &sample.facts {
        let _ = writeln!(out, "fact: {f}");
    }
    let _ = writeln!(out, "\nreservations ({}):", s.reservations.len());
    for r in &s.reservations {
        let kind = match r.kind {
            ReservationKind::Model => "model",
            ReservationKind::Campaign => "campaign",
            ReservationKind::Sandbox => "sandbox run",
            ReservationKind::Reading => "document reading",
        };
        let peak = r.measured_peak.as_ref().map_or_else(|| "not measured".into(), amounts);
        let cores = match r.cores {
            0 => String::new(),
            1 => ", 1 core".to_owned(),
            n => format!(", {n} cores"),
        };
        let _ = writeln!(
            out,
            "  {} {kind} {} — reserved {}{cores}; peak {peak}; priority {}",
            r.id,
            r.owner,
            amounts(&r.reserved),
            r.priority
        );
    }
    if let Some(m) = &s.model {
        let _ = writeln!(out, "\nmodel: {}", model_line(m));
    }
    // SPEC D2: where confined runs go, or why none can be.
    let confinement =
        if s.confinement.ready { s.confinement.detail.clone() } else { format!("NONE — {}", s.confinement.detail) };
    let _ = writeln!(out, "\nconfinement: {confinement}");
    // SPEC X1: what `sandbox.exec` may run, or why nothing.
    let sandbox = if s.sandbox.ready { s.sandbox.detail.clone() } else { format!("off — {}", s.sandbox.detail) };
    let _ = writeln!(out, "\nsandbox: {sandbox}");
    let _ = writeln!(out, "\nadmission log (latest last):");
    for d in &s.decisions {
        let verdict = match d.outcome {
            DecisionOutcome::Admitted => "ADMITTED",
            DecisionOutcome::Refused => "REFUSED",
            DecisionOutcome::Released => "released",
            DecisionOutcome::Lapsed => "lease lapsed",
            DecisionOutcome::Stopped => "STOPPED",
        };
        let blocked =
            if d.blocked_by.is_empty() { String::new() } else { format!(" [blocked by: {}]", d.blocked_by.join(", ")) };
        let _ = writeln!(out, "  {} {} {verdict}: {}{blocked}", d.at_ms, d.owner, d.reason);
    }
    out
}

fn model_line(m: &ModelStatus) -> String {
    // What it holds on each card now, beside the estimate (AMD fdinfo).
    let gpu: String = m
        .gpu_memory
        .iter()
        .map(|g| format!("; on {}: {} VRAM, {} GTT ({})", g.pdev, mib(g.vram), mib(g.gtt), g.source))
        .collect();
    format!(
        "{} — {} (ctx {}, {} GPU layers); endpoint {}; estimate {} ({} weights, {} KV, {} overhead); peak {}{gpu}; \
         restarts {}; {}",
        m.state,
        m.spec.gguf,
        m.estimate.context,
        m.spec.gpu_layers,
        m.endpoint.as_deref().unwrap_or("-"),
        amounts(&m.estimate.reserved),
        mib(m.estimate.weights),
        mib(m.estimate.kv_cache),
        mib(m.estimate.overhead),
        opt_mib(m.peak_memory),
        m.restarts,
        m.detail
    )
}

fn absolute(p: &Path) -> Result<String, Failure> {
    let abs = if p.is_absolute() { p.to_path_buf() } else { std::env::current_dir()?.join(p) };
    abs.to_str()
        .map(str::to_owned)
        .ok_or_else(|| Failure::new(ErrorKind::InvalidInput, format!("{} is not valid UTF-8", abs.display())))
}

/// `labfy model …`.
pub fn model(what: ModelWhat) -> Result<(), Failure> {
    match what {
        ModelWhat::Start { gguf, sha256, ctx, gpu_layers, runtime_dir } => {
            let spec = ModelSpec { gguf: absolute(&gguf)?, sha256: sha256.to_ascii_lowercase(), ctx, gpu_layers };
            match ask(runtime_dir, GovernorRequest::ModelStart(spec), MODEL_START_TIMEOUT)? {
                GovernorResponse::Model(m) if m.state == ModelState::Ready => {
                    println!("model: {}", model_line(&m));
                    Ok(())
                }
                GovernorResponse::Model(m) if m.state == ModelState::Failed || m.state == ModelState::Stopped => {
                    Err(Failure::new(ErrorKind::Unavailable, format!("the model did not start: {}", m.detail)))
                }
                GovernorResponse::Model(m) => {
                    println!("model: {} (still loading; `labfy model status` follows it)", model_line(&m));
                    Ok(())
                }
                other => Err(refused(other)),
            }
        }
        ModelWhat::Stop { runtime_dir } => {
            match ask(runtime_dir, GovernorRequest::ModelStop {}, Duration::from_secs(30))? {
                GovernorResponse::ModelStopped {} => {
                    println!("model stopped; its reservation is released");
                    Ok(())
                }
                other => Err(refused(other)),
            }
        }
        ModelWhat::Status { runtime_dir, json } => {
            let s = state(runtime_dir)?;
            match s.model {
                Some(m) if json => {
                    println!(
                        "{}",
                        serde_json::to_string_pretty(&m)
                            .map_err(|e| Failure::new(ErrorKind::Internal, e.to_string()))?
                    );
                    Ok(())
                }
                Some(m) => {
                    println!("model: {}", model_line(&m));
                    Ok(())
                }
                None => Err(Failure::new(ErrorKind::NotFound, "no model was started")),
            }
        }
    }
}
