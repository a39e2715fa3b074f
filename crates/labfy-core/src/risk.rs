//! Risk levels of agent tools (SPEC R1–R6, seed AGENT_TOOL_RISK_LEVELS).

use serde::{Deserialize, Serialize};

/// The worst consequence a tool's contract allows (R1). Static per tool: it
/// never depends on the arguments of a call (R2); a composite tool takes the
/// highest level of any path it can take (R3). It is not data sensitivity,
/// authority or cost, which are separate contract fields (R4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RiskLevel {
    /// Observe, search, compute or propose, with no durable mutation and no
    /// external engagement.
    Low,
    /// A durable but pre-commit mutation: draft-like, reversible or
    /// compensable before any external engagement.
    Medium,
    /// Irreversible or externally observable: any outbound request made for
    /// the agent (R6), a terminal decision, an external assertion.
    High,
}

impl RiskLevel {
    /// The published spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RiskLevel;

    #[test]
    fn levels_are_ordered_worst_last_and_spelled_as_published() {
        assert!(RiskLevel::Low < RiskLevel::Medium && RiskLevel::Medium < RiskLevel::High);
        // R3: a composite takes the maximum of its paths.
        assert_eq!([RiskLevel::Low, RiskLevel::High, RiskLevel::Medium].into_iter().max(), Some(RiskLevel::High));
        for (level, text) in [(RiskLevel::Low, "low"), (RiskLevel::Medium, "medium"), (RiskLevel::High, "high")] {
            assert_eq!(level.as_str(), text);
            assert_eq!(serde_json::to_value(level).unwrap(), text);
        }
    }
}
