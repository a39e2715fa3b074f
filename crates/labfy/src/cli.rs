//! Command-line parsing and the commands themselves.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use labfy::{Failure, generate_with_progress};
use labfy_core::{ErrorKind, ObjectRef, RefKind};
use labfy_server::listener;
use labfy_store::specimen::{self, SpecimenOutcome, SpecimenSpec};
use labfy_store::{Store, WorkspaceClass};

/// Default loopback port of the UI.
pub const DEFAULT_PORT: u16 = 7345;

/// Labfy — a Tor-isolated research appliance with a resource governor.
#[derive(Parser)]
#[command(name = "labfy", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start Labfy: create the SPECIMEN workspace on a fresh data directory,
    /// serve the UI on 127.0.0.1:<port> and print its URL. Stop with Ctrl-C.
    Up {
        /// Data directory (holds labfy.sqlite3). Default: $XDG_DATA_HOME/labfy,
        /// else ~/.local/share/labfy.
        #[arg(long, env = "LABFY_DATA_DIR")]
        data_dir: Option<PathBuf>,
        /// Loopback port of the browser UI.
        #[arg(long, env = "LABFY_PORT", default_value_t = DEFAULT_PORT)]
        port: u16,
        /// Workspace to open (`workspace:<uuid>`). Default: the first ready one.
        #[arg(long)]
        workspace: Option<String>,
        /// Private runtime directory (sockets, per-boot secret; mode 0700,
        /// removed at stop). Default: /run/labfy for root, else
        /// $XDG_RUNTIME_DIR/labfy, else /tmp/labfy-<uid>.
        #[arg(long, env = "LABFY_RUNTIME_DIR")]
        runtime_dir: Option<PathBuf>,
        /// The llama-server program the governor may start for the local
        /// model (`labfy model start`); without it, model starts are refused.
        #[arg(long, env = "LABFY_LLAMA_SERVER")]
        llama_server: Option<PathBuf>,
        /// An arti configuration file (arti's TOML format: bridges, or a
        /// private Tor network) for the egress daemon; without it, egress
        /// uses the real Tor network.
        #[arg(long, env = "LABFY_ARTI_CONFIG")]
        arti_config: Option<PathBuf>,
        /// Largest body egress keeps per fetch, MiB (SPEC C3): a fetched
        /// page or document waits in the scratch directory (what a campaign
        /// asks the governor for, per URL) until the server stores it.
        #[arg(long, env = "LABFY_MAX_BODY_MIB", default_value_t = labfy_ipc::messages::egress::DEFAULT_MAX_BODY_BYTES >> 20,
              value_parser = clap::value_parser!(u64).range(1..=(labfy_ipc::messages::egress::MAX_BODY_BYTES_CEILING >> 20)))]
        max_body_mib: u64,
        /// The operator's configuration file (TOML; the packaged unit gives
        /// /etc/labfy/labfy.toml): each setting applies where neither a flag
        /// nor the environment gives it (docs/OPERATIONS.md, "Configuration").
        #[arg(long, env = "LABFY_CONFIG")]
        config: Option<PathBuf>,
    },
    /// Show the governor's samples, reservations and admission log.
    Resources {
        /// Runtime directory of the running `labfy up`.
        #[arg(long, env = "LABFY_RUNTIME_DIR")]
        runtime_dir: Option<PathBuf>,
        /// Print the state as JSON (for machines).
        #[arg(long)]
        json: bool,
    },
    /// Start, stop or show the local model (the governor's llama-server).
    Model {
        #[command(subcommand)]
        what: crate::governor_cli::ModelWhat,
    },
    /// List, show, approve or refuse the grants egress holds: a grant made
    /// in the UI fetches nothing until a human confirms it here or on
    /// egress's confirmation page (SPEC T2).
    Grant {
        #[command(subcommand)]
        what: crate::grant_cli::GrantWhat,
    },
    /// Print a fresh one-time login link for the UI of a running `labfy up`
    /// (SPEC T4): only the user that runs Labfy can read what it is made from.
    Open {
        /// Runtime directory of the running `labfy up` (same default).
        #[arg(long, env = "LABFY_RUNTIME_DIR")]
        runtime_dir: Option<PathBuf>,
    },
    /// Show the state of each process of a running `labfy up`.
    Status {
        /// Runtime directory of the running `labfy up` (same default).
        #[arg(long, env = "LABFY_RUNTIME_DIR")]
        runtime_dir: Option<PathBuf>,
    },
    /// Write a deterministic synthetic (SPECIMEN) investigation.
    Specimen {
        /// Data directory (created if missing).
        #[arg(long, env = "LABFY_DATA_DIR")]
        data_dir: PathBuf,
        /// Number of evidence items, 1 to 1,000,000.
        #[arg(long, default_value_t = specimen::DEFAULT_SPECIMEN_SIZE)]
        size: u64,
        /// Seed: the same seed gives the same ids and content.
        #[arg(long, default_value_t = specimen::DEFAULT_SPECIMEN_SEED)]
        seed: u64,
    },
    /// Find the selectors analysts pivot on (domains, URLs, addresses,
    /// IBANs, crypto and onion addresses, hashes) in the evidence of an
    /// investigation, or of every investigation of a workspace, and add them
    /// to its graph with their positions (SPEC C4). Idempotent.
    Extract(crate::case_cli::ExtractArgs),
    /// Import files and folders into an investigation (SPEC C2): originals
    /// kept by hash, text read by a confined parser, one outcome per file.
    Import(crate::import_cli::ImportArgs),
    /// Serve the agent tool catalog of one investigation to an MCP client
    /// over standard input and output (SPEC L5): the running `labfy up`'s
    /// gateway, policy and human decisions, as any agent's.
    Mcp(crate::mcp::McpArgs),
    /// Export an investigation as a bundle anyone can check offline (SPEC
    /// C5): evidence and its text, entities, relations, mentions,
    /// provenance, fetches, grants, campaigns, the audit log and egress's
    /// fetch log as JSON Lines, the graph as STIX 2.1, and a manifest of
    /// SHA-256 hashes. Prints the bundle's fingerprint.
    Export(crate::case_cli::ExportArgs),
    /// Check a bundle offline: every hash and every cross-reference; the
    /// first mismatch is named. With --fingerprint, the manifest must be the
    /// one handed over.
    Verify(crate::case_cli::VerifyArgs),
    /// Receive a bundle exported by another appliance (SPEC I4): verified as
    /// `labfy verify` does, then opened as a read-only investigation with
    /// its whole provenance (fetches, grants, campaigns, the sender's audit
    /// log, egress's fetch log), marked received with its fingerprint. The
    /// same bundle twice is one investigation. Prints its reference
    #[command(name = "import-bundle")]
    ImportBundle(crate::case_cli::ImportBundleArgs),
    /// List or create workspaces.
    Workspace {
        #[command(subcommand)]
        what: WorkspaceWhat,
    },
}

#[derive(Subcommand)]
enum WorkspaceWhat {
    /// List every workspace (reference, class, status, name) and, indented
    /// under it, its investigations (reference, evidence items, title);
    /// an archived one ends with `archived <when>`, one received from
    /// another appliance with `received <when> (read-only, bundle <fingerprint>)`.
    List {
        /// Data directory.
        #[arg(long, env = "LABFY_DATA_DIR")]
        data_dir: PathBuf,
    },
    /// Create an empty REAL workspace (with one investigation) and print its
    /// reference; open it with `labfy up --workspace <ref>`.
    Create {
        /// Data directory (created if missing).
        #[arg(long, env = "LABFY_DATA_DIR")]
        data_dir: PathBuf,
        /// Display name (1–200 characters).
        #[arg(long)]
        name: String,
    },
}

/// Entry point: parse, run, report.
pub fn main() -> ExitCode {
    // SPEC T4: whatever the caller's umask, what Labfy creates (the data
    // directory, the database and its journals, the runtime directory, the
    // children's files) is its own alone: 0700 directories, 0600 files.
    // SAFETY: umask(2) takes an integer and cannot fail.
    #[allow(unsafe_code)]
    unsafe {
        libc::umask(0o077);
    }
    // The operator's configuration file (`labfy up --config FILE`): its
    // settings become the environment variables the environment leaves
    // unset, before clap reads them — and before any thread exists.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "up")
        && let Some(path) = crate::config_file::named(&args)
        && let Err(e) = crate::config_file::apply(&path)
    {
        let failure = Failure::new(ErrorKind::InvalidInput, e);
        eprintln!("labfy: error: {}", failure.message());
        return ExitCode::from(failure.exit_code());
    }
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::try_from_env("LABFY_LOG").unwrap_or_else(|_| "warn".into()))
        .with_writer(labfy_core::one_line::stderr)
        // Colour codes only for a terminal: under `labfy up` this goes to the log file (SPEC U8).
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let result = match cli.command {
        Command::Up { data_dir, port, workspace, runtime_dir, llama_server, arti_config, max_body_mib, config: _ } => {
            up(data_dir, port, workspace, runtime_dir, llama_server, arti_config, max_body_mib)
        }
        Command::Resources { runtime_dir, json } => crate::governor_cli::resources(runtime_dir, json),
        Command::Model { what } => crate::governor_cli::model(what),
        Command::Grant { what } => crate::grant_cli::grant(what),
        Command::Status { runtime_dir } => status_cmd(runtime_dir),
        Command::Open { runtime_dir } => open_cmd(runtime_dir),
        Command::Specimen { data_dir, size, seed } => specimen_cmd(data_dir, SpecimenSpec { seed, size }),
        Command::Extract(args) => crate::case_cli::extract(args),
        Command::Import(args) => crate::import_cli::import(args),
        Command::Mcp(args) => crate::mcp::mcp(args),
        Command::Export(args) => crate::case_cli::export(args),
        Command::Verify(args) => crate::case_cli::verify(args),
        Command::ImportBundle(args) => crate::case_cli::import_bundle(args),
        Command::Workspace { what: WorkspaceWhat::List { data_dir } } => workspace_list(data_dir),
        Command::Workspace { what: WorkspaceWhat::Create { data_dir, name } } => workspace_create(data_dir, &name),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("labfy: error: {}", f.message());
            ExitCode::from(f.exit_code())
        }
    }
}

fn default_data_dir() -> Result<PathBuf, Failure> {
    if let Some(x) = std::env::var_os("XDG_DATA_HOME").filter(|x| !x.is_empty()) {
        return Ok(PathBuf::from(x).join("labfy"));
    }
    match std::env::var_os("HOME").filter(|h| !h.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".local/share/labfy")),
        None => Err(Failure::new(ErrorKind::InvalidInput, "no HOME or XDG_DATA_HOME: pass --data-dir")),
    }
}

fn specimen_cmd(data_dir: PathBuf, spec: SpecimenSpec) -> Result<(), Failure> {
    let mut store = Store::open(&data_dir)?;
    match generate_with_progress(&mut store, spec)? {
        SpecimenOutcome::Created { workspace, .. } => println!("{workspace}"),
        SpecimenOutcome::AlreadyPresent { workspace, size, .. } => {
            eprintln!(
                "labfy: a complete SPECIMEN with seed {} ({size} items) is already there; nothing written",
                spec.seed
            );
            println!("{workspace}");
        }
    }
    Ok(())
}

fn workspace_list(data_dir: PathBuf) -> Result<(), Failure> {
    let store = Store::open(&data_dir)?;
    for w in store.reads().workspaces()? {
        let archived = |at: &Option<String>| at.as_ref().map(|a| format!("\tarchived {a}")).unwrap_or_default();
        println!("{}\t{}\t{}\t{}{}", w.id, w.class.as_str(), w.status, w.name, archived(&w.archived_at));
        for i in store.reads().investigations(w.id.id())? {
            let received = i
                .received
                .as_ref()
                .map(|r| format!("\treceived {} (read-only, bundle {})", r.received_at, r.fingerprint))
                .unwrap_or_default();
            println!(
                "  {}\t{} evidence items\t{}{}{received}",
                i.id,
                i.evidence_count,
                i.title,
                archived(&i.archived_at)
            );
        }
    }
    Ok(())
}

fn workspace_create(data_dir: PathBuf, name: &str) -> Result<(), Failure> {
    let mut store = Store::open(&data_dir)?;
    let (ws, _inv) = store.create_real_workspace(name, "labfy workspace create")?;
    println!("{ws}");
    Ok(())
}

/// Starts the host launcher, then leaves the host's network namespace for
/// an empty one of the supervisor's own (SPEC P4, issue 18 D4; see
/// [`crate::launcher`]). The process must still be single-threaded (a user
/// namespace, as for a non-root supervisor, demands it; a network namespace
/// entered by one thread would leave the others outside). Where either step
/// fails, the supervisor keeps the host's network and says why.
fn leave_the_host_network() -> (Option<std::sync::Arc<crate::launcher::HostLauncher>>, Option<std::fs::File>) {
    let threads = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("Threads:")).and_then(|n| n.trim().parse::<u32>().ok()));
    if threads != Some(1) {
        eprintln!("labfy: the supervisor keeps the host's network: it already runs {threads:?} threads");
        return (None, None);
    }
    let (log_read, log_write) = match labfy_sys::pipe() {
        Ok(pair) => pair,
        Err(e) => {
            eprintln!("labfy: the supervisor keeps the host's network: no pipe for the launcher's log ({e})");
            return (None, None);
        }
    };
    let started = match crate::launcher::start(std::process::Stdio::from(log_write)) {
        Ok(started) => started,
        Err(e) => {
            eprintln!("labfy: the supervisor keeps the host's network: cannot start the host launcher ({e})");
            return (None, None);
        }
    };
    let left = labfy_sys::steps::NoNetwork::prepare().enter();
    let launcher = match started.listen() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("labfy: cannot listen to the host launcher ({e}); egress cannot be started");
            return (None, Some(log_read));
        }
    };
    match left {
        Ok(()) => eprintln!("labfy: supervisor in a network namespace of its own; egress alone has the host's"),
        Err(e) => eprintln!("labfy: the supervisor keeps the host's network: cannot leave it ({e})"),
    }
    (Some(launcher), Some(log_read))
}

fn open_cmd(runtime_dir: Option<PathBuf>) -> Result<(), Failure> {
    let dir = runtime_dir.unwrap_or_else(crate::supervisor::default_runtime_dir);
    let (port, key) = labfy_ipc::login::read_login_file(&dir).map_err(|e| {
        Failure::new(
            ErrorKind::Unavailable,
            format!("no running labfy up to log in to ({e}); start it with `labfy up`"),
        )
    })?;
    let code = key.mint_code(std::time::SystemTime::now());
    println!("{}", labfy_ipc::login::login_url(port, &code));
    Ok(())
}

fn status_cmd(runtime_dir: Option<PathBuf>) -> Result<(), Failure> {
    let dir = runtime_dir.unwrap_or_else(crate::supervisor::default_runtime_dir);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let children = runtime.block_on(crate::supervisor::status(&dir))?;
    println!("{:<10} {:<11} {:>8} {:>8}  detail", "process", "state", "pid", "restarts");
    for c in children {
        let pid = c.pid.map_or_else(|| "-".to_owned(), |p| p.to_string());
        println!(
            "{:<10} {:<11} {:>8} {:>8}  {}",
            labfy_ipc::daemon::role_name(c.role),
            c.state,
            pid,
            c.restarts,
            c.detail
        );
        if let Some(confinement) = &c.confinement {
            println!("{:<10} confinement: {confinement}", "");
        }
        if c.warnings > 0 {
            let last = c.last_warning.as_deref().unwrap_or("?");
            println!("{:<10} warnings: {} logged (last: {last})", "", c.warnings);
        }
    }
    Ok(())
}

fn up(
    data_dir: Option<PathBuf>,
    port: u16,
    workspace: Option<String>,
    runtime_dir: Option<PathBuf>,
    llama_server: Option<PathBuf>,
    arti_config: Option<PathBuf>,
    max_body_mib: u64,
) -> Result<(), Failure> {
    // A service user confines its children in user namespaces: a system
    // that denies them (Ubuntu's AppArmor rule, a sysctl, a seccomp policy)
    // is refused here, with the reason and the fix, before anything starts.
    labfy_sys::userns::check().map_err(|why| Failure::new(ErrorKind::Unavailable, format!("cannot start: {why}")))?;
    let data_dir = match data_dir {
        Some(d) => d,
        None => default_data_dir()?,
    };
    // Egress reads and validates the file itself (only it links arti); here
    // it must at least be a file, named absolutely for the child.
    let arti_config = arti_config
        .map(|p| {
            std::fs::canonicalize(&p).ok().filter(|c| c.is_file()).ok_or_else(|| {
                Failure::new(ErrorKind::InvalidInput, format!("--arti-config {}: no such file", p.display()))
            })
        })
        .transpose()?;
    let wanted = workspace
        .map(|w| ObjectRef::parse_kind(&w, RefKind::Workspace))
        .transpose()
        .map_err(|e| Failure::new(ErrorKind::InvalidInput, format!("--workspace: {e}")))?;
    // The agent's configuration (SPEC M4) is the server's, from the
    // `LABFY_AGENT_*` variables passed to it: checked here first, so a bad
    // one is one clear error instead of a server that keeps exiting. The
    // endpoint `governed` is the governor's model socket in our runtime
    // directory (SPEC D1).
    let runtime_dir = runtime_dir.unwrap_or_else(crate::supervisor::default_runtime_dir);
    let agent = labfy_runtime::client::AgentMode::resolve(
        &labfy_runtime::client::AgentFlags::default(),
        labfy_runtime::client::process_env,
        Some(&labfy_ipc::daemon::model_socket(&runtime_dir)),
    )
    .map_err(|e| Failure::new(ErrorKind::InvalidInput, format!("invalid agent configuration (SPEC M4): {e}")))?;
    // The socket first: a port in use fails before anything is written.
    let listener = listener::bind_loopback(listener::loopback(port))?;
    let programs = crate::supervisor::Programs::beside_current_exe()?;
    let mut store = Store::open(&data_dir)?;
    let ready = |s: &Store| -> Result<Vec<_>, Failure> {
        Ok(s.reads().workspaces()?.into_iter().filter(|w| w.status == "READY").collect())
    };
    // The embedded default: without --workspace, and with no ready SPECIMEN
    // workspace yet, write one.
    if wanted.is_none() && !ready(&store)?.iter().any(|w| w.class == WorkspaceClass::Specimen) {
        eprintln!("labfy: no SPECIMEN workspace in {}: writing the default one", data_dir.display());
        generate_with_progress(&mut store, SpecimenSpec::default())?;
    }
    let workspaces = ready(&store)?;
    let chosen = match wanted {
        Some(w) => workspaces.iter().find(|x| x.id == w).ok_or_else(|| {
            Failure::new(ErrorKind::InvalidInput, format!("no ready workspace {w} in {}", data_dir.display()))
        })?,
        // Without --workspace: the first SPECIMEN one (REAL ones must be asked for).
        None => workspaces.iter().find(|w| w.class == WorkspaceClass::Specimen).ok_or_else(|| {
            Failure::new(
                ErrorKind::InvalidInput,
                format!("no ready SPECIMEN workspace in {}; name one with --workspace", data_dir.display()),
            )
        })?,
    };
    // Under systemd with `Delegate=yes` (the unit sets the governor's cgroup
    // root to `delegated`, SPEC D1): into the `supervisor` leaf before any
    // child exists, so that the governor may confine beside it. A unit
    // without delegation is said here and by the governor, which then
    // refuses every confined run with the reason.
    if std::env::var("LABFY_GOVERNOR_CGROUP_ROOT").is_ok_and(|v| v == "delegated") {
        match labfy_governor::cgroup::enter_supervisor_leaf() {
            Ok(moved) => {
                for leaf in moved {
                    eprintln!("labfy: supervisor moved into cgroup {}", leaf.display());
                }
            }
            Err(e) => {
                eprintln!("labfy: no delegated cgroup sub-tree ({e}): model starts and sandbox runs will be refused")
            }
        }
    }
    // SPEC P4: only egress has a network. The UI's socket is bound; egress
    // is started (and restarted) by a launcher left in the host's network
    // namespace, and the supervisor goes into one of its own with nothing
    // in it, as the governor does. Said, not silent, where it cannot be.
    let (host_launcher, launcher_log) = leave_the_host_network();
    // The server runs with our uid: it must not be able to ptrace us.
    labfy_ipc::daemon::forbid_ptrace().map_err(|e| Failure::new(ErrorKind::Internal, e.to_string()))?;
    let (ws, name, class) = (chosen.id, chosen.name.clone(), chosen.class);
    drop(store);
    let plan = crate::supervisor::Plan {
        real_workspace: class == WorkspaceClass::Real,
        data_dir: data_dir.clone(),
        workspace: ws.to_string(),
        runtime_dir,
        programs,
        llama_server,
        arti_config,
        max_body_mib,
        // TCP on its own loopback only for a model endpoint named by port;
        // the governed model is a Unix socket.
        loopback_tcp: agent.model_config().is_some_and(|m| m.endpoint().is_tcp()),
        host_launcher,
        launcher_log,
    };
    // One thread: the children's PR_SET_PDEATHSIG follows the thread that
    // forked them, and this one lives as long as the supervisor.
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(crate::supervisor::run(plan, listener, move |link| {
        println!("Labfy is serving {name} ({}) from {}", class.as_str(), data_dir.display());
        println!("Open {link}");
        println!("(a one-time link; `labfy open` prints a fresh one)");
        println!("The processes' log: {}", labfy::layout::log_file(&data_dir).display());
    }))?;
    eprintln!("labfy: stopped");
    Ok(())
}
