//! `labfy-egress`: the egress daemon, started by `labfy up`.
//!
//! Today it is the process and its sockets only, and it has no network code
//! at all: it answers health on its control socket (to the supervisor) and on
//! `egress.sock` (to the workspace server the supervisor names), reporting
//! itself not ready — every fetch is unavailable until the Tor client (arti)
//! arrives with the egress issue. There is no clear-net fallback to fall to.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use labfy_ipc::daemon;
use labfy_ipc::messages::egress::{EgressRequest, EgressResponse};
use labfy_ipc::messages::{Boundary, Health, Role};

/// Labfy's egress daemon (normally started by `labfy up`).
#[derive(Parser)]
#[command(version, about)]
struct Args {
    /// Private runtime directory holding the sockets and the per-boot secret.
    #[arg(long, env = "LABFY_RUNTIME_DIR")]
    runtime_dir: PathBuf,
}

const DETAIL: &str = "no Tor client yet: every fetch is unavailable";

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("LABFY_LOG").unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let started = Instant::now();
    daemon::main("labfy-egress", async move {
        daemon::run_service(
            &args.runtime_dir,
            Role::Egress,
            Boundary::Egress,
            || (false, DETAIL.to_owned()),
            move |req: EgressRequest, _peer| async move {
                match req {
                    EgressRequest::Health {} => EgressResponse::Health(Health {
                        role: Role::Egress,
                        pid: std::process::id(),
                        uptime_ms: started.elapsed().as_millis() as u64,
                        ready: false,
                        detail: DETAIL.to_owned(),
                    }),
                    _ => EgressResponse::Failed(labfy_ipc::messages::Failure {
                        code: "UNAVAILABLE".into(),
                        message: DETAIL.into(),
                    }),
                }
            },
        )
        .await
    })
}
