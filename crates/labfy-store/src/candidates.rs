//! Candidate URLs of a research request (SPEC F1).
//!
//! `research.prepare` proposes the addresses a human might grant, found in
//! what the agent selected: the URLs and domains written in a selected
//! evidence item, the URL, domain, onion or e-mail entity selected itself,
//! the URL and domain entities linked to a selected entity by a relation or
//! mentioned in the same evidence. They are proposals only: the
//! authorization screen pre-fills them, the human edits the list, and the
//! grant names the human's final list — checked again by
//! [`crate::check_campaign_url`] and by egress's grant authority (T2).
//!
//! Every value comes from hostile text, so the work is bounded (characters
//! scanned per item, rows read per entity, proposals kept) and each value is
//! screened by [`screen_candidate`]: normalised as a campaign stores it, and
//! left out with its reason when no campaign should fetch it (another
//! scheme, credentials, a private or loopback address, a name that is not
//! public, an IDN homograph, an onion address that is not a v3 address with
//! its checksum, an exclusion of the request). A valid onion address is
//! proposed like any public name: egress reaches it through arti's
//! onion-service client (SPEC F3).

use std::collections::HashSet;
use std::net::Ipv4Addr;

use labfy_core::{ObjectRef, RefKind};
use labfy_extract::Kind;
use rusqlite::{Connection, OptionalExtension, params};
use serde::{Deserialize, Serialize};
use unicode_security::{RestrictionLevel, RestrictionLevelDetection};
use url::{Host, Url};
use uuid::Uuid;

use crate::campaign::{MAX_URL_BYTES, check_campaign_url};
use crate::error::{Result, StoreError};
use crate::hosts::check_host_pattern;

/// Most URLs proposed by one request (the rest are counted in `more`).
pub const MAX_CANDIDATES: usize = 16;
/// Most left-out values listed with their reason (the rest are counted).
pub const MAX_SKIPPED_LISTED: usize = 16;
/// Characters of each selected evidence item scanned for URLs and domains.
pub const CANDIDATE_SCAN_CHARS: usize = 262_144;
/// Evidence items read, per selected entity, for co-mentioned URLs.
const CO_MENTION_EVIDENCE: i64 = 32;
/// URL and domain entities read, per selected entity, by relation or co-mention.
const LINKED_ROWS: i64 = 64;
/// Longest label of a source kept with a proposal.
const MAX_LABEL_CHARS: usize = 120;
/// Longest left-out value kept, in characters.
const MAX_SKIPPED_VALUE_CHARS: usize = 200;
/// Shortest exclusion matched against a URL (shorter ones would match anything).
const MIN_EXCLUSION_CHARS: usize = 3;

/// Why a URL is proposed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CandidateOrigin {
    /// Written in the selected evidence item's text.
    EvidenceText,
    /// A domain written in the selected evidence item's text: its home page.
    EvidenceDomain,
    /// The selected entity is this URL.
    EntityUrl,
    /// The selected entity is this domain: its home page.
    EntityDomain,
    /// The domain of the selected e-mail address: its home page.
    EmailDomain,
    /// A URL or domain entity linked to the selected one by a relation.
    Linked,
    /// A URL or domain entity mentioned in the same evidence as the selected one.
    CoMentioned,
}

/// One proposed URL.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CandidateUrl {
    /// WHATWG-normalised, without fragment: the form a campaign stores and fetches.
    pub url: String,
    /// Its host in ASCII (punycode) form: the scope entry that covers it.
    pub host: String,
    /// The host as written in its own script, when it is an IDN.
    pub host_unicode: Option<String>,
    /// Why it is proposed.
    pub origin: CandidateOrigin,
    /// The relation's kind, for [`CandidateOrigin::Linked`].
    pub relation: Option<String>,
    /// The selected object it comes from.
    pub selected: ObjectRef,
    /// The evidence or entity it came through, when not the selected object.
    pub via: Option<ObjectRef>,
    /// Title or name of `via` (or of the selected object), cut to 120 characters.
    pub label: String,
}

/// Why a value found in the selection is not proposed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// Not an absolute URL, or no host (`detail`: the parser's words).
    Unparsable,
    /// Longer than a campaign may name.
    TooLong,
    /// Another scheme than http or https (`detail`: the scheme).
    Scheme,
    /// Carries a user name or password.
    Credentials,
    /// A private, loopback, link-local or otherwise non-public IPv4 address
    /// (`detail`: which, as a code: `loopback`, `private`, `link_local`,
    /// `unspecified`, `reserved`, `documentation`, `shared`, `benchmarking`).
    PrivateAddress,
    /// An IPv6 literal: no grant scope holds one.
    Ipv6,
    /// A name that is not on the public Internet (`localhost`, `.local`,
    /// `.internal`, one label…).
    NotPublic,
    /// An onion address that no onion service can have (`detail`:
    /// `bad_checksum` for 56 characters whose v3 checksum is wrong,
    /// `not_v3` for anything else, such as a retired 16-character v2
    /// address). A valid v3 address is proposed (SPEC F3).
    Onion,
    /// An IDN label mixing scripts as no legitimate name does (`detail`: the label).
    MixedScripts,
    /// An IDN that looks like an ASCII name (`detail`: the name it imitates).
    Homograph,
    /// Matches one of the request's exclusions (`detail`: the exclusion).
    Excluded,
}

/// A value left out, with its reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedCandidate {
    /// The value as found, cut to 200 characters.
    pub value: String,
    /// Why it is left out.
    pub reason: SkipReason,
    /// What the reason names (see [`SkipReason`]).
    pub detail: Option<String>,
    /// The selected object it comes from.
    pub selected: ObjectRef,
}

/// What `research.prepare` proposes for the human to edit (SPEC F1).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResearchCandidates {
    /// The proposals, in the selection's order (at most [`MAX_CANDIDATES`]).
    pub urls: Vec<CandidateUrl>,
    /// Further acceptable URLs found and not listed.
    pub more: u32,
    /// The hosts of `urls`, in order, once each: a scope that covers them.
    pub hosts: Vec<String>,
    /// Values left out, with their reason (at most [`MAX_SKIPPED_LISTED`]).
    pub skipped: Vec<SkippedCandidate>,
    /// Every value left out, listed or not.
    pub skipped_total: u32,
}

/// A value [`screen_candidate`] accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Screened {
    /// Normalised URL, without fragment.
    pub url: String,
    /// ASCII host.
    pub host: String,
    /// The host in its own script, when it is an IDN.
    pub host_unicode: Option<String>,
}

/// A refusal of [`screen_candidate`].
pub type Refusal = (SkipReason, Option<String>);

/// Screens one value found in hostile text: returns it normalised as a
/// campaign would store it, or why no campaign should fetch it. Pure and
/// bounded (the value is refused above [`MAX_URL_BYTES`] before parsing).
pub fn screen_candidate(raw: &str, exclusions: &[String]) -> std::result::Result<Screened, Refusal> {
    if raw.len() > MAX_URL_BYTES {
        return Err((SkipReason::TooLong, None));
    }
    let mut url = Url::parse(raw).map_err(|e| (SkipReason::Unparsable, Some(e.to_string())))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err((SkipReason::Scheme, Some(cut(url.scheme(), 16))));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err((SkipReason::Credentials, None));
    }
    url.set_fragment(None);
    let (host, host_unicode) = match url.host() {
        None => return Err((SkipReason::Unparsable, Some("no host".into()))),
        Some(Host::Ipv6(_)) => return Err((SkipReason::Ipv6, None)),
        Some(Host::Ipv4(ip)) => {
            if let Some(why) = non_public_ipv4(ip) {
                return Err((SkipReason::PrivateAddress, Some(why.into())));
            }
            (ip.to_string(), None)
        }
        Some(Host::Domain(name)) => {
            let name = name.trim_end_matches('.').to_owned();
            (name.clone(), screen_domain(&name)?)
        }
    };
    let url = url.to_string();
    if url.len() > MAX_URL_BYTES {
        return Err((SkipReason::TooLong, None));
    }
    for x in exclusions {
        let needle = x.trim().to_lowercase();
        if needle.chars().count() < MIN_EXCLUSION_CHARS {
            continue;
        }
        let shown = host_unicode.as_deref().unwrap_or_default().to_lowercase();
        if url.to_lowercase().contains(&needle) || shown.contains(&needle) {
            return Err((SkipReason::Excluded, Some(cut(x.trim(), 80))));
        }
    }
    // What the human will grant must pass the grant's own check with the
    // proposed host as its scope.
    check_campaign_url(&url, std::slice::from_ref(&host))
        .map_err(|e| (SkipReason::Unparsable, Some(cut(&e.to_string(), 160))))?;
    Ok(Screened { url, host, host_unicode })
}

/// Why an IPv4 address is not on the public Internet, if it is not: a code
/// the UI words (`loopback`, `private`, `link_local`, `unspecified`,
/// `reserved` (multicast, broadcast, class E), `documentation`, `shared`
/// (carrier NAT), `benchmarking`).
fn non_public_ipv4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    Some(if ip.is_loopback() {
        "loopback"
    } else if ip.is_private() {
        "private"
    } else if ip.is_link_local() {
        "link_local"
    } else if ip.is_unspecified() || a == 0 {
        "unspecified"
    } else if ip.is_broadcast() || ip.is_multicast() || a >= 240 {
        "reserved"
    } else if ip.is_documentation() {
        "documentation"
    } else if a == 100 && (64..128).contains(&b) {
        "shared"
    } else if a == 198 && (b == 18 || b == 19) {
        "benchmarking"
    } else {
        return None;
    })
}

/// Top-level names that never reach the public Internet (RFC 6761, 6762,
/// 8375, ICANN's `.internal`) and common private ones.
const NOT_PUBLIC_SUFFIXES: &[&str] = &["localhost", "local", "internal", "lan", "home.arpa", "invalid", "intranet"];

/// Screens a host name (ASCII form from the URL parser); returns its Unicode
/// form when it is an IDN.
fn screen_domain(name: &str) -> std::result::Result<Option<String>, Refusal> {
    // `http://.%2E` parses to the host `..`, empty once its dots are gone
    // (found by the `candidate_url` fuzz target).
    if name.is_empty() {
        return Err((SkipReason::Unparsable, Some("empty host name".into())));
    }
    let not_public = || Err((SkipReason::NotPublic, Some(cut(name, 80))));
    if !name.contains('.') {
        return not_public();
    }
    if NOT_PUBLIC_SUFFIXES.iter().any(|s| name == *s || name.ends_with(&format!(".{s}"))) {
        return not_public();
    }
    if name.ends_with(".onion") {
        return match crate::hosts::check_onion_name(name) {
            Ok(()) => Ok(None),
            Err(why) => Err((SkipReason::Onion, Some(why.code().into()))),
        };
    }
    if check_host_pattern(name).is_err() {
        return not_public();
    }
    if !name.split('.').any(|l| l.starts_with("xn--")) {
        return Ok(None);
    }
    let (unicode, decoded) = idna::domain_to_unicode(name);
    if decoded.is_err() {
        return Err((SkipReason::Unparsable, Some("invalid internationalised name".into())));
    }
    let mut imitated = Vec::new();
    let mut looks_ascii = true;
    for label in unicode.split('.') {
        if label.is_ascii() {
            imitated.push(label.to_owned());
            continue;
        }
        if label.detect_restriction_level() > RestrictionLevel::HighlyRestrictive {
            return Err((SkipReason::MixedScripts, Some(cut(label, 63))));
        }
        let skeleton: String = unicode_security::skeleton(label).collect();
        looks_ascii &= skeleton.is_ascii();
        imitated.push(skeleton);
    }
    if looks_ascii {
        return Err((SkipReason::Homograph, Some(cut(&imitated.join("."), 80))));
    }
    Ok(Some(unicode))
}

fn cut(s: &str, max: usize) -> String {
    labfy_core::bounded::truncate_chars(s, max)
}

/// Collects proposals and refusals, once per normalised URL.
struct Collector<'a> {
    exclusions: &'a [String],
    seen: HashSet<String>,
    out: ResearchCandidates,
}

/// Where a value was found.
struct Source {
    origin: CandidateOrigin,
    relation: Option<String>,
    selected: ObjectRef,
    via: Option<ObjectRef>,
    label: String,
}

impl Collector<'_> {
    fn offer(&mut self, raw: &str, src: Source) {
        if !self.seen.insert(raw.to_owned()) {
            return;
        }
        match screen_candidate(raw, self.exclusions) {
            Ok(s) => {
                if s.url != raw && !self.seen.insert(s.url.clone()) {
                    return;
                }
                if self.out.urls.len() >= MAX_CANDIDATES {
                    self.out.more = self.out.more.saturating_add(1);
                    return;
                }
                if !self.out.hosts.contains(&s.host) {
                    self.out.hosts.push(s.host.clone());
                }
                self.out.urls.push(CandidateUrl {
                    url: s.url,
                    host: s.host,
                    host_unicode: s.host_unicode,
                    origin: src.origin,
                    relation: src.relation,
                    selected: src.selected,
                    via: src.via,
                    label: cut(&src.label, MAX_LABEL_CHARS),
                });
            }
            Err((reason, detail)) => {
                self.out.skipped_total = self.out.skipped_total.saturating_add(1);
                if self.out.skipped.len() < MAX_SKIPPED_LISTED {
                    self.out.skipped.push(SkippedCandidate {
                        value: cut(raw, MAX_SKIPPED_VALUE_CHARS),
                        reason,
                        detail,
                        selected: src.selected,
                    });
                }
            }
        }
    }

    /// Whether a proposal already names this host.
    fn has_host(&self, host: &str) -> bool {
        self.out.hosts.iter().any(|h| h == host)
    }
}

/// The address an entity of a URL-like kind stands for.
fn entity_address(kind: &str, name: &str) -> Option<(String, CandidateOrigin)> {
    match kind {
        "url" => Some((name.to_owned(), CandidateOrigin::EntityUrl)),
        "domain" => Some((format!("https://{name}/"), CandidateOrigin::EntityDomain)),
        "onion" => Some((format!("http://{name}/"), CandidateOrigin::EntityDomain)),
        "email" => {
            let domain = name.rsplit_once('@')?.1;
            Some((format!("https://{domain}/"), CandidateOrigin::EmailDomain))
        }
        _ => None,
    }
}

/// Proposes the URLs of a selection (SPEC F1). `selection` was checked to be
/// in one investigation of the workspace.
pub(crate) fn gather(conn: &Connection, selection: &[ObjectRef], exclusions: &[String]) -> Result<ResearchCandidates> {
    let mut c = Collector { exclusions, seen: HashSet::new(), out: ResearchCandidates::default() };
    for selected in selection {
        match selected.kind() {
            RefKind::Evidence => scan_evidence(conn, &mut c, *selected, selected.id())?,
            RefKind::Entity => from_entity(conn, &mut c, *selected, selected.id())?,
            RefKind::Relation => {
                let ends: Option<(String, String)> = conn
                    .prepare_cached("SELECT src, dst FROM relations WHERE id = ?1")?
                    .query_row([selected.id().to_string()], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()?;
                for end in ends.into_iter().flat_map(|(s, d)| [s, d]) {
                    let Ok(r) = end.parse::<ObjectRef>() else { continue };
                    match r.kind() {
                        RefKind::Entity => from_entity(conn, &mut c, *selected, r.id())?,
                        RefKind::Evidence => scan_evidence(conn, &mut c, *selected, r.id())?,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    Ok(c.out)
}

/// URLs, then onion addresses, then domains (those no URL already names)
/// written in the first [`CANDIDATE_SCAN_CHARS`] characters of an item.
fn scan_evidence(conn: &Connection, c: &mut Collector<'_>, selected: ObjectRef, id: Uuid) -> Result<()> {
    let row: Option<(String, String)> = conn
        .prepare_cached("SELECT title, substr(content, 1, ?2) FROM evidence WHERE id = ?1")?
        .query_row(params![id.to_string(), CANDIDATE_SCAN_CHARS as i64], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let Some((title, text)) = row else { return Ok(()) };
    let via = ObjectRef::new(RefKind::Evidence, id);
    let via = (via != selected).then_some(via);
    let found = labfy_extract::extract(&text).mentions;
    let src = |origin| Source { origin, relation: None, selected, via, label: title.clone() };
    for m in found.iter().filter(|m| m.kind == Kind::Url) {
        c.offer(&m.value, src(CandidateOrigin::EvidenceText));
    }
    for m in found.iter().filter(|m| m.kind == Kind::Onion) {
        c.offer(&format!("http://{}/", m.value), src(CandidateOrigin::EvidenceDomain));
    }
    // A domain written inside a URL is that URL's host, not a proposal of its own.
    let url_spans: Vec<(usize, usize)> =
        found.iter().filter(|m| m.kind == Kind::Url).map(|m| (m.start, m.start + m.len)).collect();
    let in_url = |at: usize| {
        let i = url_spans.partition_point(|&(start, _)| start <= at);
        i > 0 && at < url_spans[i - 1].1
    };
    for m in found.iter().filter(|m| m.kind == Kind::Domain) {
        if !in_url(m.start) && !c.has_host(&m.value) {
            c.offer(&format!("https://{}/", m.value), src(CandidateOrigin::EvidenceDomain));
        }
    }
    Ok(())
}

/// An entity's own address, then the URL-like entities linked to it by a
/// relation, then those mentioned in the same evidence.
fn from_entity(conn: &Connection, c: &mut Collector<'_>, selected: ObjectRef, id: Uuid) -> Result<()> {
    let row: Option<(String, String)> = conn
        .prepare_cached("SELECT kind, name FROM entities WHERE id = ?1")?
        .query_row([id.to_string()], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let Some((kind, name)) = row else { return Ok(()) };
    let me = ObjectRef::new(RefKind::Entity, id);
    if let Some((raw, origin)) = entity_address(&kind, &name) {
        let via = (me != selected).then_some(me);
        c.offer(&raw, Source { origin, relation: None, selected, via, label: name.clone() });
    }
    let key = me.to_string();
    let linked: Vec<(String, String, String, String)> = conn
        .prepare_cached(
            "SELECT r.kind, e.id, e.kind, e.name FROM relations r JOIN entities e ON e.id = substr(r.dst, 8)
              WHERE r.src = ?1 AND r.kind <> 'mentions' AND r.dst LIKE 'entity:%'
                AND e.kind IN ('url', 'domain', 'onion', 'email')
             UNION ALL
             SELECT r.kind, e.id, e.kind, e.name FROM relations r JOIN entities e ON e.id = substr(r.src, 8)
              WHERE r.dst = ?1 AND r.kind <> 'mentions' AND r.src LIKE 'entity:%'
                AND e.kind IN ('url', 'domain', 'onion', 'email')
             LIMIT ?2",
        )?
        .query_map(params![key, LINKED_ROWS], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?
        .collect::<std::result::Result<_, _>>()?;
    for (relation, other, kind, name) in linked {
        offer_entity(c, selected, &other, &kind, &name, CandidateOrigin::Linked, Some(relation));
    }
    let co: Vec<(String, String, String)> = conn
        .prepare_cached(
            "WITH ev AS (SELECT src FROM relations WHERE dst = ?1 AND kind = 'mentions' LIMIT ?2)
             SELECT DISTINCT e.id, e.kind, e.name FROM ev
               JOIN relations r ON r.src = ev.src AND r.kind = 'mentions'
               JOIN entities e ON e.id = substr(r.dst, 8)
              WHERE e.kind IN ('url', 'domain', 'onion') AND r.dst <> ?1
              ORDER BY e.kind = 'domain', e.name
              LIMIT ?3",
        )?
        .query_map(params![key, CO_MENTION_EVIDENCE, LINKED_ROWS], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<std::result::Result<_, _>>()?;
    for (other, kind, name) in co {
        // A co-mentioned domain adds nothing to a URL of the same host.
        if kind == "domain" && c.has_host(&name) {
            continue;
        }
        offer_entity(c, selected, &other, &kind, &name, CandidateOrigin::CoMentioned, None);
    }
    Ok(())
}

fn offer_entity(
    c: &mut Collector<'_>,
    selected: ObjectRef,
    id: &str,
    kind: &str,
    name: &str,
    origin: CandidateOrigin,
    relation: Option<String>,
) {
    let Some((raw, _)) = entity_address(kind, name) else { return };
    let via = Uuid::try_parse(id).ok().map(|u| ObjectRef::new(RefKind::Entity, u));
    c.offer(&raw, Source { origin, relation, selected, via, label: name.to_owned() });
}

/// Reads stored candidates (`NULL` for a request prepared before SPEC F1).
pub(crate) fn parse_stored(text: Option<String>) -> Result<Option<ResearchCandidates>> {
    text.map(|t| {
        serde_json::from_str(&t).map_err(|e| StoreError::Internal(format!("stored candidates are invalid: {e}")))
    })
    .transpose()
}
