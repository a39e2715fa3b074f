//! The confinement sequence for real (SPEC T1): a shell started in a `Jail`
//! is PID 1 of its own namespace, sees only its root, writes only where it
//! was told; a failing step is named and leaves no child behind.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::path::Path;
use std::time::Duration;

use labfy_sys::seccomp::{Policy, Sockets};
use labfy_sys::{Jail, Root, Step};

fn shell_jail(work: &Path, script: &str) -> Jail {
    let mut root = Root::new();
    root.system().unwrap().devices().unwrap().proc().unwrap().tmp(1 << 20).unwrap().writable(work).unwrap();
    let mut jail = Jail::new(Path::new("/bin/sh"), root);
    jail.arg("-c").arg(script).may_write(work).env("OUT", work);
    jail
}

fn run(jail: Jail) -> std::process::ExitStatus {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (mut child, _) = jail.spawn().expect("spawn");
    rt.block_on(async { tokio::time::timeout(Duration::from_secs(30), child.wait()).await.unwrap().unwrap() })
}

#[test]
fn a_confined_shell_is_alone_in_its_root() {
    let dir = tempfile::tempdir().unwrap();
    let work = std::fs::canonicalize(dir.path()).unwrap();
    let marker = std::env::temp_dir().join(format!("labfy-sys-marker-{}", std::process::id()));
    std::fs::write(&marker, "host").unwrap();
    let script = format!(
        "echo $$ > \"$OUT/pid\"; echo /proc/[0-9]* > \"$OUT/procs\"; \
         hostname > \"$OUT/host\" 2>/dev/null || cat /proc/sys/kernel/hostname > \"$OUT/host\"; \
         ls / > \"$OUT/root\"; ls /etc > \"$OUT/etc\" 2>/dev/null; test -e {m} && echo seen > \"$OUT/marker\"; \
         touch /usr/labfy-escape 2> \"$OUT/usr\"; true",
        m = marker.display()
    );
    let mut jail = shell_jail(&work, &script);
    jail.hostname("jailed").unwrap().seccomp(Policy { sockets: Sockets::UnixOnly, driver_ioctl: false });
    let status = run(jail);
    std::fs::remove_file(&marker).unwrap();
    assert!(status.success(), "{status}");
    let read = |f: &str| std::fs::read_to_string(work.join(f)).unwrap_or_default();
    assert_eq!(read("pid").trim(), "1", "not PID 1 of its own namespace");
    // A shell builtin's glob: no process of its own to count.
    assert_eq!(read("procs").trim(), "/proc/1", "it sees other processes");
    assert_eq!(read("host").trim(), "jailed");
    let top: Vec<String> = read("root").lines().map(str::to_owned).collect();
    for absent in ["etc", "home", "root", "run", "var", "sys"] {
        if absent == "etc" && Path::new("/etc/ld.so.cache").exists() {
            continue; // /etc holds the loader's cache and the alternatives' links alone
        }
        assert!(!top.contains(&absent.to_owned()), "/{absent} is in the child's root: {top:?}");
    }
    assert!(top.contains(&"usr".to_owned()), "{top:?}");
    let etc: Vec<String> = read("etc").lines().map(str::to_owned).collect();
    assert!(etc.iter().all(|e| e == "ld.so.cache" || e == "alternatives"), "/etc shows more: {etc:?}");
    if Path::new("/etc/alternatives").is_dir() {
        // Links under /usr that lead through it must not dangle.
        assert!(etc.contains(&"alternatives".to_owned()), "{etc:?}");
    }
    assert_eq!(read("marker"), "", "a host file is visible");
    assert!(read("usr").contains("Read-only"), "{}", read("usr"));
    assert!(!Path::new("/usr/labfy-escape").exists());
}

#[test]
fn a_failing_step_is_named_and_leaves_no_child() {
    let dir = tempfile::tempdir().unwrap();
    let work = std::fs::canonicalize(dir.path()).unwrap();
    let mut jail = shell_jail(&work, "touch \"$OUT/ran\"");
    // Raising a hard limit needs a capability over the host's user
    // namespace, which the child never has.
    jail.limit(libc::RLIMIT_NOFILE, u64::MAX - 1);
    let err = jail.spawn().expect_err("the limit step must fail");
    assert_eq!(err.step, Step::Limits, "{err}");
    assert_eq!(err.errno(), Some(libc::EPERM), "{err}");
    assert!(err.to_string().contains("resource limits"), "{err}");
    // Reaped (this thread has no child left, zombie or not), and it never
    // reached its program.
    let children = std::fs::read_to_string("/proc/thread-self/children").unwrap();
    assert_eq!(children.trim(), "", "a child is left behind");
    assert!(!work.join("ran").exists(), "the program ran after a failed step");
}

#[test]
fn a_bad_plan_is_refused_before_any_clone() {
    let err = Root::new().writable(Path::new("/nonexistent/labfy-sys")).unwrap_err();
    assert_eq!(err.step, Step::Prepare);
    let dir = tempfile::tempdir().unwrap();
    let err = Jail::new(Path::new("relative/program"), Root::new()).spawn().unwrap_err();
    assert_eq!(err.step, Step::Prepare, "{err}");
    let _ = dir;
}

#[test]
fn the_report_names_what_is_applied_and_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let mut jail = shell_jail(dir.path(), "true");
    jail.seccomp(Policy { sockets: Sockets::UnixOnly, driver_ioctl: false });
    let c = jail.confinement();
    let text = c.to_string();
    assert!(text.contains("PID"), "{text}");
    assert!(text.contains("seccomp"), "{text}");
    match labfy_sys::landlock::abi() {
        Some(_) => assert!(text.contains("Landlock ABI"), "{text}"),
        None => assert!(c.missing.iter().any(|m| m.contains("Landlock")), "{text}"),
    }
    let unfiltered = shell_jail(dir.path(), "true").confinement();
    assert!(unfiltered.missing.iter().any(|m| m.contains("seccomp")), "{unfiltered}");
}

/// The local model's case under a service user (SPEC D1, T1): no network at
/// all and no identity to drop to, so a user namespace of its own mapping
/// the caller's ids to themselves — the same ids inside, no capability over
/// anything outside — and the mode mask it was given, so that the socket it
/// creates is the mode the caller chose.
#[test]
fn without_an_identity_a_child_with_no_network_keeps_the_callers_ids_in_a_user_namespace_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let work = std::fs::canonicalize(dir.path()).unwrap();
    let script = "cat /proc/self/uid_map > \"$OUT/uid_map\"; id -u > \"$OUT/uid\"; \
                  cat /proc/net/dev > \"$OUT/net\"; umask > \"$OUT/umask\"; : > \"$OUT/made\"";
    let mut jail = shell_jail(&work, script);
    jail.no_network().umask(0o007).seccomp(Policy { sockets: Sockets::UnixOnly, driver_ioctl: false });
    let report = jail.confinement().to_string();
    assert!(report.starts_with("user, mount, PID"), "{report}");
    assert!(report.contains("no interface up"), "{report}");
    let status = run(jail);
    assert!(status.success(), "{status}");
    let read = |f: &str| std::fs::read_to_string(work.join(f)).unwrap_or_default();
    // SAFETY: geteuid takes no argument and cannot fail.
    #[allow(unsafe_code)]
    let me = unsafe { libc::geteuid() };
    let map: Vec<String> = read("uid_map").split_whitespace().map(str::to_owned).collect();
    assert_eq!(map, [me.to_string(), me.to_string(), "1".to_owned()], "not a user namespace of its own");
    assert_eq!(read("uid").trim(), me.to_string());
    // Only the kernel's own loopback, and down: no interface is brought up.
    let net = read("net");
    let interfaces: Vec<&str> = net.lines().skip(2).filter_map(|l| l.split(':').next()).map(str::trim).collect();
    assert_eq!(interfaces, ["lo"], "{net}");
    assert_eq!(read("umask").trim(), "0007");
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(work.join("made")).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o660);
}

/// The sandbox's `/work` (SPEC X1, issue 16 under the unit): a tmpfs of the
/// child's own, bounded by the kernel in bytes and files, handed to the
/// caller as a descriptor before `execve` — what the run wrote is read
/// after it is gone, and no mount was made on the host.
#[test]
fn an_exported_tmpfs_is_read_after_the_run_and_bounded_by_the_kernel() {
    let dir = tempfile::tempdir().unwrap();
    let work = std::fs::canonicalize(dir.path()).unwrap();
    // SAFETY: geteuid/getegid take no argument and cannot fail.
    #[allow(unsafe_code)]
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let script = "echo kept > /work/out.txt; mkdir /work/sub && echo deep > /work/sub/f; \
                  for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do touch /work/n$i 2>/dev/null || break; done; \
                  rm /work/n1 /work/n2; echo $i > /work/made; \
                  head -c 2097152 /dev/zero > /work/big || echo big refused; true";
    let mut root = Root::new();
    root.system().unwrap().devices().unwrap().proc().unwrap().tmp(1 << 20).unwrap();
    root.tmpfs_at(Path::new("/work"), 1 << 20, 16, uid, gid).unwrap();
    let mut jail = Jail::new(Path::new("/bin/sh"), root);
    jail.arg("-c").arg(script).no_network().may_write_at(Path::new("/work")).export_dir(Path::new("/work")).unwrap();
    let (mut out, write) = labfy_sys::pipe().unwrap();
    jail.output(std::os::fd::AsRawFd::as_raw_fd(&write));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (mut child, _) = jail.spawn().expect("spawn");
    drop(write);
    let exported = child.take_exported().expect("the directory was handed over");
    let mut said = String::new();
    std::io::Read::read_to_string(&mut out, &mut said).unwrap();
    let status =
        rt.block_on(async { tokio::time::timeout(Duration::from_secs(30), child.wait()).await.unwrap().unwrap() });
    assert!(status.success(), "{status}: {said}");
    let at = Path::new("/proc/self/fd").join(std::os::fd::AsRawFd::as_raw_fd(&exported).to_string());
    let read = |f: &str| std::fs::read_to_string(at.join(f)).unwrap_or_default();
    assert_eq!(read("out.txt"), "kept\n");
    assert_eq!(read("sub/f"), "deep\n");
    // Bytes: 1 MiB, not the 2 MiB asked.
    let big = std::fs::metadata(at.join("big")).unwrap().len();
    assert!(big <= 1 << 20, "{big} bytes written past the bound");
    assert!(said.contains("No space left") && said.contains("big refused"), "{said}");
    // Files: the tmpfs counts inodes (its root included); the loop stopped.
    let made: u32 = read("made").trim().parse().unwrap();
    assert!(made < 20, "{made} files made past the bound");
    // Nothing was mounted on the host.
    assert!(std::fs::read_dir(&work).unwrap().next().is_none());
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.lines().any(|l| l.contains(" /work ")), "a /work mount leaked to the host");
}

#[test]
fn its_own_proc_is_writable_only_when_asked_and_only_its_own() {
    // What NVIDIA's driver does at cuInit: name a thread through /proc.
    // (The error file first: a redirection that fails is reported where
    // stderr goes at that moment.)
    let script = "{ echo labfy-t > /proc/self/task/$$/comm; } 2> \"$OUT/comm.err\" && cat /proc/$$/comm > \"$OUT/comm\"; \
                  { echo 1 > /proc/sys/kernel/sysrq; } 2> \"$OUT/sysctl.err\"; true";
    for asked in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let work = std::fs::canonicalize(dir.path()).unwrap();
        let mut jail = shell_jail(&work, script);
        jail.seccomp(Policy { sockets: Sockets::UnixOnly, driver_ioctl: false });
        if asked {
            jail.proc_writable();
        }
        assert!(run(jail).success());
        let read = |f: &str| std::fs::read_to_string(work.join(f)).unwrap_or_default();
        if labfy_sys::landlock::abi().is_none() {
            eprintln!("no Landlock here: nothing to tell apart");
            return;
        }
        if asked {
            assert_eq!(read("comm").trim(), "labfy-t", "{}", read("comm.err"));
        } else {
            assert_eq!(read("comm"), "", "a /proc write went through Landlock unasked");
            assert!(read("comm.err").contains("denied"), "{}", read("comm.err"));
        }
        // Never a knob of the machine's: no capability, not the host's root.
        assert!(!read("sysctl.err").is_empty(), "a sysctl was written");
    }
}

/// `memfd_create(2)` (x86-64's number), which NVIDIA's driver needs at
/// `cuInit`: refused by the allow-list, allowed with a GPU's driver ioctls.
#[cfg(target_arch = "x86_64")]
#[test]
fn the_gpu_runtimes_system_calls_come_only_with_the_gpu() {
    // perl-base is Essential on Debian: always there to make the raw call.
    assert!(Path::new("/usr/bin/perl").exists(), "no /usr/bin/perl to make the raw system call");
    for gpu in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let work = std::fs::canonicalize(dir.path()).unwrap();
        let mut root = Root::new();
        root.system().unwrap().devices().unwrap().proc().unwrap().tmp(1 << 20).unwrap().writable(&work).unwrap();
        let mut jail = Jail::new(Path::new("/usr/bin/perl"), root);
        // errno read at once: perl's open sets it too.
        let script = "my $fd = syscall(319, my $n = \"labfy\", 0); my $e = 0 + $!; \
                      open(my $o, '>', \"$ENV{OUT}/memfd\") or die; print $o ($fd >= 0 ? 'ok' : $e)";
        jail.arg("-e").arg(script).may_write(&work).env("OUT", &work);
        jail.seccomp(Policy { sockets: Sockets::UnixOnly, driver_ioctl: gpu });
        assert!(run(jail).success());
        let got = std::fs::read_to_string(work.join("memfd")).unwrap();
        let want = if gpu { "ok".to_owned() } else { libc::EPERM.to_string() };
        assert_eq!(got, want, "memfd_create with driver_ioctl {gpu}");
    }
}
