//! One process's GPU memory on AMD, from the DRM fdinfo the amdgpu driver
//! writes for each open device file (SPEC Q1; issue 45, L4) — what ROCm SMI
//! would say per process, without it.
//!
//! `/proc/<pid>/fdinfo/<fd>` of a DRM file holds `key:\tvalue` lines
//! (the kernel's `drm-usage-stats`): `drm-driver: amdgpu`, `drm-pdev` (the
//! card's PCI address), `drm-client-id` (one per DRM file description: two
//! descriptors of one client count once), and its memory by region. Kernels
//! from 6.11 write `drm-total-vram` / `drm-total-gtt` (sizes in bytes,
//! `KiB` or `MiB`) beside the older `drm-memory-vram` / `drm-memory-gtt`
//! (KiB), which older kernels write alone; the newer wins when both are
//! there. Other descriptors (sockets, files, another driver's) are skipped.

use std::collections::BTreeMap;
use std::path::Path;

use labfy_ipc::messages::governor::GpuMemoryUse;

use super::read::read_bounded;

/// The driver whose fdinfo is read.
pub const DRIVER: &str = "amdgpu";

/// `source` of the figures.
pub const SOURCE: &str = "amdgpu fdinfo";

/// Most descriptors of one process looked at.
pub const MAX_FDS: usize = 4096;

/// One DRM client's memory, as one fdinfo says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrmClient {
    /// The card's PCI address (`0000:03:00.0`).
    pub pdev: String,
    /// The client's id on that card.
    pub client_id: u64,
    /// VRAM, bytes.
    pub vram: u64,
    /// GTT (system memory the GPU maps), bytes.
    pub gtt: u64,
}

/// A size as fdinfo writes it: bytes, or with `KiB`, `MiB` or `GiB`.
fn size(value: &str) -> Option<u64> {
    let mut words = value.split_whitespace();
    let n: u64 = words.next()?.parse().ok()?;
    let unit = match words.next() {
        None => 1,
        Some("KiB") => 1 << 10,
        Some("MiB") => 1 << 20,
        Some("GiB") => 1 << 30,
        Some(_) => return None,
    };
    if words.next().is_some() {
        return None;
    }
    n.checked_mul(unit)
}

/// Reads one fdinfo: the client it describes, when it is an amdgpu DRM
/// file with an id and a card; `None` otherwise.
pub fn parse(text: &str) -> Option<DrmClient> {
    let mut fields = BTreeMap::new();
    for line in text.lines() {
        if let Some((k, v)) = line.split_once(':') {
            fields.insert(k.trim(), v.trim());
        }
    }
    if fields.get("drm-driver") != Some(&DRIVER) {
        return None;
    }
    let region = |name: &str| {
        fields
            .get(format!("drm-total-{name}").as_str())
            .or_else(|| fields.get(format!("drm-memory-{name}").as_str()))
            .and_then(|v| size(v))
            .unwrap_or(0)
    };
    Some(DrmClient {
        pdev: (*fields.get("drm-pdev")?).to_owned(),
        client_id: fields.get("drm-client-id")?.parse().ok()?,
        vram: region("vram"),
        gtt: region("gtt"),
    })
}

/// The GPU memory process `pid` holds, per card: its clients counted once
/// each, summed by card. Empty when it has no amdgpu file open; an error
/// when its descriptors cannot be listed (gone, or not ours to read).
pub fn of_process(proc_root: &Path, pid: u32) -> Result<Vec<GpuMemoryUse>, String> {
    let dir = proc_root.join(pid.to_string()).join("fdinfo");
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut clients: BTreeMap<(String, u64), DrmClient> = BTreeMap::new();
    for entry in entries.take(MAX_FDS).flatten() {
        let Ok(text) = read_bounded(&entry.path()) else { continue };
        if let Some(c) = parse(&text) {
            clients.insert((c.pdev.clone(), c.client_id), c);
        }
    }
    let mut cards: BTreeMap<String, GpuMemoryUse> = BTreeMap::new();
    for c in clients.into_values() {
        let card = cards.entry(c.pdev.clone()).or_insert_with(|| GpuMemoryUse {
            pdev: c.pdev.clone(),
            vram: 0,
            gtt: 0,
            source: SOURCE.to_owned(),
        });
        card.vram = card.vram.saturating_add(c.vram);
        card.gtt = card.gtt.saturating_add(c.gtt);
    }
    Ok(cards.into_values().collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)] // tests fail loudly by design

    use super::*;

    /// A 6.11+ kernel's amdgpu fdinfo (from the patch that added the
    /// `drm-total-*` keys), legacy keys kept beside.
    const NEW: &str = "pos:\t0\nflags:\t02100002\nmnt_id:\t26\nino:\t1070\ndrm-driver:\tamdgpu\ndrm-client-id:\t30\n\
        drm-pdev:\t0000:04:00.0\npasid:\t32785\ndrm-total-cpu:\t0\ndrm-shared-cpu:\t0\ndrm-active-cpu:\t0\n\
        drm-resident-cpu:\t0\ndrm-total-gtt:\t22 MiB\ndrm-shared-gtt:\t0\ndrm-active-gtt:\t10 MiB\n\
        drm-resident-gtt:\t22 MiB\ndrm-total-vram:\t544428 KiB\ndrm-shared-vram:\t13584 KiB\n\
        drm-active-vram:\t260356 KiB\ndrm-resident-vram:\t544428 KiB\ndrm-memory-vram:\t544428 KiB\n\
        drm-memory-gtt: \t22528 KiB\ndrm-memory-cpu: \t0 KiB\namd-memory-visible-vram:\t544428 KiB\n\
        amd-evicted-vram:\t0 KiB\namd-requested-vram:\t544428 KiB\namd-requested-gtt:\t22528 KiB\n\
        drm-engine-gfx:\t39456116802 ns\n";

    /// An older kernel's: `drm-memory-*` in KiB alone.
    const OLD: &str = "pos:\t0\nflags:\t02100002\nmnt_id:\t24\ndrm-driver:\tamdgpu\ndrm-pdev:\t0000:03:00.0\n\
        drm-client-id:\t8\ndrm-engine-gfx:\t120 ns\ndrm-engine-compute:\t0 ns\ndrm-memory-vram:\t4096 KiB\n\
        drm-memory-gtt: \t2048 KiB\ndrm-memory-cpu: \t0 KiB\namd-memory-visible-vram:\t0 KiB\n";

    #[test]
    fn both_kernels_formats_are_read() {
        assert_eq!(
            parse(NEW),
            Some(DrmClient { pdev: "0000:04:00.0".into(), client_id: 30, vram: 544_428 * 1024, gtt: 22 << 20 })
        );
        assert_eq!(
            parse(OLD),
            Some(DrmClient { pdev: "0000:03:00.0".into(), client_id: 8, vram: 4096 * 1024, gtt: 2048 * 1024 })
        );
    }

    #[test]
    fn other_descriptors_and_broken_values_are_not_clients() {
        assert_eq!(parse("pos:\t0\nflags:\t0100002\nmnt_id:\t24\nino:\t3\n"), None, "a plain file");
        assert_eq!(parse(&OLD.replace("amdgpu", "i915")), None, "another driver");
        assert_eq!(parse(&OLD.replace("drm-client-id:\t8\n", "")), None, "no client id");
        assert_eq!(parse(&OLD.replace("drm-client-id:\t8", "drm-client-id:\teight")), None);
        let odd = parse(&OLD.replace("4096 KiB", "4096 parsecs")).unwrap();
        assert_eq!(odd.vram, 0, "a unit not known is no size");
        assert_eq!(size("18446744073709551615 KiB"), None, "an overflow is no size");
        assert_eq!(size("12"), Some(12));
    }

    #[test]
    fn a_process_counts_each_client_once_per_card() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("4242/fdinfo");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("0"), "pos:\t0\nflags:\t02\n").unwrap();
        std::fs::write(dir.join("5"), OLD).unwrap();
        std::fs::write(dir.join("6"), OLD).unwrap(); // a dup of the same client
        std::fs::write(dir.join("7"), OLD.replace("drm-client-id:\t8", "drm-client-id:\t9")).unwrap();
        std::fs::write(dir.join("8"), NEW).unwrap();
        let cards = of_process(root.path(), 4242).unwrap();
        let got: Vec<(&str, u64, u64)> = cards.iter().map(|c| (c.pdev.as_str(), c.vram, c.gtt)).collect();
        assert_eq!(
            got,
            [("0000:03:00.0", 2 * 4096 * 1024, 2 * 2048 * 1024), ("0000:04:00.0", 544_428 * 1024, 22 << 20)]
        );
        assert!(cards.iter().all(|c| c.source == SOURCE));
        assert!(of_process(root.path(), 1).is_err(), "no such process");
        let none = root.path().join("7/fdinfo");
        std::fs::create_dir_all(&none).unwrap();
        assert!(of_process(root.path(), 7).unwrap().is_empty(), "no GPU file open");
    }
}
