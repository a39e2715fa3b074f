//! The host-network launcher (SPEC P4, issue 18 D4): only egress has a
//! network.
//!
//! The supervisor needs the host's network namespace for two things: to
//! bind the UI's loopback socket (done once, before anything else) and to
//! start egress, which must live there — and egress is restarted when it
//! crashes. An unprivileged process that leaves a network namespace cannot
//! come back to it, nor put a child into it (`setns` needs `CAP_SYS_ADMIN`
//! over it). So before the supervisor leaves the host's network, it starts
//! this small launcher, which stays behind: a second `labfy` process
//! (`labfy __labfy-host-launcher`, fd 3 its end of a socket pair) whose only
//! work is to start the program the supervisor names, signal it, and say
//! when it exits. Then the supervisor enters a network namespace of its own
//! with nothing in it ([`labfy_sys::steps::NoNetwork`], as the governor
//! does), and every process of the appliance but egress and this launcher
//! has no route anywhere.
//!
//! The protocol is one JSON object per line. The supervisor asks
//! `{"op":"spawn","program":…,"args":[…],"env":[[k,v]…]}` or
//! `{"op":"signal","pid":N,"signal":S}`; the launcher answers a spawn with
//! `{"event":"started","pid":N}` or `{"event":"failed","error":…}`, and
//! says `{"event":"exited","pid":N,"status":W}` (the raw wait status) when
//! a child ends. A child is signalled only while the launcher has not
//! reaped it, so a pid is never signalled after it could be recycled. The
//! launcher dies with the supervisor (`PR_SET_PDEATHSIG`), its children
//! with it; its stderr — theirs too — goes to the supervisor's log book.

use std::collections::HashSet;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

/// The hidden argument that makes `labfy` the launcher.
pub const ARG: &str = "__labfy-host-launcher";
/// The launcher's end of the socket pair.
const LAUNCHER_FD: i32 = 3;
/// Longest wait for the answer to a spawn.
const SPAWN_ANSWER: Duration = Duration::from_secs(10);
/// Longest request or event line, bytes.
const MAX_LINE: usize = 64 * 1024;

/// What the supervisor asks.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
enum Request {
    /// Start `program` with these arguments and this environment (and no
    /// other), stdin and stdout on `/dev/null`, stderr the launcher's.
    Spawn { program: PathBuf, args: Vec<String>, env: Vec<(String, String)> },
    /// Send `signal` to `pid`, one of the launcher's living children.
    Signal { pid: u32, signal: i32 },
}

/// What the launcher says.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case", deny_unknown_fields)]
enum Event {
    Started { pid: u32 },
    Failed { error: String },
    Exited { pid: u32, status: i32 },
}

/// Runs the launcher and exits, when this process was started as one.
pub fn run_if_launcher() {
    if std::env::args_os().nth(1).is_some_and(|a| a == ARG) {
        // SAFETY: fd 3 is the socket pair's end the supervisor placed there
        // for this process alone; nothing else owns it.
        #[allow(unsafe_code)]
        let stream = UnixStream::from(unsafe { OwnedFd::from_raw_fd(LAUNCHER_FD) });
        let code = match serve(stream) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("labfy host launcher: {e}");
                1
            }
        };
        std::process::exit(code);
    }
}

/// The launcher's loop: requests until the supervisor's end closes.
fn serve(stream: UnixStream) -> std::io::Result<()> {
    let writer = Arc::new(Mutex::new(stream.try_clone()?));
    let living: Arc<Mutex<HashSet<u32>>> = Arc::default();
    {
        let (writer, living) = (writer.clone(), living.clone());
        std::thread::spawn(move || reap(&writer, &living));
    }
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    loop {
        line.clear();
        let n = std::io::Read::take(&mut reader, MAX_LINE as u64).read_line(&mut line)?;
        if n == 0 || !line.ends_with('\n') {
            // The supervisor is gone (or sent nonsense): its children go too.
            for pid in living.lock().unwrap_or_else(std::sync::PoisonError::into_inner).iter() {
                // SAFETY: kill(2) on a child of ours not yet reaped (the set
                // holds only those).
                #[allow(unsafe_code)]
                unsafe {
                    libc::kill(*pid as i32, libc::SIGTERM);
                }
            }
            return Ok(());
        }
        let event = match serde_json::from_str::<Request>(&line) {
            Ok(Request::Spawn { program, args, env }) => {
                // Under the lock: the reaper cannot take the pid out (a child
                // that dies at once) before it is in.
                let mut g = living.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                match spawn(&program, &args, &env) {
                    Ok(child) => {
                        let pid = child.id();
                        g.insert(pid);
                        // Reaped by `reap`, never through this handle.
                        drop(child);
                        Some(Event::Started { pid })
                    }
                    Err(e) => Some(Event::Failed { error: format!("cannot start {}: {e}", program.display()) }),
                }
            }
            Ok(Request::Signal { pid, signal }) => {
                let g = living.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if g.contains(&pid) {
                    // SAFETY: kill(2) on a child of ours not yet reaped: the
                    // reaper takes the lock before it reaps.
                    #[allow(unsafe_code)]
                    unsafe {
                        libc::kill(pid as i32, signal);
                    }
                }
                None
            }
            Err(e) => Some(Event::Failed { error: format!("a request the launcher does not understand: {e}") }),
        };
        if let Some(event) = event {
            send(&writer, &event)?;
        }
    }
}

fn spawn(program: &std::path::Path, args: &[String], env: &[(String, String)]) -> std::io::Result<Child> {
    let mut cmd = Command::new(program);
    cmd.env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        // Who may use its control socket: our parent, the supervisor.
        .env(labfy_ipc::daemon::SUPERVISOR_PID_ENV, labfy_ipc::daemon::parent_pid().to_string())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        // Its own process group, as the supervisor's other children.
        .process_group(0);
    // SAFETY: the closure runs between fork and exec and makes one
    // async-signal-safe system call (prctl).
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(|| labfy_sys::steps::die_with_parent(libc::SIGTERM));
    }
    cmd.spawn()
}

/// Waits for any child to end; takes it out of `living` before it is
/// reaped (so no signal can reach a recycled pid), then says so.
fn reap(writer: &Mutex<UnixStream>, living: &Mutex<HashSet<u32>>) {
    loop {
        // SAFETY: a zeroed siginfo_t for waitid to fill.
        #[allow(unsafe_code)]
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: waitid(P_ALL, WNOWAIT) fills `info` and reaps nothing.
        #[allow(unsafe_code)]
        let rc = unsafe { libc::waitid(libc::P_ALL, 0, &mut info, libc::WEXITED | libc::WNOWAIT) };
        if rc != 0 {
            // No child yet (ECHILD) or interrupted: look again shortly.
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        // SAFETY: waitid succeeded, so si_pid is set.
        #[allow(unsafe_code)]
        let pid = unsafe { info.si_pid() };
        let mut status = 0;
        {
            let mut g = living.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            g.remove(&(pid as u32));
            // SAFETY: reaps the child waitid named; `status` is ours.
            #[allow(unsafe_code)]
            unsafe {
                libc::waitpid(pid, &mut status, 0);
            }
        }
        if send(writer, &Event::Exited { pid: pid as u32, status }).is_err() {
            return;
        }
    }
}

fn send(writer: &Mutex<UnixStream>, event: &Event) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(event).map_err(std::io::Error::other)?;
    line.push(b'\n');
    writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner).write_all(&line)
}

/// The supervisor's side, started but not yet listening: the launcher
/// process and the supervisor's end of the pair. Listening needs a thread,
/// and the supervisor must still be single-threaded to leave its network
/// namespace, so that comes after ([`Started::listen`]).
pub struct Started {
    stream: UnixStream,
    child: Child,
}

/// Starts the launcher: this same program with [`ARG`], the pair's other
/// end as fd 3, dying with the supervisor, its stderr going to `stderr`.
pub fn start(stderr: Stdio) -> std::io::Result<Started> {
    let (ours, theirs) = UnixStream::pair()?;
    let theirs_fd = std::os::fd::AsRawFd::as_raw_fd(&theirs);
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.arg(ARG).env_clear().stdin(Stdio::null()).stdout(Stdio::null()).stderr(stderr).process_group(0);
    // SAFETY: the closure runs between fork and exec and makes only
    // async-signal-safe system calls (prctl, dup2/fcntl) on integers.
    #[allow(unsafe_code)]
    unsafe {
        cmd.pre_exec(move || {
            labfy_sys::steps::die_with_parent(libc::SIGKILL)?;
            labfy_sys::steps::place_fd(theirs_fd, LAUNCHER_FD)
        });
    }
    let child = cmd.spawn()?;
    drop(theirs);
    Ok(Started { stream: ours, child })
}

impl Started {
    /// Starts reading the launcher's events (a thread of its own).
    pub fn listen(self) -> std::io::Result<Arc<HostLauncher>> {
        let (answers_tx, answers) = mpsc::channel();
        let (changed, _) = watch::channel(0u64);
        let launcher = Arc::new(HostLauncher {
            writer: Mutex::new(self.stream.try_clone()?),
            answers: Mutex::new(answers),
            exited: Mutex::default(),
            gone: Mutex::new(None),
            changed,
            _child: Mutex::new(self.child),
        });
        let reader = launcher.clone();
        let stream = self.stream;
        std::thread::spawn(move || reader.read_events(stream, &answers_tx));
        Ok(launcher)
    }
}

/// The supervisor's handle on the launcher.
pub struct HostLauncher {
    writer: Mutex<UnixStream>,
    answers: Mutex<mpsc::Receiver<Event>>,
    /// Raw wait statuses of the children that ended, by pid.
    exited: Mutex<std::collections::HashMap<u32, i32>>,
    /// Why the launcher is gone, once it is.
    gone: Mutex<Option<String>>,
    changed: watch::Sender<u64>,
    _child: Mutex<Child>,
}

impl HostLauncher {
    fn read_events(&self, stream: UnixStream, answers: &mpsc::Sender<Event>) {
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        let why = loop {
            line.clear();
            match std::io::Read::take(&mut reader, MAX_LINE as u64).read_line(&mut line) {
                Ok(0) => break "the host launcher exited".to_owned(),
                Err(e) => break format!("the host launcher's socket failed: {e}"),
                Ok(_) => {}
            }
            match serde_json::from_str::<Event>(&line) {
                Ok(Event::Exited { pid, status }) => {
                    self.exited.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(pid, status);
                    self.changed.send_modify(|n| *n += 1);
                }
                Ok(answer) => {
                    let _ = answers.send(answer);
                }
                Err(e) => break format!("the host launcher said something else: {e}"),
            }
        };
        *self.gone.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(why);
        self.changed.send_modify(|n| *n += 1);
    }

    /// Why the launcher is gone, once it is: egress can then never be
    /// started again in the host's network (SPEC K3).
    pub fn gone(&self) -> Option<String> {
        self.gone.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    fn ask(&self, request: &Request) -> std::io::Result<()> {
        let mut line = serde_json::to_vec(request).map_err(std::io::Error::other)?;
        line.push(b'\n');
        self.writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner).write_all(&line)
    }

    /// Starts `program` in the host's network namespace.
    pub fn spawn(
        self: &Arc<Self>,
        program: &std::path::Path,
        args: &[OsString],
        env: &[(OsString, OsString)],
    ) -> std::io::Result<RemoteChild> {
        if let Some(why) = self.gone.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone() {
            return Err(std::io::Error::other(why));
        }
        let text = |s: &OsString| {
            s.clone().into_string().map_err(|s| std::io::Error::other(format!("{} is not UTF-8", s.to_string_lossy())))
        };
        let args = args.iter().map(text).collect::<std::io::Result<Vec<_>>>()?;
        let env = env.iter().map(|(k, v)| Ok((text(k)?, text(v)?))).collect::<std::io::Result<Vec<_>>>()?;
        let answers = self.answers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        self.ask(&Request::Spawn { program: program.to_path_buf(), args, env })?;
        match answers.recv_timeout(SPAWN_ANSWER) {
            Ok(Event::Started { pid }) => Ok(RemoteChild { pid, launcher: self.clone() }),
            Ok(Event::Failed { error }) => Err(std::io::Error::other(error)),
            Ok(other) => Err(std::io::Error::other(format!("unexpected answer from the host launcher: {other:?}"))),
            Err(_) => Err(std::io::Error::other("the host launcher did not answer")),
        }
    }

    fn status_of(&self, pid: u32) -> Option<ExitStatus> {
        if let Some(status) = self.exited.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get(&pid) {
            return Some(ExitStatus::from_raw(*status));
        }
        // The launcher gone, its children die with it (SIGTERM).
        self.gone.lock().unwrap_or_else(std::sync::PoisonError::into_inner).as_ref().map(|_| ExitStatus::from_raw(15))
    }
}

/// A child of the launcher, as the supervisor holds it.
pub struct RemoteChild {
    pid: u32,
    launcher: Arc<HostLauncher>,
}

impl RemoteChild {
    /// Its pid.
    pub fn id(&self) -> u32 {
        self.pid
    }

    /// Its end, if it has ended.
    pub fn try_wait(&self) -> Option<ExitStatus> {
        self.launcher.status_of(self.pid)
    }

    /// Sends `signal` through the launcher (ignored once it has ended).
    pub fn signal(&self, signal: i32) -> std::io::Result<()> {
        self.launcher.ask(&Request::Signal { pid: self.pid, signal })
    }

    /// Waits for its end.
    pub async fn wait(&self) -> ExitStatus {
        let mut rx = self.launcher.changed.subscribe();
        loop {
            if let Some(status) = self.try_wait() {
                return status;
            }
            if rx.changed().await.is_err() {
                return ExitStatus::from_raw(libc::SIGKILL);
            }
        }
    }
}
