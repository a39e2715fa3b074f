//! Where Labfy makes its cgroups: a hierarchy's root, given as a parameter
//! (SPEC D2), as youki's `libcgroups` takes one.
//!
//! A [`Tree`] is either the unified v2 hierarchy's directory, or one
//! directory per v1 controller. Three origins:
//! - **system**: the whole hierarchy at `/sys/fs/cgroup` (v2) or each v1
//!   controller's mount point. Only root may manage it (`labfy up` as root).
//! - **delegated**: the sub-tree systemd hands to the service (`Delegate=yes`,
//!   SPEC D1): the parent of the cgroup leaf named [`SUPERVISOR_LEAF`] that the
//!   supervisor moved itself into at start, read from `/proc/self/cgroup`.
//!   cgroup v2 allows controllers only below a cgroup that holds no process
//!   ("no internal processes"): hence the supervisor's leaf, beside which the
//!   governor makes `labfy/<name>`.
//! - **given**: a directory named by the operator or a test (`v2:/dir`, or
//!   `v1:/dir` holding one directory per controller): the fixture trees of
//!   the tests, where files stand for what the kernel would create.
//!
//! The tree implements `cgroups-rs`'s `Hierarchy`, so the limits are still
//! written and read by that crate; what this module does by hand is what the
//! crate does against fixed paths (it reads `/sys/fs/cgroup/cgroup.controllers`
//! and ignores `cgroup.subtree_control` write errors): finding the
//! controllers a tree offers, enabling them below its root with each write
//! checked, and making the directories (an existing one is never adopted).

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use cgroups_rs::fs::cpu::CpuController;
use cgroups_rs::fs::cpuacct::CpuAcctController;
use cgroups_rs::fs::hierarchies;
use cgroups_rs::fs::memory::MemController;
use cgroups_rs::fs::pid::PidController;
use cgroups_rs::fs::{Cgroup, Subsystem};

use super::{CONTROLLERS, CgroupError, Hierarchy, PARENT, is_root};

/// The cgroup leaf the supervisor moves itself (and so every process it
/// starts) into when systemd delegated it a sub-tree; the delegated root is
/// that leaf's parent.
pub const SUPERVISOR_LEAF: &str = "supervisor";

/// Where the unified hierarchy is mounted on a v2 system.
pub const UNIFIED_MOUNT: &str = "/sys/fs/cgroup";

/// Which tree the governor manages, as the operator (or the supervisor)
/// names it: `LABFY_GOVERNOR_CGROUP_ROOT` / `--cgroup-root`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeSpec {
    /// `auto`: the whole hierarchy when root, else the delegated sub-tree.
    Auto,
    /// `system`: the whole hierarchy (root only).
    System,
    /// `delegated`: the sub-tree systemd delegated to this service.
    Delegated,
    /// `v2:/dir`: a unified-hierarchy directory.
    V2(PathBuf),
    /// `v1:/dir`: a directory holding one directory per v1 controller.
    V1(PathBuf),
}

impl FromStr for TreeSpec {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let absolute = |p: &str| {
            let path = PathBuf::from(p);
            if path.is_absolute() && !p.split('/').any(|c| c == "..") {
                Ok(path)
            } else {
                Err(format!("{p:?} is not an absolute path without `..`"))
            }
        };
        match text {
            "auto" => Ok(Self::Auto),
            "system" => Ok(Self::System),
            "delegated" => Ok(Self::Delegated),
            _ => match text.split_once(':') {
                Some(("v2", dir)) => absolute(dir).map(Self::V2),
                Some(("v1", dir)) => absolute(dir).map(Self::V1),
                _ => Err(format!("cgroup root {text:?} is none of auto, system, delegated, v2:/dir, v1:/dir")),
            },
        }
    }
}

/// How a tree was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The whole hierarchy.
    System,
    /// A sub-tree delegated by systemd.
    Delegated,
    /// A directory named by the operator or a test.
    Given,
}

#[derive(Debug, Clone)]
enum Layout {
    /// The one directory of the unified hierarchy.
    V2(PathBuf),
    /// Each controller's directory, by controller name.
    V1(BTreeMap<String, PathBuf>),
}

/// The part of a cgroup hierarchy Labfy may manage (SPEC D2). Cheap to clone.
#[derive(Debug, Clone)]
pub struct Tree {
    layout: Layout,
    origin: Origin,
}

impl Tree {
    /// A unified (v2) tree rooted at `dir`.
    pub fn v2(dir: impl Into<PathBuf>) -> Self {
        Self { layout: Layout::V2(dir.into()), origin: Origin::Given }
    }

    /// A v1 tree: `dir/<controller>` for each of Labfy's controllers found
    /// there (a symbolic link such as `cpu -> cpu,cpuacct` counts).
    pub fn v1(dir: impl AsRef<Path>) -> Self {
        let dir = dir.as_ref();
        let dirs =
            CONTROLLERS.iter().map(|c| ((*c).to_owned(), dir.join(c))).filter(|(_, path)| path.is_dir()).collect();
        Self { layout: Layout::V1(dirs), origin: Origin::Given }
    }

    /// The whole hierarchy of this machine (root only).
    pub fn system() -> Result<Self, CgroupError> {
        if !is_root() {
            return Err(CgroupError::Unavailable(
                "the whole cgroup hierarchy is root's: the governor does not run as root, and systemd delegated \
                 it no sub-tree (cgroup root `delegated`)"
                    .to_owned(),
            ));
        }
        if hierarchies::is_cgroup2_unified_mode() {
            return Ok(Self { layout: Layout::V2(PathBuf::from(UNIFIED_MOUNT)), origin: Origin::System });
        }
        Ok(Self { layout: Layout::V1(v1_mounts()), origin: Origin::System })
    }

    /// The sub-tree systemd delegated to this service: the parent of this
    /// process's [`SUPERVISOR_LEAF`] cgroup, in each hierarchy.
    pub fn delegated() -> Result<Self, CgroupError> {
        let own = std::fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| CgroupError::Unavailable(format!("cannot read /proc/self/cgroup: {e}")))?;
        if hierarchies::is_cgroup2_unified_mode() {
            Self::delegated_from(&own, Some(Path::new(UNIFIED_MOUNT)), &BTreeMap::new())
        } else {
            Self::delegated_from(&own, None, &v1_mounts())
        }
    }

    /// [`Tree::delegated`] from the text of `/proc/self/cgroup` and where
    /// the hierarchies are mounted: `unified` on a v2 system, else each v1
    /// controller's mount point.
    pub fn delegated_from(
        own: &str,
        unified: Option<&Path>,
        v1: &BTreeMap<String, PathBuf>,
    ) -> Result<Self, CgroupError> {
        let not_delegated = |why: String| {
            CgroupError::Unavailable(format!(
                "no delegated cgroup sub-tree: {why} (under systemd, the unit needs Delegate=yes and the supervisor \
                 moves itself into a `{SUPERVISOR_LEAF}` leaf at start)"
            ))
        };
        // Each line: `id:controllers:/path` (`0::/path` for the unified one).
        let lines: Vec<(&str, &str)> = own
            .lines()
            .filter_map(|line| {
                let mut parts = line.splitn(3, ':');
                let _id = parts.next()?;
                Some((parts.next()?, parts.next()?))
            })
            .collect();
        let parent_of_leaf = |path: &str| -> Result<String, CgroupError> {
            let rel = path.trim_start_matches('/');
            match rel.rsplit_once('/') {
                Some((parent, leaf)) if leaf == SUPERVISOR_LEAF => Ok(parent.to_owned()),
                None if rel == SUPERVISOR_LEAF => Ok(String::new()),
                _ => Err(not_delegated(format!("this process's cgroup is {path}, not a `{SUPERVISOR_LEAF}` leaf"))),
            }
        };
        if let Some(mount) = unified {
            let (_, path) = lines
                .iter()
                .find(|(controllers, _)| controllers.is_empty())
                .ok_or_else(|| not_delegated("/proc/self/cgroup has no unified (0::) line".to_owned()))?;
            let parent = parent_of_leaf(path)?;
            return Ok(Self { layout: Layout::V2(mount.join(parent)), origin: Origin::Delegated });
        }
        let mut dirs = BTreeMap::new();
        for (name, mount) in v1 {
            let Some((_, path)) = lines.iter().find(|(controllers, _)| controllers.split(',').any(|c| c == name))
            else {
                continue;
            };
            dirs.insert(name.clone(), mount.join(parent_of_leaf(path)?));
        }
        if dirs.is_empty() {
            return Err(not_delegated("no v1 controller of Labfy's (memory, cpu, pids) is mounted".to_owned()));
        }
        Ok(Self { layout: Layout::V1(dirs), origin: Origin::Delegated })
    }

    /// The tree `spec` names, on this machine.
    pub fn resolve(spec: &TreeSpec) -> Result<Self, CgroupError> {
        match spec {
            TreeSpec::Auto if is_root() => Self::system(),
            TreeSpec::Auto | TreeSpec::Delegated => Self::delegated(),
            TreeSpec::System => Self::system(),
            TreeSpec::V2(dir) => Ok(Self::v2(dir)),
            TreeSpec::V1(dir) => Ok(Self::v1(dir)),
        }
    }

    /// Which hierarchy it is part of.
    pub fn version(&self) -> Hierarchy {
        match self.layout {
            Layout::V2(_) => Hierarchy::V2,
            Layout::V1(_) => Hierarchy::V1,
        }
    }

    /// How it was found.
    pub fn origin(&self) -> Origin {
        self.origin
    }

    /// Where Labfy's cgroups go: the tree's directory (v2) or directories (v1).
    pub fn roots(&self) -> Vec<PathBuf> {
        match &self.layout {
            Layout::V2(dir) => vec![dir.clone()],
            Layout::V1(dirs) => dirs.values().cloned().collect(),
        }
    }

    /// The controllers the tree offers, among Labfy's ([`CONTROLLERS`]).
    pub fn offered(&self) -> Result<Vec<String>, CgroupError> {
        match &self.layout {
            Layout::V2(dir) => {
                let file = dir.join("cgroup.controllers");
                let text = std::fs::read_to_string(&file).map_err(|e| {
                    CgroupError::Unavailable(format!("{} is not a cgroup v2 directory ({e})", dir.display()))
                })?;
                let offered: Vec<&str> = text.split_whitespace().collect();
                Ok(CONTROLLERS.iter().filter(|c| offered.contains(c)).map(|c| (*c).to_owned()).collect())
            }
            Layout::V1(dirs) => Ok(CONTROLLERS
                .iter()
                .filter(|c| dirs.get(**c).is_some_and(|dir| dir.join("cgroup.procs").exists()))
                .map(|c| (*c).to_owned())
                .collect()),
        }
    }

    /// Makes the tree ready for `labfy/<name>` cgroups with the `required`
    /// controllers, and returns the controllers to attach (the required ones
    /// and whichever others the tree offers).
    ///
    /// Refuses, each time with a sentence, a tree that lacks a required
    /// controller (a delegation without it), one that is not writable (no
    /// delegation, a read-only mount), and on v2 a root that still holds
    /// processes. On v2 the controllers are enabled in the root's and in
    /// `labfy/`'s `cgroup.subtree_control` (each write checked; what is
    /// already enabled is not written again).
    pub fn prepare(&self, required: &[&str]) -> Result<Vec<String>, CgroupError> {
        let offered = self.offered()?;
        if let Some(missing) = required.iter().find(|c| !offered.iter().any(|o| o == *c)) {
            return Err(CgroupError::Unavailable(format!(
                "the {missing} controller is not available in {} (offered: {}){}",
                self,
                if offered.is_empty() { "none".to_owned() } else { offered.join(", ") },
                if self.origin == Origin::Delegated {
                    "; systemd delegates it with Delegate=yes (or Delegate=memory cpu pids) in the unit"
                } else {
                    ""
                }
            )));
        }
        match &self.layout {
            Layout::V2(dir) => {
                let wanted: Vec<&str> = offered.iter().map(String::as_str).collect();
                enable(dir, &wanted)?;
                make_dir(&dir.join(PARENT), true)?;
                enable(&dir.join(PARENT), &wanted)?;
            }
            Layout::V1(dirs) => {
                for (controller, dir) in dirs {
                    if offered.contains(controller) {
                        make_dir(&dir.join(PARENT), true)?;
                    }
                }
            }
        }
        Ok(offered)
    }

    /// Each `attached` controller's directory for `path` (one on v2).
    pub(super) fn dirs_of(&self, path: &str, attached: &[String]) -> Vec<PathBuf> {
        match &self.layout {
            Layout::V2(dir) => vec![dir.join(path)],
            Layout::V1(dirs) => {
                // `cpu` and `cpuacct` may be one mount (a symbolic link):
                // one directory per hierarchy, told by the canonical root.
                let mut seen: Vec<PathBuf> = Vec::new();
                let mut found = Vec::new();
                for (_, dir) in dirs.iter().filter(|(c, _)| attached.contains(c)) {
                    let canonical = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.clone());
                    if !seen.contains(&canonical) {
                        seen.push(canonical);
                        found.push(dir.join(path));
                    }
                }
                found
            }
        }
    }

    /// A `cgroups-rs` handle on `path` below the tree, with `attached` controllers.
    pub(super) fn load(&self, path: &str, attached: &[String]) -> Cgroup {
        Cgroup::load_with_specified_controllers(Box::new(self.clone()), path, attached.to_vec())
    }
}

impl fmt::Display for Tree {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let origin = match self.origin {
            Origin::System => "the whole hierarchy",
            Origin::Delegated => "the delegated sub-tree",
            Origin::Given => "the given tree",
        };
        match &self.layout {
            Layout::V2(dir) => write!(f, "{origin} of cgroup v2 at {}", dir.display()),
            Layout::V1(dirs) => {
                let list: Vec<String> = dirs.values().map(|d| d.display().to_string()).collect();
                let list = if list.is_empty() { "(no controller)".into() } else { list.join(", ") };
                write!(f, "{origin} of cgroup v1 at {list}")
            }
        }
    }
}

/// Moves this process (all its threads) into a [`SUPERVISOR_LEAF`] cgroup
/// below the one it runs in, in every hierarchy Labfy uses: what the
/// supervisor does first under a unit with `Delegate=yes`, so that the
/// unit's cgroup holds no process and the governor may give controllers to
/// `labfy/<name>` beside the leaf (cgroup v2's rule; v1 does the same for
/// one layout on both). Every process the supervisor starts inherits the
/// leaf. Already in a leaf (a restart): nothing to do. Returns the
/// directories it moved into; a cgroup that is not this user's is refused
/// with the reason (the unit lacks `Delegate=yes`).
pub fn enter_supervisor_leaf() -> Result<Vec<PathBuf>, CgroupError> {
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| CgroupError::Unavailable(format!("cannot read /proc/self/cgroup: {e}")))?;
    let places: Vec<PathBuf> = if hierarchies::is_cgroup2_unified_mode() {
        own.lines()
            .filter_map(|l| l.strip_prefix("0::"))
            .map(|path| Path::new(UNIFIED_MOUNT).join(path.trim_start_matches('/')))
            .collect()
    } else {
        let mounts = v1_mounts();
        let mut places: Vec<PathBuf> = Vec::new();
        for line in own.lines() {
            let mut parts = line.splitn(3, ':');
            let (_, Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next()) else { continue };
            if let Some(mount) = controllers.split(',').find_map(|c| mounts.get(c)) {
                let place = mount.join(path.trim_start_matches('/'));
                if !places.contains(&place) {
                    places.push(place);
                }
            }
        }
        places
    };
    if places.is_empty() {
        return Err(CgroupError::Unavailable("this process is in no cgroup of Labfy's controllers".to_owned()));
    }
    let mut moved = Vec::new();
    for place in places {
        if place.file_name().is_some_and(|leaf| leaf == SUPERVISOR_LEAF) {
            continue; // already there
        }
        let leaf = place.join(SUPERVISOR_LEAF);
        make_dir(&leaf, true)?;
        let procs = leaf.join("cgroup.procs");
        std::fs::write(&procs, "0").map_err(|e| io_unavailable(&procs, "move the supervisor into", &e))?;
        moved.push(leaf);
    }
    Ok(moved)
}

/// Enables `controllers` in `dir/cgroup.subtree_control` (one write, every
/// controller `+`-prefixed, as the kernel takes it), unless all are listed.
fn enable(dir: &Path, controllers: &[&str]) -> Result<(), CgroupError> {
    let file = dir.join("cgroup.subtree_control");
    let current = std::fs::read_to_string(&file).map_err(|e| io_unavailable(&file, "read", &e))?;
    let listed: Vec<&str> = current.split_whitespace().collect();
    let missing: Vec<String> = controllers.iter().filter(|c| !listed.contains(c)).map(|c| format!("+{c}")).collect();
    if missing.is_empty() {
        return Ok(());
    }
    std::fs::write(&file, missing.join(" ")).map_err(|e| match e.raw_os_error() {
        Some(libc::EBUSY) => CgroupError::Unavailable(format!(
            "cannot enable {} in {}: the cgroup holds processes, and cgroup v2 gives controllers only to the \
             children of a cgroup without any (the supervisor moves itself into a `{SUPERVISOR_LEAF}` leaf first)",
            missing.join(" "),
            file.display()
        )),
        _ => io_unavailable(&file, &format!("enable {} in", missing.join(" ")), &e),
    })
}

/// Makes a cgroup directory; `shared`: an existing one is fine (the
/// `labfy/` parent), else it is refused by the caller's check beforehand.
pub(super) fn make_dir(dir: &Path, shared: bool) -> Result<(), CgroupError> {
    match std::fs::create_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if shared && e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(io_unavailable(dir, "create", &e)),
    }
}

/// A failed cgroupfs call as a sentence: permission and read-only mean the
/// tree is not ours to manage; the rest is reported as it is.
pub(super) fn io_unavailable(path: &Path, op: &str, error: &io::Error) -> CgroupError {
    let why = match error.raw_os_error() {
        Some(libc::EROFS) => "the cgroup hierarchy is mounted read-only here",
        Some(libc::EACCES | libc::EPERM) => {
            "permission denied: this cgroup sub-tree is not this user's (no root, no systemd delegation)"
        }
        Some(libc::ENOENT) => "it does not exist (controller or kernel feature not available)",
        _ => return CgroupError::Io { op: format!("{op} {}", path.display()), source: io::Error::from(error.kind()) },
    };
    CgroupError::Unavailable(format!("cannot {op} {}: {why} ({error})", path.display()))
}

/// Each of Labfy's v1 controllers' mount points on this machine.
fn v1_mounts() -> BTreeMap<String, PathBuf> {
    use cgroups_rs::fs::Controllers;
    let v1 = hierarchies::V1::new();
    [
        ("memory", Controllers::Mem),
        ("cpu", Controllers::Cpu),
        ("cpuacct", Controllers::CpuAcct),
        ("pids", Controllers::Pids),
    ]
    .into_iter()
    .filter_map(|(name, controller)| v1.get_mount_point(controller).map(|(point, _root)| (name.to_owned(), point)))
    .collect()
}

impl cgroups_rs::fs::Hierarchy for Tree {
    fn subsystems(&self) -> Vec<Subsystem> {
        let offered = self.offered().unwrap_or_default();
        let make = |name: &str, dir: PathBuf, v2: bool| -> Option<Subsystem> {
            Some(match name {
                "memory" => Subsystem::Mem(MemController::new(dir, PathBuf::new(), v2)),
                "cpu" => Subsystem::Cpu(CpuController::new(dir, PathBuf::new(), v2)),
                "cpuacct" if !v2 => Subsystem::CpuAcct(CpuAcctController::new(dir, PathBuf::new())),
                "pids" => Subsystem::Pid(PidController::new(dir, PathBuf::new(), v2)),
                _ => return None,
            })
        };
        match &self.layout {
            Layout::V2(dir) => offered.iter().filter_map(|c| make(c, dir.clone(), true)).collect(),
            Layout::V1(dirs) => dirs
                .iter()
                .filter(|(c, _)| offered.contains(c))
                .filter_map(|(c, dir)| make(c, dir.clone(), false))
                .collect(),
        }
    }

    fn root(&self) -> PathBuf {
        match &self.layout {
            Layout::V2(dir) => dir.clone(),
            // Used by cgroups-rs for v2 operations only.
            Layout::V1(dirs) => dirs.values().next().cloned().unwrap_or_default(),
        }
    }

    fn root_control_group(&self) -> Cgroup {
        Cgroup::load(Box::new(self.clone()), "")
    }

    fn parent_control_group(&self, path: &str) -> Cgroup {
        let parent = Path::new(path).parent().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
        Cgroup::load(Box::new(self.clone()), parent)
    }

    fn v2(&self) -> bool {
        matches!(self.layout, Layout::V2(_))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_and_refuse() {
        assert_eq!("auto".parse::<TreeSpec>().unwrap(), TreeSpec::Auto);
        assert_eq!("delegated".parse::<TreeSpec>().unwrap(), TreeSpec::Delegated);
        assert_eq!("v2:/sys/fs/cgroup/x".parse::<TreeSpec>().unwrap(), TreeSpec::V2("/sys/fs/cgroup/x".into()));
        assert_eq!("v1:/tmp/t".parse::<TreeSpec>().unwrap(), TreeSpec::V1("/tmp/t".into()));
        for bad in ["", "v3:/x", "v2:relative", "v2:/a/../b", "root"] {
            assert!(bad.parse::<TreeSpec>().is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn a_delegated_v2_tree_is_the_parent_of_the_supervisor_leaf() {
        let own = "0::/system.slice/labfy.service/supervisor\n";
        let tree = Tree::delegated_from(own, Some(Path::new("/sys/fs/cgroup")), &BTreeMap::new()).unwrap();
        assert_eq!(tree.roots(), [PathBuf::from("/sys/fs/cgroup/system.slice/labfy.service")]);
        assert_eq!(tree.version(), Hierarchy::V2);
        assert_eq!(tree.origin(), Origin::Delegated);
        // Not moved into the leaf: no delegation to speak of.
        let error = Tree::delegated_from(
            "0::/system.slice/labfy.service\n",
            Some(Path::new("/sys/fs/cgroup")),
            &BTreeMap::new(),
        )
        .unwrap_err()
        .to_string();
        assert!(error.contains("not a `supervisor` leaf") && error.contains("Delegate=yes"), "{error}");
    }

    #[test]
    fn a_delegated_v1_tree_follows_each_controllers_line() {
        let own = "12:pids:/system.slice/labfy.service/supervisor\n4:cpu,cpuacct:/system.slice/labfy.service/supervisor\n\
                   3:memory:/system.slice/labfy.service/supervisor\n1:name=systemd:/system.slice/labfy.service/supervisor\n0::/\n";
        let mounts: BTreeMap<String, PathBuf> = [
            ("memory", "/sys/fs/cgroup/memory"),
            ("cpu", "/sys/fs/cgroup/cpu,cpuacct"),
            ("cpuacct", "/sys/fs/cgroup/cpu,cpuacct"),
            ("pids", "/sys/fs/cgroup/pids"),
        ]
        .into_iter()
        .map(|(c, p)| (c.to_owned(), PathBuf::from(p)))
        .collect();
        let tree = Tree::delegated_from(own, None, &mounts).unwrap();
        assert_eq!(tree.version(), Hierarchy::V1);
        let roots = tree.roots();
        assert!(roots.contains(&PathBuf::from("/sys/fs/cgroup/memory/system.slice/labfy.service")), "{roots:?}");
        assert!(roots.contains(&PathBuf::from("/sys/fs/cgroup/cpu,cpuacct/system.slice/labfy.service")), "{roots:?}");
        assert!(roots.contains(&PathBuf::from("/sys/fs/cgroup/pids/system.slice/labfy.service")), "{roots:?}");
    }
}
