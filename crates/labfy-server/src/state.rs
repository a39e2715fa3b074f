//! The one application state (STYLE 7): a `Clone` handle of `Arc`s.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use uuid::Uuid;

use crate::db::Db;
use crate::isolation::Isolation;
use crate::session::{RateLimit, Sessions};

/// Shared by every handler and layer.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    isolation: Isolation,
    runtime_dir: Option<PathBuf>,
    db: Db,
    sessions: Sessions,
    allowed_hosts: [String; 2],
    workspace: Uuid,
}

impl AppState {
    /// State for a server listening on loopback `port`, browsing `workspace`.
    pub fn new(db: Db, port: u16, workspace: Uuid, rate_limit: RateLimit) -> Self {
        Self {
            inner: Arc::new(Inner {
                isolation: Isolation::detect(),
                runtime_dir: None,
                db,
                sessions: Sessions::new(rate_limit),
                allowed_hosts: [format!("127.0.0.1:{port}"), format!("localhost:{port}")],
                workspace,
            }),
        }
    }

    /// Records the supervisor's runtime directory (for `/api/v1/status`).
    /// Call before the state is cloned; later calls change nothing.
    pub fn with_runtime_dir(mut self, dir: PathBuf) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.runtime_dir = Some(dir);
        }
        self
    }

    /// The supervisor's runtime directory, when supervised.
    pub fn runtime_dir(&self) -> Option<&Path> {
        self.inner.runtime_dir.as_deref()
    }

    /// Whether this process is off the network (read once, at start).
    pub fn isolation(&self) -> &Isolation {
        &self.inner.isolation
    }

    /// The store.
    pub fn db(&self) -> &Db {
        &self.inner.db
    }

    /// Live sessions.
    pub fn sessions(&self) -> &Sessions {
        &self.inner.sessions
    }

    /// The exact `Host` values accepted.
    pub fn allowed_hosts(&self) -> &[String] {
        &self.inner.allowed_hosts
    }

    /// The workspace new sessions browse.
    pub fn workspace(&self) -> Uuid {
        self.inner.workspace
    }
}
