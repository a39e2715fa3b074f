//! Host memory (RAM, swap through sysinfo) and memory pressure (PSI from
//! `<proc_root>/pressure/memory`) (SPEC Q1, Q4).
//!
//! The `sysinfo::System` is built once with memory only and refreshed for
//! memory only each sample (one read of `/proc/meminfo`). PSI is read each
//! sample; when the file is absent (kernel without PSI) that is detected once,
//! logged once, not retried, and the same fact is carried in every sample.

use std::path::{Path, PathBuf};

use labfy_ipc::messages::governor::{HostSample, Psi};
use sysinfo::{MemoryRefreshKind, RefreshKind, System};

use super::read::{ReadError, quote, read_bounded};

/// Valid PSI averages, percent.
pub const PSI_RANGE: std::ops::RangeInclusive<f64> = 0.0..=100.0;

/// Parses `/proc/pressure/memory`:
///
/// ```text
/// some avg10=0.00 avg60=0.00 avg300=0.00 total=0
/// full avg10=0.00 avg60=0.00 avg300=0.00 total=0
/// ```
///
/// Both lines must carry an `avg10` in [`PSI_RANGE`]; otherwise `None`.
pub fn parse_psi(text: &str) -> Option<Psi> {
    let avg10 = |kind: &str| -> Option<f64> {
        let line = text.lines().find(|l| l.split_whitespace().next() == Some(kind))?;
        let value = line.split_whitespace().find_map(|t| t.strip_prefix("avg10="))?;
        let v: f64 = value.parse().ok()?;
        (v.is_finite() && PSI_RANGE.contains(&v)).then_some(v)
    };
    Some(Psi { some_avg10: avg10("some")?, full_avg10: avg10("full")? })
}

/// The host memory and pressure probe.
#[derive(Debug)]
pub struct HostProbe {
    system: Option<System>,
    /// Why `system` is `None`.
    system_fact: Option<String>,
    psi_path: PathBuf,
    /// Set once the PSI file was found absent: not read again.
    psi_absent_fact: Option<String>,
}

impl HostProbe {
    /// Builds the memory-only `System` (never fails: an error is a fact).
    pub fn new(proc_root: &Path) -> Self {
        let kind = RefreshKind::nothing().with_memory(MemoryRefreshKind::everything());
        let (system, system_fact) = match System::new_with_specifics(kind) {
            Ok(s) => (Some(s), None),
            Err(e) => (None, Some(format!("host memory unreadable (sysinfo: {e}); RAM and swap read as 0"))),
        };
        Self { system, system_fact, psi_path: proc_root.join("pressure").join("memory"), psi_absent_fact: None }
    }

    /// Refreshes memory and reads PSI, pushing facts for what could not be read.
    pub fn sample(&mut self, facts: &mut Vec<String>) -> HostSample {
        let mut host = HostSample {
            ram_total: 0,
            ram_used: 0,
            ram_available: 0,
            swap_total: 0,
            swap_used: 0,
            psi: self.read_psi(facts),
        };
        match &mut self.system {
            Some(system) => {
                system.refresh_memory_specifics(MemoryRefreshKind::everything());
                host.ram_total = system.total_memory();
                host.ram_used = system.used_memory();
                host.ram_available = system.available_memory();
                host.swap_total = system.total_swap();
                host.swap_used = system.used_swap();
                if host.ram_total == 0 {
                    facts.push("host memory unreadable (sysinfo reports 0 bytes of RAM)".to_owned());
                }
            }
            None => facts.extend(self.system_fact.iter().cloned()),
        }
        host
    }

    fn read_psi(&mut self, facts: &mut Vec<String>) -> Option<Psi> {
        if let Some(fact) = &self.psi_absent_fact {
            facts.push(fact.clone());
            return None;
        }
        let shown = self.psi_path.display();
        match read_bounded(&self.psi_path) {
            Ok(text) => {
                let psi = parse_psi(&text);
                if psi.is_none() {
                    facts.push(format!("PSI unreadable: {shown} malformed ({})", quote(&text)));
                }
                psi
            }
            Err(ReadError::Absent) => {
                let fact = format!("PSI not available: {shown} absent");
                tracing::info!("{fact}");
                facts.push(fact.clone());
                self.psi_absent_fact = Some(fact);
                None
            }
            Err(e) => {
                facts.push(format!("PSI {shown} {e}"));
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn parses_both_lines() {
        let text =
            "some avg10=1.50 avg60=0.20 avg300=0.00 total=1234\nfull avg10=0.75 avg60=0.10 avg300=0.00 total=99\n";
        assert_eq!(parse_psi(text), Some(Psi { some_avg10: 1.5, full_avg10: 0.75 }));
        let edge = "some avg10=100.00 avg60=0 avg300=0 total=0\nfull avg10=0.00 avg60=0 avg300=0 total=0\n";
        assert_eq!(parse_psi(edge), Some(Psi { some_avg10: 100.0, full_avg10: 0.0 }));
    }

    #[test]
    fn refuses_malformed_input() {
        assert_eq!(parse_psi(""), None);
        assert_eq!(parse_psi("some avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"), None, "no full line");
        assert_eq!(parse_psi("some avg10=abc\nfull avg10=0.00\n"), None);
        assert_eq!(parse_psi("some avg10=100.01\nfull avg10=0.00\n"), None);
        assert_eq!(parse_psi("some avg10=-1\nfull avg10=0.00\n"), None);
        assert_eq!(parse_psi("some avg10=NaN\nfull avg10=0.00\n"), None);
        assert_eq!(parse_psi("somewhat avg10=1\nfull avg10=0.00\n"), None);
    }

    #[test]
    fn absent_psi_is_detected_once_and_reported_every_sample() {
        let root = tempfile::tempdir().unwrap();
        let mut probe = HostProbe::new(root.path());
        let mut facts = Vec::new();
        assert_eq!(probe.sample(&mut facts).psi, None);
        assert!(probe.psi_absent_fact.is_some());
        // Appearing later is not seen: the absence was recorded once.
        std::fs::create_dir_all(root.path().join("pressure")).unwrap();
        std::fs::write(root.path().join("pressure/memory"), "some avg10=1 \nfull avg10=1\n").unwrap();
        let mut again = Vec::new();
        assert_eq!(probe.sample(&mut again).psi, None);
        let psi_facts = |f: &[String]| f.iter().filter(|f| f.starts_with("PSI not available: ")).count();
        assert_eq!((psi_facts(&facts), psi_facts(&again)), (1, 1));
    }
}
