//! The journal writer (SPEC F4): turns, results and events leave memory for
//! the store's `agent_journal` on a thread of their own, in the order they
//! were recorded, in batches — the call that made them never waits for the
//! disk. [`Journal::flush`] waits until everything recorded before it is
//! written (a server's shutdown, a test).
//!
//! A write that fails is logged and its batch dropped: the turn goes on in
//! memory (the journal serves the next start; it never blocks the present).

use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use labfy_store::JournalRecord;
pub use labfy_store::{JournalKind, JournalLayer};
use serde::Serialize;
use uuid::Uuid;

use crate::backend::{self, Backend};

/// Records written in one transaction at most.
pub const JOURNAL_BATCH: usize = 256;
/// Longest [`Journal::flush`] waits.
pub const JOURNAL_FLUSH_TIMEOUT: Duration = Duration::from_secs(10);

/// A record whose body is serialised on the writer thread, not the caller's.
struct Pending {
    head: JournalRecord,
    body: Box<dyn FnOnce() -> Result<String, serde_json::Error> + Send>,
}

enum Msg {
    Record(Pending),
    Flush(mpsc::SyncSender<()>),
}

/// A handle on the journal's writer thread; clones share it.
#[derive(Clone)]
pub struct Journal {
    inner: Arc<Writer>,
}

struct Writer {
    tx: Mutex<Option<Sender<Msg>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Drop for Writer {
    fn drop(&mut self) {
        // The last handle: the thread writes what is queued, then stops.
        self.tx.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(t) = self.thread.lock().unwrap_or_else(PoisonError::into_inner).take() {
            let _ = t.join();
        }
    }
}

impl std::fmt::Debug for Journal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal").finish_non_exhaustive()
    }
}

impl Journal {
    /// A journal writing through `backend` on a thread of its own.
    pub fn start(backend: Arc<dyn Backend>) -> Self {
        let (tx, rx) = mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("labfy-journal".into())
            .spawn(move || write_loop(backend.as_ref(), &rx))
            .map_err(|e| tracing::error!(error = %e, "the journal's thread did not start: nothing is journaled"))
            .ok();
        Self { inner: Arc::new(Writer { tx: Mutex::new(Some(tx)), thread: Mutex::new(thread) }) }
    }

    /// Queues `value` as the record `id` of `layer` and `kind` in `ws`,
    /// ordered by `seq`. It is serialised on the writer thread: the caller
    /// pays for a move, not for JSON.
    pub fn record(
        &self,
        ws: Uuid,
        layer: JournalLayer,
        kind: JournalKind,
        id: String,
        seq: u64,
        value: impl Serialize + Send + 'static,
    ) {
        let seq = i64::try_from(seq).unwrap_or(i64::MAX);
        let head = JournalRecord { workspace: ws, layer, kind, id, seq, body: String::new() };
        let pending = Pending { head, body: Box::new(move || serde_json::to_string(&value)) };
        if let Some(tx) = self.inner.tx.lock().unwrap_or_else(PoisonError::into_inner).as_ref() {
            let _ = tx.send(Msg::Record(pending));
        }
    }

    /// Waits until every record queued before this call is written, at
    /// most [`JOURNAL_FLUSH_TIMEOUT`]; false when it was not.
    pub fn flush(&self) -> bool {
        let (ack, done) = mpsc::sync_channel(1);
        let sent = self
            .inner
            .tx
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .is_some_and(|tx| tx.send(Msg::Flush(ack)).is_ok());
        sent && done.recv_timeout(JOURNAL_FLUSH_TIMEOUT).is_ok()
    }
}

fn write_loop(backend: &dyn Backend, rx: &Receiver<Msg>) {
    let mut batch = Vec::with_capacity(JOURNAL_BATCH);
    let mut acks = Vec::new();
    loop {
        // Block for the first message, then take what else is queued.
        let Ok(first) = rx.recv() else { return };
        let mut next = Some(first);
        while let Some(m) = next.take() {
            match m {
                Msg::Record(Pending { mut head, body }) => match body() {
                    Ok(text) => {
                        head.body = text;
                        batch.push(head);
                    }
                    Err(e) => tracing::error!(error = %e, kind = ?head.kind, "a journal record does not serialise"),
                },
                Msg::Flush(ack) => acks.push(ack),
            }
            if batch.len() >= JOURNAL_BATCH {
                break;
            }
            next = rx.try_recv().ok();
        }
        if !batch.is_empty() {
            if let Err(e) = backend::write(backend, |s| s.journal(&batch)) {
                tracing::error!(error = %e, records = batch.len(), "the agent journal was not written");
            }
            batch.clear();
        }
        for ack in acks.drain(..) {
            let _ = ack.send(());
        }
    }
}
