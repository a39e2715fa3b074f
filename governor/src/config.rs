//! The governor's configuration: command-line flags (and `LABFY_*`
//! variables), validated once into an immutable [`GovernorConfig`]
//! (STYLE 11). Every default is a named constant.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use labfy_ipc::messages::governor::Amounts;

use crate::ledger::LedgerConfig;
use crate::model::{MAX_CTX, MIN_CTX, ModelSettings};
use crate::probe::ProbeConfig;
use crate::sandbox::SandboxSettings;

/// Default sampling period, milliseconds.
pub const DEFAULT_SAMPLE_MS: u64 = 1000;
/// Sampling period bounds, milliseconds.
pub const SAMPLE_MS_RANGE: (u64, u64) = (100, 60_000);
/// Default RAM headroom, MiB.
pub const DEFAULT_HEADROOM_RAM_MIB: u64 = 1024;
/// Default GPU memory headroom, MiB.
pub const DEFAULT_HEADROOM_VRAM_MIB: u64 = 512;
/// Default swap headroom, MiB.
pub const DEFAULT_HEADROOM_SWAP_MIB: u64 = 0;
/// Default scratch headroom, MiB.
pub const DEFAULT_HEADROOM_SCRATCH_MIB: u64 = 1024;
/// Default swap-use threshold, percent.
pub const DEFAULT_SWAP_PRESSURE_PERCENT: u8 = 50;
/// Default PSI `some avg10` threshold, percent.
pub const DEFAULT_PSI_PRESSURE: f64 = 20.0;
/// Samples in a row under pressure before the lowest-priority run is stopped.
pub const DEFAULT_PRESSURE_STOP_AFTER: u32 = 10;
/// Default context of the local model.
pub const DEFAULT_MODEL_CTX: u32 = 4096;
/// Default wait for a model's `/health` 200.
pub const DEFAULT_MODEL_START_TIMEOUT_S: u64 = 300;
/// Where ROCm installs its runtime (outside `/usr`).
pub const DEFAULT_GPU_RUNTIME_DIR: &str = "/opt/rocm";
/// Most GPU runtime directories given to llama-server.
pub const MAX_GPU_RUNTIME_DIRS: usize = 8;

/// Labfy's Resource Governor daemon (normally started by `labfy up`, which
/// passes it every `LABFY_GOVERNOR_*` variable of its own environment).
#[derive(Debug, Clone, Parser)]
#[command(version, about)]
pub struct Args {
    /// Private runtime directory holding the sockets and the per-boot secret.
    #[arg(long, env = "LABFY_RUNTIME_DIR")]
    pub runtime_dir: PathBuf,
    /// Data directory; the scratch directory defaults to `<data-dir>/scratch`.
    #[arg(long, env = "LABFY_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Scratch directory (free space and Labfy's own usage are sampled there).
    #[arg(long, env = "LABFY_SCRATCH_DIR")]
    pub scratch_dir: Option<PathBuf>,
    /// The llama-server program the LocalModelSupervisor starts.
    #[arg(long, env = "LABFY_LLAMA_SERVER")]
    pub llama_server: Option<PathBuf>,
    /// Sampling period, milliseconds (100–60000).
    #[arg(long, env = "LABFY_GOVERNOR_SAMPLE_MS", default_value_t = DEFAULT_SAMPLE_MS)]
    pub sample_ms: u64,
    /// RAM never handed out, MiB.
    #[arg(long, env = "LABFY_GOVERNOR_HEADROOM_RAM_MIB", default_value_t = DEFAULT_HEADROOM_RAM_MIB)]
    pub headroom_ram_mib: u64,
    /// GPU memory never handed out, MiB.
    #[arg(long, env = "LABFY_GOVERNOR_HEADROOM_VRAM_MIB", default_value_t = DEFAULT_HEADROOM_VRAM_MIB)]
    pub headroom_vram_mib: u64,
    /// Swap never handed out, MiB.
    #[arg(long, env = "LABFY_GOVERNOR_HEADROOM_SWAP_MIB", default_value_t = DEFAULT_HEADROOM_SWAP_MIB)]
    pub headroom_swap_mib: u64,
    /// Scratch space never handed out, MiB.
    #[arg(long, env = "LABFY_GOVERNOR_HEADROOM_SCRATCH_MIB", default_value_t = DEFAULT_HEADROOM_SCRATCH_MIB)]
    pub headroom_scratch_mib: u64,
    /// Swap use (percent of swap) above which admissions stop.
    #[arg(long, env = "LABFY_GOVERNOR_SWAP_PRESSURE_PERCENT", default_value_t = DEFAULT_SWAP_PRESSURE_PERCENT)]
    pub swap_pressure_percent: u8,
    /// PSI memory `some avg10` (percent) above which admissions stop.
    #[arg(long, env = "LABFY_GOVERNOR_PSI_PRESSURE", default_value_t = DEFAULT_PSI_PRESSURE)]
    pub psi_pressure: f64,
    /// Samples in a row under pressure before the lowest-priority run is stopped (0: never stop).
    #[arg(long, env = "LABFY_GOVERNOR_PRESSURE_STOP_AFTER", default_value_t = DEFAULT_PRESSURE_STOP_AFTER)]
    pub pressure_stop_after: u32,
    /// CPU cores handed out to parser workers and sandbox runs (default:
    /// the cores this process may run on; fewer keeps some for the desktop).
    #[arg(long, env = "LABFY_GOVERNOR_CORES", value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub cores: Option<u32>,
    /// Context of the local model when a start names none.
    #[arg(long, env = "LABFY_GOVERNOR_MODEL_CTX", default_value_t = DEFAULT_MODEL_CTX)]
    pub model_ctx: u32,
    /// Threads of llama-server (default: the machine's cores).
    #[arg(long, env = "LABFY_GOVERNOR_MODEL_THREADS")]
    pub model_threads: Option<u32>,
    /// Directories of a GPU runtime that lies outside the system's
    /// (`/usr`, `/lib`…), given read-only to a llama-server that offloads
    /// layers, where they exist (ROCm's default `/opt/rocm`). Repeatable.
    #[arg(
        long = "gpu-runtime-dir",
        env = "LABFY_GOVERNOR_GPU_RUNTIME_DIRS",
        value_delimiter = ':',
        default_value = DEFAULT_GPU_RUNTIME_DIR
    )]
    pub gpu_runtime_dirs: Vec<PathBuf>,
    /// Longest wait for the model's `/health` 200, seconds.
    #[arg(long, env = "LABFY_GOVERNOR_MODEL_START_TIMEOUT_S", default_value_t = DEFAULT_MODEL_START_TIMEOUT_S)]
    pub model_start_timeout_s: u64,
    /// Root of the DRM sysfs tree (tests point it at a fixture).
    #[arg(long, default_value = "/sys/class/drm")]
    pub drm_root: PathBuf,
    /// Root of procfs, for PSI (tests point it at a fixture, whose
    /// `pressure/memory` they write to stage memory pressure).
    #[arg(long, env = "LABFY_GOVERNOR_PROC_ROOT", default_value = "/proc")]
    pub proc_root: PathBuf,
    /// Do not load ROCm SMI (amdgpu sysfs alone).
    #[arg(long)]
    pub no_rocm_smi: bool,
    /// Do not load NVML.
    #[arg(long)]
    pub no_nvml: bool,
    /// A program `sandbox.exec` may run (SPEC X1): `name=/abs/program arg…
    /// {script}`, repeated (`;` between them in the variable); `none` turns
    /// the sandbox off. Default: python3 and jq, where installed.
    #[arg(long = "sandbox-program", env = "LABFY_GOVERNOR_SANDBOX_PROGRAMS", value_delimiter = ';')]
    pub sandbox_programs: Vec<String>,
    /// Where the governor makes its cgroups (SPEC D2): `auto` (the whole
    /// hierarchy as root, else the sub-tree systemd delegated), `system`,
    /// `delegated`, `v2:/dir` or `v1:/dir` (one directory per controller).
    #[arg(long, env = "LABFY_GOVERNOR_CGROUP_ROOT", default_value = "auto")]
    pub cgroup_root: String,
}

/// The validated configuration.
#[derive(Debug, Clone)]
pub struct GovernorConfig {
    /// Runtime directory (sockets, secret).
    pub runtime_dir: PathBuf,
    /// Probes.
    pub probe: ProbeConfig,
    /// Ledger.
    pub ledger: LedgerConfig,
    /// Local model.
    pub model: ModelSettings,
    /// Sampling period.
    pub sample_period: Duration,
    /// Samples in a row under pressure before a stop (0: never).
    pub pressure_stop_after: u32,
    /// `sandbox.exec`'s allow-list (SPEC X1).
    pub sandbox: SandboxSettings,
    /// Where confinements go (SPEC D2), resolved at start.
    pub cgroup_root: crate::cgroup::TreeSpec,
}

const MIB: u64 = 1024 * 1024;

impl GovernorConfig {
    /// Validates the flags; a sentence on the first bad one.
    pub fn from_args(a: Args) -> Result<Self, String> {
        let (lo, hi) = SAMPLE_MS_RANGE;
        if !(lo..=hi).contains(&a.sample_ms) {
            return Err(format!("--sample-ms {} is not between {lo} and {hi}", a.sample_ms));
        }
        if !(1..=100).contains(&a.swap_pressure_percent) {
            return Err(format!("--swap-pressure-percent {} is not between 1 and 100", a.swap_pressure_percent));
        }
        if !(a.psi_pressure > 0.0 && a.psi_pressure <= 100.0) {
            return Err(format!("--psi-pressure {} is not in (0, 100]", a.psi_pressure));
        }
        if !(MIN_CTX..=MAX_CTX).contains(&a.model_ctx) {
            return Err(format!("--model-ctx {} is not between {MIN_CTX} and {MAX_CTX}", a.model_ctx));
        }
        let mib = |v: u64, flag: &str| v.checked_mul(MIB).ok_or_else(|| format!("--{flag} {v} is too large"));
        let headroom = Amounts {
            vram: mib(a.headroom_vram_mib, "headroom-vram-mib")?,
            ram: mib(a.headroom_ram_mib, "headroom-ram-mib")?,
            swap: mib(a.headroom_swap_mib, "headroom-swap-mib")?,
            scratch: mib(a.headroom_scratch_mib, "headroom-scratch-mib")?,
        };
        let scratch = match (a.scratch_dir, a.data_dir) {
            (Some(s), _) => s,
            (None, Some(d)) => d.join("scratch"),
            (None, None) => return Err("give --data-dir or --scratch-dir (where scratch space is measured)".into()),
        };
        let threads = a
            .model_threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get() as u32))
            .clamp(1, 256);
        let sandbox = SandboxSettings::from_specs(&a.sandbox_programs, scratch.join("sandbox"))?;
        let cgroup_root = a.cgroup_root.parse().map_err(|e| format!("--cgroup-root: {e}"))?;
        let socket_dir = labfy_ipc::daemon::model_dir(&a.runtime_dir);
        if let Some(bad) = a.gpu_runtime_dirs.iter().find(|d| !d.is_absolute()) {
            return Err(format!("--gpu-runtime-dir {} is not an absolute path", bad.display()));
        }
        let gpu_runtime_dirs = a.gpu_runtime_dirs.into_iter().take(MAX_GPU_RUNTIME_DIRS).collect();
        let mut probe = ProbeConfig::new(scratch);
        probe.drm_root = a.drm_root;
        probe.proc_root = a.proc_root;
        probe.rocm_smi = !a.no_rocm_smi;
        probe.nvml = !a.no_nvml;
        Ok(Self {
            runtime_dir: a.runtime_dir,
            probe,
            ledger: LedgerConfig {
                headroom,
                swap_pressure_percent: a.swap_pressure_percent,
                psi_some_pressure: a.psi_pressure,
                sample_period_ms: a.sample_ms,
                cores: a.cores.unwrap_or_else(crate::ledger::available_cores),
            },
            model: ModelSettings {
                llama_server: a.llama_server,
                default_ctx: a.model_ctx,
                threads,
                start_timeout: Duration::from_secs(a.model_start_timeout_s.clamp(1, 3600)),
                socket_dir,
                gpu_runtime_dirs,
            },
            sample_period: Duration::from_millis(a.sample_ms),
            pressure_stop_after: a.pressure_stop_after,
            sandbox,
            cgroup_root,
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn parse(extra: &[&str]) -> Result<GovernorConfig, String> {
        let mut argv = vec!["labfy-governor", "--runtime-dir", "/run/x", "--data-dir", "/d"];
        argv.extend_from_slice(extra);
        GovernorConfig::from_args(Args::try_parse_from(argv).map_err(|e| e.to_string())?)
    }

    #[test]
    fn defaults_and_bounds() {
        let c = parse(&[]).unwrap();
        assert_eq!(c.probe.scratch_dir, PathBuf::from("/d/scratch"));
        assert_eq!(c.ledger.headroom.ram, DEFAULT_HEADROOM_RAM_MIB * MIB);
        assert_eq!(c.sample_period, Duration::from_millis(DEFAULT_SAMPLE_MS));
        assert!(parse(&["--sample-ms", "100"]).is_ok());
        assert!(parse(&["--sample-ms", "99"]).unwrap_err().contains("--sample-ms"));
        assert!(parse(&["--sample-ms", "60001"]).is_err());
        assert!(parse(&["--swap-pressure-percent", "0"]).is_err());
        assert!(parse(&["--psi-pressure", "0"]).is_err());
        assert!(parse(&["--model-ctx", "255"]).is_err());
        assert_eq!(c.model.socket(), PathBuf::from("/run/x/model/model.sock"));
        // GPU runtimes outside /usr: ROCm's place by default, absolute paths only.
        assert_eq!(c.model.gpu_runtime_dirs, [PathBuf::from(DEFAULT_GPU_RUNTIME_DIR)]);
        let two = parse(&["--gpu-runtime-dir", "/opt/rocm-6.4.1", "--gpu-runtime-dir", "/opt/amdgpu"]).unwrap();
        assert_eq!(two.model.gpu_runtime_dirs, [PathBuf::from("/opt/rocm-6.4.1"), PathBuf::from("/opt/amdgpu")]);
        assert!(parse(&["--gpu-runtime-dir", "opt/rocm"]).unwrap_err().contains("not an absolute path"));
        // The model listens on a Unix socket: there is no port to configure.
        assert!(parse(&["--model-port", "18090"]).is_err());
        assert!(parse(&["--headroom-ram-mib", &u64::MAX.to_string()]).unwrap_err().contains("too large"));
        assert!(parse(&["--bogus"]).is_err());
        assert_eq!(c.cgroup_root, crate::cgroup::TreeSpec::Auto);
        assert!(parse(&["--cgroup-root", "v2:relative"]).unwrap_err().contains("--cgroup-root"));
        let no_dir = Args::try_parse_from(["labfy-governor", "--runtime-dir", "/r"]).unwrap();
        assert!(GovernorConfig::from_args(no_dir).unwrap_err().contains("--data-dir"));
    }
}
