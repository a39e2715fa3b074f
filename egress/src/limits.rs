//! The bounds of a fetch (SPEC E5), and of the confirmation page's
//! connections (SPEC T5, V2), named once.

use std::time::Duration;

use labfy_ipc::messages::egress::{DEFAULT_MAX_BODY_BYTES, MAX_REDIRECTS};

/// Longest wait for a Tor stream to open.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest a whole fetch may take, redirects included.
pub const FETCH_DEADLINE: Duration = Duration::from_secs(120);
/// Longest silence while a byte is awaited (slow loris).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(20);
/// Most fetches in flight at once; more wait their turn.
pub const MAX_IN_FLIGHT: usize = 8;
/// How long a campaign's slot (its isolation token) outlives its last
/// fetch when no `EndCampaign` comes — a server killed mid-campaign never
/// sends one, and a compromised one can name campaigns that do not exist.
pub const CAMPAIGN_IDLE: Duration = Duration::from_secs(10 * 60);
/// Most campaign slots held at once; past it the longest idle is forgotten.
pub const MAX_CAMPAIGNS: usize = 256;
/// Most response headers hyper parses (more is a malformed response).
pub const MAX_RESPONSE_HEADERS: usize = 64;
/// Largest response head (status line and headers), in bytes.
pub const MAX_HEADER_BYTES: usize = 64 * 1024;
/// Longest header value kept in provenance, in characters.
pub const MAX_HEADER_VALUE_CHARS: usize = 512;

/// Most connections the confirmation page holds at once: far below egress's
/// descriptor limit, so that a flood of the page leaves room for egress's
/// IPC sockets, its ledger and Tor (red team 3, F3). A human needs a few.
pub const PAGE_MAX_CONNECTIONS: usize = 128;

/// The confirmation page's connections (`labfy_http::serve`): at most
/// [`PAGE_MAX_CONNECTIONS`], the oldest unproven one displaced by a new one;
/// 2.5 s for a connection's first request, 10 s for any header (and a
/// proven keep-alive connection's wait), 30 s without a byte read or
/// written, 5 s to drain at shutdown, 100 ms before a connection may be
/// displaced.
pub const PAGE_LIMITS: labfy_http::Limits = labfy_http::Limits {
    max_connections: PAGE_MAX_CONNECTIONS,
    first_request_timeout: Duration::from_millis(2500),
    header_read_timeout: Duration::from_secs(10),
    idle_timeout: Duration::from_secs(30),
    drain_timeout: Duration::from_secs(5),
    max_header_buffer: 16 * 1024,
    eviction_grace: Duration::from_millis(100),
};

/// The bounds one [`crate::Egress`] applies. [`Limits::default`] is the
/// production set; tests shorten the timeouts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// [`CONNECT_TIMEOUT`].
    pub connect: Duration,
    /// [`FETCH_DEADLINE`].
    pub deadline: Duration,
    /// [`IDLE_TIMEOUT`].
    pub idle: Duration,
    /// Largest body kept, in bytes: [`DEFAULT_MAX_BODY_BYTES`] unless the
    /// operator set another (`--max-body-mib`, SPEC C3).
    pub max_body: u64,
    /// [`MAX_REDIRECTS`].
    pub max_redirects: u8,
    /// [`MAX_IN_FLIGHT`].
    pub max_in_flight: usize,
    /// [`MAX_RESPONSE_HEADERS`].
    pub max_headers: usize,
    /// [`CAMPAIGN_IDLE`].
    pub campaign_idle: Duration,
    /// [`MAX_CAMPAIGNS`].
    pub max_campaigns: usize,
    /// [`MAX_HEADER_BYTES`] (hyper needs at least 8192).
    pub max_header_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            connect: CONNECT_TIMEOUT,
            deadline: FETCH_DEADLINE,
            idle: IDLE_TIMEOUT,
            max_body: DEFAULT_MAX_BODY_BYTES,
            max_redirects: MAX_REDIRECTS,
            max_in_flight: MAX_IN_FLIGHT,
            max_headers: MAX_RESPONSE_HEADERS,
            campaign_idle: CAMPAIGN_IDLE,
            max_campaigns: MAX_CAMPAIGNS,
            max_header_bytes: MAX_HEADER_BYTES,
        }
    }
}
