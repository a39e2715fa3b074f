//! The one URL rule of a grant (SPEC E3, T2; `labfy_store::check_campaign_url`
//! and `host_in_scope`, which the store, the gateway and egress's ledger all
//! apply): never panics; an accepted URL is http(s), without credentials or
//! fragment, normalised once and for all (checking it again gives it back
//! unchanged), and its host is in the scope by a plain reading of the
//! patterns (the oracle below, written from the rule's documentation).
//! Input: host patterns separated by commas, a newline, then the URL.
#![no_main]

use labfy_store::{check_campaign_url, check_host_pattern};
use libfuzzer_sys::fuzz_target;

/// `*.x.org` covers the sub-domains of `x.org` (never `x.org`, never an
/// address); any other pattern covers exactly itself; IPv6 nothing.
fn covered(host: &str, patterns: &[String]) -> bool {
    if host.starts_with('[') {
        return false;
    }
    let address = host.parse::<std::net::Ipv4Addr>().is_ok();
    patterns.iter().any(|p| match p.strip_prefix('*') {
        Some(dot_base) => !address && host.len() > dot_base.len() && host.ends_with(dot_base),
        None => p == host,
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Some((patterns, url)) = text.split_once('\n') else { return };
    let patterns: Vec<String> =
        patterns.split(',').filter(|p| check_host_pattern(p).is_ok()).map(str::to_owned).take(16).collect();
    match check_campaign_url(url, &patterns) {
        Ok(normal) => {
            let parsed = url::Url::parse(&normal).expect("a normalised URL parses");
            assert!(matches!(parsed.scheme(), "http" | "https"), "{normal}");
            assert!(parsed.username().is_empty() && parsed.password().is_none(), "credentials kept: {normal}");
            assert!(parsed.fragment().is_none(), "fragment kept: {normal}");
            let host = parsed.host_str().expect("a host");
            assert!(covered(host, &patterns), "{host} accepted outside {patterns:?}");
            assert_eq!(check_campaign_url(&normal, &patterns).ok().as_deref(), Some(normal.as_str()), "not idempotent");
        }
        Err(e) => assert!(!e.to_string().is_empty(), "a refusal without a reason"),
    }
});
