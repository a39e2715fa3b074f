//! Whether this process is off the network, as a kernel fact (SPEC P2): the
//! network interfaces it can see. In the namespace the supervisor gives it
//! there is only `lo`; anywhere else it shares the host's interfaces.

use serde::Serialize;

/// What the server knows about its own network isolation.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Isolation {
    /// True when loopback is the only interface this process can see.
    pub isolated: bool,
    /// One line for the UI and the log.
    pub detail: String,
}

impl Isolation {
    /// Reads `/proc/self/net/dev`.
    pub fn detect() -> Self {
        match std::fs::read_to_string("/proc/self/net/dev") {
            Ok(text) => Self::from_net_dev(&text),
            Err(e) => Self { isolated: false, detail: format!("cannot read /proc/self/net/dev: {e}") },
        }
    }

    /// Decides from the text of `/proc/<pid>/net/dev`.
    pub fn from_net_dev(text: &str) -> Self {
        let names: Vec<&str> = text.lines().skip(2).filter_map(|l| l.split(':').next()).map(str::trim).collect();
        if names == ["lo"] {
            Self { isolated: true, detail: "own network namespace: loopback only".into() }
        } else {
            Self { isolated: false, detail: format!("shares a network with interfaces: {}", names.join(", ")) }
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
}
