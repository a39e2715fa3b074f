//! The server's access to the store: one writer and a small pool of read-only
//! connections, each used on the blocking thread pool so SQLite never blocks
//! the async workers.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use labfy_store::{ReadOnlyStore, Reads, Store, StoreError};

use crate::error::{ApiError, ApiResult};

/// Idle read connections kept open.
pub const MAX_IDLE_READERS: usize = 8;

/// Handle to the store, cheap to clone.
#[derive(Clone)]
pub struct Db {
    data_dir: PathBuf,
    writer: Arc<Mutex<Store>>,
    readers: Arc<Mutex<Vec<ReadOnlyStore>>>,
}

impl Db {
    /// Wraps an open (migrated) store.
    pub fn new(store: Store, data_dir: PathBuf) -> Self {
        Self { data_dir, writer: Arc::new(Mutex::new(store)), readers: Arc::new(Mutex::new(Vec::new())) }
    }

    /// The data directory (its blob store lies under it).
    pub fn data_dir(&self) -> &std::path::Path {
        &self.data_dir
    }

    /// Runs `f` with read models on a pooled read-only connection.
    pub async fn read<T, F>(&self, f: F) -> ApiResult<T>
    where
        T: Send + 'static,
        F: FnOnce(Reads<'_>) -> Result<T, StoreError> + Send + 'static,
    {
        let this = self.clone();
        tokio::task::spawn_blocking(move || this.read_blocking(f))
            .await
            .map_err(|e| ApiError::internal(&e))?
            .map_err(ApiError::from)
    }

    /// Runs `f` with read models on a pooled read-only connection, on the
    /// calling thread (call it from the blocking pool).
    pub fn read_blocking<T>(&self, f: impl FnOnce(Reads<'_>) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let pooled = self.readers.lock().unwrap_or_else(std::sync::PoisonError::into_inner).pop();
        let conn = match pooled {
            Some(c) => c,
            None => ReadOnlyStore::open(&self.data_dir)?,
        };
        let out = f(conn.reads());
        let mut pool = self.readers.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if pool.len() < MAX_IDLE_READERS {
            pool.push(conn);
        }
        out
    }

    /// Runs `f` with the writer, on the calling thread (from the blocking pool).
    pub fn write_blocking<T>(&self, f: impl FnOnce(&mut Store) -> Result<T, StoreError>) -> Result<T, StoreError> {
        let mut store = self.writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut store)
    }

    /// Runs `f` with the (single) writer.
    pub async fn write<T, F>(&self, f: F) -> ApiResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Store) -> Result<T, StoreError> + Send + 'static,
    {
        let writer = self.writer.clone();
        tokio::task::spawn_blocking(move || {
            let mut store = writer.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            f(&mut store)
        })
        .await
        .map_err(|e| ApiError::internal(&e))?
        .map_err(ApiError::from)
    }
}

/// The gateway reaches the store only through the server's connections (SPEC G1).
impl labfy_gateway::Backend for Db {
    fn read(&self, f: &mut dyn FnMut(&Reads<'_>) -> Result<(), StoreError>) -> Result<(), StoreError> {
        self.read_blocking(|r| f(&r))
    }

    fn write(&self, f: &mut dyn FnMut(&mut Store) -> Result<(), StoreError>) -> Result<(), StoreError> {
        self.write_blocking(|s| f(s))
    }
}
