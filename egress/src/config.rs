//! Egress's configuration, built and validated once at start (STYLE 11):
//! the data directory (the store egress re-checks grants in, and arti's
//! state and cache under `<data>/egress/arti`), and optionally an operator's
//! arti configuration file.
//!
//! The file is in arti's own TOML format (the keys of arti's `[tor_network]`,
//! `[bridges]`, `[path_rules]`, `[address_filter]`, `[channel]`, … sections)
//! and is deserialized into arti's [`TorClientConfigBuilder`]. Unknown keys
//! are refused, each named; `[storage]` is Labfy's except
//! `[storage.permissions]`. Without a file, arti's defaults: the real Tor
//! network.

use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use arti_client::TorClientConfig;
use arti_client::config::{CfgPath, TorClientConfigBuilder};

use crate::error::ConfigError;

/// Largest arti configuration file egress reads.
pub const MAX_ARTI_CONFIG_BYTES: u64 = 1 << 20;

/// The configuration of one egress process.
#[derive(Debug, Clone)]
pub struct Config {
    /// The data directory (holds `labfy.sqlite3`).
    pub data_dir: PathBuf,
    /// arti's state directory, `<data>/egress/arti/state` (0700).
    pub state_dir: PathBuf,
    /// arti's cache directory, `<data>/egress/arti/cache` (0700).
    pub cache_dir: PathBuf,
    /// The operator's arti configuration file, if one is used.
    pub arti_config: Option<PathBuf>,
    /// The Tor client configuration, built.
    pub tor: TorClientConfig,
}

impl Config {
    /// Builds the configuration: checks the data directory, creates arti's
    /// directories (0700), reads and validates the arti file if any.
    pub fn load(data_dir: &Path, arti_config: Option<&Path>) -> Result<Self, ConfigError> {
        if !data_dir.is_dir() {
            return Err(ConfigError::NoDataDir(data_dir.to_owned()));
        }
        let builder = match arti_config {
            Some(path) => builder_from_file(path)?,
            None => TorClientConfigBuilder::default(),
        };
        let (state_dir, cache_dir) = arti_dirs(data_dir);
        for dir in [data_dir.join("egress"), data_dir.join("egress/arti"), state_dir.clone(), cache_dir.clone()] {
            private_dir(&dir)?;
        }
        let tor = build(builder, &state_dir, &cache_dir, arti_config)?;
        Ok(Self {
            data_dir: data_dir.to_owned(),
            state_dir,
            cache_dir,
            arti_config: arti_config.map(Path::to_owned),
            tor,
        })
    }
}

/// arti's state and cache directories under a data directory.
pub fn arti_dirs(data_dir: &Path) -> (PathBuf, PathBuf) {
    let arti = data_dir.join("egress").join("arti");
    (arti.join("state"), arti.join("cache"))
}

/// Forces Labfy's directories into `builder` and builds it.
pub fn build(
    mut builder: TorClientConfigBuilder,
    state_dir: &Path,
    cache_dir: &Path,
    file: Option<&Path>,
) -> Result<TorClientConfig, ConfigError> {
    builder.storage().state_dir(CfgPath::new_literal(state_dir)).cache_dir(CfgPath::new_literal(cache_dir));
    builder.build().map_err(|e| ConfigError::Invalid {
        path: file.map_or_else(|| PathBuf::from("(arti defaults)"), Path::to_owned),
        message: e.to_string(),
    })
}

/// Reads an arti configuration file (bounded) into a builder.
pub fn builder_from_file(path: &Path) -> Result<TorClientConfigBuilder, ConfigError> {
    let io = |source| ConfigError::Io { path: path.to_owned(), source };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut text = String::new();
    file.take(MAX_ARTI_CONFIG_BYTES + 1).read_to_string(&mut text).map_err(io)?;
    if text.len() as u64 > MAX_ARTI_CONFIG_BYTES {
        return Err(ConfigError::TooLarge { path: path.to_owned(), max: MAX_ARTI_CONFIG_BYTES });
    }
    builder_from_toml(&text, path)
}

/// Parses arti's TOML into a builder: unknown keys are refused (named), and
/// so is any `[storage]` key but `permissions`.
pub fn builder_from_toml(text: &str, path: &Path) -> Result<TorClientConfigBuilder, ConfigError> {
    let syntax = |e: toml::de::Error| ConfigError::Syntax { path: path.to_owned(), message: e.message().to_owned() };
    let table: toml::Table = toml::from_str(text).map_err(syntax)?;
    if let Some(storage) = table.get("storage") {
        let key = match storage.as_table() {
            Some(t) => t.keys().find(|k| k.as_str() != "permissions").map(|k| format!("storage.{k}")),
            None => Some("storage".to_owned()),
        };
        if let Some(key) = key {
            return Err(ConfigError::StorageForced { path: path.to_owned(), key });
        }
    }
    let mut unknown = Vec::new();
    let de = toml::Deserializer::parse(text).map_err(syntax)?;
    let builder: TorClientConfigBuilder =
        serde_ignored::deserialize(de, |p| unknown.push(p.to_string().replace("?.", ""))).map_err(syntax)?;
    if !unknown.is_empty() {
        unknown.sort();
        unknown.dedup();
        return Err(ConfigError::UnknownKeys { path: path.to_owned(), keys: unknown });
    }
    Ok(builder)
}

/// Creates `dir` if needed and makes it 0700 (it is egress's own).
fn private_dir(dir: &Path) -> Result<(), ConfigError> {
    let io = |source| ConfigError::Io { path: dir.to_owned(), source };
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(io)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the private-network harness writes (notes/tor-private-network.md).
    const PRIVATE_NET: &str = r#"
[tor_network]
authorities = { v3idents = ["D8E2D0C24F9A2F8A4B8C7E6D5F4E3D2C1B0A9F8E"] }
fallback_caches = [
  { rsa_identity = "0123456789ABCDEF0123456789ABCDEF01234567", ed_identity = "Qwerty0123456789Qwerty0123456789Qwerty01234", orports = ["127.0.0.1:5101"] },
]

[path_rules]
ipv4_subnet_family_prefix = 33
ipv6_subnet_family_prefix = 129

[address_filter]
allow_local_addrs = true

[storage.permissions]
dangerously_trust_everyone = true
"#;

    fn p() -> &'static Path {
        Path::new("arti.toml")
    }

    #[test]
    fn a_private_network_file_is_accepted_and_its_dirs_are_forced() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("arti.toml");
        std::fs::write(&f, PRIVATE_NET).unwrap();
        let cfg = Config::load(dir.path(), Some(&f)).unwrap();
        assert_eq!(cfg.state_dir, dir.path().join("egress/arti/state"));
        for d in ["egress", "egress/arti", "egress/arti/state", "egress/arti/cache"] {
            let mode = std::fs::metadata(dir.path().join(d)).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o700, "{d}");
        }
        let shown = format!("{:?}", cfg.tor);
        assert!(shown.contains(&cfg.state_dir.display().to_string()), "state dir forced");
        assert!(shown.contains("127.0.0.1:5101"), "fallback kept");
    }

    /// Bridges, plain and through a pluggable transport (arti's own
    /// `[bridges]` section): an operator whose network blocks Tor uses them.
    /// A build without arti's `bridge-client`/`pt-client` features refuses
    /// such a file, so this pins those features.
    #[test]
    fn a_file_with_bridges_is_accepted() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("arti.toml");
        let text = "[bridges]\nenabled = true\nbridges = [\n  \"192.0.2.10:443 0123456789ABCDEF0123456789ABCDEF01234567\",\n  \
                    \"obfs4 192.0.2.11:443 1123456789ABCDEF0123456789ABCDEF01234567 cert=AAAA iat-mode=0\",\n]\n\
                    [[bridges.transports]]\nprotocols = [\"obfs4\"]\npath = \"/usr/bin/obfs4proxy\"\n";
        std::fs::write(&f, text).unwrap();
        let cfg = Config::load(dir.path(), Some(&f)).unwrap_or_else(|e| panic!("{e}"));
        let shown = format!("{:?}", cfg.tor);
        assert!(shown.contains("192.0.2.10") && shown.contains("obfs4"), "bridges kept: {shown}");
    }

    #[test]
    fn defaults_need_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = Config::load(dir.path(), None).unwrap();
        assert!(cfg.arti_config.is_none());
        assert!(Config::load(&dir.path().join("absent"), None).unwrap_err().to_string().contains("does not exist"));
    }

    #[test]
    fn unknown_keys_are_refused_by_name() {
        let e = builder_from_toml("[proxy]\nsocks_listen = 9150\n[path_rules]\nipv4_subnet_family_prefixx = 3\n", p())
            .unwrap_err();
        let m = e.to_string();
        assert!(matches!(e, ConfigError::UnknownKeys { .. }), "{m}");
        assert!(m.contains("proxy") && m.contains("path_rules.ipv4_subnet_family_prefixx"), "{m}");
    }

    #[test]
    fn storage_is_labfys() {
        for (text, key) in [
            ("[storage]\nstate_dir = \"/tmp/elsewhere\"\n", "storage.state_dir"),
            ("[storage]\ncache_dir = \"/tmp/elsewhere\"\n", "storage.cache_dir"),
            ("storage = 3\n", "storage"),
        ] {
            let e = builder_from_toml(text, p()).unwrap_err();
            assert!(matches!(&e, ConfigError::StorageForced { key: k, .. } if k == key), "{e}");
        }
        assert!(builder_from_toml("[storage.permissions]\ndangerously_trust_everyone = true\n", p()).is_ok());
    }

    #[test]
    fn bad_files_say_why() {
        let e = builder_from_toml("[path_rules\n", p()).unwrap_err();
        assert!(matches!(e, ConfigError::Syntax { .. }), "{e}");
        let e = builder_from_toml("[path_rules]\nipv4_subnet_family_prefix = \"many\"\n", p()).unwrap_err();
        assert!(matches!(e, ConfigError::Syntax { .. }), "{e}");
        // Custom authorities without fallbacks: arti's own consistency check.
        let dir = tempfile::tempdir().unwrap();
        let b = builder_from_toml(
            "[tor_network]\nauthorities = { v3idents = [\"D8E2D0C24F9A2F8A4B8C7E6D5F4E3D2C1B0A9F8E\"] }\n",
            p(),
        )
        .unwrap();
        let e = build(b, &dir.path().join("s"), &dir.path().join("c"), Some(p())).unwrap_err();
        assert!(matches!(e, ConfigError::Invalid { .. }), "{e}");
        let big = dir.path().join("big.toml");
        std::fs::write(&big, "#".repeat(MAX_ARTI_CONFIG_BYTES as usize + 1)).unwrap();
        assert!(matches!(builder_from_file(&big).unwrap_err(), ConfigError::TooLarge { .. }));
        assert!(matches!(builder_from_file(&dir.path().join("none")).unwrap_err(), ConfigError::Io { .. }));
    }
}
