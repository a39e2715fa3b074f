//! `labfy`: the appliance's command line (and, with `up`, its supervisor).

mod case_cli;
mod cli;
mod config_file;
mod governor_cli;
mod grant_cli;
mod import_cli;
mod launcher;
mod logs;
mod mcp;
mod operator;
mod reading;
mod supervisor;

use std::process::ExitCode;

fn main() -> ExitCode {
    // A parser worker started by `labfy import` runs and exits here (SPEC C2).
    labfy_parse::run_if_child();
    // The host launcher `labfy up` leaves in the host's network (SPEC P4).
    launcher::run_if_launcher();
    cli::main()
}
