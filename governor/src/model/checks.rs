//! A start's steps 1 and 2: the request checked before anything is opened,
//! the program checked, the model file opened once and hashed from that
//! descriptor.

use std::io::Read;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use labfy_ipc::messages::governor::ModelSpec;
use sha2::Digest;

use super::{HASH_CHUNK, MAX_CTX, MAX_GPU_LAYERS, MAX_PATH_BYTES, MIN_CTX, MODEL_UID, ModelSettings, StartError};

/// Checks a request before anything is opened (step 1).
pub fn check_spec(spec: &ModelSpec, settings: &ModelSettings) -> Result<(PathBuf, u32), StartError> {
    let invalid = |m: String| Err(StartError::Invalid(m));
    if spec.gguf.len() > MAX_PATH_BYTES || spec.gguf.contains('\0') {
        return invalid(format!("model path longer than {MAX_PATH_BYTES} bytes or with a NUL byte"));
    }
    let path = PathBuf::from(&spec.gguf);
    if !path.is_absolute() {
        return invalid(format!("model path {:?} is not absolute", spec.gguf));
    }
    if spec.sha256.len() != 64 || !spec.sha256.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
        return invalid("sha256 must be 64 lower-case hexadecimal digits".into());
    }
    let ctx = spec.ctx.unwrap_or(settings.default_ctx);
    if !(MIN_CTX..=MAX_CTX).contains(&ctx) {
        return invalid(format!("context {ctx} is not between {MIN_CTX} and {MAX_CTX}"));
    }
    if spec.gpu_layers > MAX_GPU_LAYERS {
        return invalid(format!("gpu_layers {} is over {MAX_GPU_LAYERS}", spec.gpu_layers));
    }
    Ok((path, ctx))
}

/// Checks the configured llama-server: a regular file, executable — by any
/// user when it runs as [`MODEL_UID`] (`other_uid`, a root governor).
pub fn check_program(program: Option<&Path>, other_uid: bool) -> Result<PathBuf, StartError> {
    let Some(p) = program else {
        return Err(StartError::Unavailable(
            "no llama-server is configured (labfy up reads LABFY_LLAMA_SERVER; the governor --llama-server)".into(),
        ));
    };
    let meta = std::fs::metadata(p)
        .map_err(|e| StartError::Unavailable(format!("llama-server {} is missing: {e}", p.display())))?;
    if !meta.is_file() {
        return Err(StartError::Unavailable(format!("llama-server {} is not a regular file", p.display())));
    }
    if meta.permissions().mode() & 0o111 == 0 {
        return Err(StartError::Unavailable(format!("llama-server {} is not executable", p.display())));
    }
    // As MODEL_UID, with its directory bound into its root: both must be
    // open to any user (a script must be readable too).
    if !other_uid {
        return Ok(p.to_path_buf());
    }
    if meta.permissions().mode() & 0o005 != 0o005 {
        return Err(StartError::Unavailable(format!(
            "llama-server {} is mode {:o}: it runs as the unprivileged uid {MODEL_UID}, so it must be readable and \
             executable by any user (chmod o+rx)",
            p.display(),
            meta.permissions().mode() & 0o7777
        )));
    }
    if let Some(dir) = p.parent() {
        let mode = std::fs::metadata(dir).map(|m| m.permissions().mode()).unwrap_or(0);
        if mode & 0o001 == 0 {
            return Err(StartError::Unavailable(format!(
                "the directory of llama-server, {}, is mode {:o}: it runs as the unprivileged uid {MODEL_UID}, so \
                 the directory must be searchable by any user (chmod o+x)",
                dir.display(),
                mode & 0o7777
            )));
        }
    }
    Ok(p.to_path_buf())
}

/// Opens the model file, refusing what is not a regular file (step 2).
pub fn open_model(path: &Path) -> Result<std::fs::File, StartError> {
    let meta = std::fs::metadata(path)
        .map_err(|e| StartError::Invalid(format!("model file {} cannot be read: {e}", path.display())))?;
    let ft = meta.file_type();
    if ft.is_dir() {
        return Err(StartError::Invalid(format!("model path {} is a directory", path.display())));
    }
    if ft.is_block_device() || ft.is_char_device() || ft.is_fifo() || ft.is_socket() || !ft.is_file() {
        return Err(StartError::Invalid(format!("model path {} is not a regular file", path.display())));
    }
    std::fs::File::open(path)
        .map_err(|e| StartError::Invalid(format!("model file {} cannot be opened: {e}", path.display())))
}

/// SHA-256 of an open file, from its start.
pub fn sha256_of(file: &std::fs::File) -> std::io::Result<String> {
    use std::io::{Seek, SeekFrom};
    let mut f = file.try_clone()?;
    f.seek(SeekFrom::Start(0))?;
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0u8; HASH_CHUNK];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}
