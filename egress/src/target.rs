//! What a URL may be before egress opens anything for it (SPEC E2, E3, E5),
//! and whether a host is inside a grant's scope. Pure functions: no store,
//! no network, no resolver.

use std::net::Ipv4Addr;

use labfy_core::bounded::truncate_chars;
use labfy_ipc::messages::egress::MAX_URL_BYTES;
use url::{Host, Url};

/// A URL that passed [`check_url`]: absolute `http`/`https`, no
/// credentials, fragment removed (it is never sent), a host that is a DNS
/// name or an IPv4 literal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The URL as it will be asked (no fragment).
    pub url: Url,
    /// The host, lower case: a DNS name (resolved by the Tor exit, never
    /// here) or an IPv4 literal.
    pub host: String,
    /// The port (the scheme's default when the URL names none).
    pub port: u16,
    /// True for `https`.
    pub tls: bool,
    /// The IPv4 literal, when the host is one.
    pub ip: Option<Ipv4Addr>,
}

impl Target {
    /// The request target in origin form: path and query.
    pub fn origin_form(&self) -> String {
        match self.url.query() {
            Some(q) => format!("{}?{q}", self.url.path()),
            None => self.url.path().to_owned(),
        }
    }

    /// The `Host` header: the host, and the port when it is not the default.
    pub fn host_header(&self) -> String {
        match self.url.port() {
            Some(p) => format!("{}:{p}", self.host),
            None => self.host.clone(),
        }
    }
}

/// A URL shortened for a refusal reason (never the whole of a long URL).
pub fn shown(url: &str) -> String {
    truncate_chars(url, 120)
}

/// Checks one URL (the asked one or a redirect hop) against the rules that
/// need no grant: length, syntax, scheme, credentials, host kind. The
/// fragment is dropped. Returns the refusal reason otherwise.
pub fn check_url(raw: &str) -> Result<Target, String> {
    if raw.len() > MAX_URL_BYTES {
        return Err(format!("the URL is {} bytes long; at most {MAX_URL_BYTES} are allowed", raw.len()));
    }
    let mut url = Url::parse(raw).map_err(|e| format!("`{}` is not an absolute URL: {e}", shown(raw)))?;
    let tls = match url.scheme() {
        "http" => false,
        "https" => true,
        other => return Err(format!("scheme `{}` is refused: http and https only", truncate_chars(other, 16))),
    };
    if !url.username().is_empty() || url.password().is_some() {
        return Err("URLs carrying credentials are refused (egress sends no authentication)".into());
    }
    url.set_fragment(None);
    let (host, ip) = match url.host() {
        None => return Err(format!("`{}` has no host", shown(raw))),
        Some(Host::Ipv6(_)) => return Err("IPv6 literals are refused; name the host".into()),
        Some(Host::Ipv4(ip)) => {
            if ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() || ip.octets()[0] == 0 {
                return Err(format!("`{ip}` is not a host address"));
            }
            (ip.to_string(), Some(ip))
        }
        Some(Host::Domain(d)) => {
            let d = d.to_ascii_lowercase();
            if d.is_empty() {
                return Err(format!("`{}` has no host", shown(raw)));
            }
            (d, None)
        }
    };
    let Some(port) = url.port_or_known_default() else {
        return Err(format!("`{}` has no port", shown(raw)));
    };
    Ok(Target { url, host, port, tls, ip })
}

/// The reserved range an IPv4 address falls in, if any: such an address is
/// reached only when the grant's scope names it exactly.
pub fn reserved_range(ip: Ipv4Addr) -> Option<&'static str> {
    let o = ip.octets();
    if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_private() {
        Some("private")
    } else if ip.is_link_local() {
        Some("link-local")
    } else if o[0] == 100 && (o[1] & 0xc0) == 64 {
        Some("carrier-grade NAT")
    } else if o[0] >= 240 {
        Some("reserved")
    } else {
        None
    }
}

/// Whether `host` (lower case) is inside a scope of host patterns: the
/// store's rule, the one the gateway applies too (`*.example.org` covers the
/// sub-domains of `example.org`, not itself; any other pattern covers
/// exactly that host; a wildcard never covers an address).
pub use labfy_store::host_in_scope;

/// Why `target` may not be reached under a scope, or `None` when it may.
pub fn scope_refusal(target: &Target, patterns: &[String], grant: &str) -> Option<String> {
    if host_in_scope(&target.host, patterns) {
        return None;
    }
    let host = truncate_chars(&target.host, 64);
    Some(match target.ip.and_then(reserved_range) {
        Some(range) => format!("`{host}` is a {range} address and the scope of {grant} does not name it"),
        None => format!("host `{host}` is outside the scope of {grant}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(p: &[&str]) -> Vec<String> {
        p.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn urls_are_http_or_https_with_a_host_and_no_credentials() {
        let t = check_url("https://News.Example.org/a/b?q=1#frag").unwrap();
        assert_eq!((t.host.as_str(), t.port, t.tls), ("news.example.org", 443, true));
        assert_eq!(t.url.as_str(), "https://news.example.org/a/b?q=1");
        assert_eq!(t.origin_form(), "/a/b?q=1");
        assert_eq!(t.host_header(), "news.example.org");
        let t = check_url("http://example.org:8080").unwrap();
        assert_eq!(
            (t.port, t.tls, t.origin_form(), t.host_header()),
            (8080, false, "/".into(), "example.org:8080".into())
        );
        for (bad, why) in [
            ("ftp://example.org/", "scheme `ftp`"),
            ("file:///etc/passwd", "scheme `file`"),
            ("https://user@example.org/", "credentials"),
            ("https://user:pw@example.org/", "credentials"),
            ("https://:pw@example.org/", "credentials"),
            ("example.org/x", "not an absolute URL"),
            ("https://[::1]/", "IPv6"),
            ("https://[2001:db8::1]:8443/", "IPv6"),
            ("http://0.0.0.0/", "not a host address"),
            ("http://255.255.255.255/", "not a host address"),
            ("http://224.0.0.1/", "not a host address"),
            ("data:text/plain,hi", "scheme `data`"),
        ] {
            let e = check_url(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn the_url_bound_is_exact() {
        let head = "https://example.org/";
        let at = format!("{head}{}", "a".repeat(MAX_URL_BYTES - head.len()));
        assert_eq!(at.len(), MAX_URL_BYTES);
        assert!(check_url(&at).is_ok());
        let over = format!("{at}a");
        assert!(check_url(&over).unwrap_err().contains("at most 2048"));
    }

    #[test]
    fn numeric_hosts_are_ipv4_literals_whatever_their_spelling() {
        // WHATWG parsing: these are all 127.0.0.1, so none slips past as a name.
        for u in ["http://127.1/", "http://0x7f.0.0.1/", "http://2130706433/", "http://127.0.0.1./"] {
            let t = check_url(u).unwrap();
            assert_eq!(t.ip, Some(Ipv4Addr::LOCALHOST), "{u}");
            assert_eq!(t.host, "127.0.0.1");
        }
    }

    #[test]
    fn reserved_ranges_are_named() {
        let r = |s: &str| reserved_range(s.parse().unwrap());
        assert_eq!(r("127.0.0.1"), Some("loopback"));
        assert_eq!(r("10.1.2.3"), Some("private"));
        assert_eq!(r("172.16.0.1"), Some("private"));
        assert_eq!(r("192.168.1.1"), Some("private"));
        assert_eq!(r("169.254.169.254"), Some("link-local"));
        assert_eq!(r("100.64.0.1"), Some("carrier-grade NAT"));
        assert_eq!(r("100.127.255.255"), Some("carrier-grade NAT"));
        assert_eq!(r("100.128.0.1"), None);
        assert_eq!(r("93.184.216.34"), None);
    }

    #[test]
    fn scope_patterns_cover_sub_domains_or_exact_hosts() {
        let s = scope(&["*.example.org", "news.example.net", "10.0.0.5"]);
        assert!(host_in_scope("a.example.org", &s));
        assert!(host_in_scope("a.b.example.org", &s));
        assert!(!host_in_scope("example.org", &s));
        assert!(!host_in_scope("badexample.org", &s));
        assert!(!host_in_scope("example.org.evil.net", &s));
        assert!(host_in_scope("news.example.net", &s));
        assert!(!host_in_scope("www.news.example.net", &s));
        assert!(!host_in_scope("example.net", &s));
        assert!(host_in_scope("10.0.0.5", &s));
        assert!(!host_in_scope("10.0.0.6", &s));
        assert!(!host_in_scope("anything", &scope(&[])));
        // A wildcard never covers an IP address, and `*.` alone covers nothing.
        assert!(!host_in_scope("1.2.3.4", &scope(&["*.3.4"])));
        assert!(!host_in_scope("a.b", &scope(&["*."])));
    }

    #[test]
    fn a_reserved_ip_is_reached_only_when_the_scope_names_it() {
        let t = check_url("http://192.168.1.10/admin").unwrap();
        let e = scope_refusal(&t, &scope(&["*.example.org"]), "grant:x").unwrap();
        assert!(e.contains("private address") && e.contains("does not name it"), "{e}");
        assert_eq!(scope_refusal(&t, &scope(&["192.168.1.10"]), "grant:x"), None);
        let t = check_url("http://93.184.216.34/").unwrap();
        assert!(scope_refusal(&t, &scope(&["example.org"]), "grant:x").unwrap().contains("outside the scope"));
        let t = check_url("https://a.example.org/").unwrap();
        assert_eq!(scope_refusal(&t, &scope(&["*.example.org"]), "grant:x"), None);
    }
}
