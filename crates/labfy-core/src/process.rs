//! A process as the kernel names it for good (SPEC K3, I1): its pid and its
//! start time. A pid is recycled; the pair is not. The governor ties a
//! campaign's reservation to the workspace server that asked; `labfy
//! import` records itself on its job, so the next import can tell a job
//! whose process was killed from one still running.

/// A living process, or one that lived: pid and start time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Holder {
    /// Its pid, in the reader's pid namespace.
    pub pid: i32,
    /// Field 22 of `/proc/<pid>/stat` (clock ticks since boot).
    pub start: u64,
}

impl Holder {
    /// The living process `pid`, or `None` when there is none (or only a
    /// zombie).
    pub fn of(pid: i32) -> Option<Self> {
        let (state, start) = stat(pid)?;
        (state != "Z" && state != "X").then_some(Self { pid, start })
    }

    /// This process.
    pub fn current() -> Option<Self> {
        Self::of(i32::try_from(std::process::id()).ok()?)
    }

    /// Whether this very process still lives: same pid, same start time,
    /// not a zombie.
    pub fn alive(&self) -> bool {
        Self::of(self.pid).is_some_and(|now| now.start == self.start)
    }
}

/// The state and start time of `pid` from `/proc/<pid>/stat`.
fn stat(pid: i32) -> Option<(String, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: the fields that
    // follow it start after its last `)`, with field 3, the state.
    let rest = text.get(text.rfind(')')? + 1..)?;
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.to_owned();
    let start = fields.nth(18)?.parse().ok()?;
    Some((state, start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_lives_and_a_recycled_pid_is_not_it() {
        let me = Holder::current().expect("this process");
        assert!(me.alive());
        assert!(!Holder { start: me.start + 1, ..me }.alive(), "same pid, another start: another process");
        let mut child = std::process::Command::new("true").spawn().expect("true");
        let pid = i32::try_from(child.id()).expect("pid");
        let seen = Holder::of(pid);
        child.wait().expect("wait");
        assert!(seen.is_none_or(|h| !h.alive()), "a reaped child is gone");
    }
}
