//! `labfy-bench confinement`: what the server's system-call filter costs
//! (issue 20's target: secured read-route throughput with the filter ≥ 0.95
//! of the same without it). The real `labfy-server`, confined by the same
//! `labfy-sys` sequence `labfy up` uses — once with its seccomp allow-list,
//! once without — serves one secured read route (`GET /api/v1/workspaces`,
//! a session, every layer) to the same keep-alive load; rounds interleave
//! the two so that drift in the machine's load falls on both. Figures, not
//! assertions (docs/PERFORMANCE.md).

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::path::Path;

use labfy::jail::ServerJail;
use labfy::{Failure, generate_with_progress};
use labfy_ipc::login::LoginKey;
use labfy_server::listener;
use labfy_store::Store;
use labfy_store::specimen::SpecimenSpec;

use crate::common::{fail, fetch_session, load, sibling};

/// Options of `labfy-bench confinement`.
#[derive(clap::Args)]
pub struct ConfinementBenchArgs {
    /// Rounds; each measures both servers.
    #[arg(long, default_value_t = 7)]
    rounds: usize,
    /// Seconds of load per server and round.
    #[arg(long, default_value_t = 3)]
    seconds: u64,
    /// Keep-alive connections of the load.
    #[arg(long, default_value_t = 16)]
    connections: usize,
}

/// One confined server on its own port.
struct Served {
    child: labfy_sys::ConfinedChild,
    addr: SocketAddr,
    _control: std::os::unix::net::UnixStream,
}

fn start(program: &Path, data: &Path, run: &Path, seccomp: bool) -> Result<Served, Failure> {
    let l = listener::bind_loopback(listener::loopback(0))?;
    let addr = l.local_addr()?;
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()?;
    let spec =
        ServerJail { program, data_dir: data, runtime_dir: run, loopback_tcp: false, seccomp, capabilities_dir: None };
    let mut jail = spec.build().map_err(fail)?;
    jail.arg("--runtime-dir").arg(run).arg("--data-dir").arg(data);
    jail.env("LISTEN_FDS", "1").env("LABFY_LOG", "error").listener(l.as_raw_fd());
    jail.env("LABFY_CONTROL_FD", labfy_ipc::daemon::CONTROL_FD.to_string())
        .pass_fd(theirs.as_raw_fd(), labfy_ipc::daemon::CONTROL_FD);
    let (child, _) = jail.spawn().map_err(fail)?;
    Ok(Served { child, addr, _control: ours })
}

/// Waits until the server answers (the login page, 401).
async fn answering(addr: SocketAddr) -> Result<(), Failure> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        if tokio::net::TcpStream::connect(addr).await.is_ok() {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    Err(fail(format!("the confined server on {addr} did not answer")))
}

pub fn confinement(args: ConfinementBenchArgs) -> Result<(), Failure> {
    let tmp = tempfile::TempDir::new()?;
    let data = tmp.path().join("data");
    let run = tmp.path().join("run");
    let mut store = Store::open(&data)?;
    generate_with_progress(&mut store, SpecimenSpec::default())?;
    drop(store);
    let storage = |e: labfy_ipc::IpcError| fail(e.to_string());
    labfy_ipc::secret::create_private_dir(&run).map_err(storage)?;
    labfy::layout::prepare(&data, &run).map_err(storage)?;
    labfy_ipc::secret::create_secret(&run).map_err(storage)?;
    let key = LoginKey::generate();
    // The port in login.json is only for `labfy open`; each server knows its own.
    labfy_ipc::login::write_login_file(&run, 0, &key).map_err(storage)?;
    let (data, run) = (std::fs::canonicalize(&data)?, std::fs::canonicalize(&run)?);
    let program = sibling("labfy-server")?;

    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    rt.block_on(async {
        let mut filtered = start(&program, &data, &run, true)?;
        let mut bare = start(&program, &data, &run, false)?;
        answering(filtered.addr).await?;
        answering(bare.addr).await?;
        let now = std::time::SystemTime::now();
        let c_filtered = fetch_session(filtered.addr, &key.mint_code(now)).await?;
        let c_bare = fetch_session(bare.addr, &key.mint_code(now)).await?;
        println!(
            "# confined labfy-server, GET /api/v1/workspaces with a session: {} connections, {} rounds of {} s per server",
            args.connections, args.rounds, args.seconds
        );
        let mut ratios = Vec::new();
        for round in 1..=args.rounds.max(1) {
            let (b, _) = load(bare.addr, "/api/v1/workspaces", Some(&c_bare), args.connections, args.seconds).await?;
            let (f, _) =
                load(filtered.addr, "/api/v1/workspaces", Some(&c_filtered), args.connections, args.seconds).await?;
            let ratio = f / b.max(1e-9);
            println!("round {round}: without seccomp {b:>8.0} req/s   with seccomp {f:>8.0} req/s   ratio {ratio:.3}");
            ratios.push(ratio);
        }
        ratios.sort_by(f64::total_cmp);
        println!("{:<44} {:>8.3}", "with / without seccomp throughput (median)", ratios[ratios.len() / 2]);
        let _ = filtered.child.kill().await;
        let _ = bare.child.kill().await;
        Ok::<(), Failure>(())
    })
}
