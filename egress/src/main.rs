//! `labfy-egress`: the egress daemon, started by `labfy up`. A thin binary
//! over the `labfy_egress` library (its README is the map): configuration,
//! the grant ledger, the Tor client, then three doors until shutdown: the
//! server's `egress.sock` (propose, fetch, revoke — never decide), the
//! operator's `operator/egress.operator.sock` (`labfy grant`), and the
//! confirmation page on its own loopback port (SPEC T2).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Parser;
use labfy_egress::confirm::ConfirmPage;
use labfy_egress::{Bodies, Config, Egress, Ledger, Limits, Tor, bodies_dir};
use labfy_ipc::auth::{HANDSHAKE_TIMEOUT, PeerPolicy};
use labfy_ipc::daemon::{self, ControlChannel};
use labfy_ipc::messages::egress::EgressRequest;
use labfy_ipc::messages::{Boundary, Role};
use labfy_ipc::server::{self, Stats};
use tokio_util::sync::CancellationToken;

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
    /// Loopback port of the grant confirmation page (0: any free port; the
    /// links egress makes name it).
    #[arg(long, env = "LABFY_EGRESS_CONFIRM_PORT", default_value_t = 0)]
    confirm_port: u16,
    /// Scratch directory (the governor measures it): fetched bodies wait in
    /// its `egress` folder until the server reads them. Default:
    /// `<data-dir>/scratch`.
    #[arg(long, env = "LABFY_SCRATCH_DIR")]
    scratch_dir: Option<PathBuf>,
    /// Largest body kept per fetch, MiB (SPEC C3); a larger one is refused
    /// with its reason and nothing is kept.
    #[arg(long, env = "LABFY_MAX_BODY_MIB", default_value_t = labfy_ipc::messages::egress::DEFAULT_MAX_BODY_BYTES >> 20,
          value_parser = clap::value_parser!(u64).range(1..=(labfy_ipc::messages::egress::MAX_BODY_BYTES_CEILING >> 20)))]
    max_body_mib: u64,
}

/// Exit status of a configuration egress refuses.
const EXIT_CONFIG: u8 = 2;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("LABFY_LOG").unwrap_or_else(|_| "info".into()))
        .with_writer(labfy_core::one_line::stderr)
        // Colour codes only for a terminal: under `labfy up` this goes to the log file (SPEC U8).
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
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
    let ledger = match Ledger::open(&config.data_dir.join("egress")) {
        Ok(l) => Arc::new(l),
        Err(e) => {
            eprintln!("labfy-egress: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let scratch = args.scratch_dir.clone().unwrap_or_else(|| config.data_dir.join("scratch"));
    let bodies = match Bodies::open(&bodies_dir(&scratch)) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("labfy-egress: the scratch directory {} cannot hold bodies: {e}", scratch.display());
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let limits = Limits { max_body: args.max_body_mib << 20, ..Limits::default() };
    daemon::main("labfy-egress", async move {
        let custom = config.arti_config.is_some();
        let tor = Tor::start(config.tor).await;
        tracing::info!(max_body_bytes = limits.max_body, bodies = %bodies.dir().display(), "fetched bodies wait in scratch");
        let egress = Egress::new(ledger.clone(), tor, bodies, limits, custom);
        let stop = CancellationToken::new();
        let tor_state = egress.clone();
        let page = ConfirmPage::start(ledger, Arc::new(move || tor_state.bootstrap()), args.confirm_port, stop.clone())
            .await?;
        tracing::info!(port = page.port(), "grant confirmation page on 127.0.0.1");
        egress.set_confirm_links(Arc::new(move |g| page.link(g)));

        let health = egress.clone();
        let plane =
            daemon::start_control(&args.runtime_dir, Role::Egress, ControlChannel::Socket, move || health.health())?;
        // The server's socket: only the pids the supervisor names.
        let service = server::bind(&daemon::service_socket(&args.runtime_dir, Boundary::Egress))?;
        let e = egress.clone();
        tokio::spawn(server::serve(
            service,
            daemon::service_policy(&plane, Boundary::Egress),
            Arc::new(Stats::default()),
            move |req: EgressRequest, _peer| {
                let e = e.clone();
                async move { e.handle(req).await }
            },
        ));
        // The operator's socket: same uid and the secret, any pid, in a
        // directory the confined server's root masks — where a human's
        // decision on a grant comes from (`labfy grant approve`).
        labfy_ipc::secret::create_private_dir(&daemon::operator_dir(&args.runtime_dir))?;
        let operator = server::bind(&daemon::operator_socket(&args.runtime_dir, Boundary::Egress))?;
        let policy = PeerPolicy {
            boundary: Boundary::Egress,
            uid: daemon::euid(),
            pids: None,
            secret: plane.secret.clone(),
            handshake_timeout: HANDSHAKE_TIMEOUT,
        };
        let e = egress.clone();
        tokio::spawn(server::serve(operator, policy, Arc::new(Stats::default()), move |req: EgressRequest, _peer| {
            let e = e.clone();
            async move { e.handle_operator(req).await }
        }));
        tracing::info!("egress serving");
        let outcome = daemon::wait_for_shutdown(&plane).await;
        stop.cancel();
        outcome
    })
}
