//! What the `labfy` command shares with the benchmarks (`labfy-bench`): how
//! a command fails, the data directory's layout, the workspace server's
//! jail, and SPECIMEN generation with its progress bar. The command line and
//! the supervisor themselves are the binary's (`main.rs`).

pub mod failure;
pub mod jail;
pub mod layout;
pub mod progress;

pub use failure::Failure;
pub use progress::generate_with_progress;
