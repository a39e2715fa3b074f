//! AMD GPUs through amdgpu sysfs, no library (SPEC Q1).
//!
//! Under `<drm_root>/cardN/device/` (`drm_root` is `/sys/class/drm`), a card
//! whose `vendor` is [`AMD_VENDOR_ID`] exposes `mem_info_vram_{total,used}`,
//! `mem_info_gtt_{total,used}` (bytes), `gpu_busy_percent` (0-100) and, under
//! `hwmon/hwmon*/`, `temp*_input` (m°C) and `power1_average` or `power1_input`
//! (µW). Connector entries (`card0-DP-1`), render nodes and other vendors are
//! skipped. A value that cannot be read or is out of range is `None` plus a
//! fact naming the card and the file.
//!
//! Discovery (listing the DRM and hwmon directories) is cached in
//! [`AmdProbe`] and redone every [`REDISCOVERY_INTERVAL`]; a sample only
//! reads the ~10 small files of each card.

use std::fs;
use std::ops::RangeInclusive;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use labfy_ipc::messages::governor::{GpuSample, GpuVendor};

use super::read::{ReadError, read_bounded, read_number};

/// PCI vendor id of AMD, as sysfs writes it.
pub const AMD_VENDOR_ID: &str = "0x1002";

/// `source` of a card read from sysfs alone.
pub const SOURCE_SYSFS: &str = "amdgpu sysfs";

/// UMA rule (SPEC Q1): a card is a UMA APU when its VRAM total is at most
/// this (a BIOS carve-out, typically 512 MiB) **and** its GTT total is larger
/// than its VRAM total, i.e. the GPU works mostly out of system memory.
/// Unknown totals give `uma: false`. An APU whose carve-out was raised above
/// 1 GiB in firmware reads as discrete; its GTT figures are reported anyway.
pub const UMA_MAX_VRAM_BYTES: u64 = 1 << 30;

/// Valid `gpu_busy_percent`.
pub const BUSY_PERCENT_RANGE: RangeInclusive<u64> = 0..=100;

/// Plausible temperatures, millidegrees Celsius; outside is a broken sensor.
pub const TEMPERATURE_RANGE_MC: RangeInclusive<i64> = -50_000..=200_000;

/// Plausible power draw, microwatts (0 to 2 kW).
pub const POWER_RANGE_UW: RangeInclusive<u64> = 0..=2_000_000_000;

/// Memory figures, bytes (any non-negative `u64`).
pub const BYTES_RANGE: RangeInclusive<u64> = 0..=u64::MAX;

/// Most entries looked at in the DRM directory.
pub const MAX_DRM_ENTRIES: usize = 1024;

/// Most entries looked at in one hwmon directory.
pub const MAX_HWMON_ENTRIES: usize = 256;

/// How often [`AmdProbe`] lists the DRM and hwmon directories again.
pub const REDISCOVERY_INTERVAL: Duration = Duration::from_secs(30);

/// One AMD card found under the DRM directory, with its files located.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmdCard {
    /// `cardN`.
    pub id: String,
    /// PCI address (`0000:03:00.0`), or the card name when none was found.
    pub name: String,
    /// `<drm_root>/cardN/device`.
    pub device_dir: PathBuf,
    /// The `hwmon/hwmon*` directories, sorted.
    pub hwmon_dirs: Vec<PathBuf>,
    /// Every `temp*_input` in them, sorted.
    pub temp_inputs: Vec<PathBuf>,
}

/// True for a UMA APU under the [`UMA_MAX_VRAM_BYTES`] rule.
pub fn is_uma(vram_total: Option<u64>, gtt_total: Option<u64>) -> bool {
    match (vram_total, gtt_total) {
        (Some(vram), Some(gtt)) => vram <= UMA_MAX_VRAM_BYTES && gtt > vram,
        _ => false,
    }
}

/// `cardN` with N all digits (not `card0-DP-1`, not `renderD128`).
fn card_number(name: &str) -> Option<u32> {
    let digits = name.strip_prefix("card")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The card's PCI address: the basename of the `device` symlink's target,
/// else `PCI_SLOT_NAME=` of `device/uevent`, else the card id.
fn pci_name(id: &str, device_dir: &Path) -> String {
    if let Some(base) = fs::read_link(device_dir).ok().as_deref().and_then(Path::file_name) {
        return base.to_string_lossy().into_owned();
    }
    let uevent = read_bounded(&device_dir.join("uevent")).unwrap_or_default();
    match uevent.lines().find_map(|l| l.trim().strip_prefix("PCI_SLOT_NAME=")) {
        Some(slot) if !slot.is_empty() => slot.to_owned(),
        _ => id.to_owned(),
    }
}

/// Sorted names of a directory's entries whose name passes `keep`, at most `max`.
fn list_sorted(dir: &Path, max: usize, keep: impl Fn(&str) -> bool) -> std::io::Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in fs::read_dir(dir)?.take(max) {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if keep(&name) {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// Finds the AMD cards under `drm_root` and locates their hwmon files.
/// Returns the cards (by card number) and facts about what could not be read.
/// A missing `drm_root` is no card and no fact (a machine without a GPU
/// driver); the caller reports "no GPU found".
pub fn discover_cards(drm_root: &Path) -> (Vec<AmdCard>, Vec<String>) {
    let mut facts = Vec::new();
    let mut numbered = Vec::new();
    match fs::read_dir(drm_root) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (Vec::new(), facts),
        Err(e) => {
            facts.push(format!("amdgpu: {} unreadable ({e})", drm_root.display()));
            return (Vec::new(), facts);
        }
        Ok(entries) => {
            for entry in entries.take(MAX_DRM_ENTRIES).flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                if let Some(n) = card_number(&name) {
                    numbered.push((n, name));
                }
            }
        }
    }
    numbered.sort();
    let mut cards = Vec::new();
    for (_, id) in numbered {
        let device_dir = drm_root.join(&id).join("device");
        match read_bounded(&device_dir.join("vendor")) {
            Ok(v) if v.trim().eq_ignore_ascii_case(AMD_VENDOR_ID) => {}
            Ok(_) => continue,                  // another vendor (NVIDIA goes through NVML)
            Err(ReadError::Absent) => continue, // not a PCI device (virtual display)
            Err(e) => {
                facts.push(format!("{id}: vendor {e}"));
                continue;
            }
        }
        let name = pci_name(&id, &device_dir);
        let hwmon_root = device_dir.join("hwmon");
        let hwmon_dirs: Vec<PathBuf> = list_sorted(&hwmon_root, MAX_HWMON_ENTRIES, |n| n.starts_with("hwmon"))
            .unwrap_or_default()
            .into_iter()
            .map(|n| hwmon_root.join(n))
            .collect();
        let mut temp_inputs = Vec::new();
        for dir in &hwmon_dirs {
            let temps = list_sorted(dir, MAX_HWMON_ENTRIES, |n| n.starts_with("temp") && n.ends_with("_input"));
            temp_inputs.extend(temps.unwrap_or_default().into_iter().map(|n| dir.join(n)));
        }
        cards.push(AmdCard { id, name, device_dir, hwmon_dirs, temp_inputs });
    }
    (cards, facts)
}

/// Reads one card's figures. Never panics: each unreadable figure is `None`
/// and a fact.
pub fn read_card(card: &AmdCard) -> (GpuSample, Vec<String>) {
    let mut facts = Vec::new();
    let who = card.id.as_str();
    let dev = &card.device_dir;
    let mut bytes = |file: &str| read_number(&dev.join(file), who, file, &BYTES_RANGE, &mut facts);
    let vram_total = bytes("mem_info_vram_total");
    let vram_used = bytes("mem_info_vram_used");
    let gtt_total = bytes("mem_info_gtt_total");
    let gtt_used = bytes("mem_info_gtt_used");
    let busy_percent =
        read_number(&dev.join("gpu_busy_percent"), who, "gpu_busy_percent", &BUSY_PERCENT_RANGE, &mut facts)
            .and_then(|b| u8::try_from(b).ok()); // within 0..=100, always fits
    for (used, total, kind) in [(vram_used, vram_total, "VRAM"), (gtt_used, gtt_total, "GTT")] {
        match (used, total) {
            (Some(u), Some(t)) if u > t => facts.push(format!("{who}: {kind} used {u} exceeds total {t}")),
            _ => {}
        }
    }

    let (temperature_mc, power_uw) = if card.hwmon_dirs.is_empty() {
        facts.push(format!("{who}: no hwmon directory (temperature and power unknown)"));
        (None, None)
    } else {
        let mut highest: Option<i64> = None;
        for path in &card.temp_inputs {
            let file = path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
            if let Some(t) = read_number(path, who, &file, &TEMPERATURE_RANGE_MC, &mut facts) {
                highest = Some(highest.map_or(t, |h| h.max(t)));
            }
        }
        if card.temp_inputs.is_empty() {
            facts.push(format!("{who}: no hwmon temp*_input"));
        }
        (highest, read_power(card, &mut facts))
    };

    let sample = GpuSample {
        id: card.id.clone(),
        vendor: GpuVendor::Amd,
        name: card.name.clone(),
        uma: is_uma(vram_total, gtt_total),
        vram_total,
        vram_used,
        gtt_total,
        gtt_used,
        busy_percent,
        temperature_mc,
        power_uw,
        source: SOURCE_SYSFS.to_owned(),
    };
    (sample, facts)
}

/// `power1_average`, else `power1_input`, from the first hwmon directory that has one.
fn read_power(card: &AmdCard, facts: &mut Vec<String>) -> Option<u64> {
    for dir in &card.hwmon_dirs {
        for file in ["power1_average", "power1_input"] {
            let path = dir.join(file);
            if path.exists() {
                return read_number(&path, &card.id, file, &POWER_RANGE_UW, facts);
            }
        }
    }
    facts.push(format!("{}: no hwmon power1_average or power1_input", card.id));
    None
}

/// Discovers and reads every AMD card under `drm_root` in one go (no cache).
pub fn read_cards(drm_root: &Path) -> (Vec<GpuSample>, Vec<String>) {
    let (cards, mut facts) = discover_cards(drm_root);
    let mut samples = Vec::with_capacity(cards.len());
    for card in &cards {
        let (sample, card_facts) = read_card(card);
        samples.push(sample);
        facts.extend(card_facts);
    }
    (samples, facts)
}

/// The cached AMD sysfs probe: discovery every [`REDISCOVERY_INTERVAL`],
/// small reads every sample.
#[derive(Debug)]
pub struct AmdProbe {
    drm_root: PathBuf,
    cards: Vec<AmdCard>,
    discovery_facts: Vec<String>,
    next_discovery: Option<Instant>,
}

impl AmdProbe {
    /// A probe of the cards under `drm_root`; nothing is read yet.
    pub fn new(drm_root: PathBuf) -> Self {
        Self { drm_root, cards: Vec::new(), discovery_facts: Vec::new(), next_discovery: None }
    }

    /// Reads every card, rediscovering first when the interval has passed.
    pub fn sample_at(&mut self, now: Instant) -> (Vec<GpuSample>, Vec<String>) {
        if self.next_discovery.is_none_or(|at| now >= at) {
            let (cards, facts) = discover_cards(&self.drm_root);
            self.cards = cards;
            self.discovery_facts = facts;
            self.next_discovery = Some(now + REDISCOVERY_INTERVAL);
        }
        let mut facts = self.discovery_facts.clone();
        let mut samples = Vec::with_capacity(self.cards.len());
        for card in &self.cards {
            let (sample, card_facts) = read_card(card);
            samples.push(sample);
            facts.extend(card_facts);
        }
        (samples, facts)
    }

    /// The cards found by the last discovery.
    pub fn cards(&self) -> &[AmdCard] {
        &self.cards
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn uma_rule_edges() {
        assert!(is_uma(Some(UMA_MAX_VRAM_BYTES), Some(UMA_MAX_VRAM_BYTES + 1)));
        assert!(!is_uma(Some(UMA_MAX_VRAM_BYTES + 1), Some(15 * GIB)));
        assert!(!is_uma(Some(512 << 20), Some(512 << 20)));
        assert!(!is_uma(None, Some(15 * GIB)));
        assert!(!is_uma(Some(512 << 20), None));
        assert!(!is_uma(Some(16 * GIB), Some(15 * GIB)));
    }

    #[test]
    fn card_names() {
        assert_eq!(card_number("card0"), Some(0));
        assert_eq!(card_number("card12"), Some(12));
        assert_eq!(card_number("card0-DP-1"), None);
        assert_eq!(card_number("card"), None);
        assert_eq!(card_number("renderD128"), None);
        assert_eq!(card_number("version"), None);
    }

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }

    #[test]
    fn name_from_symlink_then_uevent_then_card() {
        let root = tempfile::tempdir().unwrap();
        let real = root.path().join("devices/0000:0a:00.0");
        fs::create_dir_all(&real).unwrap();
        fs::create_dir_all(root.path().join("card0")).unwrap();
        std::os::unix::fs::symlink(&real, root.path().join("card0/device")).unwrap();
        assert_eq!(pci_name("card0", &root.path().join("card0/device")), "0000:0a:00.0");
        write(&root.path().join("card1/device/uevent"), "DRIVER=amdgpu\nPCI_SLOT_NAME=0000:0b:00.0\n");
        assert_eq!(pci_name("card1", &root.path().join("card1/device")), "0000:0b:00.0");
        write(&root.path().join("card2/device/uevent"), "DRIVER=amdgpu\n");
        assert_eq!(pci_name("card2", &root.path().join("card2/device")), "card2");
    }

    #[test]
    fn rediscovers_only_after_the_interval() {
        let root = tempfile::tempdir().unwrap();
        let dev = root.path().join("card0/device");
        write(&dev.join("vendor"), "0x1002\n");
        for f in ["mem_info_vram_total", "mem_info_vram_used", "mem_info_gtt_total", "mem_info_gtt_used"] {
            write(&dev.join(f), "1\n");
        }
        write(&dev.join("gpu_busy_percent"), "3\n");
        let mut probe = AmdProbe::new(root.path().to_path_buf());
        let t0 = Instant::now();
        assert_eq!(probe.sample_at(t0).0.len(), 1);
        // A second card appears: unseen until the interval has passed.
        let dev1 = root.path().join("card1/device");
        write(&dev1.join("vendor"), "0x1002\n");
        assert_eq!(probe.sample_at(t0 + Duration::from_secs(1)).0.len(), 1);
        assert_eq!(probe.sample_at(t0 + REDISCOVERY_INTERVAL).0.len(), 2);
        assert_eq!(probe.cards().len(), 2);
    }

    #[test]
    fn absent_drm_root_is_no_card_and_no_fact() {
        let root = tempfile::tempdir().unwrap();
        let (cards, facts) = read_cards(&root.path().join("nope"));
        assert!(cards.is_empty());
        assert!(facts.is_empty());
    }
}
