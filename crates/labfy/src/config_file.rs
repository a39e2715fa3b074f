//! The operator's configuration file (issue 18, operations): a commented
//! TOML file, `/etc/labfy/labfy.toml` under the packaged unit, given to
//! `labfy up --config FILE` (or `LABFY_CONFIG`).
//!
//! Each setting stands for one of the environment variables the processes
//! already read (`LABFY_PORT`, `LABFY_AGENT_*`, `LABFY_GOVERNOR_*`…), and is
//! applied as that variable when the environment does not set it: a flag
//! wins over the environment, the environment over the file, the file over
//! the defaults. The supervisor passes them on as before (`LABFY_GOVERNOR_*`
//! to the governor, `LABFY_AGENT_*` to the server).
//!
//! The file names programs the governor runs (llama-server, the sandbox's
//! allow-list), so it is refused, with the reason, unless it is a regular
//! file that only its owner — root or the user running Labfy — can write.
//! An unknown key is refused too (a typo would otherwise be a silent
//! default), as is a relative path.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// Largest configuration file read.
pub const MAX_BYTES: u64 = 64 * 1024;

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// The browser UI.
    #[serde(default)]
    pub ui: Ui,
    /// The processes' log.
    #[serde(default)]
    pub log: Log,
    /// Tor and egress.
    #[serde(default)]
    pub tor: Tor,
    /// The local model's program.
    #[serde(default)]
    pub model: Model,
    /// The agent (SPEC M4).
    #[serde(default)]
    pub agent: Agent,
    /// The Resource Governor.
    #[serde(default)]
    pub governor: Governor,
}

/// `[ui]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ui {
    /// `LABFY_PORT`.
    pub port: Option<u16>,
}

/// `[log]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Log {
    /// `LABFY_LOG`.
    pub level: Option<String>,
}

/// `[tor]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tor {
    /// `LABFY_ARTI_CONFIG`.
    pub arti_config: Option<PathBuf>,
    /// `LABFY_MAX_BODY_MIB`.
    pub max_body_mib: Option<u64>,
}

/// `[model]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Model {
    /// `LABFY_LLAMA_SERVER`.
    pub llama_server: Option<PathBuf>,
}

/// `[agent]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Agent {
    /// `LABFY_AGENT_MODE`.
    pub mode: Option<String>,
    /// `LABFY_AGENT_MODEL_ENDPOINT`.
    pub model_endpoint: Option<String>,
    /// `LABFY_AGENT_MODEL_ID`.
    pub model_id: Option<String>,
    /// `LABFY_AGENT_MODEL_TIMEOUT_SECONDS`.
    pub model_timeout_seconds: Option<u64>,
    /// `LABFY_AGENT_OPTIONAL_CATALOG`: the capabilities' tools (SPEC X2).
    pub optional_catalog: Option<bool>,
    /// `LABFY_AGENT_CAPABILITIES_DIR`: the operator's installed manifests.
    pub capabilities_dir: Option<PathBuf>,
}

/// `[governor]`: each key is `LABFY_GOVERNOR_<KEY>` (`labfy-governor --help`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // one line each below, in the variables' names
pub struct Governor {
    pub sample_ms: Option<u64>,
    pub headroom_ram_mib: Option<u64>,
    pub headroom_vram_mib: Option<u64>,
    pub headroom_swap_mib: Option<u64>,
    pub headroom_scratch_mib: Option<u64>,
    pub swap_pressure_percent: Option<u8>,
    pub psi_pressure: Option<f64>,
    pub pressure_stop_after: Option<u32>,
    pub cores: Option<u32>,
    pub model_ctx: Option<u32>,
    pub model_threads: Option<u32>,
    pub model_start_timeout_s: Option<u64>,
    /// The sandbox's allow-list, one `name=/abs/program arg… {script}` each.
    pub sandbox_programs: Option<Vec<String>>,
    pub cgroup_root: Option<String>,
}

impl ConfigFile {
    /// Reads and checks `path` (see the module's rules).
    pub fn load(path: &Path) -> Result<Self, String> {
        let shown = path.display();
        let meta = std::fs::metadata(path).map_err(|e| format!("configuration file {shown}: {e}"))?;
        if !meta.is_file() {
            return Err(format!("configuration file {shown} is not a regular file"));
        }
        if meta.len() > MAX_BYTES {
            return Err(format!("configuration file {shown} is larger than {MAX_BYTES} bytes"));
        }
        // SAFETY: geteuid(2) cannot fail and touches no memory.
        #[allow(unsafe_code)]
        let me = unsafe { libc::geteuid() };
        if meta.uid() != 0 && meta.uid() != me {
            return Err(format!(
                "configuration file {shown} belongs to uid {}, neither root nor this user ({me}): refused, since it \
                 names the programs the governor runs",
                meta.uid()
            ));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(format!(
                "configuration file {shown} can be written by others (mode {:o}): refused, since it names the \
                 programs the governor runs (chmod go-w)",
                meta.mode() & 0o7777
            ));
        }
        let text = std::fs::read_to_string(path).map_err(|e| format!("configuration file {shown}: {e}"))?;
        Self::parse(&text).map_err(|e| format!("configuration file {shown}: {e}"))
    }

    /// Parses the text of a configuration file.
    pub fn parse(text: &str) -> Result<Self, String> {
        let file: Self = toml::from_str(text).map_err(|e| e.to_string().trim_end().to_owned())?;
        for (key, path) in
            [("tor.arti_config", &file.tor.arti_config), ("model.llama_server", &file.model.llama_server)]
        {
            if let Some(p) = path
                && !p.is_absolute()
            {
                return Err(format!("{key} = {:?} is not an absolute path", p.display().to_string()));
            }
        }
        if let Some(programs) = &file.governor.sandbox_programs
            && programs.iter().any(|p| p.contains(';'))
        {
            return Err("governor.sandbox_programs: an entry contains `;` (give one program per entry)".into());
        }
        Ok(file)
    }

    /// The environment variables the file sets, in a stable order.
    pub fn variables(&self) -> Vec<(&'static str, String)> {
        let mut vars: Vec<(&'static str, String)> = Vec::new();
        let mut put = |name: &'static str, value: Option<String>| {
            if let Some(v) = value {
                vars.push((name, v));
            }
        };
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        put("LABFY_PORT", self.ui.port.map(|v| v.to_string()));
        put("LABFY_LOG", self.log.level.clone());
        put("LABFY_ARTI_CONFIG", path(&self.tor.arti_config));
        put("LABFY_MAX_BODY_MIB", self.tor.max_body_mib.map(|v| v.to_string()));
        put("LABFY_LLAMA_SERVER", path(&self.model.llama_server));
        put("LABFY_AGENT_MODE", self.agent.mode.clone());
        put("LABFY_AGENT_MODEL_ENDPOINT", self.agent.model_endpoint.clone());
        put("LABFY_AGENT_MODEL_ID", self.agent.model_id.clone());
        put("LABFY_AGENT_MODEL_TIMEOUT_SECONDS", self.agent.model_timeout_seconds.map(|v| v.to_string()));
        put("LABFY_AGENT_OPTIONAL_CATALOG", self.agent.optional_catalog.map(|v| v.to_string()));
        put("LABFY_AGENT_CAPABILITIES_DIR", path(&self.agent.capabilities_dir));
        let g = &self.governor;
        put("LABFY_GOVERNOR_SAMPLE_MS", g.sample_ms.map(|v| v.to_string()));
        put("LABFY_GOVERNOR_HEADROOM_RAM_MIB", g.headroom_ram_mib.map(|v| v.to_string()));
        put("LABFY_GOVERNOR_HEADROOM_VRAM_MIB", g.headroom_vram_mib.map(|v| v.to_string()));
        put("LABFY_GOVERNOR_HEADROOM_SWAP_MIB", g.headroom_swap_mib.map(|v| v.to_string()));
        put("LABFY_GOVERNOR_HEADROOM_SCRATCH_MIB", g.headroom_scratch_mib.map(|v| v.to_string()));
        put("LABFY_GOVERNOR_SWAP_PRESSURE_PERCENT", g.swap_pressure_percent.map(|v| v.to_string()));
        put("LABFY_GOVERNOR_PSI_PRESSURE", g.psi_pressure.map(|v| v.to_string()));
        put("LABFY_GOVERNOR_PRESSURE_STOP_AFTER", g.pressure_stop_after.map(|v| v.to_string()));
        put("LABFY_GOVERNOR_CORES", g.cores.map(|v| v.to_string()));
        put("LABFY_GOVERNOR_MODEL_CTX", g.model_ctx.map(|v| v.to_string()));
        put("LABFY_GOVERNOR_MODEL_THREADS", g.model_threads.map(|v| v.to_string()));
        put("LABFY_GOVERNOR_MODEL_START_TIMEOUT_S", g.model_start_timeout_s.map(|v| v.to_string()));
        put("LABFY_GOVERNOR_SANDBOX_PROGRAMS", g.sandbox_programs.as_ref().map(|p| p.join(";")));
        put("LABFY_GOVERNOR_CGROUP_ROOT", g.cgroup_root.clone());
        vars
    }
}

/// The configuration file named on the command line (`--config FILE` or
/// `--config=FILE`, before any `--`) or by `LABFY_CONFIG`, if any.
pub fn named(args: &[std::ffi::OsString]) -> Option<PathBuf> {
    let mut it = args.iter().skip(1);
    while let Some(arg) = it.next() {
        let Some(text) = arg.to_str() else { continue };
        if text == "--" {
            break;
        }
        if text == "--config" {
            return it.next().map(PathBuf::from);
        }
        if let Some(value) = text.strip_prefix("--config=") {
            return Some(PathBuf::from(value));
        }
    }
    std::env::var_os("LABFY_CONFIG").map(PathBuf::from)
}

/// Loads `path` and sets each of its variables the environment does not
/// already set. Call before any thread exists (it changes the environment).
/// Returns the variables it set.
pub fn apply(path: &Path) -> Result<Vec<&'static str>, String> {
    let file = ConfigFile::load(path)?;
    let mut set = Vec::new();
    for (name, value) in file.variables() {
        if std::env::var_os(name).is_none() {
            // SAFETY: called from `main` before any other thread is started
            // (no concurrent reader of the environment).
            #[allow(unsafe_code)]
            unsafe {
                std::env::set_var(name, value);
            }
            set.push(name);
        }
    }
    Ok(set)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_packaged_example_parses_and_sets_nothing_it_leaves_commented() {
        let text = include_str!("../../../deploy/labfy.toml");
        let file = ConfigFile::parse(text).unwrap();
        let vars = file.variables();
        let names: Vec<&str> = vars.iter().map(|(n, _)| *n).collect();
        assert_eq!(names, ["LABFY_PORT", "LABFY_LOG"], "{vars:?}");
    }

    #[test]
    fn every_setting_becomes_its_variable() {
        let text = r#"
            [ui]
            port = 7400
            [log]
            level = "debug"
            [tor]
            arti_config = "/etc/labfy/arti.toml"
            max_body_mib = 8
            [model]
            llama_server = "/usr/lib/labfy/llama-server"
            [agent]
            mode = "local-model"
            model_endpoint = "governed"
            model_id = "gemma"
            model_timeout_seconds = 90
            optional_catalog = true
            capabilities_dir = "/etc/labfy/capabilities"
            [governor]
            headroom_ram_mib = 2048
            psi_pressure = 12.5
            cores = 4
            sandbox_programs = ["python3=/usr/bin/python3 -I -B {script}", "jq=/usr/bin/jq -f {script}"]
            cgroup_root = "delegated"
        "#;
        let vars = ConfigFile::parse(text).unwrap().variables();
        let get = |n: &str| vars.iter().find(|(k, _)| *k == n).map(|(_, v)| v.as_str());
        assert_eq!(get("LABFY_PORT"), Some("7400"));
        assert_eq!(get("LABFY_LOG"), Some("debug"));
        assert_eq!(get("LABFY_ARTI_CONFIG"), Some("/etc/labfy/arti.toml"));
        assert_eq!(get("LABFY_MAX_BODY_MIB"), Some("8"));
        assert_eq!(get("LABFY_LLAMA_SERVER"), Some("/usr/lib/labfy/llama-server"));
        assert_eq!(get("LABFY_AGENT_MODE"), Some("local-model"));
        assert_eq!(get("LABFY_AGENT_MODEL_TIMEOUT_SECONDS"), Some("90"));
        assert_eq!(get("LABFY_AGENT_OPTIONAL_CATALOG"), Some("true"));
        assert_eq!(get("LABFY_AGENT_CAPABILITIES_DIR"), Some("/etc/labfy/capabilities"));
        assert_eq!(get("LABFY_GOVERNOR_HEADROOM_RAM_MIB"), Some("2048"));
        assert_eq!(get("LABFY_GOVERNOR_PSI_PRESSURE"), Some("12.5"));
        assert_eq!(get("LABFY_GOVERNOR_CORES"), Some("4"));
        assert_eq!(
            get("LABFY_GOVERNOR_SANDBOX_PROGRAMS"),
            Some("python3=/usr/bin/python3 -I -B {script};jq=/usr/bin/jq -f {script}")
        );
        assert_eq!(get("LABFY_GOVERNOR_CGROUP_ROOT"), Some("delegated"));
        assert_eq!(get("LABFY_GOVERNOR_MODEL_CTX"), None);
    }

    #[test]
    fn bad_files_are_refused_with_the_reason() {
        let refused = |text: &str| ConfigFile::parse(text).unwrap_err();
        assert!(refused("[ui]\nprot = 7400\n").contains("unknown field `prot`"));
        assert!(refused("[gouvernor]\n").contains("unknown field `gouvernor`"));
        assert!(refused("[ui]\nport = 70000\n").contains("port"));
        assert!(refused("[ui]\nport = \"7400\"\n").contains("port"));
        assert!(refused("[model]\nllama_server = \"bin/llama-server\"\n").contains("not an absolute path"));
        assert!(refused("[governor]\nsandbox_programs = [\"a=/x;b=/y\"]\n").contains("`;`"));
        // A syntax error says where.
        assert!(refused("[ui\nport = 1\n").contains("line 1"), "{}", refused("[ui\nport = 1\n"));
    }

    #[test]
    fn a_file_others_may_write_or_a_strangers_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("labfy.toml");
        std::fs::write(&path, "[ui]\nport = 7400\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(ConfigFile::load(&path).unwrap().ui.port, Some(7400));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let error = ConfigFile::load(&path).unwrap_err();
        assert!(error.contains("can be written by others (mode 666)"), "{error}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o620)).unwrap();
        assert!(ConfigFile::load(&path).unwrap_err().contains("written by others"));
        assert!(ConfigFile::load(dir.path()).unwrap_err().contains("not a regular file"));
        assert!(ConfigFile::load(&dir.path().join("absent.toml")).unwrap_err().contains("absent.toml"));
        // SAFETY: geteuid(2) cannot fail.
        #[allow(unsafe_code)]
        if unsafe { libc::geteuid() } == 0 {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            std::os::unix::fs::chown(&path, Some(65534), None).unwrap();
            let error = ConfigFile::load(&path).unwrap_err();
            assert!(error.contains("belongs to uid 65534"), "{error}");
        }
    }

    #[test]
    fn the_file_is_found_on_the_command_line_before_any_double_dash() {
        let args = |a: &[&str]| a.iter().map(std::ffi::OsString::from).collect::<Vec<_>>();
        assert_eq!(named(&args(&["labfy", "up", "--config", "/etc/x.toml"])), Some("/etc/x.toml".into()));
        assert_eq!(named(&args(&["labfy", "up", "--config=/etc/y.toml", "--port", "1"])), Some("/etc/y.toml".into()));
        // The environment may name one; only the absence of both is None.
        if std::env::var_os("LABFY_CONFIG").is_none() {
            assert_eq!(named(&args(&["labfy", "up", "--", "--config", "/x"])), None);
            assert_eq!(named(&args(&["labfy", "status"])), None);
        }
    }
}
