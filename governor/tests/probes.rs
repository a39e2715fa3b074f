//! The probes' public API (SPEC Q1) against fixture sysfs/procfs trees and
//! against this machine.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use labfy_governor::probe::amd::{self, SOURCE_SYSFS};
use labfy_governor::probe::{NO_GPU_FACT, ProbeConfig, Prober, host};
use labfy_ipc::messages::governor::{GpuSample, GpuVendor, Psi};

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

fn fixture(kind: &str, name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(kind).join(name)
}

#[allow(clippy::too_many_arguments)]
fn amd(
    id: &str,
    name: &str,
    uma: bool,
    vram: (Option<u64>, Option<u64>),
    gtt: (Option<u64>, Option<u64>),
    busy: Option<u8>,
    temperature_mc: Option<i64>,
    power_uw: Option<u64>,
) -> GpuSample {
    GpuSample {
        id: id.into(),
        vendor: GpuVendor::Amd,
        name: name.into(),
        uma,
        vram_total: vram.0,
        vram_used: vram.1,
        gtt_total: gtt.0,
        gtt_used: gtt.1,
        busy_percent: busy,
        temperature_mc,
        power_uw,
        source: SOURCE_SYSFS.into(),
    }
}

fn fixture_prober(sysfs: &str, proc: &str, scratch: &Path) -> Prober {
    Prober::new(ProbeConfig {
        drm_root: fixture("sysfs", sysfs),
        proc_root: fixture("proc", proc),
        scratch_dir: scratch.to_path_buf(),
        rocm_smi: false,
        nvml: false,
    })
}

#[test]
fn one_discrete_card_exact_figures() {
    let (gpus, facts) = amd::read_cards(&fixture("sysfs", "one-discrete"));
    assert_eq!(facts, Vec::<String>::new());
    // Name from the `device` symlink; highest of three temperatures; power1_average.
    let expected = amd(
        "card0",
        "0000:03:00.0",
        false,
        (Some(16 * GIB), Some(2_684_354_560)),
        (Some(16 * GIB), Some(50 * MIB)),
        Some(37),
        Some(61_000),
        Some(48_000_000),
    );
    assert_eq!(gpus, vec![expected]);
}

#[test]
fn two_gpus_skip_connectors_render_nodes_and_other_vendors() {
    let (cards, facts) = amd::discover_cards(&fixture("sysfs", "two-gpus"));
    assert!(facts.is_empty(), "{facts:?}");
    let ids: Vec<&str> = cards.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids, ["card0", "card2"], "card0-DP-1, renderD128 and the Intel card1 are skipped");

    let (gpus, facts) = amd::read_cards(&fixture("sysfs", "two-gpus"));
    assert!(facts.is_empty(), "{facts:?}");
    assert_eq!(
        gpus,
        vec![
            // power1_input when there is no power1_average.
            amd(
                "card0",
                "0000:03:00.0",
                false,
                (Some(8 * GIB), Some(GIB)),
                (Some(16 * GIB), Some(10 * MIB)),
                Some(5),
                Some(40_000),
                Some(21_000_000)
            ),
            // power1_average wins over power1_input.
            amd(
                "card2",
                "0000:0c:00.0",
                false,
                (Some(24 * GIB), Some(20 * GIB)),
                (Some(32 * GIB), Some(0)),
                Some(100),
                Some(88_000),
                Some(300_000_000)
            ),
        ]
    );
}

#[test]
fn apu_is_uma() {
    let (gpus, facts) = amd::read_cards(&fixture("sysfs", "apu"));
    assert!(facts.is_empty(), "{facts:?}");
    let expected = amd(
        "card0",
        "0000:c4:00.0",
        true,
        (Some(512 * MIB), Some(288 * MIB)),
        (Some(15 * GIB), Some(2 * GIB)),
        Some(12),
        Some(48_000),
        Some(15_000_000),
    );
    assert_eq!(gpus, vec![expected]);
    // The same card with a VRAM carve-out just over the bound reads as discrete.
    assert!(!amd::is_uma(Some(amd::UMA_MAX_VRAM_BYTES + 1), Some(15 * GIB)));
}

#[test]
fn missing_hwmon_is_none_and_one_fact() {
    let (gpus, facts) = amd::read_cards(&fixture("sysfs", "missing-hwmon"));
    let expected = amd(
        "card0",
        "0000:07:00.0",
        false,
        (Some(4 * GIB), Some(256 * MIB)),
        (Some(8 * GIB), Some(4 * MIB)),
        Some(0),
        None,
        None,
    );
    assert_eq!(gpus, vec![expected]);
    assert_eq!(facts, vec!["card0: no hwmon directory (temperature and power unknown)".to_owned()]);
}

#[test]
fn garbage_values_are_none_with_facts_never_guesses() {
    let (gpus, facts) = amd::read_cards(&fixture("sysfs", "garbage"));
    // card2's vendor is garbage: not an AMD card, skipped.
    assert_eq!(gpus.len(), 2, "{gpus:?}");
    let expected0 = amd("card0", "0000:05:00.0", false, (None, None), (None, None), None, Some(55_000), None);
    // No uevent: the name falls back to the card; an upper-case vendor id is accepted.
    let expected1 = amd("card1", "card1", false, (None, Some(1024)), (None, Some(0)), None, None, None);
    assert_eq!(gpus, vec![expected0, expected1]);
    let expected_facts = [
        "card0: mem_info_vram_total unreadable (\"\")",
        "card0: mem_info_vram_used unreadable (\"-5\")",
        "card0: mem_info_gtt_total unreadable (\"99999999999999999999999\")",
        "card0: mem_info_gtt_used unreadable (Is a directory (os error 21))",
        "card0: gpu_busy_percent out of range (250)",
        "card0: temp1_input unreadable (\"abc\")",
        "card0: temp3_input out of range (999999)",
        "card0: power1_average unreadable (\"-1\")",
        "card1: mem_info_vram_total unreadable (longer than 4096 bytes)",
        "card1: mem_info_gtt_total absent",
        "card1: gpu_busy_percent unreadable (\"abc\")",
        "card1: no hwmon temp*_input",
        "card1: no hwmon power1_average or power1_input",
    ];
    assert_eq!(facts, expected_facts);
}

#[test]
fn psi_fixtures_present_malformed_absent() {
    let read = |name: &str| std::fs::read_to_string(fixture("proc", name).join("pressure/memory")).unwrap();
    assert_eq!(host::parse_psi(&read("present")), Some(Psi { some_avg10: 1.25, full_avg10: 0.40 }));
    assert_eq!(host::parse_psi(&read("malformed")), None);

    let scratch = tempfile::tempdir().unwrap();
    let present = fixture_prober("one-discrete", "present", scratch.path()).sample();
    assert_eq!(present.host.psi, Some(Psi { some_avg10: 1.25, full_avg10: 0.40 }));
    assert!(!present.facts.iter().any(|f| f.starts_with("PSI")), "{:?}", present.facts);

    let malformed = fixture_prober("one-discrete", "malformed", scratch.path()).sample();
    assert_eq!(malformed.host.psi, None);
    let fact = malformed.facts.iter().find(|f| f.starts_with("PSI unreadable: ")).expect("malformed PSI fact");
    assert!(fact.contains("malformed") && fact.contains("oops"), "{fact}");

    let mut prober = fixture_prober("one-discrete", "absent", scratch.path());
    for _ in 0..2 {
        let absent = prober.sample();
        assert_eq!(absent.host.psi, None);
        let n = absent.facts.iter().filter(|f| f.starts_with("PSI not available: ")).count();
        assert_eq!(n, 1, "one PSI fact per sample: {:?}", absent.facts);
    }
}

#[test]
fn prober_on_fixtures_reports_what_read_cards_reads() {
    let scratch = tempfile::tempdir().unwrap();
    let sample = fixture_prober("two-gpus", "present", scratch.path()).sample();
    let (gpus, _) = amd::read_cards(&fixture("sysfs", "two-gpus"));
    assert_eq!(sample.gpus, gpus);
    assert!(!sample.facts.iter().any(|f| f == NO_GPU_FACT), "{:?}", sample.facts);
    let json = serde_json::to_string(&sample).unwrap();
    assert!(json.contains("\"0000:0c:00.0\""), "{json}");
}

#[test]
fn real_host_sample() {
    let drm = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    std::fs::write(scratch.path().join("one-mib"), vec![0u8; MIB as usize]).unwrap();
    let config = ProbeConfig { drm_root: drm.path().to_path_buf(), ..ProbeConfig::new(scratch.path().to_path_buf()) };
    let mut prober = Prober::new(config);

    for _ in 0..2 {
        let s = prober.sample();
        let h = &s.host;
        assert!(h.ram_total > 0, "{h:?}");
        assert!(h.ram_used <= h.ram_total && h.ram_available <= h.ram_total, "{h:?}");
        assert!(h.swap_used <= h.swap_total, "{h:?}");
        // This machine has /proc/pressure/memory; a machine without it must say so.
        let psi_here = Path::new("/proc/pressure/memory").exists();
        assert_eq!(h.psi.is_some(), psi_here, "{:?}", s.facts);
        if let Some(psi) = h.psi {
            assert!((0.0..=100.0).contains(&psi.some_avg10) && (0.0..=100.0).contains(&psi.full_avg10));
        }

        let sc = s.scratch.as_ref().expect("scratch sample");
        assert_eq!(sc.path, scratch.path().display().to_string());
        assert!(sc.total > 0 && sc.free <= sc.total, "{sc:?}");
        assert!(sc.labfy_used >= MIB, "{sc:?}");

        // The development machine has no NVIDIA or ROCm library: each absence
        // is exactly one fact. Where NVML is present, its GPUs are reported.
        let count = |prefix: &str| s.facts.iter().filter(|f| f.starts_with(prefix)).count();
        assert_eq!(count("NVML not loaded: "), usize::from(!prober.nvml_loaded()), "{:?}", s.facts);
        assert_eq!(count("ROCm SMI not loaded: "), usize::from(!prober.rocm_loaded()), "{:?}", s.facts);
        assert!(s.gpus.iter().all(|g| g.vendor == GpuVendor::Nvidia && g.source == "NVML"), "{:?}", s.gpus);
        assert_eq!(count(NO_GPU_FACT), usize::from(s.gpus.is_empty()));
        if !prober.nvml_loaded() {
            assert!(s.gpus.is_empty());
        }
        for g in &s.gpus {
            assert!(g.vram_total.is_some() && g.vram_used <= g.vram_total, "{g:?}");
            assert!(g.busy_percent.is_none_or(|b| b <= 100), "{g:?}");
        }
        assert!(s.at_ms > 0);
    }
}

#[test]
fn missing_scratch_dir_is_none_and_a_fact() {
    let root = tempfile::tempdir().unwrap();
    let missing = root.path().join("not-there");
    let sample = fixture_prober("apu", "present", &missing).sample();
    assert_eq!(sample.scratch, None);
    assert!(sample.facts.iter().any(|f| f.starts_with("scratch: ") && f.contains("not-there")), "{:?}", sample.facts);
    assert_eq!(sample.gpus.len(), 1);
}
