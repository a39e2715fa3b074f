//! The gateway's only way to the store (SPEC G1): the server hands it
//! connections it already owns. The gateway never opens SQLite, starts no
//! process and keeps nothing on disk.

use labfy_store::{Reads, Store, StoreError};

/// Access to the store's read models and command handlers, lent by the
/// server for the duration of one closure. Calls block; the server runs the
/// gateway on its blocking pool.
pub trait Backend: Send + Sync {
    /// Runs `f` with read models on a read-only connection.
    fn read(&self, f: &mut dyn FnMut(&Reads<'_>) -> Result<(), StoreError>) -> Result<(), StoreError>;
    /// Runs `f` with the store's single writer.
    fn write(&self, f: &mut dyn FnMut(&mut Store) -> Result<(), StoreError>) -> Result<(), StoreError>;
}

/// Runs a value-returning read through a [`Backend`].
pub fn read<T>(b: &dyn Backend, f: impl FnOnce(&Reads<'_>) -> Result<T, StoreError>) -> Result<T, StoreError> {
    let mut f = Some(f);
    let mut out = None;
    b.read(&mut |r| {
        if let Some(f) = f.take() {
            out = Some(f(r)?);
        }
        Ok(())
    })?;
    out.ok_or_else(|| StoreError::Internal("backend did not run the read".into()))
}

/// Runs a value-returning command through a [`Backend`].
pub fn write<T>(b: &dyn Backend, f: impl FnOnce(&mut Store) -> Result<T, StoreError>) -> Result<T, StoreError> {
    let mut f = Some(f);
    let mut out = None;
    b.write(&mut |s| {
        if let Some(f) = f.take() {
            out = Some(f(s)?);
        }
        Ok(())
    })?;
    out.ok_or_else(|| StoreError::Internal("backend did not run the command".into()))
}

/// A backend over a store this process owns directly: for tests, benchmarks
/// and the CLI. The server uses its own pool instead.
pub struct DirectBackend {
    store: std::sync::Mutex<Store>,
}

impl DirectBackend {
    /// Wraps an open store.
    pub fn new(store: Store) -> Self {
        Self { store: std::sync::Mutex::new(store) }
    }
}

impl Backend for DirectBackend {
    fn read(&self, f: &mut dyn FnMut(&Reads<'_>) -> Result<(), StoreError>) -> Result<(), StoreError> {
        let store = self.store.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&store.reads())
    }

    fn write(&self, f: &mut dyn FnMut(&mut Store) -> Result<(), StoreError>) -> Result<(), StoreError> {
        let mut store = self.store.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut store)
    }
}
