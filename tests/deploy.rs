//! The systemd unit in `deploy/` passes `systemd-analyze verify` and carries
//! the hardening the design asks for. (Attached to the `labfy` package.)

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_labfy");

fn unit() -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/labfy.service")).unwrap()
}

#[test]
fn the_unit_verifies() {
    let dir = tempfile::TempDir::new().unwrap();
    // verify checks that ExecStart's program exists: point it at the build.
    let text = unit().replace("ExecStart=/usr/bin/labfy ", &format!("ExecStart={BIN} "));
    let path = dir.path().join("labfy.service");
    std::fs::write(&path, text).unwrap();
    let o = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&path)
        .output()
        .expect("systemd-analyze is needed (Debian package systemd)");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let ours: Vec<&str> = err.lines().filter(|l| l.contains("labfy.service")).collect();
    assert!(ours.is_empty(), "systemd-analyze has remarks on the unit: {ours:?}");
}

#[test]
fn the_unit_carries_the_hardening_of_the_design() {
    let text = unit();
    let directives: Vec<&str> =
        text.lines().map(str::trim).filter(|l| !l.starts_with('#') && l.contains('=')).collect();
    for wanted in [
        "User=labfy",
        "ExecStart=/usr/bin/labfy up --data-dir /var/lib/labfy --runtime-dir /run/labfy/run",
        "StateDirectory=labfy",
        "StateDirectoryMode=0700",
        "RuntimeDirectory=labfy",
        "RuntimeDirectoryMode=0700",
        "NoNewPrivileges=yes",
        "ProtectSystem=strict",
        "ProtectHome=yes",
        "PrivateTmp=yes",
        "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6",
        "RestrictNamespaces=user mnt pid net ipc uts cgroup",
        "CapabilityBoundingSet=",
        "KillMode=mixed",
        // SPEC D1/D2: the governor's cgroups in the unit's delegated sub-tree.
        "Delegate=yes",
        "Environment=LABFY_GOVERNOR_CGROUP_ROOT=delegated",
        // The GPU's nodes and the pseudo-devices, nothing else.
        "DevicePolicy=closed",
        "DeviceAllow=char-drm rw",
        "DeviceAllow=/dev/kfd rw",
    ] {
        assert!(directives.contains(&wanted), "missing `{wanted}` in deploy/labfy.service");
    }
    assert!(!directives.iter().any(|d| d.starts_with("User=root")), "the unit must not run as root");
    // Each would undo the delegation or hide the GPU (the unit says why).
    for undoing in ["ProtectControlGroups=yes", "PrivateDevices=yes"] {
        assert!(!directives.contains(&undoing), "`{undoing}` in deploy/labfy.service undoes SPEC D1");
    }
    // A unit-wide address filter would cut egress off from Tor (SPEC P4);
    // the server's lack of network comes from its namespaces (SPEC P2).
    assert!(
        !directives.iter().any(|d| d.starts_with("IPAddressDeny=") || d.starts_with("IPAddressAllow=")),
        "an IP address filter in deploy/labfy.service would stop egress from reaching Tor"
    );
}
