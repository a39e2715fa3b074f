//! Whether this process is off the network, as a kernel fact (SPEC P2): the
//! network interfaces it can see. In the namespace the supervisor gives it
//! there is only `lo`; anywhere else it shares the host's interfaces. Beside
//! it, the protections of its confinement this platform could not give
//! (SPEC T1: said loudly), as the supervisor applied it
//! (`LABFY_CONFINEMENT_MISSING`), for the UI's badge.

use serde::Serialize;

/// What the server knows about its own network isolation.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Isolation {
    /// True when loopback is the only interface this process can see.
    pub isolated: bool,
    /// One line for the UI and the log.
    pub detail: String,
    /// Protections of its confinement missing on this platform, as codes
    /// the UI translates: `landlock`, `seccomp`, `proc`.
    pub missing: Vec<String>,
}

/// The codes [`Isolation::missing`] may hold.
pub const MISSING_CODES: [&str; 3] = ["landlock", "seccomp", "proc"];

impl Isolation {
    /// Reads `/proc/self/net/dev`, and the missing protections the
    /// supervisor named.
    pub fn detect() -> Self {
        let mut me = match std::fs::read_to_string("/proc/self/net/dev") {
            Ok(text) => Self::from_net_dev(&text),
            Err(e) => {
                Self { isolated: false, detail: format!("cannot read /proc/self/net/dev: {e}"), missing: Vec::new() }
            }
        };
        me.missing = Self::missing_from(std::env::var("LABFY_CONFINEMENT_MISSING").ok().as_deref());
        me
    }

    /// The known codes of a comma-separated list (others are dropped).
    pub fn missing_from(list: Option<&str>) -> Vec<String> {
        list.unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|c| MISSING_CODES.contains(c))
            .map(str::to_owned)
            .collect()
    }

    /// Decides from the text of `/proc/<pid>/net/dev`.
    pub fn from_net_dev(text: &str) -> Self {
        let names: Vec<&str> = text.lines().skip(2).filter_map(|l| l.split(':').next()).map(str::trim).collect();
        if names == ["lo"] {
            Self { isolated: true, detail: "own network namespace: loopback only".into(), missing: Vec::new() }
        } else {
            Self {
                isolated: false,
                detail: format!("shares a network with interfaces: {}", names.join(", ")),
                missing: Vec::new(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEAD: &str = "Inter-|   Receive\n face |bytes    packets\n";

    #[test]
    fn loopback_alone_is_isolated_anything_else_is_not() {
        assert!(Isolation::from_net_dev(&format!("{HEAD}    lo: 0 0 0\n")).isolated);
        let host = Isolation::from_net_dev(&format!("{HEAD}    lo: 0 0\n  eth0: 1 2\n"));
        assert!(!host.isolated);
        assert!(host.detail.contains("eth0"));
        assert!(!Isolation::from_net_dev(HEAD).isolated, "no interface at all is not a namespace we made");
    }

    #[test]
    fn missing_protections_are_known_codes_only() {
        assert_eq!(Isolation::missing_from(Some("landlock,proc")), ["landlock", "proc"]);
        assert_eq!(Isolation::missing_from(Some("landlock, <b>x</b>,,seccomp")), ["landlock", "seccomp"]);
        assert!(Isolation::missing_from(Some("")).is_empty());
        assert!(Isolation::missing_from(None).is_empty());
    }
}
