//! A bare arti-client fetcher: the benchmark's reference for `labfy-egress`.
//!
//! It does what the egress daemon does on the network and nothing else — no
//! Labfy IPC, grants, checks or evidence store: it reads an arti TOML
//! configuration (for example the `arti.toml` written by `tests/tor-network`)
//! with egress's own loader, keeps arti's state and cache under
//! `--state-dir`, bootstraps, then fetches
//! a plain `http://` URL `--count` times through Tor with a hand-written
//! HTTP/1.1 `GET` (`Connection: close`), one new stream per fetch. The Tor
//! and HTTP part lives in `common/` (shared with `bench_egress`, which runs
//! this reference next to the real daemon).
//!
//! ```text
//! eval "$(tests/tor-network start /tmp/net)"
//! cargo run -p labfy-egress --example bare_fetch -- \
//!     --arti-config "$LABFY_TEST_ARTI_CONFIG" --state-dir /tmp/bare-state \
//!     --url http://127.0.0.1:8000/ --count 20
//! tests/tor-network stop /tmp/net
//! ```
//!
//! Output, one `key=value` record per line: `bootstrap_ms=…`, then
//! `fetch=i status=… bytes=… connect_ms=… ms=…` per fetch (`connect_ms`: until
//! the stream is open), then
//! `summary count=… median_ms=… p90_ms=… min_ms=… max_ms=…`.

mod common;

use std::path::PathBuf;
use std::time::Instant;

use clap::Parser;
use common::{Result, Target, percentile};

/// Command line.
#[derive(Parser, Debug)]
#[command(about = "Fetch a URL through Tor with bare arti-client (reference for labfy-egress)")]
struct Args {
    /// arti configuration file (arti's TOML format, without [storage]).
    #[arg(long)]
    arti_config: PathBuf,
    /// Directory for arti's state (`state/`) and cache (`cache/`).
    #[arg(long)]
    state_dir: PathBuf,
    /// `http://HOST:PORT/PATH` to fetch (plain HTTP only).
    #[arg(long)]
    url: url::Url,
    /// Number of fetches.
    #[arg(long, default_value_t = 10)]
    count: usize,
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    common::init_logging();

    // arti-client with the `rustls` feature needs a process-wide provider.
    labfy_egress::install_crypto_provider();

    let target = Target::from_url(&args.url)?;
    let (client, took) = common::bootstrap(&args.arti_config, &args.state_dir).await?;
    println!("bootstrap_ms={}", took.as_millis());

    let mut latencies_ms = Vec::with_capacity(args.count);
    for i in 1..=args.count {
        let started = Instant::now();
        let f = common::fetch(&client, &target).await.map_err(|e| format!("fetch {i}: {e}"))?;
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        let connect_ms = f.connected.as_secs_f64() * 1000.0;
        println!("fetch={i} status={} bytes={} connect_ms={connect_ms:.1} ms={ms:.1}", f.status, f.bytes);
        latencies_ms.push(ms);
    }

    if !latencies_ms.is_empty() {
        latencies_ms.sort_by(f64::total_cmp);
        let last = latencies_ms.len() - 1;
        println!(
            "summary count={} median_ms={:.1} p90_ms={:.1} min_ms={:.1} max_ms={:.1}",
            latencies_ms.len(),
            percentile(&latencies_ms, 50),
            percentile(&latencies_ms, 90),
            latencies_ms[0],
            latencies_ms[last],
        );
    }
    Ok(())
}
