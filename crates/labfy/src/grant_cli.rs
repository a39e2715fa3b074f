//! `labfy grant …`: the human's confirmation of a grant, on the terminal
//! (SPEC T2). The analyst's decision in the UI reaches egress only as a
//! proposal relayed by the workspace server, which may be compromised; it
//! allows nothing until a human confirms it here — over egress's operator
//! socket, in a directory the confined server's root masks — or on egress's
//! confirmation page. What is shown is egress's own record: the exact URLs
//! that will leave the machine.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::time::Duration;

use clap::Subcommand;
use labfy::Failure;
use labfy_core::{ErrorKind, GrantRef};
use labfy_ipc::messages::Boundary;
use labfy_ipc::messages::egress::{
    EgressRequest, EgressResponse, EgressStatus, FetchLogEntry, GrantPhase, GrantRecord,
};

/// Deadline of one call to egress.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// `labfy grant …`.
#[derive(Subcommand)]
pub enum GrantWhat {
    /// List the grants egress knows, those waiting for a human first.
    List {
        /// Runtime directory of the running `labfy up`.
        #[arg(long, env = "LABFY_RUNTIME_DIR")]
        runtime_dir: Option<PathBuf>,
        /// Print them as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Show one grant as egress recorded it, with its fetch log.
    Show {
        /// `grant:<uuid>`.
        grant: String,
        /// Runtime directory of the running `labfy up`.
        #[arg(long, env = "LABFY_RUNTIME_DIR")]
        runtime_dir: Option<PathBuf>,
    },
    /// Show a proposed grant's exact URLs and approve it after a yes.
    Approve {
        /// `grant:<uuid>`.
        grant: String,
        /// Approve without asking (for a script the operator runs after
        /// reading the URLs; without it, a terminal is needed).
        #[arg(long)]
        yes: bool,
        /// Runtime directory of the running `labfy up`.
        #[arg(long, env = "LABFY_RUNTIME_DIR")]
        runtime_dir: Option<PathBuf>,
    },
    /// Refuse a proposed grant: its campaign fetches nothing.
    Refuse {
        /// `grant:<uuid>`.
        grant: String,
        /// Runtime directory of the running `labfy up`.
        #[arg(long, env = "LABFY_RUNTIME_DIR")]
        runtime_dir: Option<PathBuf>,
    },
}

/// Runs `labfy grant …`.
pub fn grant(what: GrantWhat) -> Result<(), Failure> {
    match what {
        GrantWhat::List { runtime_dir, json } => list(runtime_dir, json),
        GrantWhat::Show { grant, runtime_dir } => show(runtime_dir, &grant),
        GrantWhat::Approve { grant, yes, runtime_dir } => decide(runtime_dir, &grant, true, yes),
        GrantWhat::Refuse { grant, runtime_dir } => decide(runtime_dir, &grant, false, true),
    }
}

/// One call on egress's operator socket; its `Failed` answer is a failure.
fn ask(runtime_dir: Option<PathBuf>, request: EgressRequest) -> Result<EgressResponse, Failure> {
    match crate::operator::call(runtime_dir, Boundary::Egress, "egress", request, CALL_TIMEOUT)? {
        EgressResponse::Failed(f) => Err(Failure::new(labfy::failure::error_kind(f.code), f.message)),
        answer => Ok(answer),
    }
}

fn unexpected(r: &EgressResponse) -> Failure {
    Failure::new(ErrorKind::Internal, format!("unexpected answer from egress: {r:?}"))
}

fn grants(runtime_dir: Option<PathBuf>) -> Result<Vec<GrantRecord>, Failure> {
    match ask(runtime_dir, EgressRequest::Grants {})? {
        EgressResponse::Grants { grants } => Ok(grants),
        other => Err(unexpected(&other)),
    }
}

fn find(runtime_dir: Option<PathBuf>, grant: &str) -> Result<GrantRecord, Failure> {
    let id: GrantRef = grant
        .parse()
        .map_err(|e| Failure::new(ErrorKind::InvalidInput, format!("`{grant}` is not a grant id: {e}")))?;
    grants(runtime_dir)?
        .into_iter()
        .find(|g| g.grant_id == id)
        .ok_or_else(|| Failure::new(ErrorKind::NotFound, format!("egress has no grant {id} (labfy grant list)")))
}

fn list(runtime_dir: Option<PathBuf>, json: bool) -> Result<(), Failure> {
    let mut all = grants(runtime_dir)?;
    if json {
        let text = serde_json::to_string_pretty(&all).map_err(|e| Failure::new(ErrorKind::Internal, e.to_string()))?;
        println!("{text}");
        return Ok(());
    }
    if all.is_empty() {
        println!("no grant: egress has received no proposal");
        return Ok(());
    }
    // Waiting ones first, then newest first (as egress lists them).
    all.sort_by_key(|g| g.phase != GrantPhase::Proposed);
    for g in &all {
        println!(
            "{}  {:<8}  {} URL(s)  proposed {}  {}",
            g.grant_id,
            phase_name(g.phase),
            g.urls.len(),
            g.proposed_at,
            phase_line(g)
        );
    }
    Ok(())
}

fn show(runtime_dir: Option<PathBuf>, grant: &str) -> Result<(), Failure> {
    let g = find(runtime_dir.clone(), grant)?;
    print!("{}", render(&g));
    let log = match ask(runtime_dir, EgressRequest::FetchLog { workspace_id: g.workspace_id, grant_id: g.grant_id })? {
        EgressResponse::FetchLog { entries } => entries,
        other => return Err(unexpected(&other)),
    };
    println!("fetch log ({} entries):", log.len());
    for e in &log {
        println!("  {}", log_line(e));
    }
    Ok(())
}

fn decide(runtime_dir: Option<PathBuf>, grant: &str, approve: bool, yes: bool) -> Result<(), Failure> {
    let g = find(runtime_dir.clone(), grant)?;
    print!("{}", render(&g));
    if g.phase != GrantPhase::Proposed {
        return Err(Failure::new(ErrorKind::Conflict, format!("{} is not waiting for a decision", g.grant_id)));
    }
    // SPEC V8: said before the question, so the human knows what approving
    // does now. A status egress cannot give is said too, not guessed.
    if approve {
        match ask(runtime_dir.clone(), EgressRequest::Status {}) {
            Ok(EgressResponse::Status(st)) => {
                if let Some(notice) = tor_notice(&st, &g.expires_at) {
                    println!("{notice}");
                }
            }
            _ => println!(
                "L'état de Tor n'a pas pu être lu. / Tor's state could not be read: the campaign runs once Tor is ready."
            ),
        }
    }
    if approve && !yes {
        if !std::io::stdin().is_terminal() {
            return Err(Failure::new(
                ErrorKind::InvalidInput,
                "not a terminal: read the URLs above, then run again with --yes to approve",
            ));
        }
        print!("Autoriser ces {n} adresse(s) ? / Allow these {n} URL(s)? [o/y/N] ", n = g.urls.len());
        std::io::stdout().flush()?;
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        if !matches!(line.trim().to_lowercase().as_str(), "o" | "oui" | "y" | "yes") {
            println!("nothing approved");
            return Ok(());
        }
    }
    match ask(runtime_dir, EgressRequest::Decide { grant_id: g.grant_id, approve })? {
        EgressResponse::Grant(r) => {
            println!("{} {}", r.grant_id, phase_line(&r));
            Ok(())
        }
        other => Err(unexpected(&other)),
    }
}

/// While Tor is not ready, what approving means (SPEC V8): the campaign
/// waits for Tor until the grant expires, fetching nothing before — in
/// French and English; `None` once Tor is ready.
fn tor_notice(st: &EgressStatus, expires_at: &str) -> Option<String> {
    if st.ready {
        return None;
    }
    let error = st.last_error.as_deref().map(|e| format!(" — {e}")).unwrap_or_default();
    Some(format!(
        "Tor n'est pas prêt (amorçage {p} % : {phase}{error}). Approuvée, la campagne attendra Tor jusqu'à \
         l'expiration de l'autorisation ({expires_at}) sans rien récupérer avant ; expirée avant, elle échoue sans \
         avoir rien dépensé.\n\
         Tor is not ready (bootstrap {p}%: {phase}{error}). Once approved, the campaign waits for Tor until the grant \
         expires ({expires_at}), fetching nothing before; if it expires first, it fails having spent nothing.",
        p = st.bootstrap_percent,
        phase = st.phase,
    ))
}

fn phase_name(p: GrantPhase) -> &'static str {
    match p {
        GrantPhase::Proposed => "PROPOSED",
        GrantPhase::Approved => "APPROVED",
        GrantPhase::Refused => "REFUSED",
        GrantPhase::Revoked => "REVOKED",
        GrantPhase::Expired => "EXPIRED",
        GrantPhase::Ended => "ENDED",
    }
}

fn phase_line(g: &GrantRecord) -> String {
    let via = g.decided_via.as_deref().unwrap_or("?");
    match g.phase {
        GrantPhase::Proposed => format!("waiting for a human (labfy grant approve {})", g.grant_id),
        GrantPhase::Approved => format!("approved on the {via}; runs until {}", g.expires_at),
        GrantPhase::Refused => format!("refused ({via})"),
        GrantPhase::Revoked => format!("revoked at {}", g.revoked_at.as_deref().unwrap_or("?")),
        GrantPhase::Expired => format!("expired at {}", g.expires_at),
        GrantPhase::Ended => format!("campaign ended at {}", g.campaign_ended_at.as_deref().unwrap_or("?")),
    }
}

fn human_bytes(b: u64) -> String {
    match b {
        0..1024 => format!("{b} B"),
        1024..1_048_576 => format!("{:.1} KiB", b as f64 / 1024.0),
        _ => format!("{:.1} MiB", b as f64 / 1_048_576.0),
    }
}

/// Egress's record, for a human to read before deciding.
fn render(g: &GrantRecord) -> String {
    let mut out = format!("{}  {}\n", g.grant_id, phase_name(g.phase));
    out.push_str(&format!("  workspace  {}\n  campaign   {}\n", g.workspace_id, g.campaign_id));
    let summary = if g.summary.is_empty() { "(none)" } else { g.summary.as_str() };
    out.push_str(&format!("  described by the workspace server (unverified): {summary}\n"));
    out.push_str(&format!("  URLs that will leave this machine through Tor ({}):\n", g.urls.len()));
    for (i, u) in g.urls.iter().enumerate() {
        out.push_str(&format!("    {:>2}. {u}\n", i + 1));
    }
    out.push_str(&format!("  redirects may reach: {}\n", g.hosts.join(", ")));
    out.push_str(&format!(
        "  budget: {} requests, {}; used {} requests, {}\n",
        g.max_requests,
        human_bytes(g.max_bytes),
        g.requests_used,
        human_bytes(g.bytes_used)
    ));
    out.push_str(&format!("  proposed {}, ends {}\n", g.proposed_at, g.expires_at));
    out.push_str(&format!("  {}\n", phase_line(g)));
    out
}

fn log_line(e: &FetchLogEntry) -> String {
    let status = serde_json::to_value(e.status).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default();
    let mut line = format!("#{} {} {status} {}", e.seq, e.at, e.url);
    if let Some(h) = e.http_status {
        line.push_str(&format!(" → HTTP {h}, {}", human_bytes(e.bytes)));
    }
    if let Some(r) = &e.reason {
        line.push_str(&format!(" — {r}"));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(phase: GrantPhase) -> GrantRecord {
        GrantRecord {
            grant_id: "grant:00000000-0000-0000-0000-000000000001".parse().unwrap(),
            workspace_id: "00000000-0000-0000-0000-000000000002".parse().unwrap(),
            campaign_id: "campaign:00000000-0000-0000-0000-000000000003".parse().unwrap(),
            urls: vec!["https://a.example.org/x".into(), "https://b.example.org/".into()],
            hosts: vec!["*.example.org".into()],
            max_requests: 10,
            max_bytes: 1_048_576,
            summary: String::new(),
            phase,
            proposed_at: "2026-12-02T00:00:00.000Z".into(),
            expires_at: "2026-12-02T01:00:00.000Z".into(),
            decided_at: None,
            decided_via: None,
            revoked_at: None,
            campaign_ended_at: None,
            requests_used: 0,
            bytes_used: 0,
            confirm_url: None,
        }
    }

    #[test]
    fn the_human_sees_every_url_and_the_servers_words_as_such() {
        let text = render(&record(GrantPhase::Proposed));
        assert!(text.contains("  1. https://a.example.org/x\n") && text.contains("  2. https://b.example.org/\n"));
        assert!(text.contains("URLs that will leave this machine through Tor (2)"), "{text}");
        assert!(text.contains("described by the workspace server (unverified): (none)"), "{text}");
        assert!(text.contains("budget: 10 requests, 1.0 MiB"), "{text}");
        assert!(text.contains("labfy grant approve grant:"), "{text}");
        let approved = GrantRecord { decided_via: Some("terminal".into()), ..record(GrantPhase::Approved) };
        assert!(phase_line(&approved).starts_with("approved on the terminal"));
    }

    /// SPEC V8: while Tor is not ready, `labfy grant approve` says so
    /// plainly, and what approving then does; once ready, nothing.
    #[test]
    fn approving_while_tor_is_not_ready_says_the_campaign_will_wait() {
        let mut st = EgressStatus {
            ready: false,
            bootstrap_percent: 42,
            phase: "fetching directory".into(),
            last_error: Some("no route".into()),
            bootstrap_ms: None,
            custom_network: false,
            max_body_bytes: 1 << 20,
            in_flight: 0,
            campaigns: 0,
            counts: [0; 5],
        };
        let text = tor_notice(&st, "2026-12-02T01:00:00.000Z").unwrap();
        assert!(text.contains("Tor n'est pas prêt (amorçage 42 % : fetching directory — no route)"), "{text}");
        assert!(text.contains("Tor is not ready (bootstrap 42%"), "{text}");
        assert!(text.contains("waits for Tor until the grant expires (2026-12-02T01:00:00.000Z)"), "{text}");
        st.ready = true;
        assert_eq!(tor_notice(&st, "2026-12-02T01:00:00.000Z"), None);
    }
}
