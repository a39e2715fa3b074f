//! The one application state (STYLE 7): a `Clone` handle of `Arc`s.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use labfy_gateway::{AgentGateway, Environment, Readiness, Scope};
use labfy_runtime::client::{AgentMode, LocalModelClient};
use labfy_runtime::runtime::AgentRuntime;
use labfy_store::WorkspaceClass;
use uuid::Uuid;

use crate::campaigns::CampaignRunner;
use crate::db::Db;
use crate::egress::{EgressClient, EgressError};
use crate::governor::{ask_governor_at, governor_line};
use crate::isolation::Isolation;
use crate::session::{RateLimit, Sessions};
use labfy_ipc::login::LoginKey;

/// Who acts from the UI, as recorded with grants, imports and in the audit
/// log: the analyst at this workstation's local session (the appliance has
/// one user).
pub const ANALYST: &str = "analyst";

/// The optional catalog as the operator set it (SPEC X2; `[agent]
/// optional_catalog` and `capabilities_dir`).
#[derive(Debug, Clone, Default)]
pub struct OptionalCatalog {
    /// Its five tools in the catalog.
    pub enabled: bool,
    /// The operator's folder of installed manifests.
    pub capabilities_dir: Option<PathBuf>,
}

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
    class: WorkspaceClass,
    gateway: Arc<AgentGateway>,
    agent: AgentRuntime,
    egress: Mutex<Option<(Instant, Readiness)>>,
    egress_client: EgressClient,
    egress_status: tokio::sync::Mutex<Option<(Instant, EgressView)>>,
    governor: tokio::sync::Mutex<Option<(Instant, GovernorView)>>,
    campaigns: CampaignRunner,
    read_pool: Arc<tokio::sync::Semaphore>,
    change_pool: Arc<tokio::sync::Semaphore>,
    parser: PathBuf,
    workspace_wish: std::sync::OnceLock<labfy_ipc::daemon::WorkspaceWish>,
}

/// The parser worker's program under `labfy up`: the server itself.
pub const DEFAULT_PARSER: &str = "/proc/self/exe";
/// How long an observed egress readiness is reused before asking again.
pub const EGRESS_PROBE_TTL: Duration = Duration::from_secs(2);
/// Longest wait for egress to answer a readiness probe.
pub const EGRESS_PROBE_TIMEOUT: Duration = Duration::from_millis(500);

impl AppState {
    /// State for a server listening on loopback `port`, browsing `workspace`,
    /// with the deterministic demo agent: [`AppState::with_agent`] with
    /// [`AgentMode::Demo`].
    ///
    /// Fails when the workspace does not exist, the catalog does not build,
    /// or it is called outside a tokio runtime.
    pub fn new(db: Db, port: u16, workspace: Uuid, rate_limit: RateLimit) -> anyhow::Result<Self> {
        Self::with_agent(db, port, workspace, rate_limit, &AgentMode::Demo)
    }

    /// State for a server listening on loopback `port`, browsing `workspace`,
    /// whose agent runtime (SPEC M1) runs the agent of `agent`, an already
    /// validated configuration (M4): the local model's client when the mode
    /// is `local-model`, else the demo agent. The runtime is built here,
    /// once, over the server's gateway; [`crate::serve`] closes it on
    /// shutdown (M8).
    ///
    /// Must be called inside a tokio runtime (the agent runtime's worker is
    /// spawned on it); outside one it fails rather than panics. Fails too
    /// when the workspace does not exist or the catalog does not build.
    pub fn with_agent(
        db: Db,
        port: u16,
        workspace: Uuid,
        rate_limit: RateLimit,
        agent: &AgentMode,
    ) -> anyhow::Result<Self> {
        Self::with_catalog(db, port, workspace, rate_limit, agent, &OptionalCatalog::default())
    }

    /// [`AppState::with_agent`], with the optional catalog (SPEC X2) as the
    /// operator set it.
    pub fn with_catalog(
        db: Db,
        port: u16,
        workspace: Uuid,
        rate_limit: RateLimit,
        agent: &AgentMode,
        optional: &OptionalCatalog,
    ) -> anyhow::Result<Self> {
        if tokio::runtime::Handle::try_current().is_err() {
            anyhow::bail!(
                "the application state must be built inside a tokio runtime (its agent runtime spawns a worker)"
            );
        }
        let class = db.read_blocking(|r| r.workspace(workspace))?.class;
        // The agent's journal (SPEC F4), a file beside the database.
        let journal = labfy_store::JournalStore::open(db.data_dir())?;
        let mut gateway = AgentGateway::new(Arc::new(db.clone()))?.with_journal(journal);
        if optional.enabled {
            gateway = gateway.with_optional_catalog(optional.capabilities_dir.clone())?;
        }
        let gateway = Arc::new(gateway);
        let model = agent.model_config().map(|config| LocalModelClient::new(config.clone()));
        let agent = AgentRuntime::start(gateway.clone(), model);
        let campaigns = CampaignRunner::new(db.clone(), workspace, None, Path::new(DEFAULT_PARSER));
        Ok(Self {
            inner: Arc::new(Inner {
                isolation: Isolation::detect(),
                runtime_dir: None,
                db,
                sessions: Sessions::new(rate_limit, LoginKey::generate(), workspace),
                allowed_hosts: [format!("127.0.0.1:{port}"), format!("localhost:{port}")],
                workspace,
                class,
                gateway,
                agent,
                egress: Mutex::new(None),
                egress_client: EgressClient::new(None),
                egress_status: tokio::sync::Mutex::new(None),
                governor: tokio::sync::Mutex::new(None),
                campaigns,
                read_pool: Arc::new(tokio::sync::Semaphore::new(crate::MAX_CONCURRENT_READS)),
                change_pool: Arc::new(tokio::sync::Semaphore::new(crate::MAX_CONCURRENT_CHANGES)),
                parser: PathBuf::from(DEFAULT_PARSER),
                workspace_wish: std::sync::OnceLock::new(),
            }),
        })
    }

    /// The program started as the parser worker of imports (SPEC C2): by
    /// default this very program (`/proc/self/exe`, which `labfy-server`'s
    /// `main` turns into the worker); tests name the built `labfy-server`.
    /// Call before the state is cloned; later calls change nothing.
    pub fn with_parser(mut self, program: PathBuf) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.campaigns =
                CampaignRunner::new(inner.db.clone(), inner.workspace, inner.runtime_dir.clone(), &program);
            inner.parser = program;
        }
        self
    }

    /// The parser worker's program.
    pub fn parser(&self) -> &Path {
        &self.inner.parser
    }

    /// Records the supervisor's runtime directory, where the supervisor,
    /// the governor and egress are reached (`/api/v1/status`, resources,
    /// egress, the campaign runner). Call before the state is cloned and
    /// before any campaign is submitted; later calls change nothing.
    pub fn with_runtime_dir(mut self, dir: PathBuf) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.egress_client = EgressClient::new(Some(dir.clone()));
            inner.campaigns = CampaignRunner::new(inner.db.clone(), inner.workspace, Some(dir.clone()), &inner.parser);
            inner.runtime_dir = Some(dir);
        }
        self
    }

    /// Slots of the reads (GET, HEAD) served at once.
    pub fn read_pool(&self) -> &Arc<tokio::sync::Semaphore> {
        &self.inner.read_pool
    }

    /// Slots of the changes (requests with a body) served at once.
    pub fn change_pool(&self) -> &Arc<tokio::sync::Semaphore> {
        &self.inner.change_pool
    }

    /// Uses `key` — the supervisor's, from `login.json` — for login links
    /// and session tokens, instead of this state's own random one. Call
    /// before the state is cloned; later calls change nothing.
    /// Its spent login codes are journaled in the data directory, so a
    /// restart of this server with the same key (a crash, a workspace
    /// switch) never lets a used link work again (SPEC V7).
    pub fn with_login_key(mut self, key: LoginKey, rate_limit: RateLimit) -> anyhow::Result<Self> {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.sessions = Sessions::with_spent_journal(rate_limit, key, inner.workspace, inner.db.data_dir())?;
        }
        Ok(self)
    }

    /// A fresh one-time login link's code for this server (SPEC T4).
    pub fn mint_login_code(&self) -> String {
        self.inner.sessions.key().mint_code(std::time::SystemTime::now())
    }

    /// The supervisor's runtime directory, when supervised.
    pub fn runtime_dir(&self) -> Option<&Path> {
        self.inner.runtime_dir.as_deref()
    }

    /// Where the analyst's wish to open another workspace goes (SPEC C1):
    /// the control plane reports it to the supervisor. Set once, when
    /// supervised; later calls change nothing.
    pub fn set_workspace_wish(&self, wish: labfy_ipc::daemon::WorkspaceWish) {
        let _ = self.inner.workspace_wish.set(wish);
    }

    /// The wish to open another workspace, when a supervisor listens for it.
    pub fn workspace_wish(&self) -> Option<&labfy_ipc::daemon::WorkspaceWish> {
        self.inner.workspace_wish.get()
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

    /// The agent tool gateway (SPEC G1): in memory, one per server instance.
    pub fn gateway(&self) -> &Arc<AgentGateway> {
        &self.inner.gateway
    }

    /// The agent runtime (SPEC M1): one per server instance, over
    /// [`AppState::gateway`].
    pub fn agent_runtime(&self) -> &AgentRuntime {
        &self.inner.agent
    }

    /// The class of the workspace this server browses.
    pub fn class(&self) -> WorkspaceClass {
        self.inner.class
    }

    /// The egress client (one connection per call).
    pub fn egress(&self) -> &EgressClient {
        &self.inner.egress_client
    }

    /// The campaign runner of this workspace (REAL campaigns only).
    pub fn campaigns(&self) -> &CampaignRunner {
        &self.inner.campaigns
    }

    /// Reads back the agent's turns, results and events the journal kept of
    /// this workspace (SPEC F4): the gateway's, then the runtime's (whose
    /// turns drive gateway turns). Paused turns can resume; running ones end
    /// `FAILED` "interrupted by restart". Call once at the start, before
    /// serving; a journal that cannot be read is logged, and serving goes on
    /// without those turns.
    pub fn restore_agent_journal(&self) {
        let scope = self.scope();
        match self.inner.gateway.restore(scope) {
            Ok(r) => tracing::info!(
                turns = r.turns,
                paused = r.paused,
                interrupted = r.interrupted.len(),
                results = r.results,
                events = r.events,
                "agent gateway journal read back"
            ),
            Err(e) => {
                tracing::error!(error = %e, "the agent gateway's journal cannot be read; its turns are not shown")
            }
        }
        match self.inner.agent.restore(scope) {
            Ok(r) => tracing::info!(
                turns = r.turns,
                paused = r.paused,
                interrupted = r.interrupted.len(),
                events = r.events,
                "agent runtime journal read back"
            ),
            Err(e) => {
                tracing::error!(error = %e, "the agent runtime's journal cannot be read; its turns are not shown")
            }
        }
    }

    /// Ends the import and export jobs the last server left running (SPEC
    /// K3): they died with it. Each ends `FAILED` with the reason, an
    /// import's recorded files kept; `labfy import`'s jobs are not the
    /// server's and are left alone. Call once at the start, before serving.
    pub fn settle_interrupted_jobs(&self) {
        let why = "interrupted: the server stopped before the job ended; what it recorded is kept";
        match self.inner.db.write_blocking(|s| s.settle_interrupted_jobs(ANALYST, why)) {
            Ok(jobs) if jobs.is_empty() => {}
            Ok(jobs) => {
                tracing::warn!(jobs = jobs.len(), "import or export jobs interrupted by the last stop were ended")
            }
            Err(e) => tracing::error!(error = %e, "the interrupted import or export jobs could not be ended"),
        }
    }

    /// Voids the research and tool requests waiting under a contract the
    /// catalog no longer publishes, and revokes the grants made under one
    /// (SPEC R5: at once, not when someone next decides). Call once at the
    /// start, before serving, before the campaign runner resumes anything.
    pub fn void_under_old_contracts(&self) {
        let catalog = self.gateway().catalog();
        let current = |name: &str| {
            labfy_gateway::ToolId::from_name(name).and_then(|id| catalog.get(id)).map(|t| t.fingerprint.clone())
        };
        match self.inner.db.write_blocking(|s| s.void_under_old_contracts(&current, "labfy-server")) {
            Ok(v) if v.is_empty() => {}
            Ok(v) => tracing::warn!(
                research_requests = v.research_requests.len(),
                tool_requests = v.tool_requests.len(),
                grants = v.grants.len(),
                "a contract changed since the last run: what was waiting or granted under the old one is void"
            ),
            Err(e) => tracing::error!(error = %e, "the requests and grants under an old contract could not be voided"),
        }
    }

    /// Lends the campaign runner to the gateway as the runner of the agent's
    /// `web.fetch` (SPEC F2), once the state is built (the runner is rebuilt
    /// by [`AppState::with_parser`] and [`AppState::with_runtime_dir`]).
    /// Only a REAL workspace served under the supervisor has one: without a
    /// runtime directory there is no egress to fetch through. Call inside a
    /// tokio runtime; true when it was lent now.
    pub fn lend_fetcher(&self) -> bool {
        if self.inner.class != WorkspaceClass::Real || self.inner.runtime_dir.is_none() {
            return false;
        }
        self.inner.gateway.set_fetcher(Arc::new(crate::campaigns::AgentFetcher::new(self.inner.campaigns.clone())))
    }

    /// The workspace and class gateway calls act in.
    pub fn scope(&self) -> Scope {
        Scope { workspace: self.inner.workspace, class: self.inner.class }
    }

    /// What tool availability depends on: the egress daemon's readiness,
    /// asked over IPC and reused for [`EGRESS_PROBE_TTL`], and the sandbox
    /// (none in this build).
    pub async fn environment(&self) -> Environment {
        let cached = {
            let slot = self.inner.egress.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            slot.as_ref().filter(|(at, _)| at.elapsed() < EGRESS_PROBE_TTL).map(|(_, r)| r.clone())
        };
        let egress = match cached {
            Some(r) => r,
            None => {
                let r = self.probe_egress().await;
                *self.inner.egress.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                    Some((Instant::now(), r.clone()));
                r
            }
        };
        let web_fetch = if self.inner.gateway.has_fetcher() {
            Readiness { ready: true, detail: "the campaign runner fetches under a grant's campaign".to_owned() }
        } else {
            Readiness::not_ready("this server runs no campaign (no supervisor, or a SPECIMEN workspace)")
        };
        let (sandbox, sandbox_programs) = self.sandbox_readiness().await;
        Environment { egress, sandbox, sandbox_programs, web_fetch }
    }

    async fn probe_egress(&self) -> Readiness {
        match self.inner.egress_client.health(EGRESS_PROBE_TIMEOUT).await {
            Ok(h) => Readiness { ready: h.ready, detail: h.detail },
            Err(EgressError::Absent) => {
                Readiness::not_ready("no egress daemon: this server was not started by `labfy up`")
            }
            Err(EgressError::Failed { message, .. }) => Readiness::not_ready(format!("egress refused: {message}")),
            Err(EgressError::Unexpected(_)) => Readiness::not_ready("egress answered health with another message"),
            Err(EgressError::Timeout(_)) => Readiness::not_ready("egress did not answer in time"),
            Err(e @ EgressError::Unreachable(_)) => Readiness::not_ready(e.to_string()),
        }
    }
}

/// How long an egress status is reused before asking again (the UI polls
/// every few seconds; several tabs cost egress one call).
pub const EGRESS_STATUS_TTL: Duration = Duration::from_secs(1);

/// What egress said of Tor when last asked (SPEC E1).
#[derive(Debug, Clone)]
pub enum EgressView {
    /// Its bootstrap state and activity.
    Available(labfy_ipc::messages::egress::EgressStatus),
    /// No status to show, and why, in one line.
    Unavailable(String),
}

impl AppState {
    /// Egress's status, asked over its service socket and reused for at most
    /// [`EGRESS_STATUS_TTL`]; concurrent callers share one call. An absent,
    /// silent or failing egress gives [`EgressView::Unavailable`]: an
    /// earlier status never stands in for a missing answer.
    pub async fn egress_status(&self) -> EgressView {
        let mut slot = self.inner.egress_status.lock().await;
        if let Some((_, view)) = slot.as_ref().filter(|(at, _)| at.elapsed() < EGRESS_STATUS_TTL) {
            return view.clone();
        }
        let view = match self.inner.egress_client.status().await {
            Ok(s) => EgressView::Available(s),
            Err(e) => EgressView::Unavailable(e.to_string()),
        };
        *slot = Some((Instant::now(), view.clone()));
        view
    }
}

/// How long an answer of the governor is reused before asking again: the UI
/// polls every 2 s, so each of its polls gets a new answer, while several tabs
/// polling at once cost the governor one call.
pub const GOVERNOR_STATE_TTL: Duration = Duration::from_secs(1);
/// Longest wait for the governor to answer `State` (connection included).
pub const GOVERNOR_STATE_TIMEOUT: Duration = Duration::from_millis(800);

/// What the governor said when last asked (SPEC Q5).
#[derive(Debug, Clone)]
pub enum GovernorView {
    /// Its state: samples, reservations, decisions, the local model.
    Available(Arc<labfy_ipc::messages::governor::GovernorState>),
    /// No state to show, and why, in one line.
    Unavailable(String),
}

impl AppState {
    /// The governor's state, asked over its service socket and reused for at
    /// most [`GOVERNOR_STATE_TTL`]. Concurrent callers share one call. A
    /// governor that is absent, silent past [`GOVERNOR_STATE_TIMEOUT`] or
    /// answers `Failed` gives [`GovernorView::Unavailable`]: an earlier state
    /// is never handed out in its place.
    pub async fn governor_state(&self) -> GovernorView {
        let mut slot = self.inner.governor.lock().await;
        if let Some((_, view)) = slot.as_ref().filter(|(at, _)| at.elapsed() < GOVERNOR_STATE_TTL) {
            return view.clone();
        }
        let view = self.ask_governor().await;
        *slot = Some((Instant::now(), view.clone()));
        view
    }

    async fn ask_governor(&self) -> GovernorView {
        use labfy_ipc::messages::governor::{GovernorRequest, GovernorResponse};
        match self.call_governor(GovernorRequest::State {}).await {
            Ok(GovernorResponse::State(s)) => GovernorView::Available(Arc::new(*s)),
            Ok(other) => GovernorView::Unavailable(unexpected(&other)),
            Err(line) => GovernorView::Unavailable(line),
        }
    }

    /// The governor's recent history (SPEC U6), asked afresh (the chart asks
    /// once when it opens); `Err` is one line saying why there is none.
    pub async fn governor_history(&self) -> Result<labfy_ipc::messages::governor::History, String> {
        use labfy_ipc::messages::governor::{GovernorRequest, GovernorResponse};
        match self.call_governor(GovernorRequest::History {}).await? {
            GovernorResponse::History(h) => Ok(*h),
            other => Err(unexpected(&other)),
        }
    }

    /// One call on the governor's service socket: connect, authenticate and
    /// call under one deadline. `Err` is one bounded line saying why not.
    async fn call_governor(
        &self,
        request: labfy_ipc::messages::governor::GovernorRequest,
    ) -> Result<labfy_ipc::messages::governor::GovernorResponse, String> {
        use labfy_ipc::messages::governor::GovernorResponse;
        let line = governor_line;
        let Some(dir) = self.runtime_dir() else {
            return Err(line("no governor: this server was not started by `labfy up`".into()));
        };
        match ask_governor_at(dir, request, GOVERNOR_STATE_TIMEOUT).await? {
            GovernorResponse::Failed(f) => Err(line(format!("governor answered {}: {}", f.code, f.message))),
            answer => Ok(answer),
        }
    }

    /// Lends the gateway the governor's sandbox runs (SPEC X1), under a
    /// supervisor only (the governor is there). Whether it was lent.
    pub fn lend_sandbox(&self) -> bool {
        let Some(dir) = self.inner.runtime_dir.clone() else { return false };
        self.inner.gateway.set_sandbox(Arc::new(crate::sandbox::GovernorSandbox::new(dir)))
    }

    /// The sandbox as tools see it: lent, and the governor offering it; with
    /// the names of its allow-list (what a capability may run, X2).
    async fn sandbox_readiness(&self) -> (Readiness, Vec<String>) {
        if !self.inner.gateway.has_sandbox() {
            return (Readiness::not_ready("no governor: this server was not started by `labfy up`"), Vec::new());
        }
        match self.governor_state().await {
            GovernorView::Available(s) if s.sandbox.ready => (
                Readiness { ready: true, detail: s.sandbox.detail.clone() },
                s.sandbox.programs.iter().map(|p| p.name.clone()).collect(),
            ),
            GovernorView::Available(s) => (Readiness::not_ready(s.sandbox.detail.clone()), Vec::new()),
            GovernorView::Unavailable(why) => (Readiness::not_ready(why), Vec::new()),
        }
    }
}

/// The line for an answer of the wrong kind.
fn unexpected(answer: &labfy_ipc::messages::governor::GovernorResponse) -> String {
    format!("governor gave an unexpected answer: {}", variant_name(answer))
}

/// The `type` tag of a governor answer, for a message (never its content).
fn variant_name(r: &labfy_ipc::messages::governor::GovernorResponse) -> String {
    serde_json::to_value(r)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_owned))
        .unwrap_or_else(|| "?".to_owned())
}
