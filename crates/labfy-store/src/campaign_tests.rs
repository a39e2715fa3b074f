//! Campaign tests: the URLs a human grants (every rule at its edge), the
//! campaign's life (every transition, legal and illegal), recording fetched
//! pages (evidence, provenance, fetch metadata, relations, index, counters)
//! and other outcomes, revocation, grant usage, workspace isolation, the
//! database's own rules and the migration from version 2. Real SQLite files.

use labfy_core::{CampaignRef, GrantRef, ObjectRef, RefKind};
use rusqlite::{Connection, params};
use tempfile::TempDir;
use uuid::Uuid;

use crate::research_tests::{
    another_specimen, assert_counters_consistent, assert_not_found, audit_actions, count, counters, decision, ev,
    evidence_row, request, specimen_store,
};
use crate::*;

/// Scope of the REAL grants below.
const SCOPE: [&str; 3] = ["news.example.org", "*.example.net", "192.0.2.7"];

fn scope() -> Vec<String> {
    SCOPE.iter().map(|h| (*h).to_owned()).collect()
}

/// A REAL workspace with two notes and one entity (added by hand: no command
/// creates entities in a REAL workspace yet).
struct Real {
    store: Store,
    ws: Uuid,
    inv: ObjectRef,
    notes: Vec<ObjectRef>,
    entity: ObjectRef,
}

fn real(dir: &TempDir, name: &str) -> Real {
    let mut store = Store::open(dir.path()).unwrap();
    let (ws, inv) = store.create_real_workspace(name, "analyst").unwrap();
    add_real(store, ws.id(), inv)
}

fn add_real(mut store: Store, ws: Uuid, inv: ObjectRef) -> Real {
    let note = |t: &str| NewNote {
        title: t.into(),
        content: format!("Piste {t} : le fil 8812."),
        source: None,
        dated_at: None,
    };
    let notes = vec![
        store.add_note(ws, &inv, &note("un"), "analyst").unwrap(),
        store.add_note(ws, &inv, &note("deux"), "analyst").unwrap(),
    ];
    let entity = ObjectRef::new(RefKind::Entity, Uuid::now_v7());
    store
        .conn()
        .execute(
            "INSERT INTO entities (id, investigation_id, kind, name, created_at)
             VALUES (?1, ?2, 'organisation', 'Zorglub SA', '2026-01-01T00:00:00.000Z')",
            params![entity.id().to_string(), inv.id().to_string()],
        )
        .unwrap();
    Real { store, ws, inv, notes, entity }
}

impl Real {
    /// Prepares a request over the notes and the entity, and grants it with `urls`.
    fn grant(&mut self, key: &str, urls: &[&str]) -> GrantOutcome {
        let selection = vec![self.notes[0], self.entity, self.notes[1]];
        let (r, _) = self.store.prepare_research(self.ws, &request(selection, key)).unwrap();
        self.store.grant_research(self.ws, &r, &self.decision(urls)).unwrap()
    }

    fn decision(&self, urls: &[&str]) -> GrantDecision {
        GrantDecision {
            scope: ResearchScope { hosts: scope() },
            urls: urls.iter().map(|u| (*u).to_owned()).collect(),
            ..decision()
        }
    }

    /// A granted campaign moved to RUNNING.
    fn running(&mut self, key: &str, urls: &[&str]) -> GrantOutcome {
        let out = self.grant(key, urls);
        self.store.campaign_admitted(self.ws, &out.campaign, "admitted: 64 MiB scratch").unwrap();
        self.store.campaign_started(self.ws, &out.campaign).unwrap();
        out
    }

    fn campaign(&self, c: &CampaignRef) -> Campaign {
        self.store.reads().campaign(self.ws, c).unwrap()
    }

    fn conn(&self) -> &Connection {
        self.store.conn()
    }
}

/// A fetched page of `url` as egress reports it.
fn page(url: &str, body: &[u8]) -> FetchedPage {
    FetchedPage {
        url: url.into(),
        final_url: url.into(),
        redirects: Vec::new(),
        http_status: 200,
        headers: vec![("content-type".into(), "text/html; charset=utf-8".into()), ("server".into(), "nginx".into())],
        content_type: Some("text/html; charset=utf-8".into()),
        body: kept(body, "8812.html"),
        body_sha256: sha256_hex(body),
        started_at: "2026-03-01T10:00:00.000Z".into(),
        elapsed_ms: 1234,
        isolation: "campaign-iso-1".into(),
        asked_by: None,
    }
}

/// A body as the server keeps it: a blob and what the parser read (here
/// in-process; the server runs the confined worker).
fn kept(body: &[u8], name: &str) -> Option<FetchedBody> {
    (!body.is_empty()).then(|| FetchedBody {
        blob: blobs::Blob { sha256: sha256_hex(body), len: body.len() as u64 },
        parsed: labfy_parse::parse(body, name),
    })
}

/// A body of `len` bytes that the test does not allocate: only its blob's
/// length and digest matter to the store's bound.
fn sized(len: u64) -> Option<FetchedBody> {
    let sha256 = sha256_hex(format!("{len}").as_bytes());
    Some(FetchedBody { blob: blobs::Blob { sha256, len }, parsed: labfy_parse::parse(b"zzz", "big.txt") })
}

fn assert_err_contains<T: std::fmt::Debug>(r: Result<T>, kind: labfy_core::ErrorKind, needle: &str, what: &str) {
    match r {
        Err(e) if e.kind() == kind && e.to_string().contains(needle) => {}
        other => panic!("{what}: expected {kind:?} containing `{needle}`, got {other:?}"),
    }
}

fn invalid_because<T: std::fmt::Debug>(r: Result<T>, needle: &str, what: &str) {
    assert_err_contains(r, labfy_core::ErrorKind::InvalidInput, needle, what);
}

fn conflict_because<T: std::fmt::Debug>(r: Result<T>, needle: &str, what: &str) {
    assert_err_contains(r, labfy_core::ErrorKind::Conflict, needle, what);
}

/// Rows of the tables a recorded fetch writes, to prove a refusal wrote nothing.
fn written(conn: &Connection) -> [i64; 6] {
    [
        count(conn, "SELECT count(*) FROM evidence"),
        count(conn, "SELECT count(*) FROM provenance"),
        count(conn, "SELECT count(*) FROM fetch_provenance"),
        count(conn, "SELECT count(*) FROM relations"),
        count(conn, "SELECT count(*) FROM audit_log"),
        count(conn, "SELECT count(*) FROM campaign_items WHERE status <> 'PLANNED'"),
    ]
}

// ---------------------------------------------------------------------------
// the URLs of a grant
// ---------------------------------------------------------------------------

#[test]
fn each_bad_campaign_url_is_refused_with_its_reason() {
    let s = scope();
    let long_ok = format!("https://news.example.org/{}", "a".repeat(MAX_URL_BYTES - 25));
    assert_eq!(long_ok.len(), MAX_URL_BYTES);
    let long_bad = format!("{long_ok}a");
    // Non-ASCII in the path is percent-encoded: 2000 bytes written, 3000+ once normalised.
    let grows = format!("https://news.example.org/{}", "é".repeat(1000));
    assert!(grows.len() <= MAX_URL_BYTES);
    let bad: Vec<(&str, String, &str)> = vec![
        ("empty", String::new(), "is empty"),
        ("2049 bytes", long_bad, "longer than 2048"),
        ("grows past 2048 once normalised", grows, "once normalised"),
        ("space", "https://news.example.org/a b".into(), "spaces or control"),
        ("tab", "https://news.example.org/a\tb".into(), "spaces or control"),
        ("newline", "https://news.example.org/\n".into(), "spaces or control"),
        ("NUL", "https://news.example.org/\u{0}".into(), "spaces or control"),
        ("relative", "/actualites/1".into(), "not an absolute URL"),
        ("no scheme", "news.example.org/a".into(), "not an absolute URL"),
        ("ftp", "ftp://news.example.org/a".into(), "scheme `ftp`"),
        ("javascript", "javascript:alert(1)".into(), "scheme `javascript`"),
        ("file", "file:///etc/passwd".into(), "scheme `file`"),
        ("user and password", "https://u:p@news.example.org/".into(), "credentials"),
        ("user only", "https://u@news.example.org/".into(), "credentials"),
        ("empty userinfo", "https://@news.example.org/".into(), "credentials"),
        ("fragment", "https://news.example.org/a#section".into(), "fragment"),
        ("empty fragment", "https://news.example.org/a#".into(), "fragment"),
        ("host outside the scope", "https://other.example.org/".into(), "outside the grant's scope"),
        ("look-alike suffix", "https://evilnews.example.org/".into(), "outside the grant's scope"),
        ("scope name as a prefix", "https://news.example.org.evil.com/".into(), "outside the grant's scope"),
        ("wildcard does not cover the bare domain", "https://example.net/".into(), "outside the grant's scope"),
        ("IPv4 not named", "http://192.0.2.8/".into(), "outside the grant's scope"),
        ("IPv6", "http://[2001:db8::1]/".into(), "IPv6 hosts are in no scope"),
        ("trailing dot", "https://news.example.org./".into(), "outside the grant's scope"),
    ];
    for (what, url, reason) in &bad {
        invalid_because(check_campaign_url(url, &s), reason, what);
    }
    let ok: Vec<(&str, &str, &str)> = vec![
        ("named host", "https://news.example.org/a?b=1", "https://news.example.org/a?b=1"),
        ("http", "http://news.example.org/", "http://news.example.org/"),
        ("sub-domain of a wildcard", "https://a.b.example.net/x", "https://a.b.example.net/x"),
        ("IPv4 named exactly", "http://192.0.2.7/status", "http://192.0.2.7/status"),
        ("upper case, default port, no path", "HTTPS://NEWS.Example.ORG:443", "https://news.example.org/"),
        ("another port", "https://news.example.org:8443/a", "https://news.example.org:8443/a"),
        ("dot segments", "https://news.example.org/a/../b", "https://news.example.org/b"),
        ("@ in the path is not userinfo", "https://news.example.org/@alice", "https://news.example.org/@alice"),
    ];
    for (what, url, normal) in &ok {
        assert_eq!(check_campaign_url(url, &s).unwrap_or_else(|e| panic!("{what}: {e}")), *normal, "{what}");
    }
    assert_eq!(check_campaign_url(&long_ok, &s).unwrap(), long_ok, "2048 bytes");
    // Scope matching on its own.
    assert!(host_in_scope("a.example.net", &s));
    assert!(!host_in_scope("example.net", &s));
    assert!(!host_in_scope(".example.net", &s));
    assert!(!host_in_scope("[::1]", &["::1".to_owned()]));
    assert!(!host_in_scope("", &s));
}

#[test]
fn the_url_list_of_a_grant_is_checked_as_a_whole_and_nothing_is_stored_when_refused() {
    let dir = TempDir::new().unwrap();
    let mut x = real(&dir, "Dossier Ouest");
    let (r, _) = x.store.prepare_research(x.ws, &request(vec![x.notes[0]], "urls")).unwrap();
    let many: Vec<String> = (0..=MAX_CAMPAIGN_URLS).map(|i| format!("https://news.example.org/{i}")).collect();
    let base = GrantDecision { budget: ResearchBudget { max_requests: 100, max_bytes: 1_000_000 }, ..x.decision(&[]) };
    let with = |urls: Vec<String>| GrantDecision { urls, ..base.clone() };
    let cases: Vec<(&str, GrantDecision, &str)> = vec![
        ("no URL in a REAL workspace", with(vec![]), "name 1 to 32 URLs"),
        ("33 URLs", with(many.clone()), "at most 32 URLs, got 33"),
        (
            "more URLs than requests",
            GrantDecision { budget: ResearchBudget { max_requests: 2, max_bytes: 1000 }, ..with(many[..3].to_vec()) },
            "budget allows 2 requests",
        ),
        (
            "a duplicate once normalised",
            with(vec![
                "https://news.example.org/a".into(),
                "https://x.example.net/".into(),
                "HTTPS://NEWS.example.org:443/a".into(),
            ]),
            "urls[2] repeats urls[0]",
        ),
        (
            "one bad URL among good ones",
            with(vec!["https://news.example.org/a".into(), "https://news.example.org/b#c".into()]),
            "urls[1]: URL has a fragment",
        ),
    ];
    let before = written(x.conn());
    for (what, d, reason) in &cases {
        invalid_because(x.store.grant_research(x.ws, &r, d), reason, what);
    }
    let c = x.conn();
    assert_eq!(written(c), before);
    assert_eq!(count(c, "SELECT count(*) FROM grants"), 0);
    assert_eq!(count(c, "SELECT count(*) FROM campaigns"), 0);
    assert_eq!(count(c, "SELECT count(*) FROM campaign_items"), 0);
    assert_eq!(x.store.reads().research_request(x.ws, &r).unwrap().status, "PENDING");
    // 32 URLs is the edge, and it is accepted.
    let out = x.store.grant_research(x.ws, &r, &with(many[..MAX_CAMPAIGN_URLS].to_vec())).unwrap();
    assert_eq!(x.campaign(&out.campaign).items.len(), MAX_CAMPAIGN_URLS);
}

#[test]
fn a_real_grant_plans_its_urls_normalised_in_its_transaction() {
    let dir = TempDir::new().unwrap();
    let mut x = real(&dir, "Dossier Nord");
    let before = counters(x.conn(), &x.inv);
    let out =
        x.grant("plan", &["HTTPS://News.Example.org:443/a?q=1", "https://www.example.net/", "http://192.0.2.7/s"]);
    let camp = x.campaign(&out.campaign);
    assert_eq!((camp.status.as_str(), camp.synthetic, camp.items_total), ("PENDING", false, 3));
    assert!(camp.started_at.is_none() && camp.finished_at.is_none());
    let urls: Vec<&str> = camp.items.iter().map(|i| i.url.as_str()).collect();
    assert_eq!(urls, ["https://news.example.org/a?q=1", "https://www.example.net/", "http://192.0.2.7/s"]);
    for (i, item) in camp.items.iter().enumerate() {
        assert_eq!(item.position, i as u32);
        assert_eq!(item.status, ItemStatus::Planned);
        assert_eq!((item.reason.as_deref(), item.http_status, item.bytes, item.evidence), (None, None, 0, None));
    }
    // The items serialise lean: no null reason, status or evidence.
    let json = serde_json::to_value(&camp.items[0]).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"position": 0, "url": "https://news.example.org/a?q=1", "status": "PLANNED", "bytes": 0})
    );
    // The decision's audit row holds the URLs as planned.
    let audit = x.store.reads().audit(x.ws, 2).unwrap();
    assert_eq!(audit[0].action, "campaign.create");
    assert_eq!(audit[0].detail["urls"], 3);
    assert_eq!(audit[1].action, "grant.decide");
    assert_eq!(audit[1].detail["urls"][0], "https://news.example.org/a?q=1");
    assert_eq!(counters(x.conn(), &x.inv), before, "planning wrote evidence");
    let unfinished = x.store.reads().unfinished_real_campaigns().unwrap();
    assert_eq!(unfinished.len(), 1);
    assert_eq!((unfinished[0].0, unfinished[0].1.id), (x.ws, out.campaign));
    assert_eq!(unfinished[0].1.items.len(), 3);
}

#[test]
fn a_specimen_grant_with_urls_uses_them_as_simulated_addresses() {
    let dir = TempDir::new().unwrap();
    let (mut store, ws, inv) = specimen_store(&dir, 5, 50);
    let sel = ev(store.conn(), &inv, 2);
    let urls: Vec<String> = (1..=5).map(|i| format!("https://news.example.org/dossier/{i}")).collect();
    let (r, _) = store.prepare_research(ws, &request(sel.clone(), "spec-urls")).unwrap();
    let d = GrantDecision { urls: urls.clone(), ..decision() };
    let out = store.grant_research(ws, &r, &d).unwrap();
    let camp = store.reads().campaign(ws, &out.campaign).unwrap();
    assert_eq!((camp.status.as_str(), camp.items_total, camp.items_done, camp.items_failed), ("COMPLETED", 5, 5, 0));
    assert!(camp.started_at.is_some() && camp.finished_at.is_some());
    let mut total = 0;
    for (i, item) in camp.items.iter().enumerate() {
        assert_eq!((item.position, item.url.as_str(), item.status), (i as u32, urls[i].as_str(), ItemStatus::Fetched));
        let e = item.evidence.unwrap();
        let (title, content, _, source, len) = evidence_row(store.conn(), &e);
        assert_eq!(source, urls[i]);
        assert!(content.contains(&format!("Adresse simulée : {}", urls[i])), "{content}");
        assert!(title.contains(&format!("{}/5 — news.example.org", i + 1)), "{title}");
        assert_eq!(item.bytes, len as u64);
        assert!(item.http_status.is_none(), "a synthetic page has no HTTP status");
        total += len;
    }
    assert_eq!(camp.bytes, total);
    // Without URLs, the synthetic campaign plans items on the scope's hosts;
    // a page over the byte budget is a REFUSED item.
    let (r2, _) = store.prepare_research(ws, &request(sel, "spec-tight")).unwrap();
    let tight = GrantDecision { budget: ResearchBudget { max_requests: 10, max_bytes: 1 }, ..decision() };
    let out2 = store.grant_research(ws, &r2, &tight).unwrap();
    let camp2 = store.reads().campaign(ws, &out2.campaign).unwrap();
    assert_eq!(camp2.items.len(), SYNTHETIC_PAGES as usize);
    assert!(camp2.items.iter().all(|i| i.status == ItemStatus::Refused && i.reason.is_some() && i.evidence.is_none()));
    assert!(camp2.items[0].url.starts_with("https://news.example.org/labfy-synthetic/"));
    // Synthetic campaigns are never the runner's business.
    assert!(store.reads().unfinished_real_campaigns().unwrap().is_empty());
    assert_counters_consistent(store.conn());
}

// ---------------------------------------------------------------------------
// transitions
// ---------------------------------------------------------------------------

#[test]
fn every_campaign_transition_is_checked() {
    let dir = TempDir::new().unwrap();
    let mut x = real(&dir, "Dossier Sud");
    let out = x.grant("life", &["https://news.example.org/1", "https://news.example.org/2"]);
    let (ws, c) = (x.ws, out.campaign);
    let p0 = page("https://news.example.org/1", b"<p>un</p>");

    // PENDING: only admission or an end FAILED/STOPPED.
    conflict_because(x.store.campaign_started(ws, &c), "it must be ADMITTED to become RUNNING", "start PENDING");
    conflict_because(x.store.record_fetch(ws, &c, 0, &p0), "only while it is RUNNING", "fetch PENDING");
    conflict_because(
        x.store.record_item_outcome(ws, &c, 0, ItemStatus::Failed, "x", 0),
        "only while it is RUNNING",
        "outcome PENDING",
    );
    conflict_because(
        x.store.campaign_finished(ws, &c, CampaignStatus::Completed, "fini"),
        "only a RUNNING campaign completes",
        "complete PENDING",
    );
    invalid_because(x.store.campaign_admitted(ws, &c, ""), "detail must not be empty", "empty detail");
    invalid_because(
        x.store.campaign_admitted(ws, &c, &"d".repeat(MAX_CAMPAIGN_DETAIL_CHARS + 1)),
        "too long",
        "long detail",
    );
    for s in [CampaignStatus::Pending, CampaignStatus::Admitted, CampaignStatus::Running] {
        invalid_because(x.store.campaign_finished(ws, &c, s, "x"), "a campaign ends COMPLETED", s.as_str());
    }
    assert_eq!(x.campaign(&c).status, "PENDING");

    // PENDING → ADMITTED (a detail of exactly the bound is accepted).
    let edge = "d".repeat(MAX_CAMPAIGN_DETAIL_CHARS);
    x.store.campaign_admitted(ws, &c, &edge).unwrap();
    let camp = x.campaign(&c);
    assert_eq!((camp.status.as_str(), camp.detail.as_str()), ("ADMITTED", edge.as_str()));
    assert!(camp.started_at.is_none());
    conflict_because(x.store.campaign_admitted(ws, &c, "encore"), "is ADMITTED", "admit twice");
    conflict_because(x.store.record_fetch(ws, &c, 0, &p0), "only while it is RUNNING", "fetch ADMITTED");
    conflict_because(
        x.store.campaign_finished(ws, &c, CampaignStatus::Completed, "fini"),
        "only a RUNNING campaign completes",
        "complete ADMITTED",
    );

    // ADMITTED → RUNNING.
    x.store.campaign_started(ws, &c).unwrap();
    let camp = x.campaign(&c);
    assert_eq!(camp.status, "RUNNING");
    assert!(camp.started_at.is_some() && camp.finished_at.is_none());
    conflict_because(x.store.campaign_admitted(ws, &c, "x"), "is RUNNING", "admit RUNNING");
    conflict_because(x.store.campaign_started(ws, &c), "is RUNNING", "start twice");
    // Items end once; completion waits for every item.
    x.store.record_fetch(ws, &c, 0, &p0).unwrap();
    conflict_because(x.store.record_fetch(ws, &c, 0, &p0), "already ended (FETCHED)", "fetch twice");
    conflict_because(
        x.store.record_item_outcome(ws, &c, 0, ItemStatus::Failed, "x", 0),
        "already ended (FETCHED)",
        "outcome after fetch",
    );
    conflict_because(
        x.store.campaign_finished(ws, &c, CampaignStatus::Completed, "fini"),
        "still has 1 planned items",
        "complete with a planned item",
    );
    invalid_because(
        x.store.record_fetch(ws, &c, 2, &page("https://news.example.org/2", b"x")),
        "has no item at position 2",
        "position past the end",
    );
    x.store.record_item_outcome(ws, &c, 1, ItemStatus::Unavailable, "Tor is not bootstrapped", 0).unwrap();
    conflict_because(
        x.store.record_item_outcome(ws, &c, 1, ItemStatus::Failed, "x", 0),
        "already ended (UNAVAILABLE)",
        "outcome twice",
    );

    // RUNNING → COMPLETED, then nothing moves any more.
    x.store.campaign_finished(ws, &c, CampaignStatus::Completed, "2 URLs: 1 page, 1 unavailable").unwrap();
    let camp = x.campaign(&c);
    assert_eq!((camp.status.as_str(), camp.items_done, camp.items_failed), ("COMPLETED", 1, 1));
    assert!(camp.finished_at.is_some());
    conflict_because(x.store.campaign_admitted(ws, &c, "x"), "is COMPLETED", "admit finished");
    conflict_because(x.store.campaign_started(ws, &c), "is COMPLETED", "start finished");
    conflict_because(x.store.record_fetch(ws, &c, 1, &p0), "is COMPLETED", "fetch finished");
    for s in [CampaignStatus::Completed, CampaignStatus::Failed, CampaignStatus::Stopped] {
        conflict_because(x.store.campaign_finished(ws, &c, s, "x"), "already ended (COMPLETED)", s.as_str());
    }
    assert_eq!(
        audit_actions(&x.store, ws, 6),
        ["campaign.finish", "campaign.item", "campaign.fetch", "campaign.start", "campaign.admit", "campaign.create"]
    );

    // FAILED from PENDING, STOPPED from ADMITTED and from RUNNING: planned items stop.
    for (key, advance, end) in [
        ("f-pending", 0, CampaignStatus::Failed),
        ("s-admitted", 1, CampaignStatus::Stopped),
        ("s-running", 2, CampaignStatus::Stopped),
    ] {
        let out = x.grant(key, &["https://news.example.org/a", "https://news.example.org/b"]);
        let c = out.campaign;
        if advance >= 1 {
            x.store.campaign_admitted(ws, &c, "ok").unwrap();
        }
        if advance >= 2 {
            x.store.campaign_started(ws, &c).unwrap();
            x.store.record_fetch(ws, &c, 0, &page("https://news.example.org/a", b"a")).unwrap();
        }
        x.store.campaign_finished(ws, &c, end, "le gouverneur refuse : mémoire").unwrap();
        let camp = x.campaign(&c);
        assert_eq!(camp.status, end.as_str(), "{key}");
        assert!(camp.finished_at.is_some(), "{key}");
        let last = camp.items.last().unwrap();
        assert_eq!(last.status, ItemStatus::Stopped, "{key}");
        assert!(last.reason.as_deref().unwrap().contains("mémoire"), "{key}: {:?}", last.reason);
        let stopped = camp.items.iter().filter(|i| i.status == ItemStatus::Stopped).count() as i64;
        assert_eq!(camp.items_failed, stopped, "{key}");
        assert_eq!(camp.items_done + camp.items_failed, camp.items_total, "{key}");
        let audit = x.store.reads().audit(ws, 1).unwrap();
        assert_eq!(audit[0].action, "campaign.finish");
        assert_eq!(audit[0].detail["items_stopped"], stopped);
    }

    // A synthetic (SPECIMEN) campaign is finished at grant time: nothing moves it.
    let sdir = TempDir::new().unwrap();
    let (mut s, sws, sinv) = specimen_store(&sdir, 1, 20);
    let (r, _) = s.prepare_research(sws, &request(ev(s.conn(), &sinv, 1), "spec")).unwrap();
    let so = s.grant_research(sws, &r, &decision()).unwrap();
    conflict_because(s.campaign_admitted(sws, &so.campaign, "x"), "is COMPLETED", "admit synthetic");
    conflict_because(
        s.campaign_finished(sws, &so.campaign, CampaignStatus::Stopped, "x"),
        "already ended",
        "stop synthetic",
    );
}

#[test]
fn a_campaign_whose_grant_expired_cannot_be_admitted_or_started_but_can_end() {
    let dir = TempDir::new().unwrap();
    let mut x = real(&dir, "Dossier Est");
    let out = x.grant("expired", &["https://news.example.org/1"]);
    // Two campaigns under a grant that expired (written by hand: no command
    // decides in the past). One PENDING, one ADMITTED.
    let expired = ObjectRef::new(RefKind::Grant, Uuid::now_v7());
    let c = x.conn();
    c.execute(
        "INSERT INTO grants (id, workspace_id, investigation_id, scope, budget, expires_at, contract_fingerprints,
                             decided_by, decided_at)
         SELECT ?1, workspace_id, investigation_id, scope, budget, '2020-01-01T00:00:00.000Z', contract_fingerprints,
                decided_by, decided_at FROM grants WHERE id = ?2",
        params![expired.id().to_string(), out.grant.id().to_string()],
    )
    .unwrap();
    let mut made = Vec::new();
    for status in ["PENDING", "ADMITTED"] {
        let id = CampaignRef::new(Uuid::now_v7());
        c.execute(
            "INSERT INTO campaigns (id, workspace_id, investigation_id, grant_id, status, detail, created_at, updated_at)
             SELECT ?1, workspace_id, investigation_id, ?2, ?3, '', created_at, updated_at FROM campaigns WHERE id = ?4",
            params![id.id().to_string(), expired.id().to_string(), status, out.campaign.id().to_string()],
        )
        .unwrap();
        made.push(id);
    }
    conflict_because(x.store.campaign_admitted(x.ws, &made[0], "ok"), "revoked or expired", "admit");
    conflict_because(x.store.campaign_started(x.ws, &made[1]), "revoked or expired", "start");
    x.store.campaign_finished(x.ws, &made[0], CampaignStatus::Failed, "grant expired before admission").unwrap();
    x.store.campaign_finished(x.ws, &made[1], CampaignStatus::Stopped, "grant expired before start").unwrap();
    assert_eq!(x.campaign(&made[0]).status, "FAILED");
    assert_eq!(x.campaign(&made[1]).status, "STOPPED");
}

// ---------------------------------------------------------------------------
// recording fetches
// ---------------------------------------------------------------------------

#[test]
fn a_fetched_page_becomes_evidence_with_provenance_fetch_metadata_relations_and_counters() {
    let dir = TempDir::new().unwrap();
    let mut x = real(&dir, "Dossier Centre");
    let url = "https://news.example.org/actualites/8812";
    let out = x.running("fetch", &[url, "https://www.example.net/b"]);
    let (ws, c) = (x.ws, out.campaign);
    let request_ref = x.store.reads().research_requests(ws, &x.inv, 1).unwrap()[0].id;
    let before = counters(x.conn(), &x.inv);
    let body = "<html><head><title>Zorglubinette</title><script>alert(1)</script></head>\
                <body>Le réseau Zorglubinette est financé depuis 2019.</body></html>";
    let mut p = page(url, body.as_bytes());
    p.final_url = "https://www.example.net/archive/8812".into();
    p.redirects = vec!["https://www.example.net/archive/8812".into()];
    p.headers = vec![
        ("Content-Type".into(), "text/html; charset=utf-8".into()),
        ("x-note".into(), "ligne\r\ninjectée".into()),
        ("etag".into(), "e".repeat(2000)),
    ];
    p.content_type = Some("Text/HTML; charset=UTF-8".into());
    p.body_sha256 = sha256_hex(body.as_bytes()).to_ascii_uppercase(); // case does not matter
    let e = x.store.record_fetch(ws, &c, 0, &p).unwrap();
    assert_eq!(e.kind(), RefKind::Evidence);

    // The evidence: the text the parser read (SPEC C3: the same extraction
    // as an import), the original bytes' digest and size, the final URL as
    // source, the page's own title.
    let (title, content, sha, source, len) = evidence_row(x.conn(), &e);
    assert!(content.contains("Le réseau Zorglubinette est financé depuis 2019."), "{content}");
    assert!(!content.contains("<body>") && !content.contains("alert(1)"), "markup or script kept as text: {content}");
    assert_eq!(sha, sha256_hex(body.as_bytes()));
    assert_eq!(source, "https://www.example.net/archive/8812");
    assert_eq!(len as usize, body.len());
    assert_eq!(title, "Zorglubinette — www.example.net");
    let summary = x.store.reads().evidence_summary(ws, &e).unwrap();
    assert_eq!(summary.mime, "text/html");
    // The original bytes are kept, referenced like an import's.
    let blob: (String, i64) = x
        .conn()
        .query_row(
            "SELECT b.sha256, b.byte_len FROM evidence e JOIN blobs b ON b.sha256 = e.blob_sha256 WHERE e.id = ?1",
            [e.id().to_string()],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(blob, (sha256_hex(body.as_bytes()), body.len() as i64));

    // Its fetch metadata, through both reads that show provenance.
    let fetch = summary.fetch.clone().expect("the summary shows the fetch");
    assert_eq!(fetch.campaign, c);
    assert_eq!(fetch.grant, out.grant);
    assert_eq!(fetch.position, 0);
    assert_eq!(fetch.url, url);
    assert_eq!(fetch.final_url, "https://www.example.net/archive/8812");
    assert_eq!(fetch.redirects, ["https://www.example.net/archive/8812"]);
    assert_eq!(fetch.http_status, 200);
    assert_eq!(fetch.headers[0], ("content-type".to_owned(), "text/html; charset=utf-8".to_owned()));
    assert_eq!(fetch.headers[1].1, "ligne\u{FFFD}\u{FFFD}injectée", "control characters survive in a header");
    assert_eq!(fetch.headers[2].1.chars().count(), MAX_HEADER_VALUE_CHARS);
    assert_eq!(fetch.content_type.as_deref(), Some("Text/HTML; charset=UTF-8"));
    assert_eq!(fetch.body_sha256, sha256_hex(body.as_bytes()));
    assert_eq!(fetch.body_bytes, body.len() as u64);
    assert_eq!((fetch.started_at.as_str(), fetch.elapsed_ms), ("2026-03-01T10:00:00.000Z", 1234));
    assert_eq!(fetch.isolation, "campaign-iso-1");
    let trace = x.store.reads().provenance_trace(ws, &e, 1).unwrap();
    let own = &trace.records[0];
    assert_eq!((own.producer.as_str(), own.activity.as_str()), (c.to_string().as_str(), "tor_fetch"));
    assert_eq!(own.fetch.as_ref(), Some(&fetch));
    let inputs: Vec<ObjectRef> = own.inputs.iter().map(|n| n.id).collect();
    assert_eq!(inputs, [out.grant.into(), request_ref, x.notes[0], x.entity, x.notes[1]]);
    assert!(trace.records[1..].iter().all(|r| r.fetch.is_none()), "only the fetch record carries fetch metadata");
    let json = serde_json::to_value(&summary).unwrap();
    assert_eq!(json["fetch"]["http_status"], 200);
    assert_eq!(json["fetch"]["campaign"], c.to_string());

    // derived_from the selected evidence and entity.
    let mut derived: Vec<String> = x
        .conn()
        .prepare("SELECT dst FROM relations WHERE src = ?1 AND kind = 'derived_from'")
        .unwrap()
        .query_map([e.to_string()], |r| r.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    derived.sort();
    let mut want = vec![x.notes[0].to_string(), x.entity.to_string(), x.notes[1].to_string()];
    want.sort();
    assert_eq!(derived, want);

    // Full-text index, counters, item, campaign, audit.
    let hits = x.store.reads().search(ws, &x.inv, "Zorglubinette financé", 10).unwrap();
    assert_eq!(hits.hits.iter().map(|h| h.id).collect::<Vec<_>>(), [e]);
    assert_eq!(counters(x.conn(), &x.inv), (before.0 + 1, before.1 + 3, before.2 + 1));
    assert_counters_consistent(x.conn());
    let camp = x.campaign(&c);
    let item = &camp.items[0];
    assert_eq!(
        (item.status, item.http_status, item.bytes, item.evidence),
        (ItemStatus::Fetched, Some(200), body.len() as u64, Some(e))
    );
    assert!(item.reason.is_none());
    assert_eq!(camp.items[1].status, ItemStatus::Planned);
    assert_eq!((camp.items_done, camp.items_failed, camp.bytes), (1, 0, body.len() as i64));
    assert_eq!(camp.evidence, [e]);
    let audit = x.store.reads().audit(ws, 1).unwrap();
    assert_eq!(audit[0].action, "campaign.fetch");
    assert_eq!(audit[0].detail["position"], 0);
    assert_eq!(audit[0].detail["evidence"], e.to_string());
    // The research state the gateway reads shows the item and its evidence.
    let state = x.store.reads().research_request(ws, &request_ref).unwrap();
    assert_eq!(state.campaign.unwrap().items[0].evidence, Some(e));
    x.store.integrity_check().unwrap();
}

#[test]
fn content_types_become_bounded_media_types() {
    for (ct, mime) in [
        (Some("text/html"), "text/html"),
        (Some(" Text/HTML ; charset=utf-8"), "text/html"),
        (Some("application/ld+json"), "application/ld+json"),
        (None, FALLBACK_MIME),
        (Some(""), FALLBACK_MIME),
        (Some("html"), FALLBACK_MIME),
        (Some("text/"), FALLBACK_MIME),
        (Some("/html"), FALLBACK_MIME),
        (Some("text/ht ml"), FALLBACK_MIME),
        (Some("text/html\u{0}"), FALLBACK_MIME),
        (Some("tëxt/html"), FALLBACK_MIME),
    ] {
        assert_eq!(mime_of(ct), mime, "{ct:?}");
    }
    let edge = format!("a/{}", "b".repeat(MAX_MIME_CHARS - 2));
    assert_eq!(mime_of(Some(&edge)), edge);
    assert_eq!(mime_of(Some(&format!("{edge}b"))), FALLBACK_MIME);
}

#[test]
fn a_page_that_breaks_a_rule_is_refused_and_nothing_is_stored() {
    let dir = TempDir::new().unwrap();
    let mut x = real(&dir, "Dossier Rouge");
    let url = "https://news.example.org/1";
    let out = x.running("refuse", &[url, "https://news.example.org/big"]);
    let (ws, c) = (x.ws, out.campaign);
    let good = page(url, b"<p>ok</p>");
    let with = |f: &dyn Fn(&mut FetchedPage)| {
        let mut p = good.clone();
        f(&mut p);
        p
    };
    let before = written(x.conn());
    let invalid: Vec<(&str, FetchedPage, &str)> = vec![
        ("wrong SHA-256", with(&|p| p.body_sha256 = sha256_hex(b"autre chose")), "SHA-256 mismatch"),
        ("SHA-256 of another length", with(&|p| p.body_sha256 = "ab".into()), "SHA-256 mismatch"),
        (
            "body over the bound",
            with(&|p| {
                p.body = sized(MAX_FETCH_BODY_BYTES + 1);
                p.body_sha256 = p.body.as_ref().unwrap().blob.sha256.clone();
            }),
            "larger than the store accepts",
        ),
        (
            "an empty blob",
            with(&|p| {
                p.body = kept(b"x", "x.txt").map(|mut b| {
                    b.blob = blobs::Blob { sha256: sha256_hex(b""), len: 0 };
                    b
                });
                p.body_sha256 = sha256_hex(b"");
            }),
            "an empty body is no body",
        ),
        ("HTTP status 99", with(&|p| p.http_status = 99), "not 100–999"),
        ("HTTP status 1000", with(&|p| p.http_status = 1000), "not 100–999"),
        ("final URL outside the scope", with(&|p| p.final_url = "https://evil.example.com/".into()), "final_url host"),
        (
            "a redirect outside the scope",
            with(&|p| p.redirects = vec!["https://www.example.net/".into(), "http://10.0.0.1/".into()]),
            "redirects[1] host",
        ),
        (
            "a redirect with credentials",
            with(&|p| p.redirects = vec!["https://u:p@news.example.org/".into()]),
            "credentials",
        ),
        ("too many redirects", with(&|p| p.redirects = vec![url.to_owned(); MAX_FETCH_REDIRECTS + 1]), "at most 10"),
        (
            "too many headers",
            with(&|p| p.headers = vec![("x".into(), "y".into()); MAX_FETCH_HEADERS + 1]),
            "at most 32",
        ),
        ("header name with a space", with(&|p| p.headers = vec![("x y".into(), "1".into())]), "not an HTTP token"),
        ("empty header name", with(&|p| p.headers = vec![(String::new(), "1".into())]), "not an HTTP token"),
        (
            "long header name",
            with(&|p| p.headers = vec![("h".repeat(MAX_HEADER_NAME_CHARS + 1), "1".into())]),
            "not an HTTP token",
        ),
        ("started_at not RFC 3339", with(&|p| p.started_at = "hier".into()), "started_at"),
        ("elapsed_ms too large", with(&|p| p.elapsed_ms = u64::MAX), "elapsed_ms"),
        ("empty isolation", with(&|p| p.isolation = String::new()), "isolation must not be empty"),
        ("long isolation", with(&|p| p.isolation = "i".repeat(MAX_ISOLATION_CHARS + 1)), "isolation too long"),
    ];
    for (what, p, reason) in &invalid {
        invalid_because(x.store.record_fetch(ws, &c, 0, p), reason, what);
    }
    conflict_because(
        x.store.record_fetch(ws, &c, 0, &with(&|p| p.url = "https://news.example.org/2".into())),
        "not the URL planned at position 0",
        "another URL",
    );
    invalid_because(x.store.record_fetch(ws, &c, 2, &good), "no item at position 2", "no such item");
    assert_eq!(written(x.conn()), before, "a refused page wrote something");
    let camp = x.campaign(&c);
    assert!(camp.items.iter().all(|i| i.status == ItemStatus::Planned));
    assert_eq!((camp.items_done, camp.items_failed, camp.bytes), (0, 0, 0));
    // Edges that pass: the normalised form of the planned URL, 10 redirects,
    // 32 headers, an empty body, an absent content type.
    let edge = with(&|p| {
        p.url = "HTTPS://news.example.org:443/1".into();
        p.redirects = vec![url.to_owned(); MAX_FETCH_REDIRECTS];
        p.headers = vec![("x".into(), "y".into()); MAX_FETCH_HEADERS];
        p.body = None;
        p.body_sha256 = sha256_hex(b"");
        p.content_type = None;
        p.http_status = 204;
        p.isolation = "i".repeat(MAX_ISOLATION_CHARS);
    });
    let evidence = x.store.record_fetch(ws, &c, 0, &edge).unwrap();
    let summary = x.store.reads().evidence_summary(ws, &evidence).unwrap();
    assert_eq!((summary.byte_len, summary.mime.as_str()), (0, FALLBACK_MIME));
    // A body of exactly the store's bound is accepted.
    let mut p = page("https://news.example.org/big", b"");
    p.body = sized(MAX_FETCH_BODY_BYTES);
    p.body_sha256 = p.body.as_ref().unwrap().blob.sha256.clone();
    p.content_type = Some("text/plain".into());
    let evidence = x.store.record_fetch(ws, &c, 1, &p).unwrap();
    assert_eq!(x.store.reads().evidence_summary(ws, &evidence).unwrap().byte_len, MAX_FETCH_BODY_BYTES as i64);
    assert_eq!(x.campaign(&c).bytes, MAX_FETCH_BODY_BYTES as i64);
    assert_counters_consistent(x.conn());
}

#[test]
fn a_binary_body_is_kept_as_evidence_with_its_original_bytes() {
    // SPEC C3: a fetched image or non-text document is no longer dropped.
    let dir = TempDir::new().unwrap();
    let mut x = real(&dir, "Dossier Binaire");
    let url = "https://news.example.org/image.png";
    let out = x.running("binary", &[url]);
    let (ws, c) = (x.ws, out.campaign);
    let body = [0x89, b'P', b'N', b'G', 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, b'I', b'H', b'D', b'R'];
    let before = counters(x.conn(), &x.inv);
    let mut p = page(url, &body);
    p.body = kept(&body, "image.png");
    p.content_type = Some("image/png".into());
    let e = x.store.record_fetch(ws, &c, 0, &p).unwrap();
    assert_eq!(counters(x.conn(), &x.inv).0, before.0 + 1, "one more evidence item");
    let (title, content, sha, _, len) = evidence_row(x.conn(), &e);
    assert_eq!((content.as_str(), sha.as_str(), len), ("", sha256_hex(&body).as_str(), body.len() as i64));
    assert_eq!(title, "https://news.example.org/image.png — HTTP 200");
    let summary = x.store.reads().evidence_summary(ws, &e).unwrap();
    assert_eq!(summary.mime, "image/png");
    assert_eq!(summary.fetch.as_ref().map(|f| f.body_bytes), Some(body.len() as u64));
    let camp = x.campaign(&c);
    let item = &camp.items[0];
    assert_eq!((item.status, item.bytes, item.evidence), (ItemStatus::Fetched, body.len() as u64, Some(e)));
    assert_eq!((camp.items_done, camp.items_failed), (1, 0));
    assert_eq!(x.store.reads().grant_usage(ws, &out.grant).unwrap(), GrantUsage { requests: 1, bytes: 16 });
    x.store.campaign_finished(ws, &c, CampaignStatus::Completed, "1 URL, an image").unwrap();
}

#[test]
fn item_outcomes_are_bounded_and_end_an_item_once() {
    let dir = TempDir::new().unwrap();
    let mut x = real(&dir, "Dossier Issues");
    let urls: Vec<String> = (0..6).map(|i| format!("https://news.example.org/{i}")).collect();
    let refs: Vec<&str> = urls.iter().map(String::as_str).collect();
    let out = x.running("outcomes", &refs);
    let (ws, c) = (x.ws, out.campaign);
    invalid_because(x.store.record_item_outcome(ws, &c, 0, ItemStatus::Planned, "x", 0), "not PLANNED", "PLANNED");
    invalid_because(x.store.record_item_outcome(ws, &c, 0, ItemStatus::Fetched, "x", 0), "record_fetch", "FETCHED");
    invalid_because(
        x.store.record_item_outcome(ws, &c, 0, ItemStatus::Failed, " ", 0),
        "reason must not be empty",
        "blank",
    );
    invalid_because(x.store.record_item_outcome(ws, &c, 0, ItemStatus::Failed, "x", u64::MAX), "bytes", "bytes");
    invalid_because(
        x.store.record_item_outcome(ws, &c, 6, ItemStatus::Failed, "x", 0),
        "no item at position 6",
        "past",
    );
    assert_eq!(x.campaign(&c).items_failed, 0);
    let long = "r".repeat(MAX_ITEM_REASON_CHARS + 50);
    let cases = [
        (0, ItemStatus::Failed, "TLS handshake failed", 120),
        (1, ItemStatus::Refused, "host outside the scope of the grant", 0),
        (2, ItemStatus::Unavailable, "Tor is not bootstrapped (42 %)", 0),
        (3, ItemStatus::Stopped, "grant revoked while in flight", 512),
        (4, ItemStatus::Failed, long.as_str(), 0),
        (5, ItemStatus::Failed, "ligne\nsuivante\u{7}", 0),
    ];
    for (pos, status, reason, bytes) in cases {
        x.store.record_item_outcome(ws, &c, pos, status, reason, bytes).unwrap();
    }
    let camp = x.campaign(&c);
    for (pos, status, reason, bytes) in cases.iter().take(4) {
        let item = &camp.items[*pos as usize];
        assert_eq!((item.status, item.reason.as_deref(), item.bytes), (*status, Some(*reason), *bytes));
    }
    assert_eq!(camp.items[4].reason.as_ref().unwrap().chars().count(), MAX_ITEM_REASON_CHARS);
    assert_eq!(camp.items[5].reason.as_deref(), Some("ligne\u{FFFD}suivante\u{FFFD}"));
    assert_eq!((camp.items_done, camp.items_failed, camp.bytes), (0, 6, 632));
    // Requests that reached egress: the FAILED ones; bytes: everything received.
    assert_eq!(x.store.reads().grant_usage(ws, &out.grant).unwrap(), GrantUsage { requests: 3, bytes: 632 });
    x.store.campaign_finished(ws, &c, CampaignStatus::Completed, "6 URLs, 6 failures").unwrap();
}

// ---------------------------------------------------------------------------
// revocation, usage, scoping
// ---------------------------------------------------------------------------

#[test]
fn revoking_a_grant_stops_its_campaigns_and_their_planned_items() {
    let dir = TempDir::new().unwrap();
    let mut x = real(&dir, "Dossier Révoqué");
    let ws = x.ws;
    let running = x.running(
        "rev-running",
        &["https://news.example.org/1", "https://news.example.org/2", "https://news.example.org/3"],
    );
    x.store.record_fetch(ws, &running.campaign, 0, &page("https://news.example.org/1", b"un")).unwrap();
    let pending = x.grant("rev-pending", &["https://news.example.org/p"]);
    let other = x.running("rev-other", &["https://news.example.org/o"]);

    x.store.revoke_grant(ws, &running.grant, "analyste Marie").unwrap();
    let camp = x.campaign(&running.campaign);
    assert_eq!(camp.status, "STOPPED");
    assert_eq!(camp.detail, "grant revoked by analyste Marie");
    assert!(camp.finished_at.is_some());
    assert_eq!(camp.items[0].status, ItemStatus::Fetched, "what was fetched stays fetched");
    for item in &camp.items[1..] {
        assert_eq!(item.status, ItemStatus::Stopped);
        assert!(item.reason.as_deref().unwrap().contains("grant revoked"), "{:?}", item.reason);
    }
    assert_eq!((camp.items_done, camp.items_failed), (1, 2));
    let audit = x.store.reads().audit(ws, 2).unwrap();
    assert_eq!((audit[0].action.as_str(), audit[0].actor.as_str()), ("campaign.stop", "analyste Marie"));
    assert_eq!(audit[0].object_ref.as_deref(), Some(running.campaign.to_string().as_str()));
    assert_eq!(audit[0].detail["items_stopped"], 2);
    assert_eq!(audit[1].action, "grant.revoke");
    // Nothing more is recorded for it.
    conflict_because(
        x.store.record_fetch(ws, &running.campaign, 1, &page("https://news.example.org/2", b"deux")),
        "is STOPPED",
        "fetch after revocation",
    );
    conflict_because(
        x.store.campaign_finished(ws, &running.campaign, CampaignStatus::Completed, "x"),
        "already ended",
        "complete after revocation",
    );

    // A PENDING campaign stops too; another grant's campaign runs on.
    x.store.revoke_grant(ws, &pending.grant, "analyst").unwrap();
    let camp = x.campaign(&pending.campaign);
    assert_eq!((camp.status.as_str(), camp.items[0].status), ("STOPPED", ItemStatus::Stopped));
    assert_eq!(x.campaign(&other.campaign).status, "RUNNING");
    let unfinished: Vec<CampaignRef> =
        x.store.reads().unfinished_real_campaigns().unwrap().into_iter().map(|(_, c)| c.id).collect();
    assert_eq!(unfinished, [other.campaign]);

    // Revoking a grant whose campaign already ended changes the grant only.
    let sdir = TempDir::new().unwrap();
    let (mut s, sws, sinv) = specimen_store(&sdir, 1, 20);
    let (r, _) = s.prepare_research(sws, &request(ev(s.conn(), &sinv, 1), "spec-rev")).unwrap();
    let so = s.grant_research(sws, &r, &decision()).unwrap();
    let before = s.reads().campaign(sws, &so.campaign).unwrap();
    s.revoke_grant(sws, &so.grant, "analyst").unwrap();
    let after = s.reads().campaign(sws, &so.campaign).unwrap();
    assert_eq!((after.status, after.detail, after.updated_at), (before.status, before.detail, before.updated_at));
    assert_eq!(audit_actions(&s, sws, 1), ["grant.revoke"]);
}

#[test]
fn grant_usage_sums_its_campaigns_and_is_scoped() {
    let dir = TempDir::new().unwrap();
    let mut x = real(&dir, "Dossier Budget");
    let ws = x.ws;
    let out =
        x.running("usage", &["https://news.example.org/1", "https://news.example.org/2", "https://news.example.org/3"]);
    assert_eq!(x.store.reads().grant_usage(ws, &out.grant).unwrap(), GrantUsage { requests: 0, bytes: 0 });
    x.store.record_fetch(ws, &out.campaign, 0, &page("https://news.example.org/1", b"12345")).unwrap();
    x.store.record_item_outcome(ws, &out.campaign, 1, ItemStatus::Refused, "over budget", 0).unwrap();
    x.store.record_item_outcome(ws, &out.campaign, 2, ItemStatus::Failed, "body too large", 100).unwrap();
    assert_eq!(x.store.reads().grant_usage(ws, &out.grant).unwrap(), GrantUsage { requests: 2, bytes: 105 });
    // Another grant's campaign counts for that grant only.
    let other = x.running("usage-2", &["https://news.example.org/x"]);
    x.store.record_fetch(ws, &other.campaign, 0, &page("https://news.example.org/x", b"abc")).unwrap();
    assert_eq!(x.store.reads().grant_usage(ws, &out.grant).unwrap(), GrantUsage { requests: 2, bytes: 105 });
    assert_eq!(x.store.reads().grant_usage(ws, &other.grant).unwrap(), GrantUsage { requests: 1, bytes: 3 });
    // The egress daemon reads it through a read-only store.
    let ro = ReadOnlyStore::open(dir.path()).unwrap();
    assert_eq!(ro.reads().grant_usage(ws, &out.grant).unwrap(), GrantUsage { requests: 2, bytes: 105 });
    assert_not_found(ro.reads().grant_usage(Uuid::now_v7(), &out.grant), "grant from another workspace");
    assert_not_found(ro.reads().grant_usage(ws, &GrantRef::new(Uuid::now_v7())), "unknown grant");
}

#[test]
fn a_campaign_of_another_workspace_is_not_found_for_every_write() {
    let dir = TempDir::new().unwrap();
    let mut a = real(&dir, "Dossier A");
    let out = a.grant("iso", &["https://news.example.org/1"]);
    let (ws_b, _) = {
        let (ws, inv) = a.store.create_real_workspace("Dossier B", "analyst").unwrap();
        (ws.id(), inv)
    };
    let (ws_s, _) = another_specimen(&mut a.store, 3, 10);
    let c = out.campaign;
    let p = page("https://news.example.org/1", b"x");
    let before = written(a.conn());
    for other in [ws_b, ws_s, Uuid::now_v7()] {
        assert_not_found(a.store.campaign_admitted(other, &c, "ok"), "admit");
        assert_not_found(a.store.campaign_started(other, &c), "start");
        assert_not_found(a.store.record_fetch(other, &c, 0, &p), "fetch");
        assert_not_found(a.store.record_item_outcome(other, &c, 0, ItemStatus::Failed, "x", 0), "outcome");
        assert_not_found(a.store.campaign_finished(other, &c, CampaignStatus::Stopped, "x"), "finish");
        assert_not_found(a.store.reads().campaign(other, &c), "read");
    }
    assert_not_found(a.store.campaign_started(a.ws, &CampaignRef::new(Uuid::now_v7())), "unknown");
    assert_eq!(written(a.conn()), before);
    assert_eq!(a.campaign(&c).status, "PENDING");
    // The owner moves it.
    a.store.campaign_admitted(a.ws, &c, "ok").unwrap();
}

#[test]
fn unfinished_real_campaigns_are_listed_oldest_first_across_workspaces() {
    let dir = TempDir::new().unwrap();
    let mut a = real(&dir, "Dossier A");
    let first = a.grant("u1", &["https://news.example.org/1"]);
    let done = a.running("u2", &["https://news.example.org/2"]);
    let Real { store, .. } = a;
    let mut store = store;
    let (ws_b, inv_b) = store.create_real_workspace("Dossier B", "analyst").unwrap();
    let mut b = add_real(store, ws_b.id(), inv_b);
    let second = b.running("u3", &["https://news.example.org/3"]);
    let reads = b.store.reads();
    let ids: Vec<(CampaignRef, String)> =
        reads.unfinished_real_campaigns().unwrap().into_iter().map(|(_, c)| (c.id, c.status)).collect();
    assert_eq!(
        ids,
        [
            (first.campaign, "PENDING".to_owned()),
            (done.campaign, "RUNNING".to_owned()),
            (second.campaign, "RUNNING".to_owned())
        ]
    );
    let wss: Vec<Uuid> = reads.unfinished_real_campaigns().unwrap().into_iter().map(|(w, _)| w).collect();
    assert_eq!(wss[2], ws_b.id());
    assert_ne!(wss[0], ws_b.id());
    let ws_first = wss[0];
    b.store.campaign_finished(ws_first, &done.campaign, CampaignStatus::Stopped, "server stopping").unwrap();
    let ids: Vec<CampaignRef> =
        b.store.reads().unfinished_real_campaigns().unwrap().into_iter().map(|(_, c)| c.id).collect();
    assert_eq!(ids, [first.campaign, second.campaign]);
}

#[test]
fn unfinished_real_campaigns_are_bounded() {
    let dir = TempDir::new().unwrap();
    let mut x = real(&dir, "Dossier Nombreux");
    let out = x.grant("many", &["https://news.example.org/1"]);
    // 100 more PENDING campaigns under the same grant, each a millisecond
    // older than the last one written (by hand: one grant makes one campaign).
    let c = x.conn();
    let mut oldest_first = Vec::new();
    for i in 0..MAX_UNFINISHED_CAMPAIGNS {
        let id = Uuid::now_v7();
        let at = format!("2026-01-01T00:00:{:02}.{:03}Z", i / 1000, i % 1000);
        c.execute(
            "INSERT INTO campaigns (id, workspace_id, investigation_id, grant_id, status, detail, created_at, updated_at)
             SELECT ?1, workspace_id, investigation_id, grant_id, 'PENDING', '', ?2, ?2 FROM campaigns WHERE id = ?3",
            params![id.to_string(), at, out.campaign.id().to_string()],
        )
        .unwrap();
        oldest_first.push(CampaignRef::new(id));
    }
    let listed: Vec<CampaignRef> =
        x.store.reads().unfinished_real_campaigns().unwrap().into_iter().map(|(_, c)| c.id).collect();
    assert_eq!(listed.len(), MAX_UNFINISHED_CAMPAIGNS as usize);
    assert_eq!(listed, oldest_first, "the 100 oldest, oldest first; the newest waits for the next start");
    x.store.campaign_finished(x.ws, &oldest_first[0], CampaignStatus::Failed, "closed").unwrap();
    let listed: Vec<CampaignRef> =
        x.store.reads().unfinished_real_campaigns().unwrap().into_iter().map(|(_, c)| c.id).collect();
    assert_eq!(listed.last(), Some(&out.campaign));
}

// ---------------------------------------------------------------------------
// the database's own rules, and the migration
// ---------------------------------------------------------------------------

#[test]
fn the_database_keeps_ended_items_finished_campaigns_and_fetch_provenance_unchanged() {
    let dir = TempDir::new().unwrap();
    let mut x = real(&dir, "Dossier Règles");
    let out = x.running("rules", &["https://news.example.org/1", "https://news.example.org/2"]);
    x.store.record_fetch(x.ws, &out.campaign, 0, &page("https://news.example.org/1", b"un")).unwrap();
    let c = x.conn();
    let id = out.campaign.id().to_string();
    let refused = |sql: &str, needle: &str| {
        let err = c.execute(sql, [&id]).unwrap_err();
        assert!(err.to_string().contains(needle), "{sql}: {err}");
    };
    refused("UPDATE campaign_items SET bytes = 0 WHERE campaign_id = ?1 AND position = 0", "ends once");
    refused(
        "UPDATE campaign_items SET url = 'https://evil.example.com/' WHERE campaign_id = ?1 AND position = 1",
        "ends once",
    );
    refused("UPDATE campaign_items SET status = 'FETCHED' WHERE campaign_id = ?1 AND position = 1", "CHECK");
    refused(
        "UPDATE campaign_items SET status = 'FAILED', finished_at = 'x' WHERE campaign_id = ?1 AND position = 1",
        "CHECK",
    );
    refused("UPDATE fetch_provenance SET http_status = 500 WHERE campaign_id = ?1", "immutable");
    refused("UPDATE campaigns SET grant_id = 'x' WHERE id = ?1", "identity never changes");
    x.store.campaign_finished(x.ws, &out.campaign, CampaignStatus::Stopped, "stop").unwrap();
    let c = x.conn();
    let err = c.execute("UPDATE campaigns SET status = 'RUNNING' WHERE id = ?1", [&id]).unwrap_err();
    assert!(err.to_string().contains("never changes"), "{err}");
    let err = c.execute("UPDATE campaigns SET items_done = 9 WHERE id = ?1", [&id]).unwrap_err();
    assert!(err.to_string().contains("never changes"), "{err}");
}

#[test]
fn a_version_2_database_migrates_to_version_3_with_its_campaigns() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join(DB_FILE);
    let (ws, inv, grant, done, pending) =
        (Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7(), Uuid::now_v7());
    {
        // A file written by version 2: its schema, a granted request, one
        // finished synthetic campaign and one REAL campaign still pending.
        let conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "application_id", APPLICATION_ID).unwrap();
        for sql in &crate::migrations::MIGRATIONS[..2] {
            conn.execute_batch(sql).unwrap();
        }
        conn.pragma_update(None, "user_version", 2).unwrap();
        let t0 = "2026-01-01T00:00:00.000Z";
        let t1 = "2026-01-01T00:00:01.000Z";
        conn.execute(
            "INSERT INTO workspaces (id, name, class, status, created_at) VALUES (?1, 'Ancien', 'REAL', 'READY', ?2)",
            params![ws.to_string(), t0],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO investigations (id, workspace_id, title, summary, created_at) VALUES (?1, ?2, 'Ancien', '', ?3)",
            params![inv.to_string(), ws.to_string(), t0],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO grants (id, workspace_id, investigation_id, scope, budget, expires_at, contract_fingerprints,
                                 decided_by, decided_at)
             VALUES (?1, ?2, ?3, '{\"hosts\":[\"news.example.org\"]}', '{\"max_requests\":1,\"max_bytes\":1}',
                     '2999-01-01T00:00:00.000Z', '{}', 'analyst', ?4)",
            params![grant.to_string(), ws.to_string(), inv.to_string(), t0],
        )
        .unwrap();
        for (id, status, synthetic) in [(done, "COMPLETED", 1), (pending, "PENDING", 0)] {
            conn.execute(
                "INSERT INTO campaigns (id, workspace_id, investigation_id, grant_id, status, detail, created_at,
                                        updated_at, synthetic)
                 VALUES (?1, ?2, ?3, ?4, ?5, '', ?6, ?7, ?8)",
                params![id.to_string(), ws.to_string(), inv.to_string(), grant.to_string(), status, t0, t1, synthetic],
            )
            .unwrap();
        }
    }
    let mut store = Store::open(dir.path()).unwrap();
    assert_eq!(store.schema_version().unwrap(), SCHEMA_VERSION);
    store.integrity_check().unwrap();
    let done_ref = CampaignRef::new(done);
    let pending_ref = CampaignRef::new(pending);
    let old = store.reads().campaign(ws, &done_ref).unwrap();
    assert_eq!(
        (old.started_at.as_deref(), old.finished_at.as_deref()),
        (Some("2026-01-01T00:00:00.000Z"), Some("2026-01-01T00:00:01.000Z"))
    );
    assert!(old.items.is_empty());
    let waiting = store.reads().campaign(ws, &pending_ref).unwrap();
    assert!(waiting.started_at.is_none() && waiting.finished_at.is_none() && waiting.items.is_empty());
    // The runner finds it and can close it (it has no URLs to fetch).
    let unfinished = store.reads().unfinished_real_campaigns().unwrap();
    assert_eq!(unfinished.iter().map(|(w, c)| (*w, c.id)).collect::<Vec<_>>(), [(ws, pending_ref)]);
    store
        .campaign_finished(ws, &pending_ref, CampaignStatus::Failed, "granted before URLs were part of a grant")
        .unwrap();
    assert!(store.reads().unfinished_real_campaigns().unwrap().is_empty());
    let g = GrantRef::new(grant);
    assert_eq!(store.reads().grant_usage(ws, &g).unwrap(), GrantUsage { requests: 0, bytes: 0 });
    // The finished campaign is now protected like any other.
    let err = store.conn().execute("UPDATE campaigns SET detail = 'x' WHERE id = ?1", [done.to_string()]).unwrap_err();
    assert!(err.to_string().contains("never changes"), "{err}");
    drop(store);
    assert_eq!(ReadOnlyStore::open(dir.path()).unwrap().reads().unfinished_real_campaigns().unwrap().len(), 0);
}
