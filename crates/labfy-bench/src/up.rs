//! `labfy-bench up`: how long `labfy up` takes to serve.

use std::time::Instant;

use labfy::{Failure, generate_with_progress};
use labfy_store::Store;
use labfy_store::specimen::SpecimenSpec;

use crate::common::{fail, report, sibling};

/// Options of `labfy-bench up`.
#[derive(clap::Args)]
pub struct UpBenchArgs {
    /// Starts measured.
    #[arg(long, default_value_t = 10)]
    runs: usize,
}

/// Time from starting `labfy up` (data directory already holding the default
/// SPECIMEN) to "every child healthy" (the URL line) and to the first 200 from
/// the UI; each run is then stopped with SIGTERM.
pub fn up(args: UpBenchArgs) -> Result<(), Failure> {
    use std::io::{BufRead, BufReader, Read, Write};
    let tmp = tempfile::TempDir::new()?;
    let data = tmp.path().join("data");
    let mut store = Store::open(&data)?;
    generate_with_progress(&mut store, SpecimenSpec::default())?;
    drop(store);
    let exe = sibling("labfy")?;
    let (mut healthy, mut answering) = (Vec::new(), Vec::new());
    for _ in 0..args.runs {
        let start = Instant::now();
        let mut child = std::process::Command::new(&exe)
            .args(["up", "--port", "0", "--data-dir"])
            .arg(&data)
            .arg("--runtime-dir")
            .arg(tmp.path().join("run"))
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()?;
        let stdout = child.stdout.take().ok_or_else(|| fail("no stdout"))?;
        let mut link = None;
        for line in BufReader::new(stdout).lines() {
            let line = line?;
            if let Some(rest) = line.strip_prefix("Open http://127.0.0.1:") {
                link = rest.split_once('/').and_then(|(p, path)| Some((p.parse::<u16>().ok()?, format!("/{path}"))));
                break;
            }
        }
        let (port, path) = link.ok_or_else(|| fail("labfy up printed no login link"))?;
        healthy.push(start.elapsed());
        // The printed one-time link, as the analyst opens it: the page that
        // hands the session to the UI (SPEC V1).
        let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
        write!(s, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n")?;
        let mut page = String::new();
        s.read_to_string(&mut page)?;
        let body = page.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        if !page.starts_with("HTTP/1.1 200") || labfy_ipc::login::session_in_page(body).is_none() {
            return Err(fail(format!("the login link answered {}", page.lines().next().unwrap_or(""))));
        }
        answering.push(start.elapsed());
        // SAFETY: kill(2) on the pid of a child we hold and have not reaped.
        #[allow(unsafe_code)]
        unsafe {
            libc::kill(child.id() as i32, libc::SIGTERM);
        }
        child.wait()?;
    }
    println!("# labfy-bench up — {} starts on a data dir holding the default SPECIMEN", args.runs);
    report("up → all children healthy", healthy);
    report("up → login page with a session", answering);
    Ok(())
}
