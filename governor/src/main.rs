//! `labfy-governor`: the Resource Governor daemon, started by `labfy up`.
//!
//! Today it is the process and its sockets only: it answers health on its
//! control socket (to the supervisor) and on `governor.sock` (to the workspace
//! server the supervisor names). Probes, the admission ledger, cgroups and the
//! LocalModelSupervisor come with the Resource Governor issue.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use labfy_ipc::daemon;
use labfy_ipc::messages::governor::{GovernorRequest, GovernorResponse};
use labfy_ipc::messages::{Boundary, Health, Role};

/// Labfy's Resource Governor daemon (normally started by `labfy up`).
#[derive(Parser)]
#[command(version, about)]
struct Args {
    /// Private runtime directory holding the sockets and the per-boot secret.
    #[arg(long, env = "LABFY_RUNTIME_DIR")]
    runtime_dir: PathBuf,
}

const DETAIL: &str = "process and IPC only: probes and admission are not built yet";

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("LABFY_LOG").unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let started = Instant::now();
    daemon::main("labfy-governor", async move {
        daemon::run_service(
            &args.runtime_dir,
            Role::Governor,
            Boundary::Governor,
            || (true, DETAIL.to_owned()),
            move |req: GovernorRequest, _peer| async move {
                match req {
                    GovernorRequest::Health {} => GovernorResponse::Health(Health {
                        role: Role::Governor,
                        pid: std::process::id(),
                        uptime_ms: started.elapsed().as_millis() as u64,
                        ready: true,
                        detail: DETAIL.to_owned(),
                    }),
                }
            },
        )
        .await
    })
}
