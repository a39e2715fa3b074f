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
