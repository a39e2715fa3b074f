//! Local sessions (SPEC S2–S3, T4, V1, V7): a session token issued only in
//! exchange for a one-time login link (`labfy up`, `labfy open`), a CSRF
//! token bound to it, and a per-session rate limiter for mutations.
//!
//! The token is never a cookie: the page keeps it in its own origin's
//! storage and sends it as `Authorization: Bearer …` (`security`), so a
//! program on another port of 127.0.0.1 receives nothing it can use.
//! The token and its CSRF token are MACs under the per-boot login key
//! (`labfy_ipc::login`), so a session is recognised by the key alone: it
//! survives a server restart, and an entry pushed out of the bounded table
//! comes back on its next request — anonymous requests create nothing and
//! evict nothing. A login code is spent for good: when supervised, the
//! spent codes are journaled in the data directory
//! ([`Sessions::with_spent_journal`]), so neither a restart nor a workspace
//! switch (the same boot's key) lets a used link open a second session.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use labfy_ipc::login::{LoginError, LoginKey, SpentCodes};
use uuid::Uuid;

/// File, in the data directory, where the spent login codes are journaled.
pub const SPENT_CODES_FILE: &str = "login-spent";
/// Most live sessions kept in memory (rate-limit state); the least recently
/// used is forgotten beyond it, and re-admitted by its valid token.
pub const MAX_SESSIONS: usize = 32;
/// Most login links remembered as used (each for its lifetime).
pub const MAX_USED_CODES: usize = 1024;

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

/// Every live session, and the login links already used.
pub struct Sessions {
    key: LoginKey,
    workspace: Uuid,
    inner: Mutex<HashMap<String, Session>>,
    used: SpentCodes,
    limit: RateLimit,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A poisoned lock only means another request panicked mid-update of a
    // plain map; the map itself is still usable.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Sessions {
    /// An empty table for `workspace`, recognising tokens made with `key`;
    /// the spent login codes in memory only.
    pub fn new(limit: RateLimit, key: LoginKey, workspace: Uuid) -> Self {
        Self { key, workspace, inner: Mutex::new(HashMap::new()), used: SpentCodes::new(MAX_USED_CODES), limit }
    }

    /// Like [`Sessions::new`], with the spent login codes journaled in
    /// `data_dir`'s [`SPENT_CODES_FILE`] (SPEC V7).
    pub fn with_spent_journal(
        limit: RateLimit,
        key: LoginKey,
        workspace: Uuid,
        data_dir: &std::path::Path,
    ) -> Result<Self, labfy_ipc::login::JournalError> {
        let used = SpentCodes::with_journal(MAX_USED_CODES, &data_dir.join(SPENT_CODES_FILE), SystemTime::now())?;
        Ok(Self { key, workspace, inner: Mutex::new(HashMap::new()), used, limit })
    }

    /// The key (to mint login links for this server).
    pub fn key(&self) -> &LoginKey {
        &self.key
    }

    /// Exchanges a login code for a new session: its token and CSRF token.
    /// A code works once, until its expiry.
    pub fn login(&self, code: &str, now: SystemTime) -> Result<(String, String), LoginError> {
        self.used.redeem(&self.key, code, now)?;
        let (cookie, csrf) = self.key.mint_session();
        if let Some(id) = self.key.check_session(&cookie) {
            self.admit(id);
        }
        Ok((cookie, csrf))
    }

    fn admit(&self, id: &str) -> Session {
        let now = Instant::now();
        let mut map = lock(&self.inner);
        if let Some(s) = map.get_mut(id) {
            s.last_used = now;
            return s.clone();
        }
        if map.len() >= MAX_SESSIONS {
            if let Some(oldest) = map.iter().min_by_key(|(_, s)| s.last_used).map(|(k, _)| k.clone()) {
                map.remove(&oldest);
            }
        }
        let s = Session {
            csrf_token: Arc::from(self.key.csrf_token(id).as_str()),
            workspace: self.workspace,
            last_used: now,
            tokens: f64::from(self.limit.burst),
            refilled: now,
        };
        map.insert(id.to_owned(), s.clone());
        s
    }

    /// The session of a token this server's key made (its id and data),
    /// marked used; `None` for anything else.
    pub fn get(&self, token: &str) -> Option<(String, Session)> {
        let id = self.key.check_session(token)?;
        Some((id.to_owned(), self.admit(id)))
    }

    /// Takes one mutation token from session `id`; `Err(wait)` when the
    /// bucket is empty.
    pub fn take_token(&self, id: &str) -> Result<(), Duration> {
        let mut map = lock(&self.inner);
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
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn table(limit: RateLimit) -> Sessions {
        Sessions::new(limit, LoginKey::generate(), Uuid::new_v4())
    }

    #[test]
    fn a_login_link_works_once_and_its_session_survives_eviction() {
        let s = table(RateLimit::default());
        let now = SystemTime::now();
        let code = s.key().mint_code(now);
        let (cookie, csrf) = s.login(&code, now).unwrap();
        assert_eq!(s.login(&code, now), Err(LoginError::Used));
        let (id, session) = s.get(&cookie).unwrap();
        assert_eq!(&*session.csrf_token, csrf.as_str());
        // Push it out of the table with other sessions: it comes back by its token.
        for _ in 0..MAX_SESSIONS + 1 {
            let c = s.key().mint_code(now);
            s.login(&c, now).unwrap();
        }
        assert_eq!(lock(&s.inner).len(), MAX_SESSIONS);
        assert!(!lock(&s.inner).contains_key(&id));
        assert_eq!(&*s.get(&cookie).unwrap().1.csrf_token, csrf.as_str());
        // Tokens not made by this key are nobody's.
        assert!(s.get("0123456789abcdef0123456789abcdef.00").is_none());
        assert!(table(RateLimit::default()).get(&cookie).is_none());
    }

    #[test]
    fn used_codes_are_bounded() {
        let s = table(RateLimit::default());
        let now = SystemTime::now();
        for _ in 0..MAX_USED_CODES {
            s.login(&s.key().mint_code(now), now).unwrap();
        }
        assert_eq!(s.login(&s.key().mint_code(now), now), Err(LoginError::TooMany));
        // Once the remembered ones expire, logins work again.
        let later = now + labfy_ipc::login::LOGIN_CODE_TTL + Duration::from_secs(1);
        assert!(s.login(&s.key().mint_code(later), later).is_ok());
    }

    #[test]
    fn bucket_allows_a_burst_then_says_how_long_to_wait() {
        let s = table(RateLimit { burst: 3, per_second: 0.5 });
        let now = SystemTime::now();
        let (cookie, _) = s.login(&s.key().mint_code(now), now).unwrap();
        let (id, _) = s.get(&cookie).unwrap();
        for _ in 0..3 {
            s.take_token(&id).unwrap();
        }
        let wait = s.take_token(&id).unwrap_err();
        assert!(wait > Duration::from_millis(1500) && wait <= Duration::from_secs(2), "{wait:?}");
    }
}
