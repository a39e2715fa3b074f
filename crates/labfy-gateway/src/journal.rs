//! The journal writer (SPEC F4): turns, results and events leave memory for
//! the store's `agent_journal` on a thread of their own, in the order they
//! were recorded, in batches — the call that made them never waits for the
//! disk. [`Journal::flush`] waits until everything recorded before it is
//! written (a server's shutdown, a test).
//!
//! The caller moves a value into a bounded queue ([`JOURNAL_QUEUE`]); the
//! writer gathers a batch for [`JOURNAL_LINGER`], keeps only the latest of
//! several snapshots of one record (a turn changes with every call),
//! serialises, and writes the batch in one transaction — one fsync for the
//! burst a turn makes. A queue that is full (a writer far behind: a disk
//! that stalls, a benchmark's thousands of calls a second) drops the record
//! and counts it, logged: the journal never blocks the present, and says
//! what it lost. A write that fails is logged and its batch dropped the same
//! way.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use labfy_store::{JournalKind, JournalLayer};
use labfy_store::{JournalRecord, JournalStore, StoreError};
use serde::Serialize;
use uuid::Uuid;

/// Records written in one transaction at most.
pub const JOURNAL_BATCH: usize = 512;
/// Records waiting for the writer at most; beyond, a record is dropped and
/// counted.
pub const JOURNAL_QUEUE: usize = 16_384;
/// How long the writer gathers records after the first of a batch before it
/// writes them (a flush writes at once): one transaction — one fsync — for
/// the burst of records a turn makes, at most about 40 a second.
pub const JOURNAL_LINGER: Duration = Duration::from_millis(25);
/// The journal is pruned to its bound (`labfy_store::JOURNAL_KEEP` records
/// of each kind per workspace) every this many batches, and at each flush.
pub const JOURNAL_PRUNE_EVERY: u32 = 64;
/// Longest [`Journal::flush`] waits.
pub const JOURNAL_FLUSH_TIMEOUT: Duration = Duration::from_secs(10);

/// The journal order of a record created at `created_at` (RFC 3339): its
/// milliseconds since the epoch, the same for every snapshot of it (a
/// turn's); 0 when it does not parse.
pub fn created_seq(created_at: &str) -> u64 {
    chrono::DateTime::parse_from_rfc3339(created_at)
        .ok()
        .and_then(|t| u64::try_from(t.timestamp_millis()).ok())
        .unwrap_or(0)
}

/// A record whose body is serialised on the writer thread, not the caller's.
struct Pending {
    head: JournalRecord,
    body: Box<dyn FnOnce() -> Result<String, serde_json::Error> + Send>,
}

enum Msg {
    Record(Pending),
    Flush(SyncSender<()>),
}

/// A handle on the journal's writer thread; clones share it.
#[derive(Clone)]
pub struct Journal {
    inner: Arc<Writer>,
}

struct Writer {
    /// The journal file, shared by the writer thread and the reads of a
    /// restore.
    store: Arc<Mutex<JournalStore>>,
    tx: Mutex<Option<SyncSender<Msg>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Records dropped because the queue was full.
    dropped: AtomicU64,
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
        f.debug_struct("Journal").field("dropped", &self.dropped()).finish_non_exhaustive()
    }
}

impl Journal {
    /// A journal writing to `store` (the data directory's journal file) on
    /// a thread of its own.
    pub fn start(store: JournalStore) -> Self {
        let store = Arc::new(Mutex::new(store));
        let (tx, rx) = mpsc::sync_channel(JOURNAL_QUEUE);
        let writing = store.clone();
        let thread = std::thread::Builder::new()
            .name("labfy-journal".into())
            .spawn(move || write_loop(&writing, &rx))
            .map_err(|e| tracing::error!(error = %e, "the journal's thread did not start: nothing is journaled"))
            .ok();
        Self {
            inner: Arc::new(Writer {
                store,
                tx: Mutex::new(Some(tx)),
                thread: Mutex::new(thread),
                dropped: AtomicU64::new(0),
            }),
        }
    }

    /// Queues `value` as the record `id` of `layer` and `kind` in `ws`,
    /// ordered by `seq`. It is serialised on the writer thread: the caller
    /// pays for a move, not for JSON. Never blocks: a full queue drops it
    /// (counted, logged).
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
        let guard = self.inner.tx.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(tx) = guard.as_ref() else { return };
        if let Err(TrySendError::Full(_)) = tx.try_send(Msg::Record(pending)) {
            let n = self.inner.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            // Said once, then at every power of two: a flood is not logged
            // record by record.
            if n.is_power_of_two() {
                tracing::warn!(dropped = n, "the agent journal's queue is full: records dropped, not journaled");
            }
        }
    }

    /// Runs `f` on the journal file (a restore's reads), between two of the
    /// writer's batches.
    pub fn read<T>(&self, f: impl FnOnce(&JournalStore) -> Result<T, StoreError>) -> Result<T, StoreError> {
        f(&self.inner.store.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Records dropped so far because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.inner.dropped.load(Ordering::Relaxed)
    }

    /// Waits until every record queued before this call is written, at
    /// most [`JOURNAL_FLUSH_TIMEOUT`]; false when it was not.
    pub fn flush(&self) -> bool {
        let deadline = Instant::now() + JOURNAL_FLUSH_TIMEOUT;
        let (ack, done) = mpsc::sync_channel(1);
        let mut msg = Msg::Flush(ack);
        loop {
            let sent = {
                let guard = self.inner.tx.lock().unwrap_or_else(PoisonError::into_inner);
                let Some(tx) = guard.as_ref() else { return false };
                tx.try_send(msg)
            };
            match sent {
                Ok(()) => break,
                Err(TrySendError::Full(m)) if Instant::now() < deadline => {
                    msg = m;
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(_) => return false,
            }
        }
        done.recv_timeout(deadline.saturating_duration_since(Instant::now())).is_ok()
    }
}

fn write_loop(store: &Mutex<JournalStore>, rx: &Receiver<Msg>) {
    let with = |f: &mut dyn FnMut(&mut JournalStore) -> Result<(), StoreError>| {
        f(&mut store.lock().unwrap_or_else(PoisonError::into_inner))
    };
    let mut pending: Vec<Pending> = Vec::with_capacity(JOURNAL_BATCH);
    let mut acks = Vec::new();
    let mut batches = 0u32;
    loop {
        // Block for the first message, then gather for the linger.
        let Ok(first) = rx.recv() else { return };
        let until = Instant::now() + JOURNAL_LINGER;
        let mut next = Some(first);
        while let Some(m) = next.take() {
            match m {
                Msg::Record(p) => pending.push(p),
                Msg::Flush(ack) => acks.push(ack),
            }
            if pending.len() >= JOURNAL_BATCH || !acks.is_empty() {
                break;
            }
            next = rx.recv_timeout(until.saturating_duration_since(Instant::now())).ok();
        }
        if !pending.is_empty() {
            let batch = serialise(&mut pending);
            if let Err(e) = with(&mut |s| s.write(&batch)) {
                tracing::error!(error = %e, records = batch.len(), "the agent journal was not written");
            }
            batches += 1;
        }
        if batches >= JOURNAL_PRUNE_EVERY || (!acks.is_empty() && batches > 0) {
            if let Err(e) = with(&mut |s| s.prune().map(|_| ())) {
                tracing::warn!(error = %e, "the agent journal was not pruned");
            }
            batches = 0;
        }
        for ack in acks.drain(..) {
            let _ = ack.send(());
        }
    }
}

/// The batch to write: of several records with one layer, kind and id (a
/// turn's snapshots), the latest only; each serialised once.
fn serialise(pending: &mut Vec<Pending>) -> Vec<JournalRecord> {
    let mut latest: HashMap<(JournalLayer, JournalKind, String), usize> = HashMap::with_capacity(pending.len());
    for (i, p) in pending.iter().enumerate() {
        latest.insert((p.head.layer, p.head.kind, p.head.id.clone()), i);
    }
    let mut out = Vec::with_capacity(latest.len());
    for (i, Pending { mut head, body }) in pending.drain(..).enumerate() {
        if latest.get(&(head.layer, head.kind, head.id.clone())) != Some(&i) {
            continue;
        }
        match body() {
            Ok(text) => {
                head.body = text;
                out.push(head);
            }
            Err(e) => tracing::error!(error = %e, kind = ?head.kind, "a journal record does not serialise"),
        }
    }
    out
}
