//! `labfy-governor`: the Resource Governor daemon, started by `labfy up`
//! (SPEC Q, P5, M11). The work is in the `labfy_governor` library.

use std::process::ExitCode;

use clap::Parser;
use labfy_governor::config::{Args, GovernorConfig};
use labfy_ipc::daemon;

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("LABFY_LOG").unwrap_or_else(|_| "info".into()))
        .with_writer(labfy_core::one_line::stderr)
        // Colour codes only for a terminal: under `labfy up` this goes to the log file (SPEC U8).
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let config = match GovernorConfig::from_args(Args::parse()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("labfy-governor: error: {e}");
            return ExitCode::from(2);
        }
    };
    daemon::main("labfy-governor", labfy_governor::service::run(config))
}
