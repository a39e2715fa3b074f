//! `labfy-egress`: the egress daemon, started by `labfy up`. A thin binary
//! over the `labfy_egress` library (its README is the map): configuration,
//! the Tor client, then the service on `egress.sock` until shutdown.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use labfy_egress::{Config, Egress, Limits, Tor};
use labfy_ipc::daemon;
use labfy_ipc::messages::egress::EgressRequest;
use labfy_ipc::messages::{Boundary, Role};

/// Labfy's egress daemon (normally started by `labfy up`).
#[derive(Parser)]
#[command(version, about)]
struct Args {
    /// Private runtime directory holding the sockets and the per-boot secret.
    #[arg(long, env = "LABFY_RUNTIME_DIR")]
    runtime_dir: PathBuf,
    /// Data directory: the store whose grants egress re-checks, and arti's
    /// state and cache under egress/arti.
    #[arg(long, env = "LABFY_DATA_DIR")]
    data_dir: PathBuf,
    /// An arti configuration file (arti's TOML format) — bridges, or a
    /// private test network. Without it, the real Tor network.
    #[arg(long, env = "LABFY_ARTI_CONFIG")]
    arti_config: Option<PathBuf>,
}

/// Exit status of a configuration egress refuses.
const EXIT_CONFIG: u8 = 2;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("LABFY_LOG").unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    labfy_egress::install_crypto_provider();
    let config = match Config::load(&args.data_dir, args.arti_config.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("labfy-egress: configuration refused: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    daemon::main("labfy-egress", async move {
        let custom = config.arti_config.is_some();
        let tor = Tor::start(config.tor).await;
        let egress = Egress::new(config.data_dir, tor, Limits::default(), custom);
        let health = egress.clone();
        daemon::run_service(
            &args.runtime_dir,
            Role::Egress,
            Boundary::Egress,
            move || health.health(),
            move |req: EgressRequest, _peer| {
                let egress = egress.clone();
                async move { egress.handle(req).await }
            },
        )
        .await
    })
}
