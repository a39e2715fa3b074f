//! Peer authentication on every connection (SPEC P3): the kernel's word on
//! who the peer is (`SO_PEERCRED`: uid, and pid when a set of pids is given),
//! then a `Hello` with the protocol version, the boundary and the per-boot
//! secret. A refusal is answered once, with its reason, and the connection
//! is closed by the caller.

use std::collections::HashSet;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::net::UnixStream;

use crate::IpcError;
use crate::frame::{read_frame, write_frame};
use crate::messages::{Boundary, PROTOCOL_VERSION};
use crate::secret::Secret;

/// How long a new connection has to present its `Hello`.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(2);

/// First frame of every connection, client to server.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hello {
    /// [`PROTOCOL_VERSION`] of the client.
    pub protocol: u16,
    /// The boundary the client wants.
    pub boundary: Boundary,
    /// The per-boot secret, hex.
    pub secret: String,
}

/// The server's answer to `Hello`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case", deny_unknown_fields)]
pub enum HelloReply {
    /// Authenticated; requests may follow.
    Welcome {
        /// The server's protocol version.
        protocol: u16,
    },
    /// Refused; the connection closes.
    Refused {
        /// Why.
        reason: String,
    },
}

/// The pids allowed to connect: those the supervisor started, kept current as
/// it restarts children.
#[derive(Debug, Clone, Default)]
pub struct AllowedPids(Arc<RwLock<HashSet<i32>>>);

impl AllowedPids {
    /// Replaces the set.
    pub fn set(&self, pids: impl IntoIterator<Item = i32>) {
        let mut g = self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        *g = pids.into_iter().collect();
    }

    /// Adds one pid.
    pub fn insert(&self, pid: i32) {
        self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner).insert(pid);
    }

    /// Whether `pid` may connect.
    pub fn contains(&self, pid: i32) -> bool {
        self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner).contains(&pid)
    }
}

/// What a daemon accepts on one socket.
#[derive(Debug, Clone)]
pub struct PeerPolicy {
    /// The boundary this socket serves.
    pub boundary: Boundary,
    /// The only uid allowed to connect.
    pub uid: u32,
    /// When set, only these pids may connect.
    pub pids: Option<AllowedPids>,
    /// The per-boot secret.
    pub secret: Secret,
    /// Deadline for the `Hello`.
    pub handshake_timeout: Duration,
}

/// Who is on the other end, once authenticated.
#[derive(Debug, Clone, Copy)]
pub struct Peer {
    /// Peer uid (kernel's word).
    pub uid: u32,
    /// Peer pid (kernel's word), when known.
    pub pid: Option<i32>,
}

async fn refuse(stream: &mut UnixStream, reason: String) -> IpcError {
    let _ = write_frame(stream, &HelloReply::Refused { reason: reason.clone() }, HANDSHAKE_TIMEOUT).await;
    IpcError::Refused(reason)
}

/// Server side: authenticates the peer of `stream` under `policy`.
///
/// The `Hello` (one bounded frame, under a deadline) is read before any
/// verdict, so that a refusal always reaches the peer: closing a Unix socket
/// with its frame unread would turn the answer into a broken pipe.
pub async fn accept(stream: &mut UnixStream, policy: &PeerPolicy) -> Result<Peer, IpcError> {
    let cred = stream.peer_cred()?;
    let peer = Peer { uid: cred.uid(), pid: cred.pid() };
    let hello: Hello = match read_frame(stream, policy.handshake_timeout).await {
        Ok(Some(h)) => h,
        Ok(None) => return Err(IpcError::Refused("closed before Hello".into())),
        Err(IpcError::Malformed(m)) => return Err(refuse(stream, format!("malformed Hello: {m}")).await),
        Err(e) => return Err(e),
    };
    // The kernel's word first: who the peer is.
    if peer.uid != policy.uid {
        return Err(refuse(stream, format!("uid {} is not allowed (expected {})", peer.uid, policy.uid)).await);
    }
    if let Some(pids) = &policy.pids {
        match peer.pid {
            Some(pid) if pids.contains(pid) => {}
            other => return Err(refuse(stream, format!("pid {other:?} is not a process Labfy started")).await),
        }
    }
    // Then what it says.
    if hello.protocol != PROTOCOL_VERSION {
        let reason = format!("protocol {} not spoken here (this side speaks {PROTOCOL_VERSION})", hello.protocol);
        return Err(refuse(stream, reason).await);
    }
    if hello.boundary != policy.boundary {
        let reason = format!("this socket serves {:?}, not {:?}", policy.boundary, hello.boundary);
        return Err(refuse(stream, reason).await);
    }
    if !policy.secret.matches(&hello.secret) {
        return Err(refuse(stream, "wrong secret".into()).await);
    }
    write_frame(stream, &HelloReply::Welcome { protocol: PROTOCOL_VERSION }, policy.handshake_timeout).await?;
    Ok(peer)
}

/// Client side: presents `secret` for `boundary` and waits for the verdict.
pub async fn hello(stream: &mut UnixStream, boundary: Boundary, secret: &Secret) -> Result<(), IpcError> {
    let h = Hello { protocol: PROTOCOL_VERSION, boundary, secret: secret.to_hex() };
    write_frame(stream, &h, HANDSHAKE_TIMEOUT).await?;
    match read_frame(stream, HANDSHAKE_TIMEOUT).await? {
        Some(HelloReply::Welcome { .. }) => Ok(()),
        Some(HelloReply::Refused { reason }) => Err(IpcError::Refused(reason)),
        None => Err(IpcError::Refused("closed without a verdict".into())),
    }
}
