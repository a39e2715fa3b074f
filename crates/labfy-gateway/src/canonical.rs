//! Canonical JSON: one home, `labfy_core::json::canonical` (the STIX
//! export hashes it too); named here as the gateway's callers know it.

pub use labfy_core::json::canonical as canonical_json;
