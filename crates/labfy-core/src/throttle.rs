//! Warnings another process can cause, bounded at the source (SPEC V6): a
//! failure that repeats — an accept loop out of descriptors under a flood —
//! is logged once, then at most once per interval with the count of the
//! repeats left unsaid, instead of once per failure.

use std::time::{Duration, Instant};

/// How often a repeating warning is logged at most.
pub const WARNING_INTERVAL: Duration = Duration::from_secs(5);

/// Decides when a repeating warning is logged.
#[derive(Debug)]
pub struct Throttle {
    interval: Duration,
    last: Option<Instant>,
    suppressed: u64,
}

impl Default for Throttle {
    fn default() -> Self {
        Self::new(WARNING_INTERVAL)
    }
}

impl Throttle {
    /// A throttle that logs at most once per `interval`.
    pub fn new(interval: Duration) -> Self {
        Self { interval, last: None, suppressed: 0 }
    }

    /// One occurrence at `now`: `Some(n)` when it is to be logged, `n` being
    /// how many occurrences were left unlogged since the last line; `None`
    /// when it is only counted.
    pub fn occurred(&mut self, now: Instant) -> Option<u64> {
        match self.last {
            Some(last) if now.saturating_duration_since(last) < self.interval => {
                self.suppressed += 1;
                None
            }
            _ => {
                self.last = Some(now);
                Some(std::mem::take(&mut self.suppressed))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_occurrence_is_logged_then_a_count_once_per_interval() {
        let mut t = Throttle::new(Duration::from_secs(5));
        let t0 = Instant::now();
        assert_eq!(t.occurred(t0), Some(0));
        for ms in [1, 10, 2_000, 4_999] {
            assert_eq!(t.occurred(t0 + Duration::from_millis(ms)), None);
        }
        assert_eq!(t.occurred(t0 + Duration::from_secs(5)), Some(4));
        assert_eq!(t.occurred(t0 + Duration::from_secs(6)), None);
        // A quiet spell: the next one is logged at once, with what was held back.
        assert_eq!(t.occurred(t0 + Duration::from_secs(60)), Some(1));
        assert_eq!(t.occurred(t0 + Duration::from_secs(66)), Some(0));
    }
}
