//! The probes of the Resource Governor (SPEC Q1): AMD GPUs (amdgpu sysfs,
//! cross-checked with ROCm SMI loaded at run time), NVIDIA GPUs (NVML loaded
//! at run time), RAM and swap (sysinfo), memory pressure (PSI), and the
//! scratch directory (free space, Labfy's own usage).
//!
//! A [`Prober`] is built once and sampled periodically (1 s by default). It
//! never fails and never panics: a missing library, an absent file or an
//! unreadable value is a `None` figure plus a fact in [`Sample::facts`].
//! Libraries are loaded once in [`Prober::new`]; standing facts (a library
//! that is absent, no PSI) are carried in every sample, so each sample
//! describes the whole state on its own.
//!
//! Cost per sample: one read of `/proc/meminfo`, one of
//! `/proc/pressure/memory`, one statvfs, ~10 small sysfs files per AMD card,
//! a few NVML/ROCm SMI calls per device. Directory listings (DRM, hwmon) are
//! cached ([`amd::REDISCOVERY_INTERVAL`]) and the scratch walk is spaced
//! ([`scratch::WALK_MIN_INTERVAL`]).

pub mod amd;
pub mod fdinfo;
pub mod host;
pub mod nvidia;
mod read;
pub mod rocm;
pub mod scratch;

use std::path::PathBuf;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use labfy_ipc::messages::governor::Sample;

pub use read::{MAX_QUOTED_CHARS, MAX_READ_BYTES};

/// Default DRM directory.
pub const DEFAULT_DRM_ROOT: &str = "/sys/class/drm";

/// Default procfs root.
pub const DEFAULT_PROC_ROOT: &str = "/proc";

/// The fact of a sample in which no GPU was found.
pub const NO_GPU_FACT: &str = "no GPU found";

/// Where the probes look (SPEC Q1). Roots are paths so tests run against fixtures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeConfig {
    /// DRM class directory, default [`DEFAULT_DRM_ROOT`].
    pub drm_root: PathBuf,
    /// procfs root (for `pressure/memory`), default [`DEFAULT_PROC_ROOT`].
    pub proc_root: PathBuf,
    /// The scratch directory; Labfy's usage is the bytes of the files under it.
    pub scratch_dir: PathBuf,
    /// Try loading `librocm_smi64` at run time (default true).
    pub rocm_smi: bool,
    /// Try NVML (default true).
    pub nvml: bool,
}

impl ProbeConfig {
    /// The defaults, with this scratch directory.
    pub fn new(scratch_dir: PathBuf) -> Self {
        Self {
            drm_root: PathBuf::from(DEFAULT_DRM_ROOT),
            proc_root: PathBuf::from(DEFAULT_PROC_ROOT),
            scratch_dir,
            rocm_smi: true,
            nvml: true,
        }
    }
}

/// Every probe, initialised once (SPEC Q1).
#[derive(Debug)]
pub struct Prober {
    host: host::HostProbe,
    scratch: scratch::ScratchProbe,
    amd: amd::AmdProbe,
    rocm: Option<rocm::RocmSmi>,
    nvidia: Option<nvidia::NvidiaProbe>,
    /// Facts true for the Prober's whole life (a library not loaded).
    standing: Vec<String>,
}

impl Prober {
    /// Builds the probes and loads the GPU libraries that are enabled and
    /// present. Never fails: a missing library is a standing fact.
    pub fn new(config: ProbeConfig) -> Self {
        let mut standing = Vec::new();
        let rocm = if config.rocm_smi { rocm::RocmSmi::load().map_err(|fact| standing.push(fact)).ok() } else { None };
        let nvidia =
            if config.nvml { nvidia::NvidiaProbe::init().map_err(|fact| standing.push(fact)).ok() } else { None };
        for fact in &standing {
            tracing::info!("{fact}");
        }
        Self {
            host: host::HostProbe::new(&config.proc_root),
            scratch: scratch::ScratchProbe::new(config.scratch_dir),
            amd: amd::AmdProbe::new(config.drm_root),
            rocm,
            nvidia,
            standing,
        }
    }

    /// True when ROCm SMI was loaded.
    pub fn rocm_loaded(&self) -> bool {
        self.rocm.is_some()
    }

    /// True when NVML was loaded.
    pub fn nvml_loaded(&self) -> bool {
        self.nvidia.is_some()
    }

    /// One sampling round of every probe. Never panics.
    pub fn sample(&mut self) -> Sample {
        let now = Instant::now();
        let at_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        let mut facts = self.standing.clone();
        let host = self.host.sample(&mut facts);
        let scratch = self.scratch.sample_at(now, &mut facts);

        let (mut gpus, amd_facts) = self.amd.sample_at(now);
        facts.extend(amd_facts);
        if let Some(smi) = &self.rocm {
            let (readings, rocm_facts) = smi.read();
            facts.extend(rocm_facts);
            facts.extend(rocm::merge_all(&mut gpus, &readings));
        }
        if let Some(nv) = &self.nvidia {
            let (nv_gpus, nv_facts) = nv.read();
            gpus.extend(nv_gpus);
            facts.extend(nv_facts);
        }
        if gpus.is_empty() {
            facts.push(NO_GPU_FACT.to_owned());
        }
        Sample { at_ms, host, scratch, gpus, facts }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn config_defaults() {
        let c = ProbeConfig::new(PathBuf::from("/var/lib/labfy/scratch"));
        assert_eq!(c.drm_root, PathBuf::from("/sys/class/drm"));
        assert_eq!(c.proc_root, PathBuf::from("/proc"));
        assert!(c.rocm_smi && c.nvml);
    }

    #[test]
    fn disabled_libraries_are_not_loaded_and_not_reported() {
        let dir = tempfile::tempdir().unwrap();
        let config = ProbeConfig {
            drm_root: dir.path().join("drm"),
            rocm_smi: false,
            nvml: false,
            ..ProbeConfig::new(dir.path().to_path_buf())
        };
        let mut prober = Prober::new(config);
        assert!(!prober.rocm_loaded() && !prober.nvml_loaded());
        let s = prober.sample();
        assert!(!s.facts.iter().any(|f| f.starts_with("ROCm SMI") || f.starts_with("NVML")), "{:?}", s.facts);
        assert!(s.facts.iter().any(|f| f == NO_GPU_FACT));
        assert!(s.at_ms > 0);
    }
}
