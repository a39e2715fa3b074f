//! `labfy`: the appliance's command line (and, with `up`, its supervisor).

mod bench;
mod bench_cases;
mod bench_confinement;
mod bench_gateway;
mod bench_governor;
mod bench_runtime;
mod case_cli;
mod cli;
mod governor_cli;
mod grant_cli;
mod jail;
mod logs;
mod operator;
mod supervisor;

use std::process::ExitCode;

fn main() -> ExitCode {
    cli::main()
}
