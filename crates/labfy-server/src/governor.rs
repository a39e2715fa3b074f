//! The workspace server's one client of the Resource Governor (issue 14
//! item 1): every call — the resources view's state and history, a
//! campaign's admission, lease renewals and release, a sandbox run — goes
//! through [`ask_governor_at`]: connect to the governor's service socket,
//! authenticate with this boot's secret, call, all under one deadline.

use std::path::Path;
use std::time::Duration;

/// Longest reason given when the governor's state is unavailable.
pub const GOVERNOR_DETAIL_MAX_CHARS: usize = 300;

/// A reason about the governor as one bounded line.
pub(crate) fn governor_line(why: String) -> String {
    let line = why.split_whitespace().collect::<Vec<_>>().join(" ");
    labfy_core::bounded::truncate_chars(&line, GOVERNOR_DETAIL_MAX_CHARS)
}

/// One call on the governor's service socket in `dir`: connect,
/// authenticate and call under one deadline. A `Failed` answer is returned
/// as is; `Err` is one bounded line saying why there was no answer.
pub async fn ask_governor_at(
    dir: &Path,
    request: labfy_ipc::messages::governor::GovernorRequest,
    deadline: Duration,
) -> Result<labfy_ipc::messages::governor::GovernorResponse, String> {
    use labfy_ipc::client::Client;
    use labfy_ipc::messages::Boundary;
    use labfy_ipc::messages::governor::{GovernorRequest, GovernorResponse};
    let line = governor_line;
    let asked = async {
        let secret = labfy_ipc::secret::read_secret(dir)?;
        let socket = labfy_ipc::daemon::service_socket(dir, Boundary::Governor);
        let c: Client<GovernorRequest, GovernorResponse> =
            Client::connect(&socket, Boundary::Governor, &secret).await?;
        // The deadline below is the one that speaks; the client's own is
        // only as long as a sandbox run needs (CALL_TIMEOUT would cut it).
        c.with_timeout(deadline + Duration::from_secs(1)).call(request).await
    };
    match tokio::time::timeout(deadline, asked).await {
        Ok(Ok(answer)) => Ok(answer),
        Ok(Err(e)) => Err(line(format!("governor unreachable: {e}"))),
        Err(_) => Err(line(format!("governor did not answer within {} ms", deadline.as_millis()))),
    }
}

/// How long an import request waits for the governor to admit its reading
/// (cores held by another import, a moment of pressure) before it is
/// answered `503` with the governor's reason.
pub const READING_PATIENCE: Duration = Duration::from_secs(20);
/// How often a held reading is renewed (its lease is a minute).
pub const READING_RENEW_EVERY: Duration = Duration::from_secs(15);
/// Longest wait for one governor answer about a reading.
const READING_CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// The priority of an import's reading (a campaign's is 100).
const READING_PRIORITY: u8 = 80;

/// One parser worker admitted by the governor for an import request (SPEC
/// A1, I1): the documents of the request are read — text, OCR — under it.
/// Renewed with [`HeldReading::keep`] between documents; given back when
/// dropped (and by the governor should this server die).
pub(crate) struct HeldReading {
    dir: std::path::PathBuf,
    reservation: String,
    renewed: tokio::time::Instant,
}

/// Asks the governor in `dir` to admit one parser worker for `job`, waiting
/// up to [`READING_PATIENCE`] while it refuses; `Err` is its reason.
pub(crate) async fn admit_reading(dir: &Path, job: labfy_core::JobRef) -> Result<HeldReading, String> {
    use labfy_ipc::messages::governor::{GovernorRequest, GovernorResponse, ReadingAsk};
    let ask = ReadingAsk {
        job,
        workers: 1,
        min_workers: 1,
        ram_per_worker: labfy_parse::worker::RAM_PER_WORKER_BYTES,
        priority: READING_PRIORITY,
    };
    let patience = tokio::time::Instant::now() + READING_PATIENCE;
    loop {
        let why = match ask_governor_at(dir, GovernorRequest::AdmitReading(ask.clone()), READING_CALL_TIMEOUT).await {
            Ok(GovernorResponse::AdmittedReading { reservation, .. }) => {
                return Ok(HeldReading { dir: dir.to_path_buf(), reservation, renewed: tokio::time::Instant::now() });
            }
            Ok(GovernorResponse::Refused(r)) => governor_line(r.said()),
            Ok(GovernorResponse::Failed(f)) => {
                return Err(governor_line(format!("the governor could not admit it: {}: {}", f.code, f.message)));
            }
            Ok(_) => return Err("the governor answered the admission with another message".into()),
            Err(e) => e,
        };
        if tokio::time::Instant::now() >= patience {
            return Err(why);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

impl HeldReading {
    /// Renews the reservation when [`READING_RENEW_EVERY`] has passed;
    /// `Err` when the governor took it back (pressure, a restart), with why.
    pub(crate) async fn keep(&mut self) -> Result<(), String> {
        use labfy_ipc::messages::governor::{GovernorRequest, GovernorResponse};
        if self.renewed.elapsed() < READING_RENEW_EVERY {
            return Ok(());
        }
        self.renewed = tokio::time::Instant::now();
        let renew = GovernorRequest::Renew { reservation: self.reservation.clone() };
        match ask_governor_at(&self.dir, renew, READING_CALL_TIMEOUT).await {
            Ok(GovernorResponse::Renewed { .. }) => Ok(()),
            Ok(GovernorResponse::Failed(f)) => {
                Err(governor_line(format!("the governor took back this import's reading: {}", f.message)))
            }
            Ok(_) => Err("the governor answered the renewal with another message".into()),
            // Unreachable for a moment: asked again at the next document;
            // the lease tells the governor if it lasts.
            Err(_) => Ok(()),
        }
    }
}

impl Drop for HeldReading {
    fn drop(&mut self) {
        use labfy_ipc::messages::governor::GovernorRequest;
        let (dir, reservation) = (self.dir.clone(), std::mem::take(&mut self.reservation));
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let _ = ask_governor_at(&dir, GovernorRequest::Release { reservation }, READING_CALL_TIMEOUT).await;
            });
        }
    }
}
