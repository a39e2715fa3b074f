//! The GPU's device nodes given to a run that offloads layers, and whether
//! the model's identity may open them.

use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::PathBuf;

use super::{MAX_GPU_DEVICES, StartError};

/// A GPU device node given to llama-server, with who may open it.
pub(super) struct GpuDevice {
    pub(super) path: PathBuf,
    pub(super) uid: u32,
    pub(super) gid: u32,
    pub(super) mode: u32,
}

/// The GPU device nodes of this machine: AMD's `/dev/kfd` and render nodes,
/// NVIDIA's control, UVM and per-GPU nodes.
pub(super) fn gpu_devices() -> Vec<GpuDevice> {
    let mut paths: Vec<PathBuf> = ["/dev/kfd", "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
        .into_iter()
        .map(PathBuf::from)
        .collect();
    for (dir, prefix) in [("/dev/dri", "renderD"), ("/dev", "nvidia")] {
        if let Ok(entries) = std::fs::read_dir(dir) {
            let mut found: Vec<PathBuf> = entries
                .filter_map(Result::ok)
                .filter(|e| {
                    let name = e.file_name();
                    let name = name.to_string_lossy();
                    name.strip_prefix(prefix).is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                })
                .map(|e| e.path())
                .collect();
            found.sort();
            paths.extend(found);
        }
    }
    paths
        .into_iter()
        .filter_map(|path| {
            let meta = std::fs::metadata(&path).ok()?;
            meta.file_type().is_char_device().then(|| GpuDevice {
                uid: meta.uid(),
                gid: meta.gid(),
                mode: meta.permissions().mode(),
                path,
            })
        })
        .take(MAX_GPU_DEVICES)
        .collect()
}

/// Who opens the GPU's nodes: the governor's own ids (llama-server keeps
/// them, in a user namespace of its own, as the service user).
#[derive(Debug, Clone)]
pub(super) struct Identity {
    pub(super) uid: u32,
    pub(super) groups: Vec<u32>,
}

impl Identity {
    pub(super) fn current() -> Self {
        // SAFETY: geteuid/getegid cannot fail; getgroups fills at most the
        // buffer's length.
        #[allow(unsafe_code)]
        let (uid, gid, groups) = unsafe {
            let mut buf = [0 as libc::gid_t; 64];
            let n = libc::getgroups(buf.len() as libc::c_int, buf.as_mut_ptr());
            (libc::geteuid(), libc::getegid(), buf[..n.max(0) as usize].to_vec())
        };
        let mut all = groups;
        all.push(gid);
        Self { uid, groups: all }
    }

    /// Whether these ids may read and write a node of this owner and mode.
    pub(super) fn may_open(&self, owner: u32, group: u32, mode: u32) -> bool {
        let bits = if self.uid == owner {
            mode >> 6
        } else if self.groups.contains(&group) {
            mode >> 3
        } else {
            mode
        };
        bits & 0o6 == 0o6
    }
}

/// Refuses offloaded layers when the service user may open none of the
/// GPU's nodes (or none exists), naming the nodes and their groups.
pub(super) fn check_gpu_access(devices: &[GpuDevice], me: &Identity) -> Result<(), StartError> {
    if devices.is_empty() {
        return Err(StartError::Unavailable(
            "gpu_layers asks for the GPU, but this machine shows no GPU device node (/dev/kfd, /dev/dri/renderD*, \
             /dev/nvidia*); start with --gpu-layers 0"
                .into(),
        ));
    }
    let closed: Vec<String> = devices
        .iter()
        .filter(|d| !me.may_open(d.uid, d.gid, d.mode))
        .map(|d| format!("{} (group {}, mode {:o})", d.path.display(), d.gid, d.mode & 0o777))
        .collect();
    if closed.len() == devices.len() {
        return Err(StartError::Unavailable(format!(
            "the service user (uid {}) may open none of the GPU's device nodes: {}; add it to their groups \
             (render, video: labfy.sysusers does) and restart the service",
            me.uid,
            closed.join(", ")
        )));
    }
    Ok(())
}
