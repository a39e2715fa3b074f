//! The agent's configuration: demo or local model, explicit, built once and
//! validated once (SPEC M4; STYLE 11).
//!
//! Sources, per setting, the flag first and then the environment variable:
//!
//! | setting  | flag               | variable                            |
//! |----------|--------------------|-------------------------------------|
//! | mode     | `--agent-mode`     | `LABFY_AGENT_MODE`                  |
//! | endpoint | `--agent-endpoint` | `LABFY_AGENT_MODEL_ENDPOINT`        |
//! | model    | `--agent-model`    | `LABFY_AGENT_MODEL_ID`              |
//! | timeout  | `--agent-timeout`  | `LABFY_AGENT_MODEL_TIMEOUT_SECONDS` |
//!
//! Rules:
//! - Nothing set: the deterministic demo agent ([`AgentMode::Demo`]).
//! - Mode `local-model`: the endpoint and the model id are required; the
//!   timeout defaults to [`DEFAULT_TIMEOUT_SECS`]. A missing or refused
//!   endpoint is a configuration error — never a silent fallback to the demo
//!   agent (M4).
//! - A model setting (endpoint, model, timeout) without mode `local-model` is
//!   an error too: it says the operator meant a local model, and running the
//!   demo agent instead would be exactly the silent fallback M4 forbids.
//! - An environment variable set to the empty string counts as unset (shells
//!   write `VAR=` to clear); an empty flag is a value, and refused as such.
//! - The endpoint [`GOVERNED`] names the model the governor runs (SPEC D1,
//!   M11): its Unix socket in the supervisor's runtime directory, which the
//!   caller knows ([`AgentMode::resolve`]); without one it is refused.

use std::fmt;
use std::time::Duration;

use labfy_core::bounded::truncate_chars;

use super::endpoint::{Endpoint, EndpointError};

/// Shortest model request deadline, in seconds (M4).
pub const MIN_TIMEOUT_SECS: u64 = 1;
/// Longest model request deadline, in seconds (M4).
pub const MAX_TIMEOUT_SECS: u64 = 600;
/// Deadline when none is configured, in seconds: a 9B model on a busy box
/// makes a few tokens a second (notes/llama-server.md).
pub const DEFAULT_TIMEOUT_SECS: u64 = 120;
/// Longest model id, in bytes.
pub const MAX_MODEL_ID_LEN: usize = 128;

/// Flag naming the agent mode.
pub const FLAG_MODE: &str = "--agent-mode";
/// Flag naming the model endpoint.
pub const FLAG_ENDPOINT: &str = "--agent-endpoint";
/// Flag naming the model id.
pub const FLAG_MODEL: &str = "--agent-model";
/// Flag naming the request deadline in seconds.
pub const FLAG_TIMEOUT: &str = "--agent-timeout";
/// Variable naming the agent mode.
pub const ENV_MODE: &str = "LABFY_AGENT_MODE";
/// Variable naming the model endpoint.
pub const ENV_ENDPOINT: &str = "LABFY_AGENT_MODEL_ENDPOINT";
/// Variable naming the model id.
pub const ENV_MODEL: &str = "LABFY_AGENT_MODEL_ID";
/// Variable naming the request deadline in seconds.
pub const ENV_TIMEOUT: &str = "LABFY_AGENT_MODEL_TIMEOUT_SECONDS";

/// Value of the mode setting for the deterministic demo agent.
pub const MODE_DEMO: &str = "demo";
/// Value of the mode setting for a local model.
pub const MODE_LOCAL_MODEL: &str = "local-model";
/// Value of the endpoint setting for the model the governor runs
/// (`labfy model start`), on its Unix socket (SPEC D1).
pub const GOVERNED: &str = "governed";

/// How many characters of a refused value an error may quote.
const QUOTE_CHARS: usize = 32;

/// The agent flags as given on the command line, unparsed: parsing and
/// validation happen once, in [`AgentMode::from_env_and_flags`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentFlags {
    /// `--agent-mode`: `demo` or `local-model`.
    pub mode: Option<String>,
    /// `--agent-endpoint`: `http://127.0.0.1:<port>` or `http://[::1]:<port>`.
    pub endpoint: Option<String>,
    /// `--agent-model`: the model id sent in requests and shown in the UI.
    pub model: Option<String>,
    /// `--agent-timeout`: the request deadline in whole seconds.
    pub timeout: Option<String>,
}

/// Which agent runs (SPEC M4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentMode {
    /// The deterministic demo agent: no model, no model endpoint.
    Demo,
    /// A local OpenAI-compatible model server on loopback.
    LocalModel(ModelConfig),
}

/// A validated local model configuration (SPEC M3, M4). Immutable: the only
/// way to build one is [`ModelConfig::new`] (or [`AgentMode::from_env_and_flags`]),
/// which checks every field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelConfig {
    endpoint: Endpoint,
    model: String,
    timeout: Duration,
}

/// Why the agent configuration was refused (SPEC M4). Each names the flag or
/// variable it came from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The mode is neither `demo` nor `local-model`.
    #[error("{setting}: unknown agent mode {value:?} (expected \"demo\" or \"local-model\")")]
    UnknownMode {
        /// The flag or variable that gave it.
        setting: &'static str,
        /// The value, cut to a few characters.
        value: String,
    },
    /// Mode `local-model` without an endpoint.
    #[error(
        "agent mode local-model needs an endpoint ({FLAG_ENDPOINT} or {ENV_ENDPOINT}); \
         there is no fallback to the demo agent"
    )]
    MissingEndpoint,
    /// The endpoint `governed` where no supervisor's runtime directory is
    /// known (a server started by hand without `--runtime-dir`).
    #[error(
        "{setting}: \"governed\" names the model `labfy model start` runs, on a socket in the runtime \
         directory of labfy up; this process has none (give --runtime-dir, or an http:// or unix: endpoint)"
    )]
    GovernedWithoutRuntime {
        /// The flag or variable that gave it.
        setting: &'static str,
    },
    /// Mode `local-model` without a model id.
    #[error("agent mode local-model needs a model id ({FLAG_MODEL} or {ENV_MODEL})")]
    MissingModel,
    /// The endpoint was refused (SPEC M3).
    #[error("{setting}: {reason}")]
    Endpoint {
        /// The flag or variable that gave it.
        setting: &'static str,
        /// Why it was refused.
        #[source]
        reason: EndpointError,
    },
    /// The model id was refused.
    #[error("{setting}: {reason}")]
    Model {
        /// The flag or variable that gave it (`model` when built in code).
        setting: &'static str,
        /// Why it was refused.
        reason: ModelIdError,
    },
    /// The timeout was refused.
    #[error("{setting}: {reason}")]
    Timeout {
        /// The flag or variable that gave it (`timeout` when built in code).
        setting: &'static str,
        /// Why it was refused.
        reason: TimeoutError,
    },
    /// A model setting is given but no mode is: the demo agent will not run
    /// in place of the model the operator meant (M4).
    #[error(
        "{setting} is set but no agent mode is: add {FLAG_MODE} local-model \
         (or {ENV_MODE}=local-model), or remove it"
    )]
    SettingWithoutMode {
        /// The flag or variable that is set.
        setting: &'static str,
    },
    /// A model setting is given with mode `demo`: contradictory.
    #[error("{setting} is set but the agent mode is demo: remove it, or choose local-model")]
    SettingInDemoMode {
        /// The flag or variable that is set.
        setting: &'static str,
    },
}

impl From<EndpointError> for ConfigError {
    fn from(reason: EndpointError) -> Self {
        Self::Endpoint { setting: "endpoint", reason }
    }
}

/// Why a model id was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelIdError {
    /// The id is empty.
    #[error("the model id is empty")]
    Empty,
    /// The id is longer than [`MAX_MODEL_ID_LEN`] bytes.
    #[error("the model id is {len} bytes long, more than {max}")]
    TooLong {
        /// Its length in bytes.
        len: usize,
        /// [`MAX_MODEL_ID_LEN`].
        max: usize,
    },
    /// A character outside ASCII letters, digits and `. _ - : / +`.
    #[error("character {0:?} is refused in a model id (letters, digits and . _ - : / + only)")]
    InvalidCharacter(char),
}

/// Why a timeout was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimeoutError {
    /// Not a whole number of seconds written in decimal digits.
    #[error("timeout {spelled:?} is not a whole number of seconds")]
    Invalid {
        /// The value, cut to a few characters.
        spelled: String,
    },
    /// Outside [`MIN_TIMEOUT_SECS`]..=[`MAX_TIMEOUT_SECS`].
    #[error("timeout of {seconds} s is outside {MIN_TIMEOUT_SECS}..={MAX_TIMEOUT_SECS} s")]
    OutOfRange {
        /// The value in whole seconds (rounded down).
        seconds: u64,
    },
}

impl ModelConfig {
    /// Checks and assembles a configuration: the model id (1 to
    /// [`MAX_MODEL_ID_LEN`] bytes of ASCII letters, digits and `. _ - : / +`)
    /// and the timeout ([`MIN_TIMEOUT_SECS`] to [`MAX_TIMEOUT_SECS`]). The
    /// endpoint is valid by construction.
    pub fn new(endpoint: Endpoint, model: impl Into<String>, timeout: Duration) -> Result<Self, ConfigError> {
        let model = model.into();
        validate_model(&model).map_err(|reason| ConfigError::Model { setting: "model", reason })?;
        validate_timeout(timeout).map_err(|reason| ConfigError::Timeout { setting: "timeout", reason })?;
        Ok(Self { endpoint, model, timeout })
    }

    /// Where the model server listens.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The model id: sent as `model` in requests, shown as
    /// `Agent local · <model>` in the UI (M10).
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The deadline of one model request, connection included.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }
}

impl fmt::Display for ModelConfig {
    /// The effective configuration, for `labfy config show` (STYLE 11).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "endpoint={} model={} timeout={}s", self.endpoint, self.model, self.timeout.as_secs())
    }
}

impl AgentMode {
    /// Resolves the mode from the flags and then the environment, per setting
    /// (rules in the module documentation), where no governed model's
    /// socket is known: the endpoint [`GOVERNED`] is refused.
    pub fn from_env_and_flags(flags: &AgentFlags, env: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        Self::resolve(flags, env, None)
    }

    /// Resolves the mode from the flags and then the environment, per setting
    /// (rules in the module documentation). `env` reads one variable; pass
    /// [`process_env`] in a binary and a closure over a map in tests.
    /// `governed` is the governed model's socket
    /// (`labfy_ipc::daemon::model_socket` of the runtime directory), which
    /// the endpoint [`GOVERNED`] stands for.
    pub fn resolve(
        flags: &AgentFlags,
        env: impl Fn(&str) -> Option<String>,
        governed: Option<&std::path::Path>,
    ) -> Result<Self, ConfigError> {
        let pick = |flag_value: &Option<String>, flag: &'static str, var: &'static str| match flag_value {
            Some(value) => Some((value.clone(), flag)),
            None => env(var).filter(|value| !value.is_empty()).map(|value| (value, var)),
        };
        let mode = pick(&flags.mode, FLAG_MODE, ENV_MODE);
        let endpoint = pick(&flags.endpoint, FLAG_ENDPOINT, ENV_ENDPOINT);
        let model = pick(&flags.model, FLAG_MODEL, ENV_MODEL);
        let timeout = pick(&flags.timeout, FLAG_TIMEOUT, ENV_TIMEOUT);
        let first_model_setting =
            [&endpoint, &model, &timeout].into_iter().flatten().map(|(_, setting)| *setting).next();

        let Some((mode, mode_setting)) = mode else {
            return match first_model_setting {
                Some(setting) => Err(ConfigError::SettingWithoutMode { setting }),
                None => Ok(Self::Demo),
            };
        };
        match mode.as_str() {
            MODE_DEMO => match first_model_setting {
                Some(setting) => Err(ConfigError::SettingInDemoMode { setting }),
                None => Ok(Self::Demo),
            },
            MODE_LOCAL_MODEL => {
                let (endpoint, endpoint_setting) = endpoint.ok_or(ConfigError::MissingEndpoint)?;
                let endpoint = match (endpoint.as_str(), governed) {
                    (GOVERNED, Some(socket)) => Endpoint::unix(socket),
                    (GOVERNED, None) => {
                        return Err(ConfigError::GovernedWithoutRuntime { setting: endpoint_setting });
                    }
                    (text, _) => Endpoint::parse(text),
                }
                .map_err(|reason| ConfigError::Endpoint { setting: endpoint_setting, reason })?;
                let (model, model_setting) = model.ok_or(ConfigError::MissingModel)?;
                validate_model(&model).map_err(|reason| ConfigError::Model { setting: model_setting, reason })?;
                let timeout = match timeout {
                    None => Duration::from_secs(DEFAULT_TIMEOUT_SECS),
                    Some((text, setting)) => {
                        parse_timeout(&text).map_err(|reason| ConfigError::Timeout { setting, reason })?
                    }
                };
                Ok(Self::LocalModel(ModelConfig::new(endpoint, model, timeout)?))
            }
            _ => Err(ConfigError::UnknownMode { setting: mode_setting, value: truncate_chars(&mode, QUOTE_CHARS) }),
        }
    }

    /// The model configuration, in local-model mode.
    pub fn model_config(&self) -> Option<&ModelConfig> {
        match self {
            Self::Demo => None,
            Self::LocalModel(config) => Some(config),
        }
    }
}

impl fmt::Display for AgentMode {
    /// The effective mode, for `labfy config show` (STYLE 11).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Demo => f.write_str(MODE_DEMO),
            Self::LocalModel(config) => write!(f, "{MODE_LOCAL_MODEL} {config}"),
        }
    }
}

/// Reads one variable of the process environment for
/// [`AgentMode::from_env_and_flags`]. A value that is not UTF-8 is passed on
/// lossily, so that validation refuses it rather than ignoring it.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var_os(name).map(|value| value.to_string_lossy().into_owned())
}

fn validate_model(model: &str) -> Result<(), ModelIdError> {
    if model.is_empty() {
        return Err(ModelIdError::Empty);
    }
    if model.len() > MAX_MODEL_ID_LEN {
        return Err(ModelIdError::TooLong { len: model.len(), max: MAX_MODEL_ID_LEN });
    }
    match model.chars().find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':' | '/' | '+'))) {
        Some(c) => Err(ModelIdError::InvalidCharacter(c)),
        None => Ok(()),
    }
}

fn validate_timeout(timeout: Duration) -> Result<(), TimeoutError> {
    let range = Duration::from_secs(MIN_TIMEOUT_SECS)..=Duration::from_secs(MAX_TIMEOUT_SECS);
    if range.contains(&timeout) { Ok(()) } else { Err(TimeoutError::OutOfRange { seconds: timeout.as_secs() }) }
}

fn parse_timeout(text: &str) -> Result<Duration, TimeoutError> {
    let invalid = || TimeoutError::Invalid { spelled: truncate_chars(text, QUOTE_CHARS) };
    if text.is_empty() || !text.chars().all(|c| c.is_ascii_digit()) {
        return Err(invalid());
    }
    // Digits only: the parse fails only on overflow, which is out of range.
    let seconds = text.parse::<u64>().map_err(|_| TimeoutError::OutOfRange { seconds: u64::MAX })?;
    let timeout = Duration::from_secs(seconds);
    validate_timeout(timeout)?;
    Ok(timeout)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let map: HashMap<String, String> = pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        move |name| map.get(name).cloned()
    }

    fn flags(mode: Option<&str>, endpoint: Option<&str>, model: Option<&str>, timeout: Option<&str>) -> AgentFlags {
        AgentFlags {
            mode: mode.map(str::to_owned),
            endpoint: endpoint.map(str::to_owned),
            model: model.map(str::to_owned),
            timeout: timeout.map(str::to_owned),
        }
    }

    fn resolve(f: &AgentFlags, env: &[(&str, &str)]) -> Result<AgentMode, ConfigError> {
        AgentMode::from_env_and_flags(f, env_of(env))
    }

    fn local(f: &AgentFlags, env: &[(&str, &str)]) -> ModelConfig {
        match resolve(f, env) {
            Ok(AgentMode::LocalModel(c)) => c,
            other => panic!("expected local-model, got {other:?}"),
        }
    }

    const EP: &str = "http://127.0.0.1:8081";

    #[test]
    fn nothing_set_is_demo() {
        assert_eq!(resolve(&AgentFlags::default(), &[]), Ok(AgentMode::Demo));
        assert_eq!(AgentMode::Demo.model_config(), None);
        assert_eq!(AgentMode::Demo.to_string(), "demo");
    }

    #[test]
    fn governed_is_the_socket_the_caller_knows_and_refused_without_one() {
        let f = flags(Some("local-model"), Some(GOVERNED), Some("gemma"), None);
        let socket = std::path::Path::new("/run/labfy/model/model.sock");
        match AgentMode::resolve(&f, env_of(&[]), Some(socket)) {
            Ok(AgentMode::LocalModel(c)) => {
                assert_eq!(c.endpoint().to_string(), "unix:/run/labfy/model/model.sock");
                assert!(!c.endpoint().is_tcp());
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(resolve(&f, &[]), Err(ConfigError::GovernedWithoutRuntime { setting: FLAG_ENDPOINT }));
        let env = [(ENV_MODE, "local-model"), (ENV_ENDPOINT, GOVERNED), (ENV_MODEL, "gemma")];
        let err = resolve(&AgentFlags::default(), &env).unwrap_err();
        assert!(err.to_string().starts_with(ENV_ENDPOINT), "{err}");
        assert!(err.to_string().contains("--runtime-dir"), "{err}");
        // A runtime directory too deep for a socket address: refused, said.
        let deep = format!("/{}/model.sock", "d".repeat(120));
        let err = AgentMode::resolve(&f, env_of(&[]), Some(std::path::Path::new(&deep))).unwrap_err();
        assert!(err.to_string().contains("longer than a socket address"), "{err}");
    }

    #[test]
    fn explicit_demo_is_demo() {
        assert_eq!(resolve(&flags(Some("demo"), None, None, None), &[]), Ok(AgentMode::Demo));
        assert_eq!(resolve(&AgentFlags::default(), &[(ENV_MODE, "demo")]), Ok(AgentMode::Demo));
    }

    #[test]
    fn local_model_from_flags() {
        let c = local(&flags(Some("local-model"), Some(EP), Some("qwen"), Some("30")), &[]);
        assert_eq!(c.endpoint(), &Endpoint::parse(EP).unwrap());
        assert_eq!(c.model(), "qwen");
        assert_eq!(c.timeout(), Duration::from_secs(30));
        assert_eq!(c.to_string(), "endpoint=http://127.0.0.1:8081 model=qwen timeout=30s");
    }

    #[test]
    fn local_model_from_env_with_default_timeout() {
        let c = local(
            &AgentFlags::default(),
            &[
                (ENV_MODE, "local-model"),
                (ENV_ENDPOINT, "http://[::1]:9000/"),
                (ENV_MODEL, "Huihui-Qwen3.5-9B-Q4_K_M.gguf"),
            ],
        );
        assert_eq!(c.endpoint().to_string(), "http://[::1]:9000");
        assert_eq!(c.model(), "Huihui-Qwen3.5-9B-Q4_K_M.gguf");
        assert_eq!(c.timeout(), Duration::from_secs(DEFAULT_TIMEOUT_SECS));
        let mode = AgentMode::LocalModel(c.clone());
        assert_eq!(mode.model_config(), Some(&c));
        assert!(mode.to_string().starts_with("local-model endpoint=http://[::1]:9000 "));
    }

    #[test]
    fn flags_win_over_env_per_setting() {
        let env = [
            (ENV_MODE, "local-model"),
            (ENV_ENDPOINT, "http://127.0.0.1:9000"),
            (ENV_MODEL, "from-env"),
            (ENV_TIMEOUT, "10"),
        ];
        let c = local(&flags(None, Some(EP), None, None), &env);
        assert_eq!(c.endpoint().port(), Some(8081));
        assert_eq!(c.model(), "from-env");
        assert_eq!(c.timeout(), Duration::from_secs(10));
        let c = local(&flags(None, None, Some("from-flag"), Some("20")), &env);
        assert_eq!(c.endpoint().port(), Some(9000));
        assert_eq!(c.model(), "from-flag");
        assert_eq!(c.timeout(), Duration::from_secs(20));
        // A flag mode wins too, and then the env's model settings contradict it.
        assert_eq!(
            resolve(&flags(Some("demo"), None, None, None), &env),
            Err(ConfigError::SettingInDemoMode { setting: ENV_ENDPOINT })
        );
        // A refused flag value is not replaced by a good env value.
        assert!(matches!(
            resolve(&flags(None, Some("http://localhost:9000"), None, None), &env),
            Err(ConfigError::Endpoint { setting: FLAG_ENDPOINT, reason: EndpointError::Localhost })
        ));
    }

    #[test]
    fn local_model_without_endpoint_is_an_error_not_demo() {
        assert_eq!(resolve(&flags(Some("local-model"), None, Some("m"), None), &[]), Err(ConfigError::MissingEndpoint));
        assert_eq!(
            resolve(&AgentFlags::default(), &[(ENV_MODE, "local-model"), (ENV_MODEL, "m")]),
            Err(ConfigError::MissingEndpoint)
        );
        assert_eq!(
            resolve(&AgentFlags::default(), &[(ENV_MODE, "local-model"), (ENV_ENDPOINT, ""), (ENV_MODEL, "m")]),
            Err(ConfigError::MissingEndpoint)
        );
        assert_eq!(resolve(&flags(Some("local-model"), Some(EP), None, None), &[]), Err(ConfigError::MissingModel));
        let message = ConfigError::MissingEndpoint.to_string();
        assert!(message.contains("--agent-endpoint") && message.contains(ENV_ENDPOINT), "{message}");
    }

    #[test]
    fn model_settings_without_local_model_mode_are_errors() {
        assert_eq!(
            resolve(&AgentFlags::default(), &[(ENV_ENDPOINT, EP)]),
            Err(ConfigError::SettingWithoutMode { setting: ENV_ENDPOINT })
        );
        assert_eq!(
            resolve(&flags(None, None, Some("m"), None), &[]),
            Err(ConfigError::SettingWithoutMode { setting: FLAG_MODEL })
        );
        assert_eq!(
            resolve(&AgentFlags::default(), &[(ENV_TIMEOUT, "30")]),
            Err(ConfigError::SettingWithoutMode { setting: ENV_TIMEOUT })
        );
        assert_eq!(
            resolve(&flags(Some("demo"), Some(EP), None, None), &[]),
            Err(ConfigError::SettingInDemoMode { setting: FLAG_ENDPOINT })
        );
    }

    #[test]
    fn unknown_modes_are_refused() {
        for (value, setting) in [("Local-Model", FLAG_MODE), ("cloud", FLAG_MODE), ("", FLAG_MODE)] {
            assert_eq!(
                resolve(&flags(Some(value), Some(EP), Some("m"), None), &[]),
                Err(ConfigError::UnknownMode { setting, value: value.to_owned() })
            );
        }
        assert_eq!(
            resolve(&AgentFlags::default(), &[(ENV_MODE, "openai")]),
            Err(ConfigError::UnknownMode { setting: ENV_MODE, value: "openai".into() })
        );
        // Empty variables count as unset.
        assert_eq!(resolve(&AgentFlags::default(), &[(ENV_MODE, ""), (ENV_ENDPOINT, "")]), Ok(AgentMode::Demo));
    }

    #[test]
    fn refused_endpoints_name_their_source() {
        let err = resolve(
            &AgentFlags::default(),
            &[(ENV_MODE, "local-model"), (ENV_ENDPOINT, "http://127.0.0.1:8080"), (ENV_MODEL, "m")],
        )
        .unwrap_err();
        assert_eq!(err, ConfigError::Endpoint { setting: ENV_ENDPOINT, reason: EndpointError::Port8080 });
        assert!(err.to_string().starts_with(ENV_ENDPOINT), "{err}");
        assert!(matches!(
            resolve(&flags(Some("local-model"), Some("https://127.0.0.1:8081"), Some("m"), None), &[]),
            Err(ConfigError::Endpoint { setting: FLAG_ENDPOINT, reason: EndpointError::Https })
        ));
    }

    #[test]
    fn timeout_bounds_are_checked_at_the_edges() {
        let with = |t: &str| resolve(&flags(Some("local-model"), Some(EP), Some("m"), Some(t)), &[]);
        let secs = |t: &str| with(t).map(|m| m.model_config().map(ModelConfig::timeout));
        assert_eq!(secs("1"), Ok(Some(Duration::from_secs(MIN_TIMEOUT_SECS))));
        assert_eq!(secs("600"), Ok(Some(Duration::from_secs(MAX_TIMEOUT_SECS))));
        assert_eq!(secs("060"), Ok(Some(Duration::from_secs(60))));
        for (t, seconds) in [("0", 0), ("601", 601), ("99999999999999999999999", u64::MAX)] {
            assert_eq!(
                with(t),
                Err(ConfigError::Timeout { setting: FLAG_TIMEOUT, reason: TimeoutError::OutOfRange { seconds } }),
                "{t}"
            );
        }
        for t in ["", "abc", "+5", "-5", " 5", "5 ", "5s", "1e3", "1.5", "٣"] {
            assert!(matches!(with(t), Err(ConfigError::Timeout { reason: TimeoutError::Invalid { .. }, .. })), "{t:?}");
        }
        let ep = Endpoint::parse(EP).unwrap();
        assert!(ModelConfig::new(ep.clone(), "m", Duration::from_millis(999)).is_err());
        assert!(ModelConfig::new(ep.clone(), "m", Duration::from_millis(1000)).is_ok());
        assert!(ModelConfig::new(ep.clone(), "m", Duration::from_millis(600_000)).is_ok());
        assert!(ModelConfig::new(ep.clone(), "m", Duration::from_millis(600_001)).is_err());
    }

    #[test]
    fn model_ids_are_checked() {
        let ep = Endpoint::parse(EP).unwrap();
        let t = Duration::from_secs(5);
        let model_err = |m: &str| match ModelConfig::new(ep.clone(), m, t) {
            Err(ConfigError::Model { reason, .. }) => reason,
            other => panic!("{m:?}: {other:?}"),
        };
        assert!(ModelConfig::new(ep.clone(), "a".repeat(MAX_MODEL_ID_LEN), t).is_ok());
        assert_eq!(
            model_err(&"a".repeat(MAX_MODEL_ID_LEN + 1)),
            ModelIdError::TooLong { len: MAX_MODEL_ID_LEN + 1, max: MAX_MODEL_ID_LEN }
        );
        assert_eq!(model_err(""), ModelIdError::Empty);
        assert!(ModelConfig::new(ep.clone(), "/models/qwen-9b_Q4:latest+x.gguf", t).is_ok());
        for (m, c) in [("a b", ' '), ("a\nb", '\n'), ("é", 'é'), ("a\"b", '"'), ("a<b", '<'), ("a\u{fffd}", '\u{fffd}')]
        {
            assert_eq!(model_err(m), ModelIdError::InvalidCharacter(c), "{m:?}");
        }
        assert!(matches!(
            resolve(&AgentFlags::default(), &[(ENV_MODE, "local-model"), (ENV_ENDPOINT, EP), (ENV_MODEL, "bad model")]),
            Err(ConfigError::Model { setting: ENV_MODEL, .. })
        ));
    }

    #[test]
    fn process_env_reads_the_real_environment() {
        // PATH is set in any test environment; a random name is not.
        assert!(process_env("PATH").is_some());
        assert_eq!(process_env("LABFY_TEST_SURELY_UNSET_4242"), None);
    }
}
