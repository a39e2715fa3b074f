//! The messages that cross process boundaries: one pair of enums per
//! boundary (STYLE 8). Adding a variant is a protocol change: bump
//! [`PROTOCOL_VERSION`] when an old peer could not understand it. Variants
//! without data are written `Variant {}`: serde lets unknown fields through on
//! unit variants of internally tagged enums, and every message here is closed.

use serde::{Deserialize, Serialize};

/// Version spoken in `Hello`; peers of another version are refused.
pub const PROTOCOL_VERSION: u16 = 1;

/// Which boundary a connection is for. A socket serves exactly one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Boundary {
    /// Supervisor ↔ each child: health and shutdown.
    Control,
    /// Workspace server ↔ governor.
    Governor,
    /// Workspace server ↔ egress.
    Egress,
}

/// A request with the id its response will carry.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request<T> {
    /// Chosen by the caller; echoed in the response.
    pub id: u64,
    /// The request itself.
    pub body: T,
}

/// A response to the request with the same id.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Response<T> {
    /// The request's id.
    pub id: u64,
    /// The answer.
    pub body: T,
}

/// The roles of Labfy's child processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The workspace server.
    Server,
    /// The resource governor.
    Governor,
    /// The egress daemon.
    Egress,
}

/// What a process says about its health.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Health {
    /// Who answers.
    pub role: Role,
    /// Its process id.
    pub pid: u32,
    /// Milliseconds since it started.
    pub uptime_ms: u64,
    /// True when it does its job; false while starting or degraded.
    pub ready: bool,
    /// One short human-readable line.
    pub detail: String,
}

/// A refusal or failure answered instead of a result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Failure {
    /// Stable code (`UNAVAILABLE`, `INVALID_INPUT`, …).
    pub code: String,
    /// Bounded human-readable message.
    pub message: String,
}

/// What the supervisor knows of one child.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChildStatus {
    /// Which child.
    pub role: Role,
    /// `starting`, `healthy`, `unhealthy`, `restarting`, `failed`, `stopping`, `stopped`.
    pub state: String,
    /// Current pid, when running.
    pub pid: Option<u32>,
    /// Restarts since `labfy up` started.
    pub restarts: u32,
    /// Last health detail or failure reason.
    pub detail: String,
}

/// Supervisor ↔ child, and `labfy status` ↔ supervisor.
pub mod control {
    use super::*;

    /// What the supervisor asks a child.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
    pub enum ControlRequest {
        /// Are you alive and ready?
        Health {},
        /// Stop in order: finish or refuse in-flight work, then exit.
        Shutdown {},
        /// The pids allowed on the daemon's service socket (the workspace
        /// server's, after each (re)start). Replaces the previous set.
        SetPeers {
            /// Process ids, as the supervisor sees them.
            pids: Vec<i32>,
        },
        /// Supervisor only: the state of every child (`labfy status`).
        Status {},
    }

    /// What a child answers.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
    pub enum ControlResponse {
        /// Health report.
        Health(Health),
        /// Shutdown accepted; the process exits shortly.
        ShuttingDown {},
        /// The peer set was replaced.
        PeersSet {},
        /// Supervisor only: every child's state.
        Status {
            /// One entry per child.
            children: Vec<ChildStatus>,
        },
        /// Refused or failed.
        Failed(Failure),
    }
}

/// Workspace server ↔ governor. Admission and probes join in their issue.
pub mod governor {
    use super::*;

    /// What the server asks the governor.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
    pub enum GovernorRequest {
        /// Is the governor alive and ready?
        Health {},
    }

    /// What the governor answers.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
    pub enum GovernorResponse {
        /// Health report.
        Health(Health),
        /// Refused or failed.
        Failed(Failure),
    }
}

/// Workspace server ↔ egress. Grant-checked fetches join in their issue.
pub mod egress {
    use super::*;

    /// What the server asks egress.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
    pub enum EgressRequest {
        /// Is egress alive (and is Tor bootstrapped)?
        Health {},
    }

    /// What egress answers.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    #[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
    pub enum EgressResponse {
        /// Health report.
        Health(Health),
        /// Refused or failed.
        Failed(Failure),
    }
}

#[cfg(test)]
mod tests {
    use super::control::*;
    use super::*;

    #[test]
    fn wire_forms_are_stable_and_closed() {
        let r = Request { id: 7, body: ControlRequest::Health {} };
        assert_eq!(serde_json::to_string(&r).unwrap(), r#"{"id":7,"body":{"type":"health"}}"#);
        for bad in [
            r#"{"id":7,"body":{"type":"reboot"}}"#,
            r#"{"id":7,"body":{"type":"health","x":1}}"#,
            r#"{"id":7,"body":{"type":"health"},"extra":true}"#,
            r#"{"id":"7","body":{"type":"health"}}"#,
        ] {
            assert!(serde_json::from_str::<Request<ControlRequest>>(bad).is_err(), "{bad}");
        }
        assert_eq!(serde_json::to_string(&Boundary::Governor).unwrap(), r#""governor""#);
        let health = r#"{"type":"health","role":"server","pid":1,"uptime_ms":2,"ready":true,"detail":"ok"}"#;
        assert!(serde_json::from_str::<ControlResponse>(health).is_ok());
        let extra = r#"{"type":"health","role":"server","pid":1,"uptime_ms":2,"ready":true,"detail":"ok","z":0}"#;
        assert!(serde_json::from_str::<ControlResponse>(extra).is_err());
    }
}
