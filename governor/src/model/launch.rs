//! A start's steps 5 to 7 and a stop: the socket directory made ready, the
//! child started through the shared confinement sequence ([`Jail`]) with its
//! log's tail kept, `/health` asked on its socket; SIGTERM, then SIGKILL.

use std::collections::VecDeque;
use std::ffi::CString;
use std::io::{BufRead, Read};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use labfy_sys::seccomp::{Policy, Sockets};
use labfy_sys::{ConfinedChild, Jail, Root, SpawnError};

use super::gpu::gpu_devices;
use super::{
    HEALTH_TIMEOUT, LOG_LINE_BYTES, LOG_TAIL_LINES, MODEL_TMP_BYTES, MODEL_UID, SOCKET_DIR_INSIDE, SOCKET_NAME,
    STOP_GRACE,
};

/// `GET /health` on the model's socket: the status code.
pub(super) async fn health_status(socket: &Path) -> Result<u16, String> {
    use http_body_util::Empty;
    use hyper::body::Bytes;
    let asked = async {
        let stream = tokio::net::UnixStream::connect(socket).await.map_err(|e| format!("connect: {e}"))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let req = hyper::Request::get("/health")
            .header(hyper::header::HOST, "localhost")
            .body(Empty::<Bytes>::new())
            .map_err(|e| e.to_string())?;
        let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
        Ok::<u16, String>(resp.status().as_u16())
    };
    tokio::time::timeout(HEALTH_TIMEOUT, asked).await.map_err(|_| "health request timed out".to_owned())?
}

/// Makes the socket directory ready for a run: created if missing (its
/// parent, the runtime directory, is the supervisor's, private), owned by
/// the uid llama-server runs as, with no socket of an earlier run left in
/// it (llama-server would fail to bind; one killed leaves its file).
pub(super) fn prepare_socket_dir(dir: &Path, owner: Option<u32>) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.is_dir() {
        return Err(std::io::Error::other(format!("{} is not a directory", dir.display())));
    }
    if let Some(uid) = owner {
        // Searchable by the server (root in a user namespace of its own,
        // without power over MODEL_UID's files); the gate is the runtime
        // directory above, 0700.
        std::os::unix::fs::chown(dir, Some(uid), Some(uid))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
    }
    match std::fs::remove_file(dir.join(SOCKET_NAME)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

/// Lines of llama-server saying it found no GPU it could use, whatever
/// layers it was asked to offload: it then runs on the CPU alone (llama.cpp's
/// `common/arg.cpp` and its GPU backends' init, CUDA's or ROCm's).
const NO_GPU_MARKERS: [&str; 2] = ["no usable GPU found", "_init: failed to initialize"];
/// Such lines kept, whatever the tail drops.
const NO_GPU_LINES: usize = 4;

/// The bounded tail of a child's log, and the lines that said it found no
/// GPU (kept apart: they come first, and the tail moves on).
#[derive(Clone, Default)]
pub(super) struct LogTail {
    lines: Arc<Mutex<VecDeque<String>>>,
    no_gpu: Arc<Mutex<Vec<String>>>,
}

impl LogTail {
    pub(super) fn push(&self, line: &str) {
        let mut l: String = line.chars().take(LOG_LINE_BYTES).collect();
        l.truncate(LOG_LINE_BYTES);
        if NO_GPU_MARKERS.iter().any(|m| l.contains(m)) {
            let mut n = self.no_gpu.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if n.len() < NO_GPU_LINES {
                n.push(l.clone());
            }
        }
        let mut g = self.lines.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if g.len() == LOG_TAIL_LINES {
            g.pop_front();
        }
        g.push_back(l);
    }

    pub(super) fn last(&self, n: usize) -> String {
        let g = self.lines.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        g.iter().skip(g.len().saturating_sub(n)).cloned().collect::<Vec<_>>().join(" | ")
    }

    /// What llama-server said when it found no GPU it could use, if it did.
    pub(super) fn no_gpu(&self) -> Option<String> {
        let n = self.no_gpu.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        (!n.is_empty()).then(|| n.join(" | "))
    }

    /// Reads `stream` line by line into the tail, on a thread of its own.
    pub(super) fn follow(&self, stream: impl Read + Send + 'static) {
        let tail = self.clone();
        std::thread::spawn(move || {
            let mut reader = std::io::BufReader::new(stream);
            let mut line = Vec::new();
            loop {
                line.clear();
                match reader.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => tail.push(String::from_utf8_lossy(&line).trim_end()),
                }
            }
        });
    }
}

/// What one spawn needs, prepared before the fork.
pub(super) struct Launch {
    pub(super) program: PathBuf,
    pub(super) model_fd: RawFd,
    pub(super) ctx: u32,
    pub(super) gpu_layers: u32,
    pub(super) threads: u32,
    /// Flags that hold llama-server to the estimate (prompt cache, checkpoints).
    pub(super) bounds: Vec<String>,
    /// A GPU runtime's directories outside the system's (ROCm's `/opt/rocm`).
    pub(super) gpu_runtime_dirs: Vec<PathBuf>,
}

/// Spawns llama-server confined (step 6) through the shared confinement
/// sequence of `labfy-sys` (SPEC T1): into its cgroup first; a network
/// namespace of its own with nothing up; its own mount, PID, IPC, UTS and
/// cgroup namespaces; a minimal root holding the system's libraries, its
/// program's directory, `/dev/null` and friends, a private `/proc` and
/// `/tmp`, the socket directory at `/run/model` — and the GPU's device
/// nodes, `/sys` and the GPU runtime's own directories (`/opt/rocm`) when
/// layers are offloaded; the verified model file as
/// fd 3 (reopened through `/proc/self/fd/3`, the only file outside its root
/// Landlock lets it read); no capability; a seccomp allow-list (Unix
/// sockets only); as root, the unprivileged [`MODEL_UID`], otherwise a user
/// namespace of its own.
pub(super) fn spawn(
    launch: &Launch,
    socket_dir: &Path,
    as_root: bool,
    procs: Vec<CString>,
    log: &LogTail,
) -> Result<(ConfinedChild, Vec<String>), String> {
    let program_dir = launch.program.parent().unwrap_or(Path::new("/"));
    let devices = if launch.gpu_layers > 0 { gpu_devices() } else { Vec::new() };
    let jail = || -> Result<Jail, SpawnError> {
        let mut root = Root::new();
        root.system()?.devices()?.proc()?.tmp(MODEL_TMP_BYTES)?.read_only(program_dir)?;
        root.writable_at(socket_dir, Path::new(SOCKET_DIR_INSIDE))?;
        if !devices.is_empty() && Path::new("/sys").is_dir() {
            // GPU runtimes find their devices and topology there.
            root.read_only(Path::new("/sys"))?;
        }
        if !devices.is_empty() {
            for dir in launch.gpu_runtime_dirs.iter().filter(|d| d.is_dir()) {
                // At its real place, and where the program's run path names
                // it when that is a link (`/opt/rocm` → `/opt/rocm-6.4.1`).
                root.read_only(dir)?;
                if std::fs::canonicalize(dir).is_ok_and(|real| real != *dir) {
                    root.read_only_at(dir, dir)?;
                }
            }
        }
        let mut jail = Jail::new(&launch.program, root);
        jail.args(["-m", "/proc/self/fd/3", "--host", &format!("{SOCKET_DIR_INSIDE}/{SOCKET_NAME}"), "-c"])
            .arg(launch.ctx.to_string())
            .arg("-ngl")
            .arg(launch.gpu_layers.to_string())
            .arg("-t")
            .arg(launch.threads.to_string())
            .arg("--no-webui")
            .args(&launch.bounds);
        jail.hostname("labfy-model")?
            .pass_fd(launch.model_fd, 3)
            .reopen_fd(3)
            .no_network()
            .may_write_at(Path::new(SOCKET_DIR_INSIDE))
            .cgroup(procs)
            .limit(libc::RLIMIT_CORE, 0)
            .seccomp(Policy { sockets: Sockets::UnixOnly, driver_ioctl: !devices.is_empty() });
        if !devices.is_empty() {
            // NVIDIA's driver names its threads through /proc at cuInit
            // (error 304 otherwise; see `Jail::proc_writable`).
            jail.proc_writable();
        }
        let mut groups = Vec::new();
        for d in &devices {
            jail.driver_device(&d.path)?;
            if d.gid != 0 && !groups.contains(&d.gid) {
                groups.push(d.gid);
            }
        }
        groups.truncate(labfy_sys::MAX_GROUPS);
        if as_root {
            // The socket is MODEL_UID's; the server, root of a user namespace
            // of its own, must be able to connect: the mode is the
            // directory's business (see `prepare_socket_dir`).
            jail.run_as(MODEL_UID, MODEL_UID, &groups).umask(0);
        } else {
            // The service user's own ids, its groups (render, video) kept:
            // the socket is for that user alone.
            jail.umask(0o077);
        }
        Ok(jail)
    };
    let (read, write) = labfy_sys::pipe().map_err(|e| format!("log pipe: {e}"))?;
    let mut jail = jail().map_err(|e| e.to_string())?;
    jail.output(write.as_raw_fd());
    let (child, confinement) = jail.spawn().map_err(|e| e.to_string())?;
    // Our copy of its output's write end closes here: EOF when it exits.
    drop(write);
    log.follow(read);
    if confinement.missing.is_empty() {
        tracing::info!(pid = child.id(), confinement = %confinement, "llama-server confined");
    } else {
        tracing::warn!(pid = child.id(), confinement = %confinement, "llama-server confined, with protections MISSING");
    }
    Ok((child, confinement.missing))
}

/// SIGTERM our own child, SIGKILL after [`STOP_GRACE`]. It is PID 1 of its
/// PID namespace, where a signal without a handler is ignored: llama-server
/// handles SIGTERM (it finishes the request in flight); a program that does
/// not is killed at the end of the grace.
pub(super) async fn terminate(child: &mut ConfinedChild) {
    let _ = child.signal(libc::SIGTERM);
    if tokio::time::timeout(STOP_GRACE, child.wait()).await.is_err() {
        let _ = child.kill().await;
    }
}
