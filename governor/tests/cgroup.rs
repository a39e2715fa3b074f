//! Cgroup confinement on this machine's real cgroups, with real child
//! processes (SPEC Q3). Needs root: when not root, each test says why and
//! returns (CI runs as root). Every test uses its own cgroup name (uuid
//! suffix), so the tests run in parallel.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime};

use labfy_governor::cgroup::{
    self, CgroupError, Confinement, ExitCause, Hierarchy, Limits, MAX_NAME_LEN, STALE_MIN_AGE, Usage, exit_cause,
};

const MIB: u64 = 1024 * 1024;

/// Whether the test can run; says why not when it cannot.
fn root() -> bool {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let euid = status.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|ids| ids.split_whitespace().nth(1));
    labfy_testkit::present(
        euid == Some("0"),
        "ROOT",
        &format!("cgroup confinement needs root (effective uid {euid:?})"),
    )
}

fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

/// Spawns `command` so that it joins `confinement` between fork and exec.
#[allow(unsafe_code)]
fn spawn_in(confinement: &Confinement, command: &mut Command) -> std::io::Result<Child> {
    let joiner = confinement.joiner();
    // SAFETY: the closure runs in the child between fork and exec;
    // `ChildJoin::join` only calls open/write/close on C strings prepared
    // before the fork: async-signal-safe, no allocation, no lock.
    unsafe {
        command.pre_exec(move || joiner.join());
    }
    command.spawn()
}

fn python(code: &str) -> Command {
    let mut command = Command::new("python3");
    command.arg("-c").arg(code);
    command
}

/// Waits for `child`, at most `limit` (then kills it and fails).
fn wait_bounded(child: &mut Child, limit: Duration) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("child did not end within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every `labfy/<name>` directory left in any hierarchy.
fn leftover_dirs(name: &str) -> Vec<PathBuf> {
    let root = PathBuf::from("/sys/fs/cgroup");
    let mut candidates = vec![root.join("labfy").join(name)];
    for entry in std::fs::read_dir(&root).unwrap().flatten() {
        candidates.push(entry.path().join("labfy").join(name));
    }
    candidates.into_iter().filter(|p| p.exists()).collect()
}

/// The directories a stale leftover would have: one per hierarchy this
/// crate attaches (v1) or the unified one (v2).
fn fixture_dirs(name: &str) -> Vec<PathBuf> {
    let root = PathBuf::from("/sys/fs/cgroup");
    let probe = Confinement::create(&unique("probe"), &Limits::memory(64 * MIB)).unwrap();
    let hierarchy = probe.hierarchy();
    let dirs = probe.dirs().iter().map(|d| d.parent().unwrap().join(name)).collect();
    probe.delete().unwrap();
    match hierarchy {
        Hierarchy::V1 => dirs,
        Hierarchy::V2 => vec![root.join("labfy").join(name)],
    }
}

#[test]
fn a_child_joins_before_it_runs_anything() {
    if !root() {
        return;
    }
    let name = unique("join");
    let confinement = Confinement::create(&name, &Limits::memory(64 * MIB)).unwrap();

    // The program's first act reads its own cgroups: it starts inside.
    let out = spawn_in(&confinement, Command::new("cat").arg("/proc/self/cgroup").stdout(Stdio::piped()))
        .unwrap()
        .wait_with_output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let wanted = format!("/labfy/{name}");
    let memory_line = text.lines().find(|l| l.contains(":memory:") || l.starts_with("0::")).unwrap();
    assert!(memory_line.ends_with(&wanted), "child started outside: {text}");
    if confinement.hierarchy() == Hierarchy::V1 {
        for controller in ["memory", "cpu", "pids"] {
            let line = text.lines().find(|l| l.split(':').nth(1) == Some(controller)).unwrap();
            assert!(line.ends_with(&wanted), "{controller} not joined: {line}");
        }
    }

    // A live child is listed by pids().
    let mut sleeper = spawn_in(&confinement, Command::new("sleep").arg("30")).unwrap();
    let listed = confinement.pids();
    assert_eq!(listed, vec![sleeper.id()], "pids() should list exactly the sleeper");
    confinement.kill_all().unwrap();
    assert_eq!(sleeper.wait().unwrap().signal(), Some(libc::SIGKILL));
    confinement.delete().unwrap();
}

#[test]
fn limits_reach_the_kernel_in_its_units() {
    if !root() {
        return;
    }
    let limits = Limits {
        memory_max: 64 * MIB,
        swap_max: Some(16 * MIB),
        cpu_quota_percent: Some(150),
        cpu_weight: Some(200),
        pids_max: Some(8),
    };
    let confinement = Confinement::create(&unique("units"), &limits).unwrap();
    let read = |file: &str| {
        let dir = confinement.dirs().iter().find(|d| d.join(file).exists()).unwrap();
        std::fs::read_to_string(dir.join(file)).unwrap().trim().to_owned()
    };
    let expected: &[(&str, String)] = match confinement.hierarchy() {
        Hierarchy::V1 => &[
            ("memory.limit_in_bytes", (64 * MIB).to_string()),
            ("memory.memsw.limit_in_bytes", (80 * MIB).to_string()), // memory + swap
            ("cpu.cfs_period_us", "100000".to_owned()),
            ("cpu.cfs_quota_us", "150000".to_owned()),
            ("cpu.shares", "2048".to_owned()),
            ("pids.max", "8".to_owned()),
        ],
        Hierarchy::V2 => &[
            ("memory.max", (64 * MIB).to_string()),
            ("memory.swap.max", (16 * MIB).to_string()), // swap alone
            ("cpu.max", "150000 100000".to_owned()),
            ("cpu.weight", "200".to_owned()),
            ("pids.max", "8".to_owned()),
        ],
    };
    for (file, value) in expected {
        assert_eq!(&read(file), value, "{file}");
    }
    confinement.delete().unwrap();
}

#[test]
fn a_child_over_its_memory_limit_is_oom_killed_and_reported() {
    if !root() {
        return;
    }
    let confinement = Confinement::create(&unique("oom"), &Limits::memory(64 * MIB)).unwrap();
    let before = confinement.usage();
    assert_eq!(before.oom_kills, Some(0));

    let mut child = spawn_in(&confinement, &mut python("b=bytearray(200*1024*1024)")).unwrap();
    let status = wait_bounded(&mut child, Duration::from_secs(60));
    let after = confinement.usage();

    assert_eq!(status.signal(), Some(libc::SIGKILL), "{status:?}");
    assert!(after.oom_kills.unwrap() > before.oom_kills.unwrap(), "{after:?}");
    let cause = exit_cause(status, &before, &after);
    assert_eq!(cause, ExitCause::OomKilled);
    assert!(cause.to_string().contains("OOM"));
    assert!(after.memory_peak.unwrap() <= 64 * MIB, "peak above the limit: {after:?}");
    confinement.delete().unwrap();
}

#[test]
fn a_child_under_its_limit_exits_cleanly_and_its_peak_is_seen() {
    if !root() {
        return;
    }
    let confinement = Confinement::create(&unique("under"), &Limits::memory(64 * MIB)).unwrap();
    let before = confinement.usage();
    // Bytes multiplication writes every page: 16 MiB really resident.
    let mut child = spawn_in(&confinement, &mut python("b=b'x'*(16*1024*1024)")).unwrap();
    let status = wait_bounded(&mut child, Duration::from_secs(60));
    let after = confinement.usage();
    assert_eq!(exit_cause(status, &before, &after), ExitCause::Exited(0));
    assert!(after.memory_peak.unwrap() >= 16 * MIB, "{after:?}");
    assert_eq!(after.oom_kills, Some(0));
    assert!(after.memory_current.is_some());
    confinement.delete().unwrap();
}

#[test]
fn pids_max_holds() {
    if !root() {
        return;
    }
    let limits = Limits { pids_max: Some(8), ..Limits::memory(64 * MIB) };
    let confinement = Confinement::create(&unique("pids"), &limits).unwrap();
    let mut child = spawn_in(
        &confinement,
        Command::new("sh").arg("-c").arg("for i in $(seq 1 20); do sleep 5 & done; wait").stderr(Stdio::piped()),
    )
    .unwrap();
    // dash gives up at the first refused fork; the sleeps it started stay.
    std::thread::sleep(Duration::from_millis(500));
    let running = confinement.pids();
    assert!(!running.is_empty() && running.len() <= 8, "{} processes in the cgroup", running.len());
    let usage = confinement.usage();
    assert!(usage.pids_current.unwrap() <= 8, "{usage:?}");
    assert!(usage.pids_limit_hits.unwrap() >= 1, "no refused fork counted: {usage:?}");

    confinement.kill_all().unwrap();
    let status = wait_bounded(&mut child, Duration::from_secs(10));
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    eprintln!("shell ({status:?}) said: {}", stderr.trim());
    assert!(stderr.to_lowercase().contains("fork"), "no fork failure reported (status {status:?}): {stderr}");
    // kill_all returns once the cgroup is empty (or after its rounds).
    let start = Instant::now();
    while !confinement.pids().is_empty() && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(confinement.pids().is_empty());
    confinement.delete().unwrap();
}

#[test]
fn a_cpu_quota_of_half_a_core_holds() {
    if !root() {
        return;
    }
    let limits = Limits { cpu_quota_percent: Some(50), cpu_weight: Some(100), ..Limits::memory(64 * MIB) };
    let confinement = Confinement::create(&unique("cpu"), &limits).unwrap();
    let busy = "import time\nend=time.monotonic()+2\nwhile time.monotonic()<end: pass";
    let start = Instant::now();
    let mut child = spawn_in(&confinement, &mut python(busy)).unwrap();
    assert!(wait_bounded(&mut child, Duration::from_secs(30)).success());
    let wall = start.elapsed();
    // A functional check with a wide margin, not a benchmark: at 50 % of one
    // core the child gets about half its wall time (the loop's 2 s plus the
    // interpreter's start-up), unconfined it would get all of it.
    let cpu = Duration::from_nanos(confinement.usage().cpu_usage_ns.unwrap());
    eprintln!("CPU used under a 50 % quota: {cpu:?} in {wall:?} of wall time");
    assert!(cpu.as_secs_f64() <= 0.65 * wall.as_secs_f64(), "used {cpu:?} of CPU in {wall:?} under a 50 % quota");
    assert!(cpu >= Duration::from_millis(100), "the busy child barely ran: {cpu:?}");
    confinement.delete().unwrap();
}

#[test]
fn delete_removes_the_cgroup_everywhere() {
    if !root() {
        return;
    }
    let name = unique("delete");
    let confinement = Confinement::create(&name, &Limits::memory(64 * MIB)).unwrap();
    assert!(!leftover_dirs(&name).is_empty());
    let mut child = spawn_in(&confinement, &mut Command::new("true")).unwrap();
    assert!(child.wait().unwrap().success());
    confinement.delete().unwrap();
    assert_eq!(leftover_dirs(&name), Vec::<PathBuf>::new());
}

#[test]
fn drop_without_delete_removes_the_cgroup() {
    if !root() {
        return;
    }
    let name = unique("drop");
    let confinement = Confinement::create(&name, &Limits::memory(64 * MIB)).unwrap();
    let mut child = spawn_in(&confinement, Command::new("sleep").arg("30")).unwrap();
    drop(confinement);
    assert_eq!(leftover_dirs(&name), Vec::<PathBuf>::new());
    assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
}

#[test]
fn delete_kills_a_live_process_and_still_removes_the_cgroup() {
    if !root() {
        return;
    }
    let name = unique("live");
    let limits = Limits { pids_max: Some(16), ..Limits::memory(64 * MIB) };
    let confinement = Confinement::create(&name, &limits).unwrap();
    // A shell with children of its own: grandchildren are killed too.
    let mut child = spawn_in(&confinement, Command::new("sh").arg("-c").arg("sleep 60 & sleep 60 & wait")).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    assert!(confinement.pids().len() >= 2);
    confinement.delete().unwrap();
    assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
    assert_eq!(leftover_dirs(&name), Vec::<PathBuf>::new());
}

#[test]
fn a_joiner_whose_cgroup_is_gone_makes_the_spawn_fail() {
    if !root() {
        return;
    }
    let confinement = Confinement::create(&unique("gone"), &Limits::memory(64 * MIB)).unwrap();
    let joiner_owner = confinement.joiner();
    confinement.delete().unwrap();
    // The program must not run unconfined: the spawn itself fails.
    #[allow(unsafe_code)]
    let spawned = {
        let mut command = Command::new("true");
        // SAFETY: as in `spawn_in`: only open/write/close on prepared C strings.
        unsafe {
            command.pre_exec(move || joiner_owner.join());
        }
        command.spawn()
    };
    assert_eq!(spawned.unwrap_err().kind(), std::io::ErrorKind::NotFound);
}

#[test]
fn bad_names_are_refused() {
    // Checked before anything touches the filesystem: runs without root.
    let too_long = "a".repeat(MAX_NAME_LEN + 1);
    for name in ["", "..", "/", "a/b", "../x", "Llama", "UPPER", "a.b", too_long.as_str()] {
        let result = Confinement::create(name, &Limits::memory(64 * MIB));
        assert!(matches!(result, Err(CgroupError::InvalidName { .. })), "{name:?}: {result:?}");
    }
    // The longest accepted name works for real.
    if root() {
        let longest = format!("{}-{}", "n".repeat(MAX_NAME_LEN - 33), uuid::Uuid::new_v4().simple());
        assert_eq!(longest.len(), MAX_NAME_LEN);
        Confinement::create(&longest, &Limits::memory(64 * MIB)).unwrap().delete().unwrap();
        assert_eq!(leftover_dirs(&longest), Vec::<PathBuf>::new());
    }
}

#[test]
fn bad_limits_are_refused() {
    let result = Confinement::create("fine", &Limits { cpu_quota_percent: Some(0), ..Limits::memory(64 * MIB) });
    assert!(matches!(result, Err(CgroupError::InvalidLimits(_))), "{result:?}");
}

#[test]
fn a_name_is_never_adopted_and_stale_leftovers_are_swept() {
    if !root() {
        return;
    }
    // Held by this process: a second create of the same name is refused.
    let held = unique("held");
    let confinement = Confinement::create(&held, &Limits::memory(64 * MIB)).unwrap();
    assert!(matches!(Confinement::create(&held, &Limits::memory(64 * MIB)), Err(CgroupError::Exists(_))));

    // A leftover of a crashed run (directories, no process) is not adopted.
    let stale = unique("stale");
    let dirs = fixture_dirs(&stale);
    for dir in &dirs {
        std::fs::create_dir_all(dir).unwrap();
    }
    assert!(matches!(Confinement::create(&stale, &Limits::memory(64 * MIB)), Err(CgroupError::Exists(_))));

    // Young, it is kept (another process may be setting it up) ...
    assert!(!cgroup::sweep_stale().contains(&stale));
    assert!(dirs.iter().all(|d| d.exists()));
    // ... old, it is removed and reported; a held one is never touched.
    let old = SystemTime::now() - STALE_MIN_AGE - Duration::from_secs(60);
    for dir in dirs.iter().chain(confinement.dirs()) {
        std::fs::File::open(dir).unwrap().set_modified(old).unwrap();
    }
    let removed = cgroup::sweep_stale();
    assert!(removed.contains(&stale), "{removed:?}");
    assert!(!removed.contains(&held));
    assert_eq!(leftover_dirs(&stale), Vec::<PathBuf>::new());
    assert!(confinement.dirs().iter().all(|d| d.exists()));
    confinement.delete().unwrap();
}

#[test]
fn probe_reports_the_hierarchy() {
    if !root() {
        // Not root: confinement is refused with a sentence, never skipped.
        assert!(matches!(cgroup::probe(), Err(CgroupError::Unavailable(_))));
        let refused = Confinement::create(&unique("nonroot"), &Limits::memory(64 * MIB));
        assert!(matches!(refused, Err(CgroupError::Unavailable(ref why)) if why.contains("root")), "{refused:?}");
        return;
    }
    let hierarchy = cgroup::probe().unwrap();
    let confinement = Confinement::create(&unique("probe"), &Limits::memory(64 * MIB)).unwrap();
    assert_eq!(confinement.hierarchy(), hierarchy);
    confinement.delete().unwrap();
}

fn usage_with_ooms(oom_kills: Option<u64>) -> Usage {
    Usage { oom_kills, ..Usage::default() }
}

#[test]
fn exit_causes_from_synthetic_statuses() {
    let none = usage_with_ooms(Some(0));
    let one = usage_with_ooms(Some(1));
    let unknown = usage_with_ooms(None);
    // Raw wait statuses: exit code in bits 8..16, terminating signal in 0..7.
    assert_eq!(exit_cause(ExitStatus::from_raw(0), &none, &none), ExitCause::Exited(0));
    assert_eq!(exit_cause(ExitStatus::from_raw(3 << 8), &none, &one), ExitCause::Exited(3));
    assert_eq!(exit_cause(ExitStatus::from_raw(libc::SIGKILL), &none, &one), ExitCause::OomKilled);
    assert_eq!(exit_cause(ExitStatus::from_raw(libc::SIGKILL), &none, &none), ExitCause::Signal(libc::SIGKILL));
    assert_eq!(exit_cause(ExitStatus::from_raw(libc::SIGKILL), &one, &one), ExitCause::Signal(libc::SIGKILL));
    assert_eq!(exit_cause(ExitStatus::from_raw(libc::SIGKILL), &unknown, &one), ExitCause::Signal(libc::SIGKILL));
    assert_eq!(exit_cause(ExitStatus::from_raw(libc::SIGTERM), &none, &one), ExitCause::Signal(libc::SIGTERM));
    // A core dump flag does not change the signal.
    assert_eq!(exit_cause(ExitStatus::from_raw(libc::SIGSEGV | 0x80), &none, &none), ExitCause::Signal(libc::SIGSEGV));
    assert_eq!(ExitCause::Signal(libc::SIGTERM).to_string(), "the process was killed by signal 15 (SIGTERM)");
    assert_eq!(ExitCause::Exited(3).to_string(), "the process exited with code 3");
}

/// The child half of [`a_delegated_subtree_confines_as_an_unprivileged_user`]:
/// runs as uid 65534 in the "unit's" cgroup, moves itself into its
/// `supervisor` leaf as `labfy up` does, then confines.
const DELEGATED_CHILD: &str = "LABFY_TEST_DELEGATED_CHILD";

/// SPEC D1/D2 on this machine's real cgroups: a sub-tree delegated the way
/// systemd's `Delegate=yes` does (the unit's directory in each hierarchy
/// chowned to the service user), and an unprivileged process (uid 65534, no
/// capability) started in it that moves itself into the `supervisor` leaf
/// (as `labfy up` does), finds the sub-tree from its own `/proc/self/cgroup`,
/// makes `labfy/<name>` there with limits and starts a child inside it. The
/// child half re-runs this test binary.
#[test]
fn a_delegated_subtree_confines_as_an_unprivileged_user() {
    if std::env::var_os(DELEGATED_CHILD).is_some() {
        return delegated_child();
    }
    if !root() {
        return;
    }
    let unit = unique("labfy-delegated");
    let mut units = Vec::new();
    for controller in ["memory", "cpu", "cpuacct", "pids"] {
        let mount = PathBuf::from("/sys/fs/cgroup").join(controller);
        if !mount.is_dir() {
            continue;
        }
        let dir = mount.join(&unit);
        std::fs::create_dir(&dir).unwrap();
        // What systemd chowns for a delegated unit: the directories and
        // the files that let the user move processes and make children.
        let status = Command::new("chown").args(["-R", "65534:65534"]).arg(&dir).status().unwrap();
        assert!(status.success());
        units.push(dir);
    }
    if units.is_empty() || labfy_governor::cgroup::configured().is_ok_and(|t| t.version() == Hierarchy::V2) {
        eprintln!("skipped: this delegated test is written for a v1 machine (v2 is covered by cgroup_trees.rs)");
        return;
    }
    // The unit's cgroup, as systemd starts the service in it.
    let leaves: Vec<std::ffi::CString> =
        units.iter().map(|d| std::ffi::CString::new(d.join("cgroup.procs").to_str().unwrap()).unwrap()).collect();
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", "a_delegated_subtree_confines_as_an_unprivileged_user", "--nocapture", "--test-threads=1"])
        .env(DELEGATED_CHILD, "1")
        .uid(65534)
        .gid(65534)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: runs in the child after fork (after its setuid, before exec);
    // writes "0" to files named by C strings made before the fork: only
    // open/write/close, async-signal-safe. This is systemd starting the
    // service in its unit's cgroup.
    #[allow(unsafe_code)]
    unsafe {
        command.pre_exec(move || labfy_sys::steps::join_cgroups(&leaves));
    }
    let child = command.spawn().unwrap();
    let out = child.wait_with_output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    for dir in units.iter().rev() {
        let _ = std::fs::remove_dir(dir.join(cgroup::SUPERVISOR_LEAF));
        let _ = std::fs::remove_dir(dir.join(cgroup::PARENT));
        let _ = std::fs::remove_dir(dir);
    }
    assert!(out.status.success(), "the unprivileged half failed:\n{text}");
    assert!(text.contains("delegated child: confined"), "the child half did not run:\n{text}");
}

fn delegated_child() {
    // Unprivileged: the whole hierarchy is refused, the delegated one found.
    assert!(!root_quiet(), "the child half must not run as root");
    let error = cgroup::Tree::system().unwrap_err().to_string();
    assert!(error.contains("does not run as root"), "{error}");
    // Not yet in a leaf: no delegated tree to speak of.
    let error = cgroup::Tree::delegated().unwrap_err().to_string();
    assert!(error.contains("not a `supervisor` leaf"), "{error}");
    let moved = cgroup::enter_supervisor_leaf().unwrap();
    assert!(moved.len() >= 3, "{moved:?}");
    // Twice is harmless (a restart finds the leaf in place).
    assert!(cgroup::enter_supervisor_leaf().unwrap().is_empty());
    let tree = cgroup::Tree::delegated().unwrap();
    assert_eq!(tree.origin(), cgroup::Origin::Delegated);
    assert!(tree.roots().iter().all(|r| r.to_str().unwrap().contains("labfy-delegated-")), "{tree}");
    let name = unique("deleg");
    let limits = Limits {
        memory_max: 64 * MIB,
        swap_max: None,
        cpu_quota_percent: Some(50),
        cpu_weight: Some(100),
        pids_max: Some(8),
    };
    let confinement = Confinement::create_in(&tree, &name, &limits).unwrap();
    let out = spawn_in(&confinement, Command::new("cat").arg("/proc/self/cgroup").stdout(Stdio::piped()))
        .unwrap()
        .wait_with_output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    for controller in ["memory", "cpu", "pids"] {
        let line =
            text.lines().find(|l| l.split(':').nth(1).is_some_and(|c| c.split(',').any(|c| c == controller))).unwrap();
        assert!(line.ends_with(&format!("/labfy/{name}")), "{controller} not joined: {line}");
    }
    let memory_dir = confinement.dirs().iter().find(|d| d.starts_with("/sys/fs/cgroup/memory")).unwrap().clone();
    assert_eq!(
        std::fs::read_to_string(memory_dir.join("memory.limit_in_bytes")).unwrap().trim(),
        (64 * MIB).to_string()
    );
    confinement.delete().unwrap();
    assert!(!memory_dir.exists());
    println!("delegated child: confined in {tree}");
}

/// Whether this process is root, without the skip message.
fn root_quiet() -> bool {
    // SAFETY: geteuid has no preconditions.
    #[allow(unsafe_code)]
    unsafe {
        libc::geteuid() == 0
    }
}
