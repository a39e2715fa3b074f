//! Whether this system lets an unprivileged program make the user
//! namespace its confinement needs (SPEC D, issue 46 item 4). A service
//! user confines its children in user namespaces; Ubuntu 24.04 and later
//! restrict them through AppArmor (`kernel.apparmor_restrict_unprivileged_userns`:
//! the namespace is made, but holds no capability, so its first mount
//! fails), older Debian had `kernel.unprivileged_userns_clone`, any system
//! may set `user.max_user_namespaces` to 0 or forbid `unshare` by seccomp.
//! [`check`] tries what a jail does — a user and a mount namespace, the
//! identity maps, a mount — in a child, and says why it failed and how to
//! fix it, so `labfy up` refuses to start with that reason instead of
//! failing at its first child.

use std::ffi::CStr;
use std::io;

use crate::raw;

/// The system's knobs that deny user namespaces, and what each says.
fn cause() -> String {
    let read = |p: &str| std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned());
    if read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        return "AppArmor restricts unprivileged user namespaces here (kernel.apparmor_restrict_unprivileged_userns = \
                1, Ubuntu 24.04 and later). The Debian package installs /etc/apparmor.d/labfy, which grants them to \
                Labfy's programs only: load it with `sudo apparmor_parser -r /etc/apparmor.d/labfy` (or reinstall \
                the package); lowering the sysctl would open them to every program"
            .into();
    }
    if read("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        return "user.max_user_namespaces is 0: give it a value above 0 (`sudo sysctl user.max_user_namespaces=15000`)"
            .into();
    }
    if read("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        return "kernel.unprivileged_userns_clone is 0: set it to 1 (`sudo sysctl kernel.unprivileged_userns_clone=1`)"
            .into();
    }
    "a security policy forbids it (a seccomp filter, a container runtime, SELinux): run Labfy where its user may \
     create user namespaces"
        .into()
}

/// The exit status of a probe that failed at `step` (1–6) with `errno`:
/// both in the 8 bits an exit status keeps (errno above 34 shown as 35).
fn status_of(step: i32, errno: i32) -> i32 {
    step * 36 + errno.clamp(0, 35)
}

/// The step of the probe that failed, from its exit status.
fn step_name(code: i32) -> &'static str {
    match code / 36 {
        1 => "unshare(CLONE_NEWUSER | CLONE_NEWNS)",
        2 => "writing /proc/self/setgroups",
        3 => "writing /proc/self/uid_map",
        4 => "writing /proc/self/gid_map",
        5 => "making / private",
        _ => "mounting a tmpfs",
    }
}

/// Checks that this process may confine its children in user namespaces.
/// Root needs none (its jails use the other namespaces only): always fine.
/// Otherwise a child tries a jail's first steps and the error says which
/// step failed, why (the system's setting) and how to fix it.
pub fn check() -> Result<(), String> {
    // SAFETY: geteuid and getegid take no argument and cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if uid == 0 {
        return Ok(());
    }
    let uid_map = format!("{uid} {uid} 1");
    let gid_map = format!("{gid} {gid} 1");
    // SAFETY: the child makes system calls on memory prepared above and
    // leaves with _exit; the parent waits for it.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("cannot check user namespaces: fork: {}", io::Error::last_os_error()));
    }
    if pid == 0 {
        let fail = |step: i32, e: io::Error| -> ! {
            // SAFETY: leaving the child without running destructors; the
            // status carries the step and the errno.
            unsafe { libc::_exit(status_of(step, e.raw_os_error().unwrap_or(35))) }
        };
        let tmp: &CStr = c"/tmp";
        let root: &CStr = c"/";
        if let Err(e) = raw::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNS) {
            fail(1, e);
        }
        if let Err(e) = raw::write_file(c"/proc/self/setgroups", b"deny") {
            fail(2, e);
        }
        if let Err(e) = raw::write_file(c"/proc/self/uid_map", uid_map.as_bytes()) {
            fail(3, e);
        }
        if let Err(e) = raw::write_file(c"/proc/self/gid_map", gid_map.as_bytes()) {
            fail(4, e);
        }
        if let Err(e) = raw::mount(None, root, None, libc::MS_REC | libc::MS_PRIVATE, None) {
            fail(5, e);
        }
        if let Err(e) = raw::mount(Some(c"tmpfs"), tmp, Some(c"tmpfs"), 0, Some(c"size=64k")) {
            fail(6, e);
        }
        // SAFETY: leaving the child.
        unsafe { libc::_exit(0) };
    }
    let mut status = 0;
    // SAFETY: waiting for our own child.
    if unsafe { libc::waitpid(pid, &mut status, 0) } < 0 {
        return Err(format!("cannot check user namespaces: waitpid: {}", io::Error::last_os_error()));
    }
    if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
        return Ok(());
    }
    let code = if libc::WIFEXITED(status) { libc::WEXITSTATUS(status) } else { 0 };
    Err(describe(code))
}

/// The refusal for a probe that ended with `code`.
fn describe(code: i32) -> String {
    let errno = code % 36;
    let error = if errno == 35 { "an error".to_owned() } else { io::Error::from_raw_os_error(errno).to_string() };
    format!(
        "this system does not let Labfy's user confine its processes in user namespaces ({} failed: {error}): {}",
        step_name(code),
        cause()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_needs_no_user_namespace_and_a_cause_is_always_named() {
        // SAFETY: geteuid takes no argument.
        if unsafe { libc::geteuid() } == 0 {
            assert_eq!(check(), Ok(()));
        }
        let said = describe(status_of(1, libc::EPERM));
        assert!(said.contains("unshare(CLONE_NEWUSER | CLONE_NEWNS) failed: Operation not permitted"), "{said}");
        assert_eq!(step_name(status_of(3, libc::EACCES)), "writing /proc/self/uid_map");
        assert!(status_of(6, 200) <= 255);
    }
}
