//! One call on a daemon's operator socket (`<runtime>/operator/…`, same uid
//! and the per-boot secret, any pid): what `labfy resources`, `labfy model …`
//! and `labfy grant …` share — find the socket, connect, authenticate, ask
//! once under a deadline.

use std::path::PathBuf;
use std::time::Duration;

use labfy::Failure;
use labfy_core::ErrorKind;
use labfy_ipc::client::Client;
use labfy_ipc::daemon::operator_socket;
use labfy_ipc::messages::Boundary;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Sends `request` to `daemon`'s operator socket in `runtime_dir` (default:
/// the supervisor's) and returns its answer; an absent daemon is
/// `Unavailable` and says to start `labfy up`.
pub fn call<Req: Serialize, Resp: DeserializeOwned>(
    runtime_dir: Option<PathBuf>,
    boundary: Boundary,
    daemon: &str,
    request: Req,
    timeout: Duration,
) -> Result<Resp, Failure> {
    let dir = runtime_dir.unwrap_or_else(crate::supervisor::default_runtime_dir);
    let sock = operator_socket(&dir, boundary);
    let not_running = || {
        Failure::new(
            ErrorKind::Unavailable,
            format!("no {daemon} is running (no socket at {}); start labfy up first", sock.display()),
        )
    };
    if !sock.exists() {
        return Err(not_running());
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    runtime.block_on(async {
        let secret =
            labfy_ipc::secret::read_secret(&dir).map_err(|e| Failure::new(ErrorKind::Storage, e.to_string()))?;
        let client: Client<Req, Resp> = Client::connect(&sock, boundary, &secret).await.map_err(|_| not_running())?;
        let mut client = client.with_timeout(timeout);
        client.call(request).await.map_err(|e| Failure::new(ErrorKind::Unavailable, e.to_string()))
    })
}
