//! The host rules of a research scope (SPEC G4, F3): one copy, beneath the
//! research, grant and campaign aggregates — a scope's host pattern
//! ([`check_host_pattern`]) and a name under `.onion` ([`check_onion_name`]),
//! which every granted URL and every candidate URL meets.

use crate::error::{Result, StoreError};

/// Longest host pattern (a DNS name is at most 253 characters).
pub const MAX_HOST_CHARS: usize = 253;

/// Checks one host pattern: lower-case DNS labels, optionally `*.` first, or
/// an IPv4 literal. No ports, paths, credentials or upper case; a wildcard
/// only below a public suffix (`*.co.uk`, `*.github.io` refused).
pub fn check_host_pattern(host: &str) -> Result<()> {
    let bad = |why: &str| Err(StoreError::Invalid(format!("scope host `{}`: {why}", truncate(host, 64))));
    if host.is_empty() || host.len() > MAX_HOST_CHARS {
        return bad(&format!("must be 1 to {MAX_HOST_CHARS} characters"));
    }
    let name = host.strip_prefix("*.").unwrap_or(host);
    if let Ok(ip) = name.parse::<std::net::Ipv4Addr>() {
        if name != host {
            return bad("a wildcard cannot cover an IP address");
        }
        if ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() {
            return bad("not a host address");
        }
        return Ok(());
    }
    if name.rsplit('.').next().is_some_and(|tld| tld.bytes().all(|b| b.is_ascii_digit())) {
        return bad("a numeric name must be a valid IPv4 address");
    }
    if name.ends_with(".onion") {
        if let Err(why) = check_onion_name(name) {
            return bad(why.sentence());
        }
    }
    let labels: Vec<&str> = name.split('.').collect();
    if labels.len() < 2 {
        return bad("must be a dotted host name such as `example.org`");
    }
    // `*.co.uk` would cover every company's site under `.co.uk`: a wildcard
    // must name a registrable domain or a name below one, per the public
    // suffix list (SPEC V6; `psl`, maintained upstream).
    if name != host && psl::domain(name.as_bytes()).is_none() {
        return bad(&format!(
            "`{}` is a public suffix (like `co.uk`): a wildcard must cover one domain, such as `*.example.co.uk`",
            truncate(name, 64)
        ));
    }
    for label in labels {
        let ok = !label.is_empty()
            && label.len() <= 63
            && !label.starts_with('-')
            && !label.ends_with('-')
            && label.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !ok {
            return bad("labels are 1–63 lower-case letters, digits or inner hyphens (no ports, paths or `*` inside)");
        }
    }
    Ok(())
}

/// Why a name under `.onion` names no onion service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BadOnion {
    /// 56 base32 characters whose v3 checksum is wrong: a typing or
    /// copying error, or a forged address.
    BadChecksum,
    /// Not a v3 address at all (a retired 16-character v2 address, or any
    /// other label).
    NotV3,
}

impl BadOnion {
    /// The code a skipped candidate carries.
    pub(crate) fn code(self) -> &'static str {
        match self {
            Self::BadChecksum => "bad_checksum",
            Self::NotV3 => "not_v3",
        }
    }

    /// The reason, for a refusal.
    fn sentence(self) -> &'static str {
        match self {
            Self::BadChecksum => "the onion address's v3 checksum is wrong; copy the address again",
            Self::NotV3 => {
                "an onion address is 56 letters a–z and digits 2–7 before `.onion` (v3); v2 addresses are retired"
            }
        }
    }
}

/// Checks a host name under `.onion` (SPEC F3): the label just before
/// `.onion` must be a v3 onion address whose checksum holds (rend-spec-v3);
/// labels before it are the service's own sub-domains (`www.<v3>.onion`),
/// which Tor accepts and ignores. The one copy of the rule: scope patterns
/// ([`check_host_pattern`]), hence every granted URL, and candidate URLs.
pub(crate) fn check_onion_name(name: &str) -> std::result::Result<(), BadOnion> {
    let label = name.strip_suffix(".onion").and_then(|l| l.rsplit('.').next()).unwrap_or_default();
    if labfy_extract::onion_is_valid(label) {
        return Ok(());
    }
    let base32 = label.len() == 56 && label.bytes().all(|b| b.is_ascii_lowercase() || (b'2'..=b'7').contains(&b));
    Err(if base32 { BadOnion::BadChecksum } else { BadOnion::NotV3 })
}

fn truncate(s: &str, max: usize) -> String {
    labfy_core::bounded::truncate_chars(s, max)
}
