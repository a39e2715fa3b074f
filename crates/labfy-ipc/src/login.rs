//! The local login (SPEC T4): only someone who can read the runtime
//! directory — the analyst's own uid — can open the UI.
//!
//! `labfy up` writes `login.json` (mode 0600, in the 0700 runtime
//! directory): the UI's port and a per-boot key. From the key it mints
//! one-time login links, `http://127.0.0.1:<port>/login?code=<nonce>.<expiry>.<mac>`
//! (`labfy up` prints one; `labfy open` mints a fresh one any time); the
//! server checks the MAC and the expiry, remembers the nonce so a link works
//! once, and answers with a session cookie whose value is MACed by the same
//! key — so a session survives a server restart, and no number of anonymous
//! requests can push it out. The server reads the key; it cannot write the
//! file (its runtime directory is read-only, SPEC T3).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use rand::RngCore;
use serde::{Deserialize, Serialize};
use sha2::Sha256;

use crate::IpcError;
use crate::secret::{read_private_file, write_private_file};

/// File name of the login key in the runtime directory.
pub const LOGIN_FILE: &str = "login.json";
/// How long a login link stays valid (it also works only once).
pub const LOGIN_CODE_TTL: Duration = Duration::from_secs(15 * 60);
/// Key length in bytes.
const KEY_BYTES: usize = 32;
/// Random bytes of a nonce (login link or session id).
const NONCE_BYTES: usize = 16;

/// Why a login link is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoginError {
    /// Not `<nonce>.<expiry>.<mac>` with the expected lengths.
    #[error("not a Labfy login code")]
    Malformed,
    /// Made with another key (another boot, or forged).
    #[error("this login link was not made by this Labfy (another start, or altered)")]
    BadSignature,
    /// Past its expiry.
    #[error("this login link has expired; run `labfy open` for a new one")]
    Expired,
    /// Already used once.
    #[error("this login link was already used; run `labfy open` for a new one")]
    Used,
    /// More logins within one link lifetime than the server remembers.
    #[error("too many logins in a short time; wait a few minutes, then run `labfy open`")]
    TooMany,
    /// The spent code could not be recorded for good, so it is not accepted.
    #[error("this login could not be recorded (the server's disk); try again with `labfy open`")]
    Unrecorded,
}

/// The per-boot key of the login links and session cookies.
#[derive(Clone)]
pub struct LoginKey([u8; KEY_BYTES]);

impl std::fmt::Debug for LoginKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LoginKey(…)")
    }
}

fn random_hex(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    rand::rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

fn unix_now(now: SystemTime) -> u64 {
    now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl LoginKey {
    /// A fresh random key.
    pub fn generate() -> Self {
        let mut bytes = [0u8; KEY_BYTES];
        rand::rng().fill_bytes(&mut bytes);
        Self(bytes)
    }

    /// HMAC-SHA256 of `data` under this key, separated by `purpose`.
    fn mac(&self, purpose: &str, data: &str) -> Hmac<Sha256> {
        // An HMAC takes a key of any length: this cannot fail.
        let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(&self.0).unwrap_or_else(|_| unreachable!());
        mac.update(purpose.as_bytes());
        mac.update(&[0]);
        mac.update(data.as_bytes());
        mac
    }

    fn verify(&self, purpose: &str, data: &str, tag_hex: &str) -> bool {
        let mut tag = [0u8; 32];
        hex::decode_to_slice(tag_hex, &mut tag).is_ok() && self.mac(purpose, data).verify_slice(&tag).is_ok()
    }

    /// A login code valid for [`LOGIN_CODE_TTL`] from `now`.
    pub fn mint_code(&self, now: SystemTime) -> String {
        let nonce = random_hex(NONCE_BYTES);
        let expires = unix_now(now) + LOGIN_CODE_TTL.as_secs();
        let signed = format!("{nonce}.{expires}");
        let tag = hex::encode(self.mac("login", &signed).finalize().into_bytes());
        format!("{signed}.{tag}")
    }

    /// Checks a login code's form, MAC and expiry; returns its nonce and
    /// expiry (the caller makes it one-time).
    pub fn check_code(&self, code: &str, now: SystemTime) -> Result<(String, u64), LoginError> {
        let mut parts = code.split('.');
        let (Some(nonce), Some(expires), Some(tag), None) = (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(LoginError::Malformed);
        };
        let well_formed = nonce.len() == 2 * NONCE_BYTES
            && nonce.bytes().all(|b| b.is_ascii_hexdigit())
            && tag.len() == 64
            && !expires.is_empty()
            && expires.len() <= 20
            && expires.bytes().all(|b| b.is_ascii_digit());
        if !well_formed {
            return Err(LoginError::Malformed);
        }
        if !self.verify("login", &format!("{nonce}.{expires}"), tag) {
            return Err(LoginError::BadSignature);
        }
        let expires: u64 = expires.parse().map_err(|_| LoginError::Malformed)?;
        if unix_now(now) > expires {
            return Err(LoginError::Expired);
        }
        Ok((nonce.to_owned(), expires))
    }

    /// A new session: its cookie value (`<id>.<mac>`) and its CSRF token.
    pub fn mint_session(&self) -> (String, String) {
        let id = random_hex(NONCE_BYTES);
        let tag = hex::encode(self.mac("session", &id).finalize().into_bytes());
        let csrf = self.csrf_token(&id);
        (format!("{id}.{tag}"), csrf)
    }

    /// The session id of a cookie value this key made, if it did.
    pub fn check_session<'c>(&self, cookie: &'c str) -> Option<&'c str> {
        let (id, tag) = cookie.split_once('.')?;
        (id.len() == 2 * NONCE_BYTES && id.bytes().all(|b| b.is_ascii_hexdigit()) && self.verify("session", id, tag))
            .then_some(id)
    }

    /// The CSRF token bound to session `id`.
    pub fn csrf_token(&self, id: &str) -> String {
        hex::encode(self.mac("csrf", id).finalize().into_bytes())
    }
}

#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct LoginFile {
    port: u16,
    key: String,
}

/// Writes `login.json` (0600) into the runtime directory.
pub fn write_login_file(dir: &Path, port: u16, key: &LoginKey) -> Result<(), IpcError> {
    let body = serde_json::to_vec(&LoginFile { port, key: hex::encode(key.0) })
        .map_err(|e| IpcError::Runtime { path: dir.join(LOGIN_FILE), reason: e.to_string() })?;
    write_private_file(dir, LOGIN_FILE, &body)
}

/// Reads `login.json`: the UI's port and the key.
pub fn read_login_file(dir: &Path) -> Result<(u16, LoginKey), IpcError> {
    let path = dir.join(LOGIN_FILE);
    let bad = |reason: String| IpcError::Runtime { path: path.clone(), reason };
    let text = read_private_file(dir, LOGIN_FILE)?;
    let file: LoginFile = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let mut key = [0u8; KEY_BYTES];
    hex::decode_to_slice(&file.key, &mut key).map_err(|_| bad("the key is not 64 hex characters".into()))?;
    Ok((file.port, LoginKey(key)))
}

/// The login link for `port` and `code`.
pub fn login_url(port: u16, code: &str) -> String {
    format!("http://127.0.0.1:{port}/login?code={code}")
}

/// How the answer to a login link hands the new session to the page: a
/// meta tag the page's script moves into its origin's storage (SPEC V1).
pub const SESSION_META_PREFIX: &str = "<meta name=\"labfy-session\" content=\"";

/// The session token in the page a login link answered, for programs that
/// log in the way the browser does (the CLI's tests, the benchmarks).
pub fn session_in_page(html: &str) -> Option<&str> {
    let start = html.find(SESSION_META_PREFIX)? + SESSION_META_PREFIX.len();
    let token = &html[start..start + html[start..].find('"')?];
    (!token.is_empty() && token.bytes().all(|b| b.is_ascii_hexdigit() || b == b'.')).then_some(token)
}

/// The login codes already exchanged, so that a link works once (SPEC T4):
/// their nonces with their expiry, at most `capacity` unexpired ones. The
/// one copy of the rule, for the server's UI and egress's confirmation page.
///
/// With a journal ([`SpentCodes::with_journal`]) a code is spent for good
/// (SPEC V7): each redemption is appended and synced to the file before it
/// is answered, and a process that starts again — the workspace server
/// after a crash or a workspace switch, with the same boot's key — reads
/// the file first, so a link used once never opens a second session.
#[derive(Debug)]
pub struct SpentCodes {
    used: Mutex<Spent>,
    capacity: usize,
}

#[derive(Debug, Default)]
struct Spent {
    codes: HashMap<String, u64>,
    journal: Option<Journal>,
}

/// The append-only file of spent codes: one `<nonce> <expiry>` line each.
#[derive(Debug)]
struct Journal {
    path: PathBuf,
    file: std::fs::File,
    /// Lines in the file, spent or expired; past twice the capacity the
    /// file is written anew with the unexpired ones.
    lines: usize,
}

/// Why the journal of spent codes cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("the spent login codes' journal {path}: {source}")]
pub struct JournalError {
    /// The file.
    pub path: PathBuf,
    /// What the system said.
    #[source]
    pub source: std::io::Error,
}

impl Journal {
    /// Writes `codes` as the whole file (a temporary file renamed over it,
    /// synced), then opens it for appending.
    fn rewrite(path: &Path, codes: &HashMap<String, u64>) -> std::io::Result<Self> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let tmp = path.with_extension("tmp");
        let mut f = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&tmp)?;
        let mut body = String::with_capacity(codes.len() * 56);
        for (nonce, expires) in codes {
            body.push_str(&format!("{nonce} {expires}\n"));
        }
        f.write_all(body.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        if let Some(dir) = path.parent() {
            std::fs::File::open(dir)?.sync_all()?;
        }
        let file = std::fs::OpenOptions::new().append(true).open(path)?;
        Ok(Self { path: path.to_owned(), file, lines: codes.len() })
    }

    fn append(&mut self, nonce: &str, expires: u64) -> std::io::Result<()> {
        use std::io::Write;
        self.file.write_all(format!("{nonce} {expires}\n").as_bytes())?;
        self.file.sync_data()?;
        self.lines += 1;
        Ok(())
    }
}

/// The unexpired `<nonce> <expiry>` lines of a journal; a line that is not
/// one (a write cut by a crash) is skipped.
fn read_journal(text: &str, now_unix: u64) -> HashMap<String, u64> {
    text.lines()
        .filter_map(|line| {
            let (nonce, expires) = line.split_once(' ')?;
            let expires: u64 = expires.parse().ok()?;
            let ok = nonce.len() == 2 * NONCE_BYTES && nonce.bytes().all(|b| b.is_ascii_hexdigit());
            (ok && expires >= now_unix).then(|| (nonce.to_owned(), expires))
        })
        .collect()
}

impl SpentCodes {
    /// None spent yet; at most `capacity` remembered at once; in memory
    /// only (a process whose key dies with it: egress's page).
    pub fn new(capacity: usize) -> Self {
        Self { used: Mutex::new(Spent::default()), capacity }
    }

    /// Like [`SpentCodes::new`], but every code spent is kept in the file
    /// at `path` (created 0600 if missing) and those still unexpired there
    /// are spent already.
    pub fn with_journal(capacity: usize, path: &Path, now: SystemTime) -> Result<Self, JournalError> {
        let err = |source| JournalError { path: path.to_owned(), source };
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            // A file that is not text was not written by this code: start
            // it anew rather than refuse every login.
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => String::new(),
            Err(e) => return Err(err(e)),
        };
        let codes = read_journal(&text, unix_now(now));
        let journal = Journal::rewrite(path, &codes).map_err(err)?;
        Ok(Self { used: Mutex::new(Spent { codes, journal: Some(journal) }), capacity })
    }

    /// Checks `code` with `key` (form, MAC, expiry) and spends it. `Used`
    /// when it was spent before; `TooMany` when `capacity` unexpired codes
    /// are spent already (the expired ones are forgotten first);
    /// `Unrecorded` when the journal cannot record it (the code is then
    /// not accepted: it could work again after a restart).
    pub fn redeem(&self, key: &LoginKey, code: &str, now: SystemTime) -> Result<(), LoginError> {
        let (nonce, expires) = key.check_code(code, now)?;
        // A poisoned lock only means a request panicked mid-update of a
        // plain map, which is still usable.
        let mut spent = self.used.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let now_unix = unix_now(now);
        spent.codes.retain(|_, exp| *exp >= now_unix);
        if spent.codes.contains_key(&nonce) {
            return Err(LoginError::Used);
        }
        if spent.codes.len() >= self.capacity {
            return Err(LoginError::TooMany);
        }
        let Spent { codes, journal } = &mut *spent;
        if let Some(j) = journal {
            if j.lines >= 2 * self.capacity {
                match Journal::rewrite(&j.path, codes) {
                    Ok(fresh) => *j = fresh,
                    Err(e) => tracing::warn!(error = %e, "the spent login codes' journal could not be compacted"),
                }
            }
            if let Err(e) = j.append(&nonce, expires) {
                tracing::warn!(error = %e, "a login code could not be recorded as spent; refused");
                return Err(LoginError::Unrecorded);
            }
        }
        codes.insert(nonce, expires);
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_code_is_spent_once_and_the_spent_ones_are_bounded_until_they_expire() {
        let key = LoginKey::generate();
        let other = LoginKey::generate();
        let now = SystemTime::now();
        let spent = SpentCodes::new(2);
        let a = key.mint_code(now);
        assert_eq!(spent.redeem(&other, &a, now), Err(LoginError::BadSignature), "checked before it is spent");
        assert_eq!(spent.redeem(&key, &a, now), Ok(()));
        assert_eq!(spent.redeem(&key, &a, now), Err(LoginError::Used));
        assert_eq!(spent.redeem(&key, &key.mint_code(now), now), Ok(()));
        // Full: a third unexpired code is refused, not remembered.
        let c = key.mint_code(now);
        assert_eq!(spent.redeem(&key, &c, now), Err(LoginError::TooMany));
        // Once the first two expired, they are forgotten; a fresh code works.
        let later = now + LOGIN_CODE_TTL + Duration::from_secs(2);
        assert_eq!(spent.redeem(&key, &key.mint_code(later), later), Ok(()));
        assert_eq!(spent.redeem(&key, &c, later), Err(LoginError::Expired));
    }

    #[test]
    fn a_journaled_code_stays_spent_across_a_restart_and_the_file_stays_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("login-spent");
        let key = LoginKey::generate();
        let now = SystemTime::now();
        let a = key.mint_code(now);
        let b = key.mint_code(now);
        {
            let spent = SpentCodes::with_journal(4, &path, now).unwrap();
            assert_eq!(spent.redeem(&key, &a, now), Ok(()));
        }
        // A process that starts again with the same key (a server restart,
        // a workspace switch) still refuses it; an unused code still works.
        let again = SpentCodes::with_journal(4, &path, now).unwrap();
        assert_eq!(again.redeem(&key, &a, now), Err(LoginError::Used));
        assert_eq!(again.redeem(&key, &b, now), Ok(()));
        // In memory only, the same code would have worked again: the file is what holds it.
        assert_eq!(SpentCodes::new(4).redeem(&key, &a, now), Ok(()));
        // A line cut by a crash is skipped, the rest kept.
        std::fs::write(&path, format!("{}\n{} 1\nzz", std::fs::read_to_string(&path).unwrap(), "ab".repeat(16)))
            .unwrap();
        let third = SpentCodes::with_journal(4, &path, now).unwrap();
        assert_eq!(third.redeem(&key, &b, now), Err(LoginError::Used));
        assert_eq!(
            std::fs::read_to_string(&path).unwrap().lines().count(),
            2,
            "expired and broken lines dropped at start"
        );
        // Expired codes are forgotten; the file is written anew before it
        // holds twice the capacity, so it stays bounded however long the
        // process lives.
        let path = dir.path().join("bounded");
        let spent = SpentCodes::with_journal(2, &path, now).unwrap();
        for round in 0..6u32 {
            let at = now + (LOGIN_CODE_TTL + Duration::from_secs(2)) * round;
            for _ in 0..2 {
                assert_eq!(spent.redeem(&key, &key.mint_code(at), at), Ok(()), "round {round}");
            }
            assert_eq!(spent.redeem(&key, &key.mint_code(at), at), Err(LoginError::TooMany));
            let lines = std::fs::read_to_string(&path).unwrap().lines().count();
            assert!(lines <= 4, "round {round}: {lines} lines");
        }
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    }

    #[test]
    fn a_code_is_accepted_until_it_expires_and_only_with_its_key() {
        let key = LoginKey::generate();
        let now = SystemTime::now();
        let code = key.mint_code(now);
        let (nonce, expires) = key.check_code(&code, now).unwrap();
        assert_eq!(nonce.len(), 32);
        assert_eq!(expires, unix_now(now) + LOGIN_CODE_TTL.as_secs());
        // At the edge: valid through its expiry second, refused after.
        assert!(key.check_code(&code, now + LOGIN_CODE_TTL).is_ok());
        assert_eq!(key.check_code(&code, now + LOGIN_CODE_TTL + Duration::from_secs(1)), Err(LoginError::Expired));
        assert_eq!(LoginKey::generate().check_code(&code, now), Err(LoginError::BadSignature));
        // A later expiry written in by hand breaks the MAC.
        let mut parts: Vec<&str> = code.split('.').collect();
        let later = (expires + 86_400).to_string();
        parts[1] = &later;
        assert_eq!(key.check_code(&parts.join("."), now), Err(LoginError::BadSignature));
        for bad in ["", "x", "a.b.c", "a.b.c.d", &format!("{code}.x"), &code.replace('.', "")] {
            assert_eq!(key.check_code(bad, now), Err(LoginError::Malformed), "{bad:?}");
        }
    }

    #[test]
    fn sessions_are_recognised_by_their_key_alone() {
        let key = LoginKey::generate();
        let (cookie, csrf) = key.mint_session();
        let id = key.check_session(&cookie).unwrap();
        assert_eq!(key.csrf_token(id), csrf);
        assert!(LoginKey::generate().check_session(&cookie).is_none());
        assert!(key.check_session(&cookie[..cookie.len() - 1]).is_none());
        assert!(key.check_session("nodot").is_none());
        let (other, _) = key.mint_session();
        assert_ne!(cookie, other);
    }

    #[test]
    fn the_file_is_private_and_round_trips() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let key = LoginKey::generate();
        write_login_file(dir.path(), 7411, &key).unwrap();
        let mode = std::fs::metadata(dir.path().join(LOGIN_FILE)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let (port, read) = read_login_file(dir.path()).unwrap();
        assert_eq!(port, 7411);
        let code = key.mint_code(SystemTime::now());
        assert!(read.check_code(&code, SystemTime::now()).is_ok());
        std::fs::set_permissions(dir.path().join(LOGIN_FILE), std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(read_login_file(dir.path()).is_err(), "a file others can read is refused");
    }
}
