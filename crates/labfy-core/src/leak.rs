//! A memory leak planted on request in a test build (SPEC K5): the proof
//! that the soak's leak check (`labfy-bench soak --leak-check`) fails on a
//! leak, as a test that would pass without the check must not.
//!
//! A debug build started with `LABFY_TEST_LEAK_BYTES=<n>` keeps `n` bytes,
//! written (so they count in the RSS), for every request the workspace
//! server answers ([`per_request`]). A release build compiles it out.

/// The variable naming the bytes leaked per request.
pub const ENV: &str = "LABFY_TEST_LEAK_BYTES";

/// Called once per request: leaks what [`ENV`] says in a debug build.
#[inline]
pub fn per_request() {
    #[cfg(debug_assertions)]
    if let Some(n) = bytes() {
        let kept: &'static mut [u8] = Vec::leak(vec![0x5a; n]);
        std::hint::black_box(kept);
    }
}

#[cfg(debug_assertions)]
fn bytes() -> Option<usize> {
    static BYTES: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *BYTES.get_or_init(|| std::env::var(ENV).ok()?.parse().ok().filter(|&n| n > 0 && n <= 1 << 20))
}

#[cfg(test)]
mod tests {
    #[test]
    fn nothing_is_leaked_unless_asked() {
        assert!(std::env::var_os(super::ENV).is_none());
        super::per_request();
        #[cfg(debug_assertions)]
        assert_eq!(super::bytes(), None);
    }
}
