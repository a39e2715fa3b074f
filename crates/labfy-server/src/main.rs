//! `labfy-server`: the workspace server as a process of its own. It serves an
//! inherited listening socket (`LISTEN_FDS=1`, fd 3) when given one, else binds
//! `127.0.0.1:<port>` itself.

use std::path::PathBuf;

use anyhow::{Context, anyhow, bail};
use clap::Parser;
use labfy_core::{ObjectRef, RefKind};
use labfy_runtime::client::{AgentFlags, AgentMode, process_env};
use labfy_server::{AppState, db::Db, listener, session::RateLimit};
use labfy_store::Store;

/// The Labfy workspace server (normally started by `labfy up`).
#[derive(Parser)]
#[command(version, about)]
struct Args {
    /// Data directory holding labfy.sqlite3.
    #[arg(long, env = "LABFY_DATA_DIR")]
    data_dir: PathBuf,
    /// Workspace to browse (`workspace:<uuid>`); default: the first ready one.
    #[arg(long)]
    workspace: Option<String>,
    /// Loopback port to bind when no socket is inherited.
    #[arg(long, default_value_t = 7345)]
    port: u16,
    /// Runtime directory of a supervisor (`labfy up`): when given, the server
    /// serves its control socket there (health, orderly shutdown).
    #[arg(long, env = "LABFY_RUNTIME_DIR")]
    runtime_dir: Option<PathBuf>,
    /// Agent mode: `demo` or `local-model` (else `LABFY_AGENT_MODE`; neither:
    /// the deterministic demo agent). Validated at start, never a fallback.
    #[arg(long, value_name = "MODE")]
    agent_mode: Option<String>,
    /// Local model endpoint: `governed` (the model `labfy model start` runs,
    /// on its socket in the runtime directory), `unix:/<path>.sock`,
    /// `http://127.0.0.1:<port>` or `http://[::1]:<port>` (else
    /// `LABFY_AGENT_MODEL_ENDPOINT`).
    #[arg(long, value_name = "URL")]
    agent_endpoint: Option<String>,
    /// Local model id, sent in requests and shown in the UI (else
    /// `LABFY_AGENT_MODEL_ID`).
    #[arg(long, value_name = "ID")]
    agent_model: Option<String>,
    /// Deadline of one model request in whole seconds, 1–600 (else
    /// `LABFY_AGENT_MODEL_TIMEOUT_SECONDS`; default 120).
    #[arg(long, value_name = "SECONDS")]
    agent_timeout: Option<String>,
    /// The optional catalog of capabilities (SPEC X2: tool.provision.*,
    /// tool.integration.propose, capability.execute, code.change.propose),
    /// off unless the operator turns it on.
    #[arg(long, env = "LABFY_AGENT_OPTIONAL_CATALOG", value_name = "BOOL", default_value_t = false,
          action = clap::ArgAction::Set)]
    optional_catalog: bool,
    /// The operator's folder of installed capability manifests (`*.json`),
    /// beside the shipped ones (with the optional catalog).
    #[arg(long, env = "LABFY_AGENT_CAPABILITIES_DIR", value_name = "DIR")]
    capabilities_dir: Option<PathBuf>,
}

impl Args {
    /// The agent flags as given, for [`AgentMode::from_env_and_flags`] (the
    /// flag first, then the variable, per setting; SPEC M4).
    fn agent_flags(&self) -> AgentFlags {
        AgentFlags {
            mode: self.agent_mode.clone(),
            endpoint: self.agent_endpoint.clone(),
            model: self.agent_model.clone(),
            timeout: self.agent_timeout.clone(),
        }
    }
}

fn main() -> anyhow::Result<()> {
    // A parser worker or document tool started by this server's imports runs here,
    // before anything else (SPEC C2).
    labfy_parse::run_if_child();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("LABFY_LOG").unwrap_or_else(|_| "info".into()))
        .with_writer(labfy_core::one_line::stderr)
        // Colour codes only for a terminal: under `labfy up` this goes to the log file (SPEC U8).
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let args = Args::parse();
    // SPEC M4, STYLE 11: the agent configuration is resolved and validated
    // once, first; a bad one stops the server with the reason — the demo
    // agent never stands in for a model the operator asked for.
    // The endpoint `governed` is the governor's model socket in the
    // supervisor's runtime directory (SPEC D1).
    let governed = args.runtime_dir.as_deref().map(labfy_ipc::daemon::model_socket);
    let agent = AgentMode::resolve(&args.agent_flags(), process_env, governed.as_deref())
        .map_err(|e| anyhow!("invalid agent configuration (SPEC M4): {e}"))?;
    tracing::info!(agent = %agent, "agent mode");
    // Before any thread exists: take the inherited socket (and clear LISTEN_*).
    let listener = match listener::inherited()? {
        Some(l) => l,
        None => listener::bind_loopback(listener::loopback(args.port))?,
    };
    let port = listener.local_addr()?.port();
    // The control channel: the end of the supervisor's socket pair when it
    // passed one (LABFY_CONTROL_FD, SPEC T3), else a socket in the runtime
    // directory (a server started by hand with --runtime-dir).
    let control = inherited_control()?;
    let mut store = Store::open(&args.data_dir)?;
    // The blob store of imports: created if missing, what an interrupted
    // upload left in its tmp/ removed (SPEC C2).
    labfy_store::blobs::BlobStore::open(&args.data_dir).context("the blob store")?;
    let workspace = match &args.workspace {
        Some(text) => ObjectRef::parse_kind(text, RefKind::Workspace).map_err(anyhow::Error::msg)?.id(),
        None => match store.reads().workspaces()?.into_iter().find(|w| w.status == "READY") {
            Some(w) => w.id.id(),
            None => {
                bail!("no ready workspace in {}; run `labfy up` or `labfy specimen` first", args.data_dir.display())
            }
        },
    };
    let chosen = store.reads().workspace(workspace).context("the chosen workspace")?;
    // Uploads and exports a stopped server left running end as interrupted
    // (an import `labfy import` is running moves after every file).
    let stale_before =
        (chrono::Utc::now() - chrono::Duration::minutes(5)).to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    let abandoned = store.abandon_stale_jobs(workspace, &stale_before)?;
    if abandoned > 0 {
        tracing::warn!(jobs = abandoned, "import or export jobs interrupted by the last stop marked FAILED");
    }
    // SPEC P2: a REAL workspace only from a process the kernel keeps off the
    // network — checked here, as a fact about this process, not as a flag.
    let isolation = labfy_server::isolation::Isolation::detect();
    if chosen.class == labfy_store::WorkspaceClass::Real && !isolation.isolated {
        bail!("{} is a REAL workspace and this process is not isolated ({}) (SPEC P2)", chosen.id, isolation.detail);
    }
    tracing::info!(isolated = isolation.isolated, detail = %isolation.detail, "network isolation");
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        // Inside the tokio runtime: the agent runtime spawns its worker here.
        let db = Db::new(store, args.data_dir.clone());
        let optional = labfy_server::state::OptionalCatalog {
            enabled: args.optional_catalog,
            capabilities_dir: args.capabilities_dir.clone(),
        };
        let mut state = AppState::with_catalog(db, port, workspace, RateLimit::default(), &agent, &optional)?;
        if let Some(dir) = &args.runtime_dir {
            // The supervisor's login key (SPEC T4): its links and sessions.
            let (_, key) = labfy_ipc::login::read_login_file(dir)?;
            state = state.with_runtime_dir(dir.clone()).with_login_key(key, RateLimit::default())?;
        }
        // The agent's turns of the last run (F4), and its import jobs (K3).
        state.restore_agent_journal();
        state.settle_interrupted_jobs();
        // A contract changed since the last run (SPEC R5): what waited or
        // was granted under the old one is void, before anything resumes.
        state.void_under_old_contracts();
        // The agent's `web.fetch` runs through the campaign runner (F2).
        if state.lend_fetcher() {
            tracing::info!("web.fetch runs under granted campaigns");
        }
        // The agent's `sandbox.exec` runs are the governor's (X1).
        if state.lend_sandbox() {
            tracing::info!("sandbox.exec runs through the governor");
        }
        // REAL campaigns a previous run left unfinished go on (E3–E6).
        match state.campaigns().resume_unfinished().await {
            Ok(0) => {}
            Ok(n) => tracing::info!(campaigns = n, "unfinished campaigns resumed"),
            Err(e) => tracing::error!(error = %e, "cannot read the unfinished campaigns; none resumed"),
        }
        // So do extraction jobs (C4), from their cursor.
        match labfy_server::extraction::resume(state.db(), workspace).await {
            Ok(0) => {}
            Ok(n) => tracing::info!(jobs = n, "unfinished extractions resumed"),
            Err(e) => tracing::error!(error = %e, "cannot read the unfinished extractions; none resumed"),
        }
        let asked = match &args.runtime_dir {
            Some(dir) => {
                let plane = labfy_ipc::daemon::start_control(dir, labfy_ipc::messages::Role::Server, control, || {
                    (true, "serving the UI and the API".to_owned())
                })?;
                // The analyst's wish to open another workspace (SPEC C1)
                // goes to the supervisor with each health answer.
                state.set_workspace_wish(plane.switch_to);
                Some(plane.shutdown)
            }
            None => None,
        };
        tracing::info!(port, "labfy-server listening");
        // Started by hand, the server prints its own one-time login link;
        // under the supervisor, `labfy up` and `labfy open` do.
        if args.runtime_dir.is_none() {
            println!("{}", labfy_ipc::login::login_url(port, &state.mint_login_code()));
        }
        let stop = async move {
            match asked {
                Some(n) => tokio::select! { _ = n.notified() => {}, _ = shutdown_signal() => {} },
                None => shutdown_signal().await,
            }
        };
        labfy_server::serve(listener, state, stop).await?;
        Ok::<(), anyhow::Error>(())
    })?;
    Ok(())
}

/// Takes the inherited control descriptor named by `LABFY_CONTROL_FD`, if
/// any (it must be [`labfy_ipc::daemon::CONTROL_FD`] and a Unix stream).
fn inherited_control() -> anyhow::Result<labfy_ipc::daemon::ControlChannel> {
    use labfy_ipc::daemon::{CONTROL_FD, ControlChannel};
    let Some(value) = std::env::var_os("LABFY_CONTROL_FD") else { return Ok(ControlChannel::Socket) };
    if value.to_str() != Some(&CONTROL_FD.to_string()) {
        bail!("LABFY_CONTROL_FD={value:?}: the control channel is passed on fd {CONTROL_FD}");
    }
    // SAFETY: the supervisor passed fd 4 for this purpose and nothing else in
    // this process owns it; the check below refuses anything but a Unix socket.
    #[allow(unsafe_code)]
    let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(CONTROL_FD) };
    let stream = std::os::unix::net::UnixStream::from(fd);
    stream.peer_addr().context("LABFY_CONTROL_FD: fd 4 is not a connected Unix socket")?;
    Ok(ControlChannel::Inherited(stream))
}

async fn shutdown_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(%e, "cannot watch SIGTERM");
            return std::future::pending().await;
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("shutting down");
}
