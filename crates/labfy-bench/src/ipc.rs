//! `labfy-bench ipc`: the IPC layer's round trip against a bare socket.

use std::sync::Arc;
use std::time::{Duration, Instant};

use labfy::Failure;

use crate::common::{fail, percentile, report};

/// Options of `labfy-bench ipc`.
#[derive(clap::Args)]
pub struct IpcBenchArgs {
    /// Round trips measured (after 1,000 warm-up ones).
    #[arg(long, default_value_t = 20_000)]
    calls: usize,
}

/// Round trip of a `Health` request to an authenticated IPC daemon, against
/// a bare Unix-socket echo of frames of the same size, on one runtime.
pub fn ipc(args: IpcBenchArgs) -> Result<(), Failure> {
    use labfy_ipc::auth::PeerPolicy;
    use labfy_ipc::client::Client;
    use labfy_ipc::messages::control::{ControlRequest, ControlResponse};
    use labfy_ipc::messages::{Boundary, Health, Role};
    use labfy_ipc::{secret, server};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    runtime.block_on(async move {
        let tmp = tempfile::TempDir::new()?;
        let run = tmp.path().join("run");
        secret::create_private_dir(&run).map_err(fail)?;
        let secret = secret::create_secret(&run).map_err(fail)?;
        let path = run.join("control.sock");
        let listener = server::bind(&path).map_err(fail)?;
        let uid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(&run)?);
        let policy = PeerPolicy {
            boundary: Boundary::Control,
            uid,
            pids: None,
            secret: secret.clone(),
            handshake_timeout: labfy_ipc::auth::HANDSHAKE_TIMEOUT,
        };
        let started = Instant::now();
        tokio::spawn(server::serve(listener, policy, Arc::default(), move |_req: ControlRequest, _peer| async move {
            ControlResponse::Health(Health {
                role: Role::Governor,
                pid: std::process::id(),
                uptime_ms: started.elapsed().as_millis() as u64,
                ready: true,
                detail: "ok".into(),
                switch_to: None,
            })
        }));
        let mut client: Client<ControlRequest, ControlResponse> =
            Client::connect(&path, Boundary::Control, &secret).await.map_err(fail)?;
        let mut samples = Vec::with_capacity(args.calls);
        for i in 0..args.calls + 1000 {
            let t = Instant::now();
            client.call(ControlRequest::Health {}).await.map_err(fail)?;
            if i >= 1000 {
                samples.push(t.elapsed());
            }
        }
        // Bare reference: the same frame sizes echoed over a Unix socket,
        // no authentication, no JSON.
        let bare_path = run.join("bare.sock");
        let bare = tokio::net::UnixListener::bind(&bare_path)?;
        tokio::spawn(async move {
            if let Ok((mut s, _)) = bare.accept().await {
                let mut buf = vec![0u8; 4096];
                let reply = vec![b'x'; 140];
                loop {
                    let mut len = [0u8; 4];
                    if s.read_exact(&mut len).await.is_err() {
                        break;
                    }
                    let n = u32::from_be_bytes(len) as usize;
                    if s.read_exact(&mut buf[..n.min(4096)]).await.is_err() {
                        break;
                    }
                    let _ = s.write_all(&(reply.len() as u32).to_be_bytes()).await;
                    let _ = s.write_all(&reply).await;
                }
            }
        });
        let mut s = tokio::net::UnixStream::connect(&bare_path).await?;
        let request = vec![b'x'; 40];
        let mut bare_samples = Vec::with_capacity(args.calls);
        let mut buf = vec![0u8; 4096];
        for i in 0..args.calls + 1000 {
            let t = Instant::now();
            s.write_all(&(request.len() as u32).to_be_bytes()).await?;
            s.write_all(&request).await?;
            let mut len = [0u8; 4];
            s.read_exact(&mut len).await?;
            let n = u32::from_be_bytes(len) as usize;
            s.read_exact(&mut buf[..n]).await?;
            if i >= 1000 {
                bare_samples.push(t.elapsed());
            }
        }
        println!("# labfy-bench ipc — {} round trips each, one connection", args.calls);
        let p50 = |v: &mut Vec<Duration>| {
            v.sort();
            percentile(v, 0.5)
        };
        let (mut a, mut b) = (samples.clone(), bare_samples.clone());
        let (ipc_p50, bare_p50) = (p50(&mut a), p50(&mut b));
        report("IPC Health round trip", samples);
        report("bare Unix echo round trip", bare_samples);
        println!("{:<28} {:>9.2}", "IPC / bare p50", ipc_p50.as_secs_f64() / bare_p50.as_secs_f64().max(1e-12));
        Ok::<(), Failure>(())
    })
}
