//! The journal writer (SPEC F4): turns, results and events leave memory for
//! the store's `agent_journal` on a thread of their own, in the order they
//! were recorded, in batches — the call that made them never waits for the
//! disk. [`Journal::flush`] waits until everything recorded before it is
//! written (a server's shutdown, a test).
//!
//! What a client was told must survive a `kill -9` one millisecond later
//! (SPEC K1): the server answers no request before everything recorded so
//! far is written ([`Journal::is_durable`], [`Journal::wait_durable`]). A
//! waiting answer cuts the linger short — the writer writes at once — and
//! answers that wait together share one transaction (a group commit); when
//! nothing is waiting, the check is two atomic loads.
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
use std::sync::{Arc, Condvar, Mutex, PoisonError};
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
    /// Its place in the queue: 1 for the first record ever accepted.
    ticket: u64,
    head: JournalRecord,
    body: Box<dyn FnOnce() -> Result<String, serde_json::Error> + Send>,
}

enum Msg {
    Record(Pending),
    Flush(SyncSender<()>),
    /// Someone waits for durability: write what is gathered now.
    Hurry,
}

/// What the writer has made of the tickets handed out.
#[derive(Debug, Default)]
struct Progress {
    /// Every ticket up to this one is written, or was lost (`lost`).
    written: u64,
    /// The ticket ranges of the last [`LOST_KEPT`] batches whose write
    /// failed, oldest first.
    lost: std::collections::VecDeque<(u64, u64)>,
}

/// Failed batches remembered for [`Journal::wait_durable`]'s answer.
const LOST_KEPT: usize = 64;

/// The journal could not make a step durable: its write failed, or took
/// longer than the wait allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotDurable {
    /// The write of a batch holding it failed (logged).
    #[error("the agent journal failed to write this step")]
    WriteFailed,
    /// Not written within the wait.
    #[error("the agent journal did not write this step in time")]
    TimedOut,
    /// The writer is gone (a thread that did not start, a closed journal).
    #[error("the agent journal is not running")]
    Closed,
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
    /// Tickets handed out: the last record accepted into the queue.
    queued: AtomicU64,
    /// The writer's progress.
    progress: Arc<Tracker>,
}

/// The writer's progress, shared with those who wait for it.
#[derive(Debug, Default)]
struct Tracker {
    state: Mutex<Progress>,
    changed: Condvar,
    /// `state.written`, for the lock-free check.
    written: AtomicU64,
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
        let progress = Arc::new(Tracker::default());
        let told = progress.clone();
        let thread = std::thread::Builder::new()
            .name("labfy-journal".into())
            .spawn(move || write_loop(&writing, &rx, &told))
            .map_err(|e| tracing::error!(error = %e, "the journal's thread did not start: nothing is journaled"))
            .ok();
        Self {
            inner: Arc::new(Writer {
                store,
                tx: Mutex::new(Some(tx)),
                thread: Mutex::new(thread),
                dropped: AtomicU64::new(0),
                queued: AtomicU64::new(0),
                progress,
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
        let guard = self.inner.tx.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(tx) = guard.as_ref() else { return };
        // Tickets are handed out under the sender's lock: their order is the
        // queue's.
        let ticket = self.inner.queued.load(Ordering::Acquire) + 1;
        let pending = Pending { ticket, head, body: Box::new(move || serde_json::to_string(&value)) };
        match tx.try_send(Msg::Record(pending)) {
            Ok(()) => self.inner.queued.store(ticket, Ordering::Release),
            Err(TrySendError::Disconnected(_)) => {}
            Err(TrySendError::Full(_)) => {
                let n = self.inner.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                // Said once, then at every power of two: a flood is not logged
                // record by record.
                if n.is_power_of_two() {
                    tracing::warn!(dropped = n, "the agent journal's queue is full: records dropped, not journaled");
                }
            }
        }
    }

    /// The last record queued so far: [`Journal::wait_durable`] of it waits
    /// for everything recorded before this call.
    pub fn ticket(&self) -> u64 {
        self.inner.queued.load(Ordering::Acquire)
    }

    /// Whether everything recorded before this call is written: two atomic
    /// loads, no lock.
    pub fn is_durable(&self) -> bool {
        self.inner.progress.written.load(Ordering::Acquire) >= self.inner.queued.load(Ordering::Acquire)
    }

    /// Waits until the record `ticket` and every one before it are written,
    /// at most `timeout` (SPEC K1). The writer is told to write at once
    /// rather than linger. An error says the step may be lost on a crash:
    /// its batch failed, the wait ran out, or the writer is gone.
    pub fn wait_durable(&self, ticket: u64, timeout: Duration) -> Result<(), NotDurable> {
        let Tracker { state: lock, changed, .. } = &*self.inner.progress;
        let deadline = Instant::now() + timeout;
        let mut p = lock.lock().unwrap_or_else(PoisonError::into_inner);
        let floor = p.written;
        if p.written < ticket {
            drop(p);
            {
                let guard = self.inner.tx.lock().unwrap_or_else(PoisonError::into_inner);
                let Some(tx) = guard.as_ref() else { return Err(NotDurable::Closed) };
                // A full queue is a writer already busy: it needs no nudge.
                if let Err(TrySendError::Disconnected(_)) = tx.try_send(Msg::Hurry) {
                    return Err(NotDurable::Closed);
                }
            }
            p = lock.lock().unwrap_or_else(PoisonError::into_inner);
            while p.written < ticket {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(NotDurable::TimedOut);
                }
                p = changed.wait_timeout(p, left).unwrap_or_else(PoisonError::into_inner).0;
            }
        }
        // A batch written during this wait failed and held a record of ours.
        if p.lost.iter().any(|&(from, upto)| upto > floor && from <= ticket) {
            return Err(NotDurable::WriteFailed);
        }
        Ok(())
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

fn write_loop(store: &Mutex<JournalStore>, rx: &Receiver<Msg>, progress: &Tracker) {
    let with = |f: &mut dyn FnMut(&mut JournalStore) -> Result<(), StoreError>| {
        f(&mut store.lock().unwrap_or_else(PoisonError::into_inner))
    };
    let mut pending: Vec<Pending> = Vec::with_capacity(JOURNAL_BATCH);
    let mut acks = Vec::new();
    let mut batches = 0u32;
    loop {
        // Block for the first message, then gather for the linger — unless
        // someone waits (a flush, an answer waiting to be durable).
        let Ok(first) = rx.recv() else { return };
        let until = Instant::now() + JOURNAL_LINGER;
        let mut next = Some(first);
        let mut hurry = false;
        while let Some(m) = next.take() {
            match m {
                Msg::Record(p) => pending.push(p),
                Msg::Flush(ack) => acks.push(ack),
                Msg::Hurry => hurry = true,
            }
            if pending.len() >= JOURNAL_BATCH || !acks.is_empty() {
                break;
            }
            // In a hurry, take what is already queued (the answers waiting
            // together share the transaction), then write.
            next = if hurry {
                rx.try_recv().ok()
            } else {
                rx.recv_timeout(until.saturating_duration_since(Instant::now())).ok()
            };
        }
        if !pending.is_empty() {
            let first = pending.first().map_or(0, |p| p.ticket);
            let last = pending.last().map_or(0, |p| p.ticket);
            let (batch, whole) = serialise(&mut pending);
            let written = with(&mut |s| s.write(&batch));
            if let Err(e) = &written {
                tracing::error!(error = %e, records = batch.len(), "the agent journal was not written");
            }
            let mut p = progress.state.lock().unwrap_or_else(PoisonError::into_inner);
            if written.is_err() || !whole {
                if p.lost.len() == LOST_KEPT {
                    p.lost.pop_front();
                }
                p.lost.push_back((first, last));
            }
            p.written = p.written.max(last);
            progress.written.store(p.written, Ordering::Release);
            drop(p);
            progress.changed.notify_all();
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
/// turn's snapshots), the latest only; each serialised once. False when a
/// record did not serialise (logged; the batch is not whole).
fn serialise(pending: &mut Vec<Pending>) -> (Vec<JournalRecord>, bool) {
    let mut latest: HashMap<(JournalLayer, JournalKind, String), usize> = HashMap::with_capacity(pending.len());
    for (i, p) in pending.iter().enumerate() {
        latest.insert((p.head.layer, p.head.kind, p.head.id.clone()), i);
    }
    let mut out = Vec::with_capacity(latest.len());
    let mut whole = true;
    for (i, Pending { mut head, body, .. }) in pending.drain(..).enumerate() {
        if latest.get(&(head.layer, head.kind, head.id.clone())) != Some(&i) {
            continue;
        }
        match body() {
            Ok(text) => {
                head.body = text;
                out.push(head);
            }
            Err(e) => {
                whole = false;
                tracing::error!(error = %e, kind = ?head.kind, "a journal record does not serialise");
            }
        }
    }
    (out, whole)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a second reader of the file sees of `ws`'s turns (another
    /// connection: what a restarted server would read).
    fn on_disk(dir: &std::path::Path, ws: Uuid) -> Vec<String> {
        let reader = JournalStore::open(dir).unwrap();
        reader.read(ws, JournalLayer::Gateway, JournalKind::Turn, 1_000).unwrap().into_iter().map(|r| r.body).collect()
    }

    /// K1: once `wait_durable` of a ticket returns, that record and every
    /// one before it are in the file for another reader, though the writer
    /// would otherwise linger; later records get later tickets.
    #[test]
    fn a_durable_wait_returns_once_the_record_is_in_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::start(JournalStore::open(dir.path()).unwrap());
        let ws = Uuid::new_v4();
        assert!(journal.is_durable(), "nothing recorded yet");
        assert_eq!(journal.ticket(), 0);
        for (i, status) in ["RUNNING", "AUTHORIZATION_REQUIRED"].into_iter().enumerate() {
            journal.record(ws, JournalLayer::Gateway, JournalKind::Turn, format!("t{i}"), i as u64, status);
        }
        let ticket = journal.ticket();
        assert_eq!(ticket, 2);
        journal.wait_durable(ticket, Duration::from_secs(10)).unwrap();
        assert!(journal.is_durable());
        assert_eq!(on_disk(dir.path(), ws), ["\"RUNNING\"", "\"AUTHORIZATION_REQUIRED\""]);
        // A ticket already written returns at once, without a write.
        journal.wait_durable(1, Duration::ZERO).unwrap();
        // Several snapshots of one record: the latest is what is durable.
        for status in ["RUNNING", "COMPLETED"] {
            journal.record(ws, JournalLayer::Gateway, JournalKind::Turn, "t2".into(), 2, status);
        }
        journal.wait_durable(journal.ticket(), Duration::from_secs(10)).unwrap();
        assert_eq!(on_disk(dir.path(), ws).last().map(String::as_str), Some("\"COMPLETED\""));
    }

    /// Many waiters at once are all answered, and share batches.
    #[test]
    fn concurrent_waiters_are_all_answered() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Journal::start(JournalStore::open(dir.path()).unwrap());
        let ws = Uuid::new_v4();
        std::thread::scope(|s| {
            for t in 0..8 {
                let journal = journal.clone();
                s.spawn(move || {
                    for i in 0..20u64 {
                        let id = format!("w{t}-{i}");
                        journal.record(ws, JournalLayer::Gateway, JournalKind::Turn, id, t * 100 + i, i);
                        journal.wait_durable(journal.ticket(), Duration::from_secs(10)).unwrap();
                    }
                });
            }
        });
        assert_eq!(on_disk(dir.path(), ws).len(), 160, "every record of every waiter");
    }
}
