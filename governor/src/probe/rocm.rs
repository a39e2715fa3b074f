//! ROCm SMI cross-check of the amdgpu sysfs figures (SPEC Q1).
//!
//! `librocm_smi64` is loaded at run time with `libloading` (a binary linked
//! against it would not start without it; see the platform notes), using only
//! symbols Debian 12's librocm-smi 5.2.3 has: `rsmi_init`,
//! `rsmi_num_monitor_devices`, `rsmi_dev_pci_id_get`,
//! `rsmi_dev_memory_total_get`, `rsmi_dev_memory_usage_get`, `rsmi_shut_down`.
//! An absent library is one fact and the sysfs figures stand alone.
//!
//! Where both sources give a memory figure, [`merge_pessimistic`] keeps the
//! most pessimistic one (higher used, lower total) and names both values in a
//! fact when they differ by more than [`MERGE_TOLERANCE_BYTES`].
//!
//! Testing: the merge and the PCI id decoding are pure and unit-tested. The
//! loading and the calls into the library cannot be tested on the development
//! machine (no AMD GPU, no librocm-smi); only "absent library ⇒ a fact" is
//! tested there.

use labfy_ipc::messages::governor::GpuSample;
use libloading::Library;

/// Library file names tried, in order.
pub const LIBRARY_NAMES: [&str; 2] = ["librocm_smi64.so.1", "librocm_smi64.so"];

/// `RSMI_MEM_TYPE_VRAM` of `rsmi_memory_type_t`.
pub const RSMI_MEM_TYPE_VRAM: u32 = 0;

/// `RSMI_MEM_TYPE_GTT` of `rsmi_memory_type_t`.
pub const RSMI_MEM_TYPE_GTT: u32 = 2;

/// `RSMI_STATUS_SUCCESS` of `rsmi_status_t`.
pub const RSMI_STATUS_SUCCESS: u32 = 0;

/// Two sources differing by at most this many bytes agree (the figures are
/// read microseconds apart; allocations move them a little). The most
/// pessimistic figure is kept either way; only a larger gap is a fact.
pub const MERGE_TOLERANCE_BYTES: u64 = 16 << 20;

/// `source` of a card whose figures were cross-checked with ROCm SMI.
pub const SOURCE_MERGED: &str = "amdgpu sysfs + ROCm SMI";

/// Most devices asked of ROCm SMI.
pub const MAX_DEVICES: u32 = 64;

/// What ROCm SMI reports for one device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RocmReading {
    /// PCI address, as sysfs writes it (`0000:03:00.0`).
    pub pci_address: String,
    /// VRAM total, bytes.
    pub vram_total: Option<u64>,
    /// VRAM used, bytes.
    pub vram_used: Option<u64>,
    /// GTT total, bytes.
    pub gtt_total: Option<u64>,
    /// GTT used, bytes.
    pub gtt_used: Option<u64>,
}

/// Decodes `rsmi_dev_pci_id_get`'s BDF id
/// (`domain << 32 | bus << 8 | device << 3 | function`) into a PCI address.
pub fn bdfid_to_pci_address(bdfid: u64) -> String {
    let domain = (bdfid >> 32) & 0xffff_ffff;
    let bus = (bdfid >> 8) & 0xff;
    let device = (bdfid >> 3) & 0x1f;
    let function = bdfid & 0x7;
    format!("{domain:04x}:{bus:02x}:{device:02x}.{function:x}")
}

/// Which way is pessimistic for a figure.
#[derive(Clone, Copy)]
enum Worse {
    Higher,
    Lower,
}

fn merge_one(
    who: &str,
    what: &str,
    sysfs: Option<u64>,
    rocm: Option<u64>,
    worse: Worse,
    facts: &mut Vec<String>,
) -> Option<u64> {
    match (sysfs, rocm) {
        (Some(s), Some(r)) => {
            if s.abs_diff(r) > MERGE_TOLERANCE_BYTES {
                facts.push(format!(
                    "{who}: {what} differs: amdgpu sysfs {s}, ROCm SMI {r}; keeping the most pessimistic"
                ));
            }
            Some(match worse {
                Worse::Higher => s.max(r),
                Worse::Lower => s.min(r),
            })
        }
        (s, r) => s.or(r),
    }
}

/// Merges ROCm SMI's figures into a sysfs sample: for each figure both give,
/// the most pessimistic (higher used, lower total), with a fact naming both
/// values when they differ by more than [`MERGE_TOLERANCE_BYTES`]; a figure
/// only ROCm SMI gives fills the gap. `source` becomes [`SOURCE_MERGED`].
/// Returns the facts.
pub fn merge_pessimistic(gpu: &mut GpuSample, rocm: &RocmReading) -> Vec<String> {
    let mut facts = Vec::new();
    let who = gpu.id.clone();
    gpu.vram_total = merge_one(&who, "VRAM total", gpu.vram_total, rocm.vram_total, Worse::Lower, &mut facts);
    gpu.vram_used = merge_one(&who, "VRAM used", gpu.vram_used, rocm.vram_used, Worse::Higher, &mut facts);
    gpu.gtt_total = merge_one(&who, "GTT total", gpu.gtt_total, rocm.gtt_total, Worse::Lower, &mut facts);
    gpu.gtt_used = merge_one(&who, "GTT used", gpu.gtt_used, rocm.gtt_used, Worse::Higher, &mut facts);
    gpu.uma = super::amd::is_uma(gpu.vram_total, gpu.gtt_total);
    gpu.source = SOURCE_MERGED.to_owned();
    facts
}

/// Matches ROCm SMI devices to sysfs cards by PCI address (case-insensitive)
/// and merges each pair with [`merge_pessimistic`]. A ROCm SMI device with no
/// sysfs card is a fact. Returns the facts.
pub fn merge_all(gpus: &mut [GpuSample], readings: &[RocmReading]) -> Vec<String> {
    let mut facts = Vec::new();
    for reading in readings {
        match gpus.iter_mut().find(|g| g.name.eq_ignore_ascii_case(&reading.pci_address)) {
            Some(gpu) => facts.extend(merge_pessimistic(gpu, reading)),
            None => facts.push(format!("ROCm SMI device {} has no amdgpu sysfs card", reading.pci_address)),
        }
    }
    facts
}

type InitFn = unsafe extern "C" fn(u64) -> u32;
type NumDevicesFn = unsafe extern "C" fn(*mut u32) -> u32;
type PciIdFn = unsafe extern "C" fn(u32, *mut u64) -> u32;
type MemoryFn = unsafe extern "C" fn(u32, u32, *mut u64) -> u32;
type ShutDownFn = unsafe extern "C" fn() -> u32;

/// A loaded and initialised ROCm SMI. Devices and their PCI addresses are
/// read once at load; each [`RocmSmi::read`] asks only the memory figures.
/// `rsmi_shut_down` runs on drop, before the library is unloaded.
pub struct RocmSmi {
    memory_total: MemoryFn,
    memory_usage: MemoryFn,
    shut_down: ShutDownFn,
    /// (device index, PCI address).
    devices: Vec<(u32, String)>,
    // Last: the function pointers above point into it.
    _library: Library,
}

impl std::fmt::Debug for RocmSmi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RocmSmi").field("devices", &self.devices).finish_non_exhaustive()
    }
}

#[allow(unsafe_code)]
fn open_library(name: &str) -> Result<Library, libloading::Error> {
    // SAFETY: loading runs the library's initialisers; librocm_smi64 is a
    // system library whose initialisers only set up its own state.
    unsafe { Library::new(name) }
}

#[allow(unsafe_code)]
fn symbol<T: Copy>(library: &Library, name: &[u8]) -> Result<T, String> {
    // SAFETY: each `T` used below is the C prototype of the symbol of that
    // name in rocm_smi.h (5.2.3): `rsmi_status_t` and `rsmi_memory_type_t`
    // are C enums (32-bit), indices are `uint32_t`, figures `uint64_t *`. The
    // copied function pointer is only called while `library` is alive
    // (`RocmSmi` owns both and drops the library last).
    unsafe { library.get::<T>(name).map(|s| *s).map_err(|e| e.to_string()) }
}

/// Calls a function that writes one value through a pointer; `Err` is a non-success status.
fn call_out<V: Default>(f: impl FnOnce(*mut V) -> u32) -> Result<V, u32> {
    let mut value = V::default();
    let status = f(&mut value);
    if status == RSMI_STATUS_SUCCESS { Ok(value) } else { Err(status) }
}

impl RocmSmi {
    /// Loads the library (each of [`LIBRARY_NAMES`] in turn), resolves the
    /// symbols, calls `rsmi_init(0)` and lists the devices. The error is the
    /// fact to report (`ROCm SMI not loaded: …`).
    pub fn load() -> Result<Self, String> {
        let mut errors = Vec::new();
        let library = LIBRARY_NAMES.iter().find_map(|name| match open_library(name) {
            Ok(lib) => Some(lib),
            Err(e) => {
                errors.push(e.to_string());
                None
            }
        });
        let Some(library) = library else {
            return Err(format!("ROCm SMI not loaded: {}", errors.join("; ")));
        };
        let fail = |e: String| format!("ROCm SMI not loaded: {e}");
        let init: InitFn = symbol(&library, b"rsmi_init\0").map_err(fail)?;
        let num_devices: NumDevicesFn = symbol(&library, b"rsmi_num_monitor_devices\0").map_err(fail)?;
        let pci_id: PciIdFn = symbol(&library, b"rsmi_dev_pci_id_get\0").map_err(fail)?;
        let memory_total: MemoryFn = symbol(&library, b"rsmi_dev_memory_total_get\0").map_err(fail)?;
        let memory_usage: MemoryFn = symbol(&library, b"rsmi_dev_memory_usage_get\0").map_err(fail)?;
        let shut_down: ShutDownFn = symbol(&library, b"rsmi_shut_down\0").map_err(fail)?;

        #[allow(unsafe_code)]
        // SAFETY: `rsmi_init(uint64_t init_flags)`, 0 = default flags; the library is loaded.
        let status = unsafe { init(0) };
        if status != RSMI_STATUS_SUCCESS {
            return Err(format!("ROCm SMI not loaded: rsmi_init returned status {status}"));
        }
        let mut smi = Self { memory_total, memory_usage, shut_down, devices: Vec::new(), _library: library };
        #[allow(unsafe_code)]
        // SAFETY: `rsmi_num_monitor_devices(uint32_t *)` writes one u32 through a valid pointer.
        let count = call_out::<u32>(|p| unsafe { num_devices(p) });
        let count = count.map_err(|s| format!("ROCm SMI not loaded: rsmi_num_monitor_devices returned status {s}"))?;
        for index in 0..count.min(MAX_DEVICES) {
            #[allow(unsafe_code)]
            // SAFETY: `rsmi_dev_pci_id_get(uint32_t, uint64_t *)`; index < the device count.
            let bdfid = call_out::<u64>(|p| unsafe { pci_id(index, p) });
            if let Ok(bdfid) = bdfid {
                smi.devices.push((index, bdfid_to_pci_address(bdfid)));
            }
        }
        Ok(smi)
    }

    /// The devices found at load: (index, PCI address).
    pub fn devices(&self) -> &[(u32, String)] {
        &self.devices
    }

    /// Reads VRAM and GTT total and used of every device. A failed call is a
    /// `None` figure and a fact.
    pub fn read(&self) -> (Vec<RocmReading>, Vec<String>) {
        let mut facts = Vec::new();
        let mut readings = Vec::with_capacity(self.devices.len());
        for (index, address) in &self.devices {
            let index = *index;
            let mut get = |f: MemoryFn, kind: u32, what: &str| {
                #[allow(unsafe_code)]
                // SAFETY: `rsmi_dev_memory_{total,usage}_get(uint32_t, rsmi_memory_type_t, uint64_t *)`;
                // `kind` is a valid memory type, index < the device count, the pointer is valid.
                let r = call_out::<u64>(|p| unsafe { f(index, kind, p) });
                r.map_err(|s| facts.push(format!("ROCm SMI {address}: {what} returned status {s}"))).ok()
            };
            let vram_total = get(self.memory_total, RSMI_MEM_TYPE_VRAM, "VRAM total");
            let vram_used = get(self.memory_usage, RSMI_MEM_TYPE_VRAM, "VRAM used");
            let gtt_total = get(self.memory_total, RSMI_MEM_TYPE_GTT, "GTT total");
            let gtt_used = get(self.memory_usage, RSMI_MEM_TYPE_GTT, "GTT used");
            readings.push(RocmReading { pci_address: address.clone(), vram_total, vram_used, gtt_total, gtt_used });
        }
        (readings, facts)
    }
}

impl Drop for RocmSmi {
    #[allow(unsafe_code)]
    fn drop(&mut self) {
        // SAFETY: `rsmi_shut_down(void)` after a successful `rsmi_init`; the
        // library field is dropped only after this body returns.
        let _status = unsafe { (self.shut_down)() };
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use labfy_ipc::messages::governor::GpuVendor;

    const GIB: u64 = 1 << 30;

    fn sysfs_gpu() -> GpuSample {
        GpuSample {
            id: "card0".into(),
            vendor: GpuVendor::Amd,
            name: "0000:03:00.0".into(),
            uma: false,
            vram_total: Some(16 * GIB),
            vram_used: Some(2 * GIB),
            gtt_total: Some(8 * GIB),
            gtt_used: None,
            busy_percent: Some(7),
            temperature_mc: Some(45_000),
            power_uw: Some(30_000_000),
            source: super::super::amd::SOURCE_SYSFS.into(),
        }
    }

    #[test]
    fn bdfid_decoding() {
        assert_eq!(bdfid_to_pci_address(0x0300), "0000:03:00.0");
        assert_eq!(bdfid_to_pci_address((1 << 32) | (0xc1 << 8) | (0x1f << 3) | 7), "0001:c1:1f.7");
    }

    #[test]
    fn merge_keeps_the_most_pessimistic_and_names_both_values() {
        let mut gpu = sysfs_gpu();
        let rocm = RocmReading {
            pci_address: "0000:03:00.0".into(),
            vram_total: Some(15 * GIB),
            vram_used: Some(3 * GIB),
            gtt_total: Some(8 * GIB + MERGE_TOLERANCE_BYTES), // within tolerance
            gtt_used: Some(GIB),                              // fills a gap
        };
        let facts = merge_pessimistic(&mut gpu, &rocm);
        assert_eq!(gpu.vram_total, Some(15 * GIB));
        assert_eq!(gpu.vram_used, Some(3 * GIB));
        assert_eq!(gpu.gtt_total, Some(8 * GIB));
        assert_eq!(gpu.gtt_used, Some(GIB));
        assert_eq!(gpu.source, SOURCE_MERGED);
        assert_eq!(
            facts,
            vec![
                format!(
                    "card0: VRAM total differs: amdgpu sysfs {}, ROCm SMI {}; keeping the most pessimistic",
                    16 * GIB,
                    15 * GIB
                ),
                format!(
                    "card0: VRAM used differs: amdgpu sysfs {}, ROCm SMI {}; keeping the most pessimistic",
                    2 * GIB,
                    3 * GIB
                ),
            ]
        );
    }

    #[test]
    fn merge_tolerance_edge() {
        let mut gpu = sysfs_gpu();
        let mut rocm = RocmReading {
            pci_address: gpu.name.clone(),
            vram_total: None,
            vram_used: Some(2 * GIB + MERGE_TOLERANCE_BYTES),
            gtt_total: None,
            gtt_used: None,
        };
        let facts = merge_pessimistic(&mut gpu, &rocm);
        assert!(facts.is_empty(), "{facts:?}");
        assert_eq!(gpu.vram_used, Some(2 * GIB + MERGE_TOLERANCE_BYTES));
        assert_eq!(gpu.vram_total, Some(16 * GIB), "sysfs figure kept when ROCm SMI has none");

        let mut gpu = sysfs_gpu();
        rocm.vram_used = Some(2 * GIB + MERGE_TOLERANCE_BYTES + 1);
        assert_eq!(merge_pessimistic(&mut gpu, &rocm).len(), 1);
    }

    #[test]
    fn merge_all_matches_by_pci_address() {
        let mut gpus = vec![sysfs_gpu()];
        let same = RocmReading {
            pci_address: "0000:03:00.0".into(),
            vram_total: Some(16 * GIB),
            vram_used: Some(2 * GIB),
            gtt_total: Some(8 * GIB),
            gtt_used: Some(0),
        };
        let stray = RocmReading { pci_address: "0000:04:00.0".into(), ..same.clone() };
        let facts = merge_all(&mut gpus, &[same, stray]);
        assert_eq!(facts, vec!["ROCm SMI device 0000:04:00.0 has no amdgpu sysfs card".to_owned()]);
        assert_eq!(gpus[0].source, SOURCE_MERGED);
        assert_eq!(gpus[0].gtt_used, Some(0));
    }

    #[test]
    fn merge_recomputes_uma_from_merged_totals() {
        let mut gpu = sysfs_gpu();
        gpu.vram_total = None;
        let rocm = RocmReading {
            pci_address: gpu.name.clone(),
            vram_total: Some(512 << 20),
            vram_used: None,
            gtt_total: None,
            gtt_used: None,
        };
        merge_pessimistic(&mut gpu, &rocm);
        assert!(gpu.uma);
    }

    #[test]
    fn absent_library_is_a_fact() {
        // No librocm-smi on the development machine; where it is installed
        // this test only checks that loading does not panic.
        match RocmSmi::load() {
            Err(fact) => assert!(fact.starts_with("ROCm SMI not loaded: "), "{fact}"),
            Ok(smi) => {
                let (readings, _) = smi.read();
                assert_eq!(readings.len(), smi.devices().len());
            }
        }
    }
}
