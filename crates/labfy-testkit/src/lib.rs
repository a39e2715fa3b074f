//! Labfy's shared test support (a dev-dependency only). See the README.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::missing_panics_doc)]

pub mod flood;
pub mod model;

/// Whether a test that needs something (root, python3, Tor, the model) may
/// run here. `have` says whether it is present. When it is not and CI said
/// it must run — `LABFY_REQUIRE_<requirement>` set, as `tests/run-all`
/// sets them — the test fails with `why`; elsewhere (a developer's
/// machine) it says it skips. A test cannot pass in CI by skipping.
pub fn present(have: bool, requirement: &str, why: &str) -> bool {
    if have {
        return true;
    }
    let var = format!("LABFY_REQUIRE_{requirement}");
    assert!(std::env::var_os(&var).is_none(), "{var} is set, and {why}");
    eprintln!("skipped: {why} ({var} unset; CI sets it and fails instead)");
    false
}
