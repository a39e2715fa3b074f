//! Candidate URLs of research requests (SPEC F1): what is proposed from
//! evidence, entities and relations, why, and what hostile text cannot make
//! the store propose (private addresses, other schemes, credentials,
//! homographs, onion addresses, exclusions), bounded. Real SQLite files.

use labfy_core::{ObjectRef, RefKind};
use tempfile::TempDir;
use uuid::Uuid;

use crate::research_tests::{request, specimen_store};
use crate::*;

fn real_store(dir: &TempDir) -> (Store, Uuid, ObjectRef) {
    let mut store = Store::open(dir.path()).unwrap();
    let (ws, inv) = store.create_real_workspace("Dossier F1", "analyst").unwrap();
    (store, ws.id(), inv)
}

fn note(store: &mut Store, ws: Uuid, inv: &ObjectRef, title: &str, text: &str) -> ObjectRef {
    let n = NewNote { title: title.into(), content: text.into(), source: None, dated_at: None };
    store.add_note(ws, inv, &n, "analyst").unwrap()
}

fn prepare(store: &mut Store, ws: Uuid, selection: Vec<ObjectRef>, exclusions: &[&str]) -> ResearchCandidates {
    let key = Uuid::now_v7().to_string();
    let mut req = request(selection, &key);
    req.exclusions = exclusions.iter().map(|s| (*s).to_owned()).collect();
    let (r, created) = store.prepare_research(ws, &req).unwrap();
    assert!(created);
    store.reads().research_request(ws, &r).unwrap().candidates.expect("a new request keeps its candidates")
}

fn urls(c: &ResearchCandidates) -> Vec<&str> {
    c.urls.iter().map(|u| u.url.as_str()).collect()
}

fn skipped(c: &ResearchCandidates, value_contains: &str) -> SkipReason {
    c.skipped
        .iter()
        .find(|s| s.value.contains(value_contains))
        .unwrap_or_else(|| panic!("`{value_contains}` not among the skipped: {:?}", c.skipped))
        .reason
}

#[test]
fn evidence_urls_and_domains_are_proposed_normalised_in_text_order_with_why() {
    let dir = TempDir::new().unwrap();
    let (mut store, ws, inv) = real_store(&dir);
    let ev = note(
        &mut store,
        ws,
        &inv,
        "Registre des sociétés",
        "Voir HTTPS://Registre.Example.COM:443/societe?id=42#haut puis http://presse.example.org/a%20b. \
         Le site annuaire-pro.fr cite aussi registre.example.com (déjà proposé par l'URL).",
    );
    let c = prepare(&mut store, ws, vec![ev], &[]);
    assert_eq!(
        urls(&c),
        ["https://registre.example.com/societe?id=42", "http://presse.example.org/a%20b", "https://annuaire-pro.fr/"]
    );
    assert_eq!(c.hosts, ["registre.example.com", "presse.example.org", "annuaire-pro.fr"]);
    assert_eq!(c.urls[0].origin, CandidateOrigin::EvidenceText);
    assert_eq!(c.urls[2].origin, CandidateOrigin::EvidenceDomain);
    assert_eq!(c.urls[0].selected, ev);
    assert_eq!(c.urls[0].via, None, "the selected item itself");
    assert_eq!(c.urls[0].label, "Registre des sociétés");
    assert_eq!((c.more, c.skipped_total), (0, 0));
    // Every proposal passes the grant's own check with its host as scope.
    for u in &c.urls {
        assert_eq!(check_campaign_url(&u.url, std::slice::from_ref(&u.host)).unwrap(), u.url);
    }
}

#[test]
fn hostile_values_are_left_out_with_their_reason() {
    let dir = TempDir::new().unwrap();
    let (mut store, ws, inv) = real_store(&dir);
    let onion = "pg6mmjiyjmcrsslvykfwnntlaru7p5svn6y2ymmju6nubxndf4pscryd";
    // The same address with one character changed: its checksum fails.
    let forged = onion.replacen('p', "q", 1);
    let text = format!(
        "http://127.0.0.1:8080/admin http://10.1.2.3/ http://192.168.0.1/routeur http://169.254.169.254/latest \
         http://100.64.0.1/ ftp://archive.example.org/pub http://user:secret@shop.example.org/ \
         http://[2001:db8::1]/ http://localhost/x http://printer.local/ http://intranet/ \
         http://{onion}.onion/ http://{forged}.onion/x http://expyuzz4wqqyqhjn.onion/ \
         http://xn--pypal-4ve.com/login https://xn--e1awd7f.com/ \
         https://social.example.net/profil https://ok.example.org/",
    );
    let ev = note(&mut store, ws, &inv, "Page hostile", &text);
    let c = prepare(&mut store, ws, vec![ev], &["social.example"]);
    // A v3 onion address with its checksum is proposed (SPEC F3).
    let onion_url = format!("http://{onion}.onion/");
    assert_eq!(urls(&c), [onion_url.as_str(), "https://ok.example.org/"], "skipped: {:?}", c.skipped);
    assert_eq!(skipped(&c, "127.0.0.1"), SkipReason::PrivateAddress);
    assert_eq!(skipped(&c, "10.1.2.3"), SkipReason::PrivateAddress);
    assert_eq!(skipped(&c, "192.168.0.1"), SkipReason::PrivateAddress);
    assert_eq!(skipped(&c, "169.254.169.254"), SkipReason::PrivateAddress);
    assert_eq!(skipped(&c, "100.64.0.1"), SkipReason::PrivateAddress);
    assert_eq!(skipped(&c, "ftp://"), SkipReason::Scheme);
    assert_eq!(skipped(&c, "secret@"), SkipReason::Credentials);
    assert_eq!(skipped(&c, "[2001:db8::1]"), SkipReason::Ipv6);
    assert_eq!(skipped(&c, "localhost"), SkipReason::NotPublic);
    assert_eq!(skipped(&c, "printer.local"), SkipReason::NotPublic);
    assert_eq!(skipped(&c, "http://intranet/"), SkipReason::NotPublic);
    let bad = |v: &str| c.skipped.iter().find(|s| s.value.contains(v)).map(|s| (s.reason, s.detail.clone()));
    assert_eq!(bad(&forged), Some((SkipReason::Onion, Some("bad_checksum".into()))));
    assert_eq!(bad("expyuzz4wqqyqhjn"), Some((SkipReason::Onion, Some("not_v3".into()))), "a retired v2 address");
    // « pаypal » with a Cyrillic а mixes scripts; « еріс » is all Cyrillic
    // letters that read as the Latin « epic ».
    assert_eq!(skipped(&c, "xn--pypal-4ve"), SkipReason::MixedScripts);
    let homograph = c.skipped.iter().find(|s| s.value.contains("xn--e1awd7f")).unwrap();
    assert_eq!(homograph.reason, SkipReason::Homograph);
    assert_eq!(homograph.detail.as_deref(), Some("epic.com"));
    let excluded = c.skipped.iter().find(|s| s.value.contains("social.example.net")).unwrap();
    assert_eq!((excluded.reason, excluded.detail.as_deref()), (SkipReason::Excluded, Some("social.example")));
    assert_eq!((c.skipped_total, c.skipped.len()), (16, 16), "{:?}", c.skipped);
}

#[test]
fn screening_is_the_same_rule_outside_the_store() {
    let ok = screen_candidate("https://M\u{fc}nchen.example.de/Stadt#x", &[]).unwrap();
    assert_eq!(ok.url, "https://xn--mnchen-3ya.example.de/Stadt");
    assert_eq!(ok.host, "xn--mnchen-3ya.example.de");
    assert_eq!(ok.host_unicode.as_deref(), Some("m\u{fc}nchen.example.de"), "a legitimate IDN is proposed");
    assert_eq!(screen_candidate("javascript:alert(1)", &[]).unwrap_err().0, SkipReason::Scheme);
    assert_eq!(screen_candidate("file:///etc/passwd", &[]).unwrap_err().0, SkipReason::Scheme);
    assert_eq!(screen_candidate("data:text/html,<b>x</b>", &[]).unwrap_err().0, SkipReason::Scheme);
    assert_eq!(screen_candidate("not a url", &[]).unwrap_err().0, SkipReason::Unparsable);
    // Found by the `candidate_url` fuzz target: a host of dots only.
    let dots = screen_candidate("http://.%2E", &[]).unwrap_err();
    assert_eq!((dots.0, dots.1.as_deref()), (SkipReason::Unparsable, Some("empty host name")));
    let long = format!("https://example.org/{}", "a".repeat(MAX_URL_BYTES));
    assert_eq!(screen_candidate(&long, &[]).unwrap_err().0, SkipReason::TooLong);
    // A short exclusion would match anything: it is not applied.
    assert!(screen_candidate("https://example.org/", &["or".into()]).is_ok());
    assert_eq!(screen_candidate("http://203.0.113.9/", &[]).unwrap_err().1.as_deref(), Some("documentation"));
    assert_eq!(screen_candidate("http://93.184.215.14/", &[]).unwrap().host, "93.184.215.14");
    let bad_onion = format!("http://{}.onion/", "a".repeat(56));
    assert_eq!(screen_candidate(&bad_onion, &[]).unwrap_err().1.as_deref(), Some("bad_checksum"));
}

#[test]
fn a_page_of_a_hundred_thousand_urls_proposes_a_bounded_list() {
    let dir = TempDir::new().unwrap();
    let (mut store, ws, inv) = real_store(&dir);
    let mut text = String::with_capacity(4 << 20);
    for i in 0..100_000 {
        text.push_str(&format!("https://h{i}.example.org/p\n"));
    }
    text.truncate(1 << 20);
    let ev = note(&mut store, ws, &inv, "Liste énorme", &text);
    let c = prepare(&mut store, ws, vec![ev], &[]);
    assert_eq!(c.urls.len(), MAX_CANDIDATES);
    assert_eq!(c.urls[0].url, "https://h0.example.org/p");
    // Only the first CANDIDATE_SCAN_CHARS characters are read.
    let line = "https://h10000.example.org/p\n".len();
    assert!(u64::from(c.more) + MAX_CANDIDATES as u64 <= (CANDIDATE_SCAN_CHARS / (line - 3)) as u64, "{}", c.more);
    assert!(c.more > 4_000, "{}", c.more);
    assert!(c.hosts.len() <= MAX_CANDIDATES);
}

#[test]
fn entities_propose_their_address_their_linked_domains_and_co_mentioned_urls() {
    let dir = TempDir::new().unwrap();
    let (mut store, ws, inv) = real_store(&dir);
    let ent = |store: &mut Store, kind: &str, name: &str| {
        store.create_entity(ws, &inv, &NewEntity { kind: kind.into(), name: name.into() }, "analyst").unwrap()
    };
    let org = ent(&mut store, "organisation", "Zorglub SA");
    let domain = ent(&mut store, "domain", "zorglub.example.com");
    let email = ent(&mut store, "email", "contact@fournisseur.example.org");
    let rel = NewRelation { kind: "owns_domain".into(), src: org, dst: domain, confidence: None };
    store.create_relation(ws, &inv, &rel, "analyst").unwrap();
    // An item mentions the organisation and a URL; extraction draws both
    // (the organisation by its legal form, SPEC A2).
    let _ev = note(&mut store, ws, &inv, "Article", "Zorglub SA publie https://presse.example.net/zorglub");
    let (job, _) = store.start_extraction(ws, &inv, "analyst").unwrap();
    while !store.extraction_step(ws, &job, 100).unwrap().done {}

    let c = prepare(&mut store, ws, vec![org, email], &[]);
    assert_eq!(
        urls(&c),
        ["https://zorglub.example.com/", "https://presse.example.net/zorglub", "https://fournisseur.example.org/"],
        "{c:?}"
    );
    assert_eq!((c.urls[0].origin, c.urls[0].relation.as_deref()), (CandidateOrigin::Linked, Some("owns_domain")));
    assert_eq!(c.urls[0].via, Some(domain));
    assert_eq!(c.urls[1].origin, CandidateOrigin::CoMentioned);
    assert_eq!(c.urls[1].selected, org);
    assert_eq!((c.urls[2].origin, c.urls[2].selected), (CandidateOrigin::EmailDomain, email));

    // A relation proposes what its ends propose.
    let conn = rusqlite::Connection::open(dir.path().join(DB_FILE)).unwrap();
    let owns: String = conn.query_row("SELECT id FROM relations WHERE kind = 'owns_domain'", [], |r| r.get(0)).unwrap();
    let owns = ObjectRef::new(RefKind::Relation, Uuid::parse_str(&owns).unwrap());
    let c = prepare(&mut store, ws, vec![owns], &[]);
    assert_eq!(urls(&c)[0], "https://zorglub.example.com/");
    assert_eq!(c.urls[0].selected, owns);
}

#[test]
fn a_specimen_selection_proposes_its_simulated_domains_and_replays_keep_them() {
    let dir = TempDir::new().unwrap();
    let (mut store, ws, inv) = specimen_store(&dir, 7, 400);
    let conn = rusqlite::Connection::open(dir.path().join(DB_FILE)).unwrap();
    let domain: String = conn
        .query_row(
            "SELECT id FROM entities WHERE investigation_id = ?1 AND kind = 'domain' ORDER BY id LIMIT 1",
            [inv.id().to_string()],
            |r| r.get(0),
        )
        .unwrap();
    let domain = ObjectRef::new(RefKind::Entity, Uuid::parse_str(&domain).unwrap());
    let req = request(vec![domain], "k-specimen");
    let (r, _) = store.prepare_research(ws, &req).unwrap();
    let first = store.reads().research_request(ws, &r).unwrap().candidates.unwrap();
    assert_eq!(first.urls[0].origin, CandidateOrigin::EntityDomain);
    assert!(first.urls[0].url.starts_with("https://") && first.urls[0].url.contains(".example"), "{first:?}");
    let (again, created) = store.prepare_research(ws, &req).unwrap();
    assert!(!created);
    assert_eq!(store.reads().research_request(ws, &again).unwrap().candidates.unwrap(), first);
}
