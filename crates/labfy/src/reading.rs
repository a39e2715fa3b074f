//! The governor's admission of `labfy import`'s reading (SPEC A1, I1): the
//! parser workers — text, and OCR inside them — are CPU work, and when the
//! appliance runs (`labfy up`), its governor admits them: as many workers as
//! it has cores and RAM for, from the most the import would use down to
//! one, under a reservation held by this process and renewed while it
//! reads. A refusal stops the import before anything is read, with the
//! governor's reason; a reservation taken back (memory pressure, a governor
//! restarted) stops it where it is — files recorded stay, and the same
//! command takes the rest by their hash.
//!
//! With no `labfy up` running there is no governor and no governed work to
//! share the machine with: the import reads with its own bound of workers,
//! and says so.

use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use labfy_core::JobRef;
use labfy_ipc::daemon::operator_socket;
use labfy_ipc::messages::Boundary;
use labfy_ipc::messages::governor::{GovernorRequest, GovernorResponse, ReadingAsk};

/// How often the reservation is renewed (its lease is a minute).
pub const RENEW_EVERY: Duration = Duration::from_secs(15);
/// Longest wait for one answer of the governor.
const CALL_TIMEOUT: Duration = Duration::from_secs(10);
/// The priority of an import's reading (a campaign's is 100).
const READING_PRIORITY: u8 = 80;

/// What the import may read with.
pub struct Reading {
    /// The governor's runtime directory and the reservation, when governed.
    held: Option<(PathBuf, String)>,
    /// Parser workers (reading threads).
    pub workers: usize,
    /// One line for the terminal: admitted, or why not governed.
    pub detail: String,
    /// Why the reservation was taken back, once it was.
    lost: Mutex<Option<String>>,
}

impl Reading {
    /// Asks the governor of the `labfy up` at `runtime_dir` (default: the
    /// supervisor's) for `wanted` workers. `Err` is the governor's refusal.
    pub fn ask(runtime_dir: Option<PathBuf>, job: JobRef, wanted: usize) -> Result<Self, String> {
        let dir = runtime_dir.unwrap_or_else(crate::supervisor::default_runtime_dir);
        let ungoverned = |why: String| Self {
            held: None,
            workers: wanted,
            detail: format!("{why}: reading with {}, not admitted by a governor", workers_text(wanted)),
            lost: Mutex::new(None),
        };
        if !operator_socket(&dir, Boundary::Governor).exists() {
            return Ok(ungoverned("no governor is running (labfy up is not)".into()));
        }
        let ask = ReadingAsk {
            job,
            workers: u32::try_from(wanted).unwrap_or(u32::MAX),
            min_workers: 1,
            ram_per_worker: labfy_parse::worker::RAM_PER_WORKER_BYTES,
            priority: READING_PRIORITY,
        };
        match call(&dir, GovernorRequest::AdmitReading(ask)) {
            Ok(GovernorResponse::AdmittedReading { reservation, workers }) => Ok(Self {
                detail: format!(
                    "admitted by the governor: {} (reservation {reservation})",
                    workers_text(usize::try_from(workers).unwrap_or(usize::MAX))
                ),
                workers: usize::try_from(workers).unwrap_or(1).clamp(1, wanted),
                held: Some((dir, reservation)),
                lost: Mutex::new(None),
            }),
            Ok(GovernorResponse::Refused(r)) => Err(r.said()),
            Ok(GovernorResponse::Failed(f)) => {
                Err(format!("the governor could not admit it: {}: {}", f.code, f.message))
            }
            Ok(other) => Err(format!("the governor answered with another message: {other:?}")),
            // A socket left by a `labfy up` that is gone: no governor.
            Err(why) => Ok(ungoverned(format!("the governor does not answer ({why})"))),
        }
    }

    /// Renews the reservation every [`RENEW_EVERY`] until `done`; when the
    /// governor no longer holds it, records why and sets `stop`. Run on a
    /// thread of its own for the import's length.
    pub fn keep(&self, done: &AtomicBool, stop: &AtomicBool) {
        let Some((dir, reservation)) = &self.held else { return };
        let mut renewed = Instant::now();
        while !done.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(200));
            if renewed.elapsed() < RENEW_EVERY {
                continue;
            }
            renewed = Instant::now();
            let why = match call(dir, GovernorRequest::Renew { reservation: reservation.clone() }) {
                Ok(GovernorResponse::Renewed { .. }) => continue,
                Ok(GovernorResponse::Failed(f)) => f.message,
                Ok(other) => format!("the governor answered with another message: {other:?}"),
                // Unreachable for a while (restarting): asked again later;
                // its lease tells the governor if this lasts.
                Err(_) => continue,
            };
            *self.lost.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                Some(format!("the governor took back this import's reading: {why}"));
            stop.store(true, Ordering::Relaxed);
            return;
        }
    }

    /// Why the reservation was taken back, if it was.
    pub fn lost(&self) -> Option<String> {
        self.lost.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Gives the reservation back (its process's end would too).
    pub fn release(self) {
        if let Some((dir, reservation)) = self.held {
            let _ = call(&dir, GovernorRequest::Release { reservation });
        }
    }
}

/// `1 parser worker`, `3 parser workers`.
fn workers_text(n: usize) -> String {
    if n == 1 { "1 parser worker".into() } else { format!("{n} parser workers") }
}

fn call(dir: &std::path::Path, request: GovernorRequest) -> Result<GovernorResponse, String> {
    crate::operator::call(Some(dir.to_path_buf()), Boundary::Governor, "governor", request, CALL_TIMEOUT)
        .map_err(|f| f.message().to_owned())
}
