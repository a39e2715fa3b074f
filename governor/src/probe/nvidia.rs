//! NVIDIA GPUs through NVML (`nvml-wrapper`, which loads `libnvidia-ml.so.1`
//! at run time) (SPEC Q1).
//!
//! NVML is initialised once ([`NvidiaProbe::init`]); without the library the
//! error is one fact and no crash. Each sample asks every device for memory,
//! utilisation, temperature and power; [`to_sample`] turns the answers into a
//! [`GpuSample`] (pure, unit-tested). The calls into a real NVML cannot be
//! tested on the development machine (no NVIDIA library).

use labfy_ipc::messages::governor::{GpuSample, GpuVendor};
use nvml_wrapper::Nvml;
use nvml_wrapper::enum_wrappers::device::TemperatureSensor;

/// `source` of an NVIDIA GPU.
pub const SOURCE_NVML: &str = "NVML";

/// Most devices asked of NVML.
pub const MAX_DEVICES: u32 = 64;

/// Highest plausible GPU temperature, °C (NVML reports whole degrees).
pub const MAX_TEMPERATURE_C: u32 = 200;

/// What NVML answered for one device; `Err` holds the error text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NvidiaReadings {
    /// PCI bus id (`00000000:01:00.0`) or product name.
    pub name: Result<String, String>,
    /// (total, used) bytes.
    pub memory: Result<(u64, u64), String>,
    /// GPU utilisation, percent.
    pub utilization_percent: Result<u32, String>,
    /// GPU core temperature, °C.
    pub temperature_c: Result<u32, String>,
    /// Power draw, milliwatts.
    pub power_mw: Result<u32, String>,
}

/// Builds the sample of device `index` (`nvidia<index>`) from NVML's answers.
/// A failed or implausible answer is `None` and a fact.
pub fn to_sample(index: u32, r: &NvidiaReadings) -> (GpuSample, Vec<String>) {
    let id = format!("nvidia{index}");
    let mut facts = Vec::new();
    let mut ok = |what: &str, res: &Result<u32, String>, max: u32| match res {
        Ok(v) if *v <= max => Some(*v),
        Ok(v) => {
            facts.push(format!("{id}: {what} out of range ({v})"));
            None
        }
        Err(e) => {
            facts.push(format!("{id}: {what} unreadable ({e})"));
            None
        }
    };
    let busy = ok("utilization", &r.utilization_percent, 100).and_then(|v| u8::try_from(v).ok());
    let temperature = ok("temperature", &r.temperature_c, MAX_TEMPERATURE_C).map(|c| i64::from(c) * 1000);
    let power = ok("power", &r.power_mw, u32::MAX).map(|mw| u64::from(mw) * 1000);
    let (vram_total, vram_used) = match &r.memory {
        Ok((total, used)) => (Some(*total), Some(*used)),
        Err(e) => {
            facts.push(format!("{id}: memory info unreadable ({e})"));
            (None, None)
        }
    };
    let name = match &r.name {
        Ok(n) => n.clone(),
        Err(e) => {
            facts.push(format!("{id}: PCI bus id unreadable ({e})"));
            id.clone()
        }
    };
    let sample = GpuSample {
        id,
        vendor: GpuVendor::Nvidia,
        name,
        uma: false,
        vram_total,
        vram_used,
        gtt_total: None,
        gtt_used: None,
        busy_percent: busy,
        temperature_mc: temperature,
        power_uw: power,
        source: SOURCE_NVML.to_owned(),
    };
    (sample, facts)
}

/// An initialised NVML.
pub struct NvidiaProbe {
    nvml: Nvml,
}

impl std::fmt::Debug for NvidiaProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvidiaProbe").finish_non_exhaustive()
    }
}

impl NvidiaProbe {
    /// `Nvml::init()`; the error is the fact to report (`NVML not loaded: …`).
    pub fn init() -> Result<Self, String> {
        Nvml::init().map(|nvml| Self { nvml }).map_err(|e| format!("NVML not loaded: {e}"))
    }

    /// Reads every device.
    pub fn read(&self) -> (Vec<GpuSample>, Vec<String>) {
        let mut facts = Vec::new();
        let count = match self.nvml.device_count() {
            Ok(n) => n,
            Err(e) => {
                facts.push(format!("NVML: device count unreadable ({e})"));
                return (Vec::new(), facts);
            }
        };
        let mut samples = Vec::new();
        for index in 0..count.min(MAX_DEVICES) {
            let device = match self.nvml.device_by_index(index) {
                Ok(d) => d,
                Err(e) => {
                    facts.push(format!("nvidia{index}: unreadable ({e})"));
                    continue;
                }
            };
            let text = |e: nvml_wrapper::error::NvmlError| e.to_string();
            let readings = NvidiaReadings {
                name: device.pci_info().map(|p| p.bus_id.to_ascii_lowercase()).map_err(text),
                memory: device.memory_info().map(|m| (m.total, m.used)).map_err(text),
                utilization_percent: device.utilization_rates().map(|u| u.gpu).map_err(text),
                temperature_c: device.temperature(TemperatureSensor::Gpu).map_err(text),
                power_mw: device.power_usage().map_err(text),
            };
            let (sample, device_facts) = to_sample(index, &readings);
            samples.push(sample);
            facts.extend(device_facts);
        }
        (samples, facts)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn converts_units_and_refuses_implausible_values() {
        let r = NvidiaReadings {
            name: Ok("00000000:01:00.0".into()),
            memory: Ok((24 << 30, 1 << 30)),
            utilization_percent: Ok(101),
            temperature_c: Ok(64),
            power_mw: Ok(250_000),
        };
        let (s, facts) = to_sample(1, &r);
        assert_eq!(s.id, "nvidia1");
        assert_eq!(s.vendor, GpuVendor::Nvidia);
        assert_eq!(s.name, "00000000:01:00.0");
        assert_eq!((s.vram_total, s.vram_used), (Some(24 << 30), Some(1 << 30)));
        assert_eq!(s.busy_percent, None);
        assert_eq!(s.temperature_mc, Some(64_000));
        assert_eq!(s.power_uw, Some(250_000_000));
        assert_eq!(s.source, SOURCE_NVML);
        assert_eq!(facts, vec!["nvidia1: utilization out of range (101)".to_owned()]);
    }

    #[test]
    fn errors_become_none_and_facts() {
        let err = "Not Supported".to_owned();
        let r = NvidiaReadings {
            name: Err(err.clone()),
            memory: Err(err.clone()),
            utilization_percent: Ok(100),
            temperature_c: Err(err.clone()),
            power_mw: Err(err),
        };
        let (s, facts) = to_sample(0, &r);
        assert_eq!(s.name, "nvidia0");
        assert_eq!(s.busy_percent, Some(100));
        assert_eq!((s.vram_total, s.temperature_mc, s.power_uw), (None, None, None));
        assert_eq!(facts.len(), 4, "{facts:?}");
    }

    #[test]
    fn absent_library_is_a_fact() {
        // No libnvidia-ml on the development machine; where it is installed
        // this only checks that init and read do not panic.
        match NvidiaProbe::init() {
            Err(fact) => assert!(fact.starts_with("NVML not loaded: "), "{fact}"),
            Ok(probe) => {
                let _ = probe.read();
            }
        }
    }
}
