//! Local sessions (SPEC S2–S3): a random `labfy_session` cookie issued by
//! `GET /`, a CSRF token bound to it, and a per-session rate limiter for
//! mutations. Memory only: a server restart asks the browser to reload `/`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::RngCore;
use uuid::Uuid;

/// Name of the session cookie.
pub const SESSION_COOKIE: &str = "labfy_session";
/// Most live sessions; the least recently used is forgotten beyond it.
pub const MAX_SESSIONS: usize = 32;

/// Token bucket settings for mutations, per session.
#[derive(Debug, Clone, Copy)]
pub struct RateLimit {
    /// Mutations allowed in a burst.
    pub burst: u32,
    /// Tokens added per second.
    pub per_second: f64,
}

impl Default for RateLimit {
    fn default() -> Self {
        Self { burst: 20, per_second: 2.0 }
    }
}

/// What the server knows about one browser session.
#[derive(Debug, Clone)]
pub struct Session {
    /// The CSRF token bound to it (shared: a lookup copies no string).
    pub csrf_token: Arc<str>,
    /// The workspace it browses.
    pub workspace: Uuid,
    last_used: Instant,
    tokens: f64,
    refilled: Instant,
}

/// Every live session.
pub struct Sessions {
    inner: Mutex<HashMap<String, Session>>,
    limit: RateLimit,
}

fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

impl Sessions {
    /// An empty table with the given mutation rate limit.
    pub fn new(limit: RateLimit) -> Self {
        Self { inner: Mutex::new(HashMap::new()), limit }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        // A poisoned lock only means another request panicked mid-update of a
        // plain map; the map itself is still usable.
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Creates a session and returns its cookie value and CSRF token.
    pub fn create(&self, workspace: Uuid) -> (String, String) {
        let id = random_token();
        let csrf = random_token();
        let now = Instant::now();
        let mut map = self.lock();
        if map.len() >= MAX_SESSIONS {
            if let Some(oldest) = map.iter().min_by_key(|(_, s)| s.last_used).map(|(k, _)| k.clone()) {
                map.remove(&oldest);
            }
        }
        map.insert(
            id.clone(),
            Session {
                csrf_token: Arc::from(csrf.as_str()),
                workspace,
                last_used: now,
                tokens: f64::from(self.limit.burst),
                refilled: now,
            },
        );
        (id, csrf)
    }

    /// Looks a session up by cookie value and marks it used.
    pub fn get(&self, id: &str) -> Option<Session> {
        let mut map = self.lock();
        let s = map.get_mut(id)?;
        s.last_used = Instant::now();
        Some(s.clone())
    }

    /// Takes one mutation token; `Err(wait)` when the bucket is empty.
    pub fn take_token(&self, id: &str) -> Result<(), Duration> {
        let mut map = self.lock();
        let Some(s) = map.get_mut(id) else {
            return Err(Duration::from_secs(1));
        };
        let now = Instant::now();
        let elapsed = now.duration_since(s.refilled).as_secs_f64();
        s.tokens = (s.tokens + elapsed * self.limit.per_second).min(f64::from(self.limit.burst));
        s.refilled = now;
        if s.tokens >= 1.0 {
            s.tokens -= 1.0;
            Ok(())
        } else {
            let wait = (1.0 - s.tokens) / self.limit.per_second.max(f64::MIN_POSITIVE);
            Err(Duration::from_secs_f64(wait.min(3600.0)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_random_and_bounded() {
        let s = Sessions::new(RateLimit::default());
        let ws = Uuid::new_v4();
        let (a, csrf_a) = s.create(ws);
        let (b, _) = s.create(ws);
        assert_ne!(a, b);
        assert_eq!(a.len(), 64);
        assert_eq!(&*s.get(&a).unwrap().csrf_token, csrf_a.as_str());
        for _ in 0..MAX_SESSIONS {
            s.create(ws);
        }
        assert!(s.get(&a).is_none(), "oldest session should be evicted");
        assert_eq!(s.lock().len(), MAX_SESSIONS);
    }

    #[test]
    fn bucket_allows_a_burst_then_says_how_long_to_wait() {
        let s = Sessions::new(RateLimit { burst: 3, per_second: 0.5 });
        let (id, _) = s.create(Uuid::new_v4());
        for _ in 0..3 {
            s.take_token(&id).unwrap();
        }
        let wait = s.take_token(&id).unwrap_err();
        assert!(wait > Duration::from_millis(1500) && wait <= Duration::from_secs(2), "{wait:?}");
    }
}
