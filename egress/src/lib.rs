#![doc = include_str!("../README.md")]

pub mod bodies;
mod config;
pub mod confirm;
mod connector;
mod error;
mod grants;
mod http;
pub mod ledger;
mod limits;
mod service;
mod target;
mod tor;

pub use bodies::{BODY_TTL, Bodies, MAX_WAITING_BODIES, bodies_dir};
pub use config::{Config, MAX_ARTI_CONFIG_BYTES, arti_dirs, build, builder_from_file, builder_from_toml};
pub use connector::Bootstrap;
pub use error::ConfigError;
pub use grants::FetchIds;
pub use http::USER_AGENT_VALUE;
pub use ledger::{Ledger, LedgerError};
pub use limits::*;
pub use service::{Egress, KEPT_HEADERS, MAX_REASON_CHARS, kept_headers};
pub use target::{Target, check_url, host_in_scope, reserved_range, scope_refusal};
pub use tor::{BOOTSTRAP_RETRY_FIRST, BOOTSTRAP_RETRY_MAX, Tor};

/// Installs ring as rustls's process-wide crypto provider (arti's TLS
/// needs one; without it arti panics on its first channel). Idempotent.
pub fn install_crypto_provider() {
    // Err means a provider is installed already: fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[cfg(test)]
mod tests;
