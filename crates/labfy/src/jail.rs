//! The workspace server's confinement (SPEC P2, T1, T3): what it is given,
//! as a [`labfy_sys::Jail`]. The sequence itself — namespaces, minimal root,
//! limits, Landlock, capabilities, seccomp — lives in `labfy-sys`, shared by
//! every confined child.
//!
//! What the server sees:
//! - its program and the system's libraries, read-only; `/dev/null` and the
//!   random devices; a private `/proc` (its own PID namespace: no host
//!   process to see or signal); a private 64 MiB `/tmp`;
//! - its data directory, writable — except `<data>/egress`, egress's Tor
//!   state, `<data>/scratch/egress`, the fetched bodies egress keeps for it,
//!   and `<data>/logs`, the other processes' log, each masked by an empty
//!   read-only tmpfs (T3); each of those and `<data>/scratch` is a mount
//!   point, which it can neither rename nor replace (V5);
//! - the runtime directory **read-only** (the other daemons' sockets, the
//!   IPC secret: it can connect and read, never replace — T3); its own
//!   control channel is an inherited socket pair, not a file;
//! - the operator's capability manifests (`[agent] capabilities_dir`, SPEC
//!   X2), read-only, when named and present;
//! - no network but its own loopback; Unix sockets only — the governed
//!   model is one, in the runtime directory (TCP on that loopback only when
//!   the operator names a model endpoint by port);
//! - no capability, no new privilege, no core dump, bounded descriptors.

use std::path::Path;

use labfy_sys::seccomp::{Policy, Sockets};
use labfy_sys::{Jail, Root, SpawnError};

use crate::layout::{egress_bodies_dir, egress_state_dir, log_dir, scratch_dir};

/// Open files the server may hold.
pub const SERVER_MAX_FILES: u64 = 4096;
/// Size of the server's private `/tmp` (SQLite's temporary files).
pub const SERVER_TMP_BYTES: u64 = 64 << 20;

/// What the server is given, before its arguments and environment.
pub struct ServerJail<'a> {
    /// The `labfy-server` program (or a stand-in).
    pub program: &'a Path,
    /// Its data directory.
    pub data_dir: &'a Path,
    /// The supervisor's runtime directory.
    pub runtime_dir: &'a Path,
    /// TCP on its own loopback (a model endpoint named by port).
    pub loopback_tcp: bool,
    /// Its seccomp allow-list. Always on under `labfy up`; off only to
    /// measure what the filter costs (`labfy-bench confinement`).
    pub seccomp: bool,
    /// The operator's folder of capability manifests, read-only (X2).
    pub capabilities_dir: Option<&'a Path>,
}

impl ServerJail<'_> {
    /// The jail; `data_dir`, `runtime_dir`, its `operator` directory,
    /// `<data>/egress`, `<data>/scratch/egress` and `<data>/logs` must exist.
    pub fn build(&self) -> Result<Jail, SpawnError> {
        let mut root = Root::new();
        root.system()?.devices()?.proc()?.tmp(SERVER_TMP_BYTES)?;
        // Order matters: the runtime directory may lie inside the data
        // directory (tests do that), so data first, then what covers parts
        // of it.
        root.writable(self.data_dir)?;
        root.mask(&egress_state_dir(self.data_dir))?;
        // The scratch directory is bound onto itself, writable as before, so
        // that it is a mount point the server cannot rename or remove: else
        // it could move `scratch` aside with egress's mask in it and make a
        // `scratch/egress` of its own where egress, opening by path, would
        // then write its bodies (the red team's F6, SPEC V5).
        root.writable(&scratch_dir(self.data_dir))?;
        root.mask(&egress_bodies_dir(self.data_dir))?;
        // The other processes' log (SPEC U8, T3): neither read nor rewritten.
        root.mask(&log_dir(self.data_dir))?;
        root.read_only(self.runtime_dir)?;
        // The operator sockets accept any pid holding the secret (which the
        // server reads): no path to them.
        root.mask(&labfy_ipc::daemon::operator_dir(self.runtime_dir))?;
        // The operator's manifests, when the folder exists (a missing one
        // is said by the registry, not a failed start).
        if let Some(dir) = self.capabilities_dir.filter(|d| d.is_dir()) {
            root.read_only(dir)?;
        }
        let mut jail = Jail::new(self.program, root);
        jail.hostname("labfy-server")?
            .may_write(self.data_dir)
            .limit(libc::RLIMIT_CORE, 0)
            .limit(libc::RLIMIT_NOFILE, SERVER_MAX_FILES)
            .tcp_connect(self.loopback_tcp);
        if self.seccomp {
            let sockets = if self.loopback_tcp { Sockets::UnixAndLoopback } else { Sockets::UnixOnly };
            jail.seccomp(Policy { sockets, driver_ioctl: false });
        }
        Ok(jail)
    }
}
