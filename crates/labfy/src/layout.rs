//! Where things are under the data directory, and the directories the
//! server's jail masks ([`crate::jail`]), made before any child starts.

use std::path::{Path, PathBuf};

use labfy_ipc::IpcError;
use labfy_ipc::secret::create_private_dir;

/// Egress's state under the data directory (arti's state and cache).
pub fn egress_state_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("egress")
}

/// The governor's scratch directory under a data directory.
pub fn scratch_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("scratch")
}

/// Where egress keeps fetched bodies until the server reads them (its part
/// of the governor's scratch directory, `<data>/scratch/egress`): masked in
/// the server's view — the server reads a body only through egress, which
/// checks the workspace (SPEC C3, T3).
pub fn egress_bodies_dir(data_dir: &Path) -> PathBuf {
    scratch_dir(data_dir).join("egress")
}

/// The log directory under a data directory.
pub fn log_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("logs")
}

/// The log file under a data directory.
pub fn log_file(data_dir: &Path) -> PathBuf {
    log_dir(data_dir).join("labfy.log")
}

/// Creates (0700) what the server's jail masks or is given read-only:
/// egress's state, the scratch directory and egress's bodies in it, the log
/// book's directory, and the runtime directory's operator sockets' folder
/// (SPEC T1, T3). [`crate::jail::ServerJail::build`] needs them to exist.
pub fn prepare(data_dir: &Path, runtime_dir: &Path) -> Result<(), IpcError> {
    for dir in [
        egress_state_dir(data_dir),
        scratch_dir(data_dir),
        egress_bodies_dir(data_dir),
        log_dir(data_dir),
        labfy_ipc::daemon::operator_dir(runtime_dir),
    ] {
        create_private_dir(&dir)?;
    }
    Ok(())
}
