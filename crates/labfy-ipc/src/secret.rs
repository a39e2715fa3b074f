//! The private runtime directory (mode 0700) and the per-boot secret in it
//! (mode 0600), created by the supervisor and read by each child (SPEC P3).
//! Anything group- or world-accessible, or owned by another user, is refused —
//! never "fixed" — because someone else may already have read it.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use rand::RngCore;
use subtle::ConstantTimeEq;

use crate::IpcError;

/// File name of the secret inside the runtime directory.
pub const SECRET_FILE: &str = "ipc.secret";
/// Bytes of randomness in a secret.
pub const SECRET_BYTES: usize = 32;

/// A per-boot secret. Its text form is lower-case hex.
#[derive(Clone)]
pub struct Secret([u8; SECRET_BYTES]);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

impl Secret {
    /// A fresh random secret.
    pub fn generate() -> Self {
        let mut bytes = [0u8; SECRET_BYTES];
        rand::rng().fill_bytes(&mut bytes);
        Self(bytes)
    }

    /// Hex text (what travels in `Hello`).
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Constant-time comparison with a presented hex text.
    pub fn matches(&self, presented: &str) -> bool {
        let mut bytes = [0u8; SECRET_BYTES];
        if hex::decode_to_slice(presented, &mut bytes).is_err() {
            return false;
        }
        bool::from(self.0.ct_eq(&bytes))
    }

    fn from_hex(text: &str) -> Option<Self> {
        let mut bytes = [0u8; SECRET_BYTES];
        hex::decode_to_slice(text.trim_end(), &mut bytes).ok()?;
        Some(Self(bytes))
    }
}

fn euid() -> u32 {
    // SAFETY: geteuid(2) takes no arguments, touches no memory and cannot fail.
    #[allow(unsafe_code)]
    unsafe {
        libc::geteuid()
    }
}

fn runtime_err(path: &Path, reason: impl Into<String>) -> IpcError {
    IpcError::Runtime { path: path.to_path_buf(), reason: reason.into() }
}

/// Checks that `path` is a directory of ours that nobody else can enter.
pub fn check_private_dir(path: &Path) -> Result<(), IpcError> {
    let meta = fs::symlink_metadata(path).map_err(|e| runtime_err(path, e.to_string()))?;
    if !meta.is_dir() {
        return Err(runtime_err(path, "not a directory (a symlink or a file is refused)"));
    }
    if meta.uid() != euid() {
        return Err(runtime_err(path, format!("owned by uid {}, not by this process's uid {}", meta.uid(), euid())));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(runtime_err(path, format!("mode {:o} lets others in; it must be 0700", meta.mode() & 0o777)));
    }
    Ok(())
}

/// Creates the runtime directory with mode 0700 (its parent must exist), or
/// checks an existing one.
pub fn create_private_dir(path: &Path) -> Result<(), IpcError> {
    match fs::DirBuilder::new().mode(0o700).create(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(runtime_err(path, e.to_string())),
    }
    check_private_dir(path)
}

/// Writes `bytes` as `dir/name` (mode 0600, replaced atomically, synced):
/// the one way Labfy writes a file of the runtime directory.
pub fn write_private_file(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), IpcError> {
    check_private_dir(dir)?;
    let tmp = dir.join(format!(".{name}.{}", std::process::id()));
    let path = dir.join(name);
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| runtime_err(&tmp, e.to_string()))?;
    f.write_all(bytes).and_then(|()| f.sync_all()).map_err(|e| runtime_err(&tmp, e.to_string()))?;
    fs::rename(&tmp, &path).map_err(|e| runtime_err(&path, e.to_string()))
}

/// Reads `dir/name`, refusing a file others could read or that is not ours.
pub fn read_private_file(dir: &Path, name: &str) -> Result<String, IpcError> {
    check_private_dir(dir)?;
    let path = dir.join(name);
    let meta = fs::symlink_metadata(&path).map_err(|e| runtime_err(&path, e.to_string()))?;
    if !meta.is_file() || meta.uid() != euid() || meta.permissions().mode() & 0o077 != 0 {
        return Err(runtime_err(&path, "must be a regular file of ours with mode 0600"));
    }
    fs::read_to_string(&path).map_err(|e| runtime_err(&path, e.to_string()))
}

/// Writes a fresh secret into `dir` (mode 0600, replaced atomically) and returns it.
pub fn create_secret(dir: &Path) -> Result<Secret, IpcError> {
    let secret = Secret::generate();
    write_private_file(dir, SECRET_FILE, secret.to_hex().as_bytes())?;
    Ok(secret)
}

/// Reads the secret of `dir`, refusing a file others could read.
pub fn read_secret(dir: &Path) -> Result<Secret, IpcError> {
    let text = read_private_file(dir, SECRET_FILE)?;
    Secret::from_hex(&text).ok_or_else(|| runtime_err(&dir.join(SECRET_FILE), "not a 64-character hex secret"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn created_dir_and_secret_are_private_and_round_trip() {
        let base = tempfile::TempDir::new().unwrap();
        let dir = base.path().join("run");
        create_private_dir(&dir).unwrap();
        assert_eq!(fs::metadata(&dir).unwrap().mode() & 0o777, 0o700);
        let s = create_secret(&dir).unwrap();
        assert_eq!(fs::metadata(dir.join(SECRET_FILE)).unwrap().mode() & 0o777, 0o600);
        let back = read_secret(&dir).unwrap();
        assert!(back.matches(&s.to_hex()));
        assert!(!back.matches(&Secret::generate().to_hex()));
        assert!(!back.matches("zz"));
        assert!(!back.matches(""));
        // A new boot, a new secret.
        let s2 = create_secret(&dir).unwrap();
        assert!(!s2.matches(&s.to_hex()));
        assert_eq!(format!("{s2:?}"), "Secret(…)");
    }

    #[test]
    fn open_dirs_and_readable_secrets_are_refused() {
        let base = tempfile::TempDir::new().unwrap();
        let dir = base.path().join("run");
        fs::create_dir(&dir).unwrap();
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        assert!(matches!(create_private_dir(&dir), Err(IpcError::Runtime { .. })));
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
        create_secret(&dir).unwrap();
        fs::set_permissions(dir.join(SECRET_FILE), fs::Permissions::from_mode(0o644)).unwrap();
        let err = read_secret(&dir).unwrap_err();
        assert!(err.to_string().contains("0600"), "{err}");
        let link = base.path().join("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert!(matches!(check_private_dir(&link), Err(IpcError::Runtime { .. })));
    }
}
