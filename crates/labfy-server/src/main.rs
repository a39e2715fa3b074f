//! `labfy-server`: the workspace server as a process of its own. It serves an
//! inherited listening socket (`LISTEN_FDS=1`, fd 3) when given one, else binds
//! `127.0.0.1:<port>` itself.

use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::Parser;
use labfy_core::{ObjectRef, RefKind};
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
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("LABFY_LOG").unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    // Before any thread exists: take the inherited socket (and clear LISTEN_*).
    let listener = match listener::inherited()? {
        Some(l) => l,
        None => listener::bind_loopback(listener::loopback(args.port))?,
    };
    let port = listener.local_addr()?.port();
    let store = Store::open(&args.data_dir)?;
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
    // SPEC P2: a REAL workspace only from a process the kernel keeps off the
    // network — checked here, as a fact about this process, not as a flag.
    let isolation = labfy_server::isolation::Isolation::detect();
    if chosen.class == labfy_store::WorkspaceClass::Real && !isolation.isolated {
        bail!("{} is a REAL workspace and this process is not isolated ({}) (SPEC P2)", chosen.id, isolation.detail);
    }
    tracing::info!(isolated = isolation.isolated, detail = %isolation.detail, "network isolation");
    let mut state = AppState::new(Db::new(store, args.data_dir.clone()), port, workspace, RateLimit::default())?;
    if let Some(dir) = &args.runtime_dir {
        state = state.with_runtime_dir(dir.clone());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let asked = match &args.runtime_dir {
            Some(dir) => {
                let plane = labfy_ipc::daemon::start_control(dir, labfy_ipc::messages::Role::Server, || {
                    (true, "serving the UI and the API".to_owned())
                })?;
                Some(plane.shutdown)
            }
            None => None,
        };
        tracing::info!(port, "labfy-server listening");
        println!("http://127.0.0.1:{port}/");
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
