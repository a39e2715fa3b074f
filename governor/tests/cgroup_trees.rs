//! The cgroup layer against fixture trees (SPEC D2): directories holding the
//! files the kernel would create — `cgroup.controllers`,
//! `cgroup.subtree_control`, `cgroup.procs`, `memory.events` — for a
//! unified (v2) hierarchy, a v1 one (with `cpu,cpuacct` joined as on most
//! distributions) and a sub-tree delegated by systemd. These machines are v1:
//! the real-kernel tests are in `cgroup.rs`; here v2 is exercised file by
//! file. What a fixture cannot do is the kernel's own part (make a new
//! cgroup's files on `mkdir`, drop them on `rmdir`): [`Kernel`] does that
//! much by hand, and says so where it does.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use labfy_governor::cgroup::{CgroupError, Confinement, ExitCause, Hierarchy, Limits, Origin, Tree, exit_cause};

const MIB: u64 = 1024 * 1024;

/// What the kernel would do for a fixture tree, done by hand.
struct Kernel;

impl Kernel {
    /// A cgroup directory as the kernel makes it: its core files, and the
    /// controllers its parent gives it.
    fn cgroup_v2(dir: &Path, controllers: &str) {
        fs::create_dir_all(dir).unwrap();
        fs::write(dir.join("cgroup.controllers"), format!("{controllers}\n")).unwrap();
        fs::write(dir.join("cgroup.subtree_control"), "").unwrap();
        fs::write(dir.join("cgroup.procs"), "").unwrap();
        fs::write(dir.join("cgroup.events"), "populated 0\nfrozen 0\n").unwrap();
    }

    /// A v1 controller directory (one per controller, or `cpu,cpuacct`).
    fn cgroup_v1(dir: &Path) {
        fs::create_dir_all(dir).unwrap();
        fs::write(dir.join("cgroup.procs"), "").unwrap();
        fs::write(dir.join("tasks"), "").unwrap();
    }

    /// What `mkdir` of a new cgroup makes: its control files at their
    /// defaults (v2: one directory; v1: each hierarchy's, by what its
    /// controllers offer).
    fn populate(dirs: &[PathBuf], version: Hierarchy) {
        let v2 = [
            ("cgroup.procs", ""),
            ("cgroup.kill", ""),
            ("memory.max", "max"),
            ("memory.swap.max", "max"),
            ("memory.current", "0"),
            ("memory.peak", "0"),
            ("memory.events", "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0"),
            ("cpu.max", "max 100000"),
            ("cpu.weight", "100"),
            ("cpu.stat", "usage_usec 0\nuser_usec 0\nsystem_usec 0"),
            ("pids.max", "max"),
            ("pids.current", "0"),
            ("pids.events", "max 0"),
        ];
        let v1 = [
            ("cgroup.procs", ""),
            ("tasks", ""),
            ("memory.limit_in_bytes", "9223372036854771712"),
            ("memory.memsw.limit_in_bytes", "9223372036854771712"),
            ("memory.usage_in_bytes", "0"),
            ("memory.max_usage_in_bytes", "0"),
            ("memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 0"),
            ("cpu.shares", "1024"),
            ("cpu.cfs_quota_us", "-1"),
            ("cpu.cfs_period_us", "100000"),
            ("cpuacct.usage", "0"),
            ("pids.max", "max"),
            ("pids.current", "0"),
            ("pids.events", "max 0"),
        ];
        for dir in dirs {
            let files: &[(&str, &str)] = if version == Hierarchy::V2 { &v2 } else { &v1 };
            for (file, value) in files {
                // A v1 hierarchy holds only its own controllers' files.
                let controller = file.split('.').next().unwrap_or("");
                let here = dir.to_string_lossy();
                if version == Hierarchy::V1
                    && !matches!(controller, "cgroup" | "tasks")
                    && !here.contains(&format!("/{controller}"))
                {
                    continue;
                }
                fs::write(dir.join(file), format!("{value}\n")).unwrap();
            }
        }
    }

    /// `rmdir` on cgroupfs takes the control files with the directory.
    fn drop_control_files(dir: &Path) {
        for entry in fs::read_dir(dir).unwrap().flatten() {
            if entry.file_type().unwrap().is_file() {
                fs::remove_file(entry.path()).unwrap();
            }
        }
    }
}

fn read(path: impl AsRef<Path>) -> String {
    let path = path.as_ref();
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).trim().to_owned()
}

fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

fn full_limits() -> Limits {
    Limits {
        memory_max: 64 * MIB,
        swap_max: None,
        cpu_quota_percent: Some(50),
        cpu_weight: Some(100),
        pids_max: Some(16),
    }
}

/// A v2 tree as systemd delegates it: the unit's cgroup offers the
/// controllers, holds no process (the supervisor moved into its leaf).
fn v2_fixture(controllers: &str) -> (tempfile::TempDir, Tree) {
    let base = tempfile::tempdir().unwrap();
    let unit = base.path().join("system.slice/labfy.service");
    Kernel::cgroup_v2(&unit, controllers);
    Kernel::cgroup_v2(&unit.join("supervisor"), "");
    let own = "0::/system.slice/labfy.service/supervisor\n";
    let tree = Tree::delegated_from(own, Some(base.path()), &BTreeMap::new()).unwrap();
    (base, tree)
}

#[test]
fn v2_delegated_tree_enables_its_controllers_once_and_confines_with_v2_files() {
    let (base, tree) = v2_fixture("cpu io memory pids");
    let unit = base.path().join("system.slice/labfy.service");
    assert_eq!(tree.version(), Hierarchy::V2);
    assert_eq!(tree.origin(), Origin::Delegated);
    assert_eq!(tree.roots(), std::slice::from_ref(&unit));

    // The governor asks the kernel for its controllers in one write…
    // (`labfy/` as the kernel shows it after the mkdir that follows.)
    Kernel::cgroup_v2(&unit.join("labfy"), "cpu memory pids");
    let attached = tree.prepare(&["memory", "cpu", "pids"]).unwrap();
    assert_eq!(attached, ["memory", "cpu", "pids"]);
    assert_eq!(read(unit.join("cgroup.subtree_control")), "+memory +cpu +pids");
    assert_eq!(read(unit.join("labfy/cgroup.subtree_control")), "+memory +cpu +pids");
    // …and, once the kernel lists them, writes nothing again.
    fs::write(unit.join("cgroup.subtree_control"), "cpu memory pids\n").unwrap();
    fs::write(unit.join("labfy/cgroup.subtree_control"), "cpu memory pids\n").unwrap();
    tree.prepare(&["memory", "cpu", "pids"]).unwrap();
    assert_eq!(read(unit.join("cgroup.subtree_control")), "cpu memory pids");

    let name = unique("fixture");
    let made = Confinement::make(&tree, &name, &full_limits()).unwrap();
    Kernel::populate(made.dirs(), Hierarchy::V2);
    let confinement = made.limit().unwrap();
    let dir = unit.join("labfy").join(&name);
    assert_eq!(confinement.dirs(), std::slice::from_ref(&dir));
    assert_eq!(confinement.hierarchy(), Hierarchy::V2);
    // v2 files and units: memory.max, swap.max alone, cpu.max "quota period", cpu.weight.
    assert_eq!(read(dir.join("memory.max")), (64 * MIB).to_string());
    assert_eq!(read(dir.join("memory.swap.max")), "0");
    assert_eq!(read(dir.join("cpu.max")), "50000 100000");
    assert_eq!(read(dir.join("cpu.weight")), "100");
    assert_eq!(read(dir.join("pids.max")), "16");
    assert!(!dir.join("memory.limit_in_bytes").exists(), "a v1 file was written in a v2 tree");
    let procs = confinement.procs_files();
    assert_eq!(procs.len(), 1);
    assert_eq!(procs[0].to_str().unwrap(), dir.join("cgroup.procs").to_str().unwrap());

    // Usage from the kernel's v2 files, `memory.events` included.
    fs::write(dir.join("memory.current"), "1048576\n").unwrap();
    fs::write(dir.join("memory.peak"), "2097152\n").unwrap();
    fs::write(dir.join("memory.events"), "low 0\nhigh 0\nmax 3\noom 1\noom_kill 0\noom_group_kill 0\n").unwrap();
    fs::write(dir.join("pids.current"), "2\n").unwrap();
    fs::write(dir.join("pids.events"), "max 4\n").unwrap();
    fs::write(dir.join("cpu.stat"), "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\n").unwrap();
    let before = confinement.usage();
    assert_eq!(before.memory_current, Some(MIB));
    assert_eq!(before.memory_peak, Some(2 * MIB));
    assert_eq!(before.oom_kills, Some(0));
    assert_eq!(before.pids_current, Some(2));
    assert_eq!(before.pids_limit_hits, Some(4));
    assert_eq!(before.cpu_usage_ns, Some(1_500_000));
    // An OOM kill is SIGKILL with `memory.events` oom_kill risen.
    fs::write(dir.join("memory.events"), "low 0\nhigh 0\nmax 9\noom 2\noom_kill 1\noom_group_kill 0\n").unwrap();
    let after = confinement.usage();
    let killed = std::os::unix::process::ExitStatusExt::from_raw(libc::SIGKILL);
    assert_eq!(exit_cause(killed, &before, &after), ExitCause::OomKilled);
    assert_eq!(exit_cause(killed, &before, &before), ExitCause::Signal(libc::SIGKILL));

    // A second cgroup of the same name is refused, never adopted.
    assert!(matches!(Confinement::create_in(&tree, &name, &full_limits()), Err(CgroupError::Exists(_))));

    Kernel::drop_control_files(&dir);
    confinement.delete().unwrap();
    assert!(!dir.exists());
}

#[test]
fn a_delegation_without_a_controller_is_refused_with_the_unit_setting_to_change() {
    let (base, tree) = v2_fixture("cpu memory");
    let error = tree.prepare(&["memory", "cpu", "pids"]).unwrap_err().to_string();
    assert!(error.contains("the pids controller is not available"), "{error}");
    assert!(error.contains("offered: memory, cpu"), "{error}");
    assert!(error.contains("Delegate=yes"), "{error}");
    // Nothing was asked of the kernel, nothing made.
    let unit = base.path().join("system.slice/labfy.service");
    assert_eq!(read(unit.join("cgroup.subtree_control")), "");
    assert!(!unit.join("labfy").exists());
    // A confinement that needs only memory is still possible there.
    Kernel::cgroup_v2(&unit.join("labfy"), "cpu memory");
    let name = unique("memonly");
    let made = Confinement::make(&tree, &name, &Limits::memory(64 * MIB)).unwrap();
    Kernel::populate(made.dirs(), Hierarchy::V2);
    let confinement = made.limit().unwrap();
    Kernel::drop_control_files(&unit.join("labfy").join(&name));
    confinement.delete().unwrap();
}

#[test]
fn a_tree_that_is_not_a_cgroup_directory_is_refused() {
    let base = tempfile::tempdir().unwrap();
    let tree = Tree::v2(base.path());
    let error = tree.prepare(&["memory"]).unwrap_err().to_string();
    assert!(error.contains("is not a cgroup v2 directory"), "{error}");
    let error = Confinement::create_in(&tree, "x", &Limits::memory(64 * MIB)).unwrap_err();
    assert!(matches!(error, CgroupError::Unavailable(_)), "{error}");
    // A v1 tree with no controller directory offers nothing.
    let error = Tree::v1(base.path()).prepare(&["memory"]).unwrap_err().to_string();
    assert!(error.contains("the memory controller is not available"), "{error}");
}

/// A read-only tree (a bind mount made read-only, as `ProtectControlGroups=`
/// makes `/sys/fs/cgroup`): refused with that reason. Needs root for the mount.
#[test]
fn a_read_only_tree_is_refused_as_such() {
    let euid = fs::read_to_string("/proc/self/status").unwrap();
    let root = euid.lines().any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"));
    if !labfy_testkit::present(root, "ROOT", "a read-only bind mount needs root") {
        return;
    }
    let (base, _) = v2_fixture("cpu memory pids");
    let unit = base.path().join("system.slice/labfy.service");
    let mount = |args: &[&str]| {
        let status = Command::new("mount").args(args).status().unwrap();
        assert!(status.success(), "mount {args:?}");
    };
    let path = unit.to_str().unwrap();
    mount(&["--bind", path, path]);
    mount(&["-o", "remount,bind,ro", path]);
    let tree = Tree::v2(&unit);
    let error = tree.prepare(&["memory", "cpu", "pids"]).unwrap_err().to_string();
    Command::new("umount").arg(path).status().unwrap();
    assert!(error.contains("mounted read-only"), "{error}");
}

#[test]
fn v1_tree_with_joined_cpu_and_cpuacct_confines_with_v1_files() {
    let base = tempfile::tempdir().unwrap();
    let root = base.path();
    // As most distributions mount v1: cpu and cpuacct one hierarchy, linked.
    Kernel::cgroup_v1(&root.join("memory"));
    Kernel::cgroup_v1(&root.join("pids"));
    Kernel::cgroup_v1(&root.join("cpu,cpuacct"));
    std::os::unix::fs::symlink("cpu,cpuacct", root.join("cpu")).unwrap();
    std::os::unix::fs::symlink("cpu,cpuacct", root.join("cpuacct")).unwrap();
    let tree = Tree::v1(root);
    assert_eq!(tree.version(), Hierarchy::V1);
    let attached = tree.prepare(&["memory", "cpu", "pids"]).unwrap();
    assert_eq!(attached, ["memory", "cpu", "cpuacct", "pids"]);
    for controller in ["memory", "cpu,cpuacct", "pids"] {
        assert!(root.join(controller).join("labfy").is_dir(), "no labfy/ in {controller}");
    }

    let limits = Limits { swap_max: Some(16 * MIB), ..full_limits() };
    let name = unique("v1");
    let made = Confinement::make(&tree, &name, &limits).unwrap();
    Kernel::populate(made.dirs(), Hierarchy::V1);
    let confinement = made.limit().unwrap();
    // One directory per hierarchy: the linked cpu and cpuacct count once.
    let dirs: Vec<PathBuf> = confinement.dirs().to_vec();
    assert_eq!(dirs.len(), 3, "{dirs:?}");
    assert_eq!(confinement.procs_files().len(), 3);
    let mem = root.join("memory/labfy").join(&name);
    let cpu = root.join("cpu,cpuacct/labfy").join(&name);
    assert_eq!(read(mem.join("memory.limit_in_bytes")), (64 * MIB).to_string());
    // v1 counts memory and swap together.
    assert_eq!(read(mem.join("memory.memsw.limit_in_bytes")), (80 * MIB).to_string());
    assert_eq!(read(cpu.join("cpu.cfs_quota_us")), "50000");
    assert_eq!(read(cpu.join("cpu.cfs_period_us")), "100000");
    assert_eq!(read(cpu.join("cpu.shares")), "1024");
    assert_eq!(read(root.join("pids/labfy").join(&name).join("pids.max")), "16");
    assert!(!mem.join("memory.max").exists(), "a v2 file was written in a v1 tree");

    for dir in &dirs {
        Kernel::drop_control_files(dir);
    }
    confinement.delete().unwrap();
    assert!(dirs.iter().all(|d| !d.exists()));
}

#[test]
fn a_delegated_v1_tree_is_found_from_each_controllers_line() {
    let base = tempfile::tempdir().unwrap();
    let mounts: BTreeMap<String, PathBuf> =
        ["memory", "cpu", "cpuacct", "pids"].iter().map(|c| ((*c).to_owned(), base.path().join(c))).collect();
    for dir in mounts.values() {
        Kernel::cgroup_v1(&dir.join("system.slice/labfy.service"));
        Kernel::cgroup_v1(&dir.join("system.slice/labfy.service/supervisor"));
    }
    let own = "9:pids:/system.slice/labfy.service/supervisor\n\
               4:memory:/system.slice/labfy.service/supervisor\n\
               2:cpuacct:/system.slice/labfy.service/supervisor\n\
               1:cpu:/system.slice/labfy.service/supervisor\n0::/\n";
    let tree = Tree::delegated_from(own, None, &mounts).unwrap();
    assert_eq!(tree.origin(), Origin::Delegated);
    let name = unique("deleg");
    let made = Confinement::make(&tree, &name, &full_limits()).unwrap();
    Kernel::populate(made.dirs(), Hierarchy::V1);
    let confinement = made.limit().unwrap();
    for dir in confinement.dirs() {
        assert!(dir.ends_with(Path::new("system.slice/labfy.service/labfy").join(&name)), "{}", dir.display());
    }
    let dirs = confinement.dirs().to_vec();
    for dir in &dirs {
        Kernel::drop_control_files(dir);
    }
    confinement.delete().unwrap();
}

#[test]
fn stale_leftovers_in_a_fixture_tree_are_swept_and_live_ones_kept() {
    let (base, tree) = v2_fixture("cpu memory pids");
    let unit = base.path().join("system.slice/labfy.service");
    Kernel::cgroup_v2(&unit.join("labfy"), "cpu memory pids");
    let made = Confinement::make(&tree, &unique("live"), &Limits::memory(64 * MIB)).unwrap();
    Kernel::populate(made.dirs(), Hierarchy::V2);
    let live = made.limit().unwrap();
    // A young leftover is kept (it may be being set up by another process).
    let young = unit.join("labfy/model-young");
    fs::create_dir(&young).unwrap();
    let removed = labfy_governor::cgroup::sweep_stale_in(&tree);
    assert!(removed.is_empty(), "{removed:?}");
    assert!(young.exists() && live.dirs()[0].exists());
    let dir = live.dirs()[0].clone();
    Kernel::drop_control_files(&dir);
    live.delete().unwrap();
}
