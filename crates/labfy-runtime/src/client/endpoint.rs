//! The model endpoint: canonical loopback or a Unix socket only (SPEC M3,
//! D1).
//!
//! An [`Endpoint`] is a socket address on the loopback interface, parsed from
//! one of exactly two spellings:
//!
//! - `http://127.0.0.1:<port>`
//! - `http://[::1]:<port>`
//!
//! each optionally followed by a single `/`. The port is decimal, without
//! leading zeros, in `1..=65535`, and never [`FORBIDDEN_PORT`] (8080, the
//! user's port: SPEC P5, M3). The request path is not part of the endpoint: the
//! client fixes it (`/v1/chat/completions`, `/health`).
//!
//! Or it is a Unix socket, `unix:<absolute path>` — the governed model's
//! (`labfy_ipc::daemon::model_socket`), which the configuration names
//! `governed` ([`super::GOVERNED`]). The path is absolute, made of plain
//! components (no `.`, `..` or empty one), fits a socket address (at most
//! [`MAX_SOCKET_PATH_BYTES`]) and ends in `.sock`, as llama-server requires
//! of a socket it listens on.
//!
//! Everything else is refused, each with its own [`EndpointError`]: DNS names
//! (`localhost` included: it resolves through NSS and `/etc/hosts`, which Labfy
//! does not control), LAN and public addresses, the unspecified addresses,
//! loopback addresses spelled any other way (`127.1`, `0x7f.0.0.1`,
//! `[::ffff:127.0.0.1]`, `[0:0:0:0:0:0:0:1]`, `127.0.0.2`…), HTTPS and every
//! other scheme, credentials, query, fragment, a path, percent-encoding,
//! whitespace and over-long input. The check is a small hand-written parser
//! rather than a general URL library on purpose: a general parser normalises
//! (`127.1` becomes `127.0.0.1`), and normalisation is exactly what must not
//! happen here.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use labfy_core::bounded::truncate_chars;

/// The user's port, never configured nor probed (SPEC P5, M3).
pub const FORBIDDEN_PORT: u16 = 8080;

/// The longest Unix socket path, in bytes: `sun_path` holds 108 with its
/// final NUL.
pub const MAX_SOCKET_PATH_BYTES: usize = 107;

/// The prefix of a Unix socket endpoint.
const UNIX_PREFIX: &str = "unix:";

/// The longest endpoint text accepted, in bytes: `unix:` and the longest
/// socket path. The longest canonical loopback form,
/// `http://127.0.0.1:65535/`, is 23 bytes.
pub const MAX_ENDPOINT_LEN: usize = UNIX_PREFIX.len() + MAX_SOCKET_PATH_BYTES;

/// How many characters of a refused value an error may quote.
const QUOTE_CHARS: usize = 24;

/// A validated model endpoint: `127.0.0.1` or `::1` and a port other than 0
/// and 8080 (SPEC M3), or a Unix socket path (SPEC D1). Immutable; the only
/// ways to build one are [`Endpoint::parse`], [`Endpoint::from_socket_addr`]
/// and [`Endpoint::unix`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Endpoint {
    target: Target,
}

/// Where an [`Endpoint`] connects.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// A socket address on the loopback interface.
    Loopback(SocketAddr),
    /// A Unix socket.
    Unix(PathBuf),
}

/// Why an endpoint was refused (SPEC M3). Each variant is one rule.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EndpointError {
    /// The value is empty.
    #[error("the endpoint is empty")]
    Empty,
    /// The value is longer than [`MAX_ENDPOINT_LEN`] bytes.
    #[error("the endpoint is {len} bytes long, more than {max}")]
    TooLong {
        /// Length of the value, in bytes.
        len: usize,
        /// [`MAX_ENDPOINT_LEN`].
        max: usize,
    },
    /// The value contains whitespace or a control character (anywhere,
    /// including around it: it is not trimmed).
    #[error("the endpoint contains whitespace or a control character")]
    Whitespace,
    /// The value contains a non-ASCII character.
    #[error("the endpoint contains a non-ASCII character")]
    NonAscii,
    /// The value contains `%`: percent-encoding is never decoded.
    #[error("the endpoint contains percent-encoding ('%')")]
    PercentEncoding,
    /// No `scheme://` prefix.
    #[error("the endpoint has no scheme: write http://127.0.0.1:<port> or http://[::1]:<port>")]
    MissingScheme,
    /// The scheme is `https` (in any case): the model endpoint is plain HTTP on
    /// loopback, where TLS adds only a certificate to trust.
    #[error("https is refused: the model endpoint is plain http on loopback")]
    Https,
    /// A scheme other than lowercase `http`.
    #[error("scheme {found:?} is refused: only lowercase http is accepted (or unix:/<path>.sock)")]
    Scheme {
        /// The scheme found, cut to a few characters.
        found: String,
    },
    /// `user[:password]@` before the host: no credentials are ever sent.
    #[error("credentials ('user:password@') are refused in the endpoint")]
    Credentials,
    /// A `?query`.
    #[error("a query ('?') is refused in the endpoint")]
    Query,
    /// A `#fragment`.
    #[error("a fragment ('#') is refused in the endpoint")]
    Fragment,
    /// A path other than empty or `/`: the client fixes the path itself.
    #[error("a path is refused in the endpoint (the client uses /v1/chat/completions itself)")]
    Path,
    /// A character that has no place in a canonical endpoint (`\`, `_`, `!`…).
    #[error("character {0:?} is refused in the endpoint")]
    InvalidCharacter(char),
    /// No host between `//` and the port.
    #[error("the endpoint has no host")]
    MissingHost,
    /// `localhost` (in any case, with or without a final dot): a name resolved
    /// through NSS and `/etc/hosts`, not an address.
    #[error("'localhost' is refused: it is a name resolved by NSS; write 127.0.0.1 or [::1]")]
    Localhost,
    /// Any other DNS name: Labfy resolves no names for the model endpoint.
    #[error("DNS name {name:?} is refused: only 127.0.0.1 or [::1] is accepted")]
    DnsName {
        /// The name, cut to a few characters.
        name: String,
    },
    /// `0.0.0.0` or `[::]`: "any address" is not an address to connect to.
    #[error("the unspecified address {0} is refused: write 127.0.0.1 or [::1]")]
    Unspecified(IpAddr),
    /// A private, link-local or unique-local address: the LAN.
    #[error("LAN address {0} is refused: only loopback (127.0.0.1 or [::1]) is accepted")]
    LanAddress(IpAddr),
    /// Any other non-loopback address (public, multicast, broadcast, reserved).
    #[error("address {0} is refused: only loopback (127.0.0.1 or [::1]) is accepted")]
    NonLoopbackAddress(IpAddr),
    /// A loopback address written in a non-canonical way, or another address
    /// of `127.0.0.0/8`, or an IPv4-mapped loopback.
    #[error("loopback spelled {spelled:?} is refused: write exactly 127.0.0.1 or [::1]")]
    NonCanonicalLoopback {
        /// The spelling found, cut to a few characters.
        spelled: String,
    },
    /// A numeric host that is not a canonical dotted quad (`10.1`,
    /// `0x0a000001`, leading zeros…) and does not denote loopback.
    #[error("numeric host {spelled:?} is not a canonical address and not loopback")]
    NonCanonicalAddress {
        /// The spelling found, cut to a few characters.
        spelled: String,
    },
    /// An IPv6 address without brackets, unbalanced brackets, or an IPv4
    /// address in brackets.
    #[error("host {spelled:?} is malformed (IPv6 needs brackets: http://[::1]:<port>)")]
    MalformedHost {
        /// The host found, cut to a few characters.
        spelled: String,
    },
    /// No `:<port>`: there is no default port (80 is not llama-server's, and
    /// guessing is probing).
    #[error("the endpoint has no port: write http://127.0.0.1:<port>")]
    MissingPort,
    /// A port that is not canonical decimal in `1..=65535` (sign, leading
    /// zero, letters, too large).
    #[error("port {spelled:?} is not a decimal number in 1..=65535 without leading zeros")]
    InvalidPort {
        /// The port text found, cut to a few characters.
        spelled: String,
    },
    /// Port 0: "any port" is not a port to connect to.
    #[error("port 0 is refused")]
    PortZero,
    /// Port 8080: the user's port, never probed (SPEC P5, M3).
    #[error("port 8080 is refused: it is the user's port and is never probed")]
    Port8080,
    /// A Unix socket path that is not absolute, has a `.`, `..` or empty
    /// component, is longer than a socket address holds, or does not end in
    /// `.sock`.
    #[error("unix socket path {spelled:?} is refused: {why}")]
    SocketPath {
        /// The path, cut to a few characters.
        spelled: String,
        /// The rule it breaks.
        why: &'static str,
    },
}

impl Endpoint {
    /// Parses the canonical text of an endpoint (SPEC M3; rules in the module
    /// documentation). The input is taken as is: no trimming, no decoding, no
    /// case folding, no resolution.
    pub fn parse(text: &str) -> Result<Self, EndpointError> {
        if text.is_empty() {
            return Err(EndpointError::Empty);
        }
        if text.len() > MAX_ENDPOINT_LEN {
            return Err(EndpointError::TooLong { len: text.len(), max: MAX_ENDPOINT_LEN });
        }
        if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(EndpointError::Whitespace);
        }
        if !text.is_ascii() {
            return Err(EndpointError::NonAscii);
        }
        if text.contains('%') {
            return Err(EndpointError::PercentEncoding);
        }
        // `unix:/path`; `unix://…` is a URL of a scheme that is not http.
        if let Some(path) = text.strip_prefix(UNIX_PREFIX).filter(|p| !p.starts_with("//")) {
            return Self::unix(Path::new(path));
        }
        let Some((scheme, rest)) = text.split_once("://") else {
            return Err(EndpointError::MissingScheme);
        };
        if scheme.eq_ignore_ascii_case("https") {
            return Err(EndpointError::Https);
        }
        if scheme != "http" {
            return Err(EndpointError::Scheme { found: quote(scheme) });
        }
        if rest.contains('#') {
            return Err(EndpointError::Fragment);
        }
        if rest.contains('?') {
            return Err(EndpointError::Query);
        }
        let (authority, path) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
        if authority.contains('@') {
            return Err(EndpointError::Credentials);
        }
        if !path.is_empty() && path != "/" {
            return Err(EndpointError::Path);
        }
        if let Some(c) =
            authority.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | ':' | '[' | ']' | '-')))
        {
            return Err(EndpointError::InvalidCharacter(c));
        }
        let (host, port) = split_host_port(authority)?;
        let ip = parse_host(host)?;
        let port = parse_port(port)?;
        Self::from_socket_addr(SocketAddr::new(ip, port))
    }

    /// Builds an endpoint from a socket address known to the caller (the
    /// governor knows the port of the llama-server it started). The same rules
    /// apply: `127.0.0.1` or `::1` only, port neither 0 nor 8080.
    pub fn from_socket_addr(addr: SocketAddr) -> Result<Self, EndpointError> {
        let ip = addr.ip();
        if ip != IpAddr::V4(Ipv4Addr::LOCALHOST) && ip != IpAddr::V6(Ipv6Addr::LOCALHOST) {
            return Err(classify_other_address(ip));
        }
        match addr.port() {
            0 => Err(EndpointError::PortZero),
            FORBIDDEN_PORT => Err(EndpointError::Port8080),
            _ => Ok(Self { target: Target::Loopback(addr) }),
        }
    }

    /// A Unix socket endpoint: an absolute path of plain components, at
    /// most [`MAX_SOCKET_PATH_BYTES`], ending in `.sock` (whitespace,
    /// control characters and non-ASCII are refused as in any endpoint).
    pub fn unix(path: &Path) -> Result<Self, EndpointError> {
        let text = path.to_string_lossy();
        let refuse = |why: &'static str| EndpointError::SocketPath { spelled: quote(&text), why };
        if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(EndpointError::Whitespace);
        }
        if !text.is_ascii() {
            return Err(EndpointError::NonAscii);
        }
        let Some(relative) = text.strip_prefix('/') else { return Err(refuse("it is not absolute")) };
        if relative.split('/').any(|c| c.is_empty() || c == "." || c == "..") {
            return Err(refuse("it has an empty, '.' or '..' component"));
        }
        if text.len() > MAX_SOCKET_PATH_BYTES {
            return Err(refuse("it is longer than a socket address holds (107 bytes)"));
        }
        if !text.ends_with(".sock") || text.ends_with("/.sock") {
            return Err(refuse("it does not end in a name with .sock"));
        }
        Ok(Self { target: Target::Unix(PathBuf::from(text.as_ref())) })
    }

    /// Where the client connects, and nothing else.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The loopback socket address, for a TCP endpoint.
    pub fn socket_addr(&self) -> Option<SocketAddr> {
        match &self.target {
            Target::Loopback(addr) => Some(*addr),
            Target::Unix(_) => None,
        }
    }

    /// The port, for a TCP endpoint.
    pub fn port(&self) -> Option<u16> {
        self.socket_addr().map(|a| a.port())
    }

    /// Whether the client needs TCP (the workspace server's confinement
    /// allows it only then).
    pub fn is_tcp(&self) -> bool {
        matches!(self.target, Target::Loopback(_))
    }

    /// The `Host` header value: `127.0.0.1:<port>` or `[::1]:<port>`;
    /// `localhost` on a Unix socket (a name never resolved: HTTP/1.1 wants
    /// one).
    pub fn host_header(&self) -> String {
        match &self.target {
            Target::Loopback(addr) => addr.to_string(),
            Target::Unix(_) => "localhost".into(),
        }
    }
}

impl fmt::Display for Endpoint {
    /// The canonical form, without a trailing `/`; it parses back to itself.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.target {
            Target::Loopback(addr) => write!(f, "http://{addr}"),
            Target::Unix(path) => write!(f, "{UNIX_PREFIX}{}", path.display()),
        }
    }
}

impl FromStr for Endpoint {
    type Err = EndpointError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}

/// A refused value, cut for quoting in an error.
fn quote(text: &str) -> String {
    truncate_chars(text, QUOTE_CHARS)
}

/// Splits `host[:port]` or `[v6][:port]`; the port text may be empty.
fn split_host_port(authority: &str) -> Result<(&str, &str), EndpointError> {
    let malformed = || EndpointError::MalformedHost { spelled: quote(authority) };
    let (host, after) = if let Some(inner) = authority.strip_prefix('[') {
        let (host, after) = inner.split_once(']').ok_or_else(malformed)?;
        if host.is_empty() || host.contains(['[', ']']) || after.contains(['[', ']']) {
            return Err(malformed());
        }
        // An IPv4 address or a name in brackets is not an IPv6 literal.
        if !host.contains(':') {
            return Err(malformed());
        }
        (host, after)
    } else {
        if authority.contains(['[', ']']) {
            return Err(malformed());
        }
        match authority.matches(':').count() {
            0 => (authority, ""),
            1 => authority.split_at(authority.find(':').unwrap_or(authority.len())),
            _ => return Err(malformed()),
        }
    };
    if host.is_empty() {
        return Err(EndpointError::MissingHost);
    }
    match after.strip_prefix(':') {
        Some(port) => Ok((host, port)),
        None if after.is_empty() => Ok((host, "")),
        None => Err(malformed()),
    }
}

/// The host's address, if it is exactly `127.0.0.1` or `::1`.
fn parse_host(host: &str) -> Result<IpAddr, EndpointError> {
    if host.contains(':') {
        // Bracketed IPv6 (brackets already removed).
        let ip: Ipv6Addr = host.parse().map_err(|_| EndpointError::MalformedHost { spelled: quote(host) })?;
        if ip == Ipv6Addr::LOCALHOST {
            return if host == "::1" {
                Ok(IpAddr::V6(ip))
            } else {
                Err(EndpointError::NonCanonicalLoopback { spelled: quote(host) })
            };
        }
        if ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()) {
            return Err(EndpointError::NonCanonicalLoopback { spelled: quote(host) });
        }
        return Err(classify_other_address(IpAddr::V6(ip)));
    }
    if let Ok(ip) = host.parse::<Ipv4Addr>() {
        // `Ipv4Addr::from_str` is strict (four decimal parts, no leading
        // zero); the comparison below holds whatever it becomes.
        if ip == Ipv4Addr::LOCALHOST && host == "127.0.0.1" {
            return Ok(IpAddr::V4(ip));
        }
        if ip.is_loopback() {
            return Err(EndpointError::NonCanonicalLoopback { spelled: quote(host) });
        }
        return Err(classify_other_address(IpAddr::V4(ip)));
    }
    if let Some(ip) = inet_aton(host) {
        // What the C library would make of it (`127.1`, `0x7f.1`, `2130706433`).
        return Err(if ip.is_loopback() {
            EndpointError::NonCanonicalLoopback { spelled: quote(host) }
        } else {
            EndpointError::NonCanonicalAddress { spelled: quote(host) }
        });
    }
    let name = host.strip_suffix('.').unwrap_or(host);
    if name.eq_ignore_ascii_case("localhost") {
        return Err(EndpointError::Localhost);
    }
    if host.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(EndpointError::NonCanonicalAddress { spelled: quote(host) });
    }
    Err(EndpointError::DnsName { name: quote(host) })
}

/// The reason for refusing an address other than `127.0.0.1` / `::1`.
fn classify_other_address(ip: IpAddr) -> EndpointError {
    match ip {
        IpAddr::V4(v4) if v4.is_unspecified() => EndpointError::Unspecified(ip),
        IpAddr::V6(v6) if v6.is_unspecified() => EndpointError::Unspecified(ip),
        IpAddr::V4(v4) if v4.is_loopback() => EndpointError::NonCanonicalLoopback { spelled: v4.to_string() },
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some_and(|m| m.is_loopback()) => {
            EndpointError::NonCanonicalLoopback { spelled: v6.to_string() }
        }
        IpAddr::V4(v4) if v4.is_private() || v4.is_link_local() => EndpointError::LanAddress(ip),
        IpAddr::V6(v6) if v6.is_unique_local() || v6.is_unicast_link_local() => EndpointError::LanAddress(ip),
        IpAddr::V6(v6) if v6.to_ipv4_mapped().is_some_and(|m| m.is_private() || m.is_link_local()) => {
            EndpointError::LanAddress(ip)
        }
        _ => EndpointError::NonLoopbackAddress(ip),
    }
}

/// The classic `inet_aton` reading of a numeric host: one to four parts,
/// each decimal, octal (leading `0`) or hexadecimal (`0x`), the last part
/// filling the remaining bytes. Used only to name the reason of a refusal.
fn inet_aton(host: &str) -> Option<Ipv4Addr> {
    let parts: Vec<&str> = host.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut values = Vec::with_capacity(parts.len());
    for part in &parts {
        let (digits, radix) = if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
            (hex, 16)
        } else if part.len() > 1 && part.starts_with('0') {
            (&part[1..], 8)
        } else {
            (*part, 10)
        };
        if digits.is_empty() && radix != 16 {
            return None;
        }
        let value = if digits.is_empty() { 0 } else { u32::from_str_radix(digits, radix).ok()? };
        values.push(value);
    }
    let (last, head) = values.split_last()?;
    let mut addr: u32 = 0;
    for (i, v) in head.iter().enumerate() {
        if *v > 0xff {
            return None;
        }
        addr |= v << (24 - 8 * i);
    }
    let tail_bits = 32 - 8 * head.len() as u32;
    if tail_bits < 32 && u64::from(*last) >= 1u64 << tail_bits {
        return None;
    }
    Some(Ipv4Addr::from(addr | last))
}

/// A canonical decimal port (not yet checked against 0 and 8080).
fn parse_port(text: &str) -> Result<u16, EndpointError> {
    if text.is_empty() {
        return Err(EndpointError::MissingPort);
    }
    let invalid = || EndpointError::InvalidPort { spelled: quote(text) };
    if !text.chars().all(|c| c.is_ascii_digit()) || (text.len() > 1 && text.starts_with('0')) {
        return Err(invalid());
    }
    text.parse::<u16>().map_err(|_| invalid())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Endpoint {
        match Endpoint::parse(text) {
            Ok(e) => e,
            Err(e) => panic!("{text:?} refused: {e}"),
        }
    }

    fn refused(text: &str) -> EndpointError {
        match Endpoint::parse(text) {
            Ok(e) => panic!("{text:?} accepted as {e}"),
            Err(e) => e,
        }
    }

    #[test]
    fn canonical_forms_are_accepted() {
        let v4 = ok("http://127.0.0.1:8081");
        assert_eq!(v4.socket_addr(), Some("127.0.0.1:8081".parse().unwrap()));
        assert_eq!(v4.to_string(), "http://127.0.0.1:8081");
        assert_eq!(v4.host_header(), "127.0.0.1:8081");
        assert_eq!(ok("http://127.0.0.1:8081/"), v4);
        let v6 = ok("http://[::1]:1");
        assert_eq!(v6.socket_addr(), Some("[::1]:1".parse().unwrap()));
        assert_eq!(v6.to_string(), "http://[::1]:1");
        assert_eq!(v6.host_header(), "[::1]:1");
        assert_eq!(ok("http://[::1]:65535/").port(), Some(65535));
        assert_eq!(ok("http://127.0.0.1:8079").port(), Some(8079));
        assert_eq!(ok("http://127.0.0.1:8081").port(), Some(8081));
        assert!(v4.is_tcp());
    }

    #[test]
    fn unix_sockets_are_absolute_plain_and_end_in_sock() {
        let u = ok("unix:/run/labfy/model/model.sock");
        assert_eq!(u.target(), &Target::Unix(PathBuf::from("/run/labfy/model/model.sock")));
        assert_eq!(u.to_string(), "unix:/run/labfy/model/model.sock");
        assert_eq!(u.host_header(), "localhost");
        assert_eq!(u.port(), None);
        assert!(!u.is_tcp());
        let why = |text: &str| match refused(text) {
            EndpointError::SocketPath { why, .. } => why,
            other => panic!("{text}: {other:?}"),
        };
        assert!(why("unix:run/model.sock").contains("not absolute"));
        assert!(why("unix:/run/../etc/model.sock").contains("'..'"));
        assert!(why("unix:/run//model.sock").contains("empty"));
        assert!(why("unix:/run/./model.sock").contains("'.'"));
        assert!(why("unix:/run/model/").contains("empty"));
        assert!(why("unix:/run/model.socket").contains(".sock"));
        assert!(why("unix:/run/.sock").contains(".sock"));
        assert!(why("unix:").contains("not absolute"));
        let longest = format!("unix:/{}.sock", "a".repeat(MAX_SOCKET_PATH_BYTES - 6));
        assert_eq!(longest.len(), MAX_ENDPOINT_LEN);
        assert!(Endpoint::parse(&longest).is_ok());
        let over = format!("unix:/a{}", &longest[6..]);
        assert!(matches!(refused(&over), EndpointError::TooLong { .. }));
        let too_long = format!("/{}.sock", "a".repeat(MAX_SOCKET_PATH_BYTES - 5));
        assert!(
            matches!(Endpoint::unix(Path::new(&too_long)), Err(EndpointError::SocketPath { why, .. }) if why.contains("longer"))
        );
        assert_eq!(refused("unix:/run/a b.sock"), EndpointError::Whitespace);
        assert_eq!(refused("unix:/run/%2e%2e/m.sock"), EndpointError::PercentEncoding);
        assert_eq!(refused("UNIX:/run/m.sock"), EndpointError::MissingScheme);
        assert_eq!(Endpoint::unix(Path::new("/run/é.sock")), Err(EndpointError::NonAscii));
    }

    #[test]
    fn display_round_trips() {
        for text in ["http://127.0.0.1:5000", "http://[::1]:5000", "unix:/run/labfy/model/model.sock"] {
            assert_eq!(ok(&ok(text).to_string()), ok(text));
            assert_eq!(text.parse::<Endpoint>(), Ok(ok(text)));
        }
    }

    #[test]
    fn length_bound_is_checked_at_the_edge() {
        // A canonical prefix padded with a path of slashes: the length check
        // comes first, so N bytes reaches the path rule and N+1 does not.
        let base = "http://127.0.0.1:8081";
        let at = format!("{base}{}", "/".repeat(MAX_ENDPOINT_LEN - base.len()));
        assert_eq!(at.len(), MAX_ENDPOINT_LEN);
        assert_eq!(refused(&at), EndpointError::Path);
        let over = format!("{at}/");
        assert_eq!(refused(&over), EndpointError::TooLong { len: MAX_ENDPOINT_LEN + 1, max: MAX_ENDPOINT_LEN });
        assert!(matches!(refused(&"x".repeat(100_000)), EndpointError::TooLong { .. }));
    }

    #[test]
    fn empty_whitespace_and_non_ascii_are_refused() {
        assert_eq!(refused(""), EndpointError::Empty);
        for text in [
            " http://127.0.0.1:8081",
            "http://127.0.0.1:8081 ",
            "http://127.0.0.1:8081\n",
            "http://127.0.0.1 :8081",
            "http://127.0.0.1:\t8081",
            "http://127.0.0.1:8081\0",
            "http://127.0.0.1:8081\u{a0}",
        ] {
            assert_eq!(refused(text), EndpointError::Whitespace, "{text:?}");
        }
        assert_eq!(refused("http://127.0.0.1:８０８１"), EndpointError::NonAscii);
        assert_eq!(refused("http://１２７.0.0.1:8081"), EndpointError::NonAscii);
    }

    #[test]
    fn percent_encoding_is_refused() {
        for text in [
            "http://127.0.0.1:8081/%2e",
            "http://%31%32%37.0.0.1:8081",
            "http://127.0.0.1%3a8081",
            "http://[::1%25lo]:8081",
            "http%3a//127.0.0.1:8081",
        ] {
            assert_eq!(refused(text), EndpointError::PercentEncoding, "{text:?}");
        }
    }

    #[test]
    fn schemes_other_than_http_are_refused() {
        assert_eq!(refused("127.0.0.1:8081"), EndpointError::MissingScheme);
        assert_eq!(refused("//127.0.0.1:8081"), EndpointError::MissingScheme);
        assert_eq!(refused("://127.0.0.1:8081"), EndpointError::Scheme { found: String::new() });
        assert_eq!(refused("http:/127.0.0.1:8081"), EndpointError::MissingScheme);
        assert_eq!(refused("https://127.0.0.1:8081"), EndpointError::Https);
        assert_eq!(refused("HTTPS://127.0.0.1:8081"), EndpointError::Https);
        for scheme in ["HTTP", "Http", "ftp", "ws", "file", "socks5", "unix"] {
            assert_eq!(
                refused(&format!("{scheme}://127.0.0.1:8081")),
                EndpointError::Scheme { found: scheme.to_owned() }
            );
        }
    }

    #[test]
    fn credentials_query_fragment_and_path_are_refused() {
        for text in [
            "http://user:pw@127.0.0.1:8081",
            "http://user@127.0.0.1:8081",
            "http://@127.0.0.1:8081",
            "http://127.0.0.1:8081@evil.example",
            "http://127.0.0.1:8081@10.0.0.1:8081",
        ] {
            assert_eq!(refused(text), EndpointError::Credentials, "{text:?}");
        }
        assert_eq!(refused("http://127.0.0.1:8081?a=b"), EndpointError::Query);
        assert_eq!(refused("http://127.0.0.1:8081/?"), EndpointError::Query);
        assert_eq!(refused("http://127.0.0.1:8081#x"), EndpointError::Fragment);
        assert_eq!(refused("http://127.0.0.1:8081/#"), EndpointError::Fragment);
        for text in [
            "http://127.0.0.1:8081/v1",
            "http://127.0.0.1:8081/v1/chat/completions",
            "http://127.0.0.1:8081//",
            "http://127.0.0.1:8081/.",
            "http://127.0.0.1:8081/@evil",
        ] {
            assert_eq!(refused(text), EndpointError::Path, "{text:?}");
        }
        assert_eq!(refused("http://127.0.0.1:8081\\@evil"), EndpointError::Credentials);
        assert_eq!(refused("http://127.0.0.1\\:8081"), EndpointError::InvalidCharacter('\\'));
        assert_eq!(refused("http://my_host:8081"), EndpointError::InvalidCharacter('_'));
    }

    #[test]
    fn names_are_refused() {
        for text in ["http://localhost:8081", "http://LOCALHOST:8081", "http://localhost.:8081", "http://localhost"] {
            assert_eq!(refused(text), EndpointError::Localhost, "{text:?}");
        }
        assert_eq!(
            refused("http://localhost.localdomain:8081"),
            EndpointError::DnsName { name: "localhost.localdomain".into() }
        );
        assert_eq!(refused("http://example.com:8081"), EndpointError::DnsName { name: "example.com".into() });
        assert_eq!(refused("http://llama-server:8081"), EndpointError::DnsName { name: "llama-server".into() });
        assert!(matches!(refused("http://127.0.0.1.nip.io:8081"), EndpointError::DnsName { .. }));
    }

    #[test]
    fn lan_public_and_unspecified_addresses_are_refused() {
        for text in [
            "http://192.168.1.10:8081",
            "http://10.0.0.1:8081",
            "http://172.16.0.1:8081",
            "http://169.254.1.1:8081",
            "http://[fe80::1]:8081",
            "http://[fd00::1]:8081",
            "http://[::ffff:192.168.1.1]:8081",
        ] {
            assert!(matches!(refused(text), EndpointError::LanAddress(_)), "{text:?}");
        }
        for text in [
            "http://8.8.8.8:8081",
            "http://1.1.1.1:8081",
            "http://[2001:db8::1]:8081",
            "http://255.255.255.255:8081",
            "http://224.0.0.1:8081",
        ] {
            assert!(matches!(refused(text), EndpointError::NonLoopbackAddress(_)), "{text:?}");
        }
        assert_eq!(refused("http://0.0.0.0:8081"), EndpointError::Unspecified(IpAddr::V4(Ipv4Addr::UNSPECIFIED)));
        assert_eq!(refused("http://[::]:8081"), EndpointError::Unspecified(IpAddr::V6(Ipv6Addr::UNSPECIFIED)));
        assert_eq!(
            refused("http://[0:0:0:0:0:0:0:0]:8081"),
            EndpointError::Unspecified(IpAddr::V6(Ipv6Addr::UNSPECIFIED))
        );
    }

    #[test]
    fn loopback_spelled_oddly_is_refused() {
        for text in [
            "http://127.1:8081",
            "http://127.0.1:8081",
            "http://127.0.0.01:8081",
            "http://0177.0.0.1:8081",
            "http://0x7f.0.0.1:8081",
            "http://0x7F000001:8081",
            "http://017700000001:8081",
            "http://2130706433:8081",
            "http://127.0.0.2:8081",
            "http://127.255.255.254:8081",
            "http://[::ffff:127.0.0.1]:8081",
            "http://[::FFFF:7f00:1]:8081",
            "http://[0:0:0:0:0:0:0:1]:8081",
            "http://[0::1]:8081",
            "http://[::0001]:8081",
            "http://[0000::1]:8081",
        ] {
            assert!(
                matches!(refused(text), EndpointError::NonCanonicalLoopback { .. }),
                "{text:?}: {:?}",
                Endpoint::parse(text)
            );
        }
        for text in [
            "http://10.1:8081",
            // Octal 0127 is 87: not loopback, and not canonical either.
            "http://0127.0.0.1:8081",
            "http://0x0a000001:8081",
            "http://1.2.3.4.5:8081",
            "http://999.0.0.1:8081",
            "http://127.0.0.1.:8081",
        ] {
            assert!(
                matches!(refused(text), EndpointError::NonCanonicalAddress { .. }),
                "{text:?}: {:?}",
                Endpoint::parse(text)
            );
        }
    }

    #[test]
    fn malformed_hosts_are_refused() {
        for text in [
            "http://::1:8081",
            "http://[::1:8081",
            "http://::1]:8081",
            "http://[127.0.0.1]:8081",
            "http://[::1]]:8081",
            "http://[[::1]]:8081",
            "http://[::1]x:8081",
            "http://[::1]8081",
            "http://[::g]:8081",
            "http://[]:8081",
        ] {
            assert!(
                matches!(refused(text), EndpointError::MalformedHost { .. }),
                "{text:?}: {:?}",
                Endpoint::parse(text)
            );
        }
        assert_eq!(refused("http://:8081"), EndpointError::MissingHost);
        assert_eq!(refused("http://"), EndpointError::MissingHost);
        assert_eq!(refused("http:///"), EndpointError::MissingHost);
    }

    #[test]
    fn ports_are_checked() {
        assert_eq!(refused("http://127.0.0.1"), EndpointError::MissingPort);
        assert_eq!(refused("http://127.0.0.1/"), EndpointError::MissingPort);
        assert_eq!(refused("http://127.0.0.1:"), EndpointError::MissingPort);
        assert_eq!(refused("http://[::1]"), EndpointError::MissingPort);
        assert_eq!(refused("http://[::1]:"), EndpointError::MissingPort);
        assert_eq!(refused("http://127.0.0.1:0"), EndpointError::PortZero);
        assert_eq!(refused("http://[::1]:0"), EndpointError::PortZero);
        assert_eq!(refused("http://127.0.0.1:8080"), EndpointError::Port8080);
        assert_eq!(refused("http://127.0.0.1:8080/"), EndpointError::Port8080);
        assert_eq!(refused("http://[::1]:8080"), EndpointError::Port8080);
        for port in ["08081", "00", "65536", "99999999999", "+8081", "-1", "8o81", "0x1f91"] {
            assert!(
                matches!(
                    refused(&format!("http://127.0.0.1:{port}")),
                    EndpointError::InvalidPort { .. } | EndpointError::InvalidCharacter(_)
                ),
                "{port:?}"
            );
        }
        // 08080 is not a spelling that sneaks past the 8080 rule.
        assert!(matches!(refused("http://127.0.0.1:08080"), EndpointError::InvalidPort { .. }));
    }

    #[test]
    fn from_socket_addr_applies_the_same_rules() {
        let ok = |a: &str| Endpoint::from_socket_addr(a.parse().unwrap());
        assert!(ok("127.0.0.1:8081").is_ok());
        assert!(ok("[::1]:8081").is_ok());
        assert_eq!(ok("127.0.0.1:8080"), Err(EndpointError::Port8080));
        assert_eq!(ok("[::1]:0"), Err(EndpointError::PortZero));
        assert!(matches!(ok("127.0.0.2:8081"), Err(EndpointError::NonCanonicalLoopback { .. })));
        assert!(matches!(ok("[::ffff:127.0.0.1]:8081"), Err(EndpointError::NonCanonicalLoopback { .. })));
        assert!(matches!(ok("0.0.0.0:8081"), Err(EndpointError::Unspecified(_))));
        assert!(matches!(ok("192.168.0.2:8081"), Err(EndpointError::LanAddress(_))));
        assert!(matches!(ok("9.9.9.9:8081"), Err(EndpointError::NonLoopbackAddress(_))));
    }

    #[test]
    fn inet_aton_reads_the_classic_forms() {
        let lo = Some(Ipv4Addr::LOCALHOST);
        assert_eq!(inet_aton("127.1"), lo);
        assert_eq!(inet_aton("127.0.1"), lo);
        assert_eq!(inet_aton("0x7f.0.0.1"), lo);
        assert_eq!(inet_aton("0177.0.0.1"), lo);
        assert_eq!(inet_aton("2130706433"), lo);
        assert_eq!(inet_aton("0x7f000001"), lo);
        assert_eq!(inet_aton("256.0.0.1"), None);
        assert_eq!(inet_aton("127.16777216"), None);
        assert_eq!(inet_aton("08.0.0.1"), None);
        assert_eq!(inet_aton("a.b"), None);
        assert_eq!(inet_aton("1.2.3.4.5"), None);
    }

    #[test]
    fn errors_quote_at_most_a_few_characters() {
        let long_name = format!("http://{}.example:8081", "a".repeat(40));
        match refused(&long_name) {
            EndpointError::DnsName { name } => assert!(name.chars().count() <= QUOTE_CHARS),
            other => panic!("{other:?}"),
        }
    }
}
