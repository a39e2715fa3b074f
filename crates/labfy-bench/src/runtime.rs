//! `labfy-bench runtime`: the agent runtime against a real llama-server
//! (issue 7), figures printed, nothing asserted (docs/PERFORMANCE.md).
//!
//! The benchmark starts `$LABFY_LLAMA_SERVER` on `$LABFY_TEST_GGUF` itself,
//! on `127.0.0.1` and a free port (never 8080), `-c 8192 -t 2 --no-webui`,
//! waits for `/health` to answer `200`, and stops it at the end, on error
//! too (SIGTERM, then SIGKILL).
//!
//! 1. **Overhead of one runtime round.** The request the runtime sends in
//!    the first round of a turn on a SPECIMEN question (system prompt,
//!    question, the first round's action schema as `response_format`; built
//!    by the runtime itself, [`AgentRuntime::first_round_request`]) goes
//!    through `LocalModelClient::chat`, `protocol::parse_action` and
//!    `check_refs`, and the gateway call of the answer (on the blocking
//!    pool, as the worker does it). Reference, in the same run and
//!    interleaved: the same JSON body POSTed to llama-server by a bare HTTP
//!    client (one `TcpStream`, `Connection: close`, nothing parsed while
//!    timed). Same prompt, `temperature 0`, same `seed` and `max_tokens`: the
//!    same tokens are generated, so the difference is the runtime's.
//! 2. **Rounds and repairs per turn.** A fixed set of 20 French analyst
//!    questions on the SPECIMEN investigation, each run as a real turn
//!    (`AgentRuntime` over a fresh SPECIMEN store and the gateway, the local
//!    model behind `LocalModelClient`), once with `response_format` and once
//!    without (`RuntimeOptions { constrained: false }`). Per mode: turns by
//!    end status, mean rounds, mean tool calls, repairs per turn, and the
//!    protocol-error rate (answers the parser refused / answers). The
//!    runtime's own budgets bound every turn.

use std::collections::{BTreeMap, HashSet};
use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use labfy::Failure;
use labfy_core::ObjectRef;
use labfy_gateway::protocol::{CallContext, CallRequest, Lang, NewTurn, TurnMode};
use labfy_gateway::{AgentGateway, DirectBackend, Environment, Scope};
use labfy_runtime::client::{ChatRequest, Endpoint, FORBIDDEN_PORT, LocalModelClient, ModelConfig, Readiness};
use labfy_runtime::protocol::{self, Action, ProtocolError};
use labfy_runtime::runtime::{AgentRuntime, MODEL_ACTOR, RuntimeOptions, RuntimeStatus, RuntimeTurn, StartTurn};
use labfy_store::specimen::{self, SpecimenOutcome, SpecimenSpec};
use labfy_store::{Store, WorkspaceClass};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use uuid::Uuid;

use crate::common::{fail, machine, percentile};

/// The model id sent in requests (llama-server ignores it).
const MODEL_ID: &str = "gemma-3-270m-q4_k_m";
/// llama-server's context, in tokens (one slot may use all of it).
const CONTEXT_TOKENS: u32 = 8192;
/// llama-server's threads.
const THREADS: u32 = 2;
/// Longest wait for llama-server's `/health` to answer `200`.
const READY_TIMEOUT: Duration = Duration::from_secs(180);
/// Longest wait for llama-server to exit after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// Starts tried when the free port found was taken meanwhile.
const START_TRIES: usize = 3;
/// How often a running turn is polled.
const POLL: Duration = Duration::from_millis(50);
/// Largest bare response read, in bytes.
const MAX_BARE_RESPONSE_BYTES: usize = 1024 * 1024;
/// The question of the overhead measurement (and the first of the set).
const OVERHEAD_QUESTION: usize = 0;

/// The fixed question set: companies, domains, people, links, and a
/// request to prepare web research every fifth question, so that
/// `--questions 10` keeps two of them (names from SPECIMEN seed 1).
const QUESTIONS: [&str; 20] = [
    "Quels liens entre Tessera Logistique SAS et Léa Martin ?",
    "Donne-moi une vue d'ensemble de l'enquête : entités principales et pièces récentes.",
    "Quelles pièces mentionnent Nordlys Logistique BV ?",
    "Qui est Camille Martin et à quelles sociétés est-elle liée ?",
    "Prépare une recherche web sur Orphée Logistique SAS et son domaine orphee-logistique.example, sans réseaux sociaux.",
    "Quels domaines sont rattachés à Brisach Logistique LLC ?",
    "Que sait-on du domaine nordlys-logistique.example ?",
    "Quelles personnes apparaissent avec Dunmore Logistique SA dans les pièces ?",
    "D'où vient la pièce la plus récente de l'enquête ? Retrace sa provenance.",
    "Prépare une recherche web pour vérifier l'immatriculation de Solvane Logistique GmbH.",
    "Quelles sociétés partagent un domaine ou une adresse e-mail avec Azurel Logistique OÜ ?",
    "Hugo Martin est-il lié à Esterel Logistique SA ? Cite les pièces.",
    "Quelles entités sont les plus citées dans l'enquête ?",
    "Résume ce que les pièces disent de Calypso Logistique SA.",
    "Prépare une recherche sur le web au sujet de Lucas Martin et de Dunmore Logistique SA.",
    "Qui utilise l'adresse lea.martin@calypso-logistique.example ?",
    "Quels liens entre Kestrel Logistique SAS et Kestrel Trading SA ?",
    "Quelles pièces parlent d'une cession de parts sociales ?",
    "Quels sont les voisins de Valmont Logistique OÜ dans le graphe ?",
    "Prépare une recherche web sur nordlys-logistique.example à partir de la pièce la plus récente.",
];

/// Options of `labfy-bench runtime`.
#[derive(clap::Args)]
pub struct RuntimeBenchArgs {
    /// Questions run as real turns in each mode (the first N of the fixed 20).
    #[arg(long, default_value_t = 20)]
    questions: usize,
    /// Which modes part 2 runs: with `response_format`, without, or both.
    #[arg(long, value_enum, default_value_t = Modes::Both)]
    modes: Modes,
    /// Timed pairs of the overhead measurement (one runtime round and one
    /// bare request each, interleaved), after one untimed pair; 0 skips
    /// part 1.
    #[arg(long, default_value_t = 20)]
    rounds: usize,
    /// SPECIMEN size in evidence items (the questions name seed 1's entities).
    #[arg(long, default_value_t = 2_000)]
    size: u64,
    /// Seconds one model request may take (the client's timeout). Generous:
    /// a 768-token answer without the schema has taken over 300 s on a
    /// shared 2-core machine, and a timeout measures the machine, not the
    /// protocol.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    /// The llama-server program.
    #[arg(long, env = "LABFY_LLAMA_SERVER")]
    llama_server: PathBuf,
    /// The GGUF model it serves.
    #[arg(long, env = "LABFY_TEST_GGUF")]
    model: PathBuf,
}

/// The modes of part 2.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Modes {
    /// With `response_format` (the runtime's default), then without.
    Both,
    /// With `response_format` only.
    Constrained,
    /// Without `response_format` only.
    Unconstrained,
}

impl Modes {
    fn constrained(self) -> &'static [bool] {
        match self {
            Self::Both => &[true, false],
            Self::Constrained => &[true],
            Self::Unconstrained => &[false],
        }
    }
}

/// Runs the benchmark.
pub fn runtime(args: RuntimeBenchArgs) -> Result<(), Failure> {
    if args.questions == 0 || args.questions > QUESTIONS.len() {
        return Err(fail(format!("--questions must be 1 to {}", QUESTIONS.len())));
    }
    println!("# labfy-bench runtime — {}", machine());
    let tmp = tempfile::TempDir::new()?;
    let started = Instant::now();
    // Stopped when dropped: on success and on every error below.
    let mut server = LlamaServer::start(&args.llama_server, &args.model, tmp.path())?;
    println!(
        "llama-server {} — {} — 127.0.0.1:{} -c {CONTEXT_TOKENS} -t {THREADS} --no-webui",
        server.version,
        args.model.display(),
        server.port
    );
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let addr = server.addr();
    let work = async {
        let endpoint = Endpoint::from_socket_addr(addr).map_err(fail)?;
        let config = ModelConfig::new(endpoint, MODEL_ID, Duration::from_secs(args.timeout)).map_err(fail)?;
        let client = LocalModelClient::new(config);
        server.wait_ready(&client).await?;
        if args.rounds > 0 {
            overhead(&args, &client, addr, tmp.path()).await?;
        }
        for &constrained in args.modes.constrained() {
            turns(&args, &client, constrained, tmp.path()).await?;
        }
        Ok::<(), Failure>(())
    };
    // SIGINT or SIGTERM ends the run as an error, so that llama-server is
    // stopped by the guard below rather than left behind.
    let result = rt.block_on(async {
        tokio::select! {
            r = work => r,
            why = interrupted() => Err(fail(why)),
        }
    });
    drop(rt);
    let rss = server.peak_rss_mib();
    drop(server);
    result?;
    println!("total {:.0} s; llama-server peak RSS {rss}", started.elapsed().as_secs_f64());
    Ok(())
}

/// Resolves on SIGINT or SIGTERM, naming it.
async fn interrupted() -> String {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => tokio::select! {
            _ = term.recv() => "interrupted by SIGTERM".into(),
            _ = tokio::signal::ctrl_c() => "interrupted by SIGINT".into(),
        },
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            "interrupted by SIGINT".into()
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

// ------------------------------------------------------------ llama-server

/// The llama-server the benchmark started; stopped (SIGTERM, then SIGKILL
/// after [`STOP_GRACE`]) when dropped.
struct LlamaServer {
    child: Child,
    port: u16,
    log: PathBuf,
    version: String,
}

impl LlamaServer {
    /// Starts it on a free loopback port (never 8080), retrying with another
    /// port if the one found was taken before llama-server bound it.
    fn start(bin: &Path, model: &Path, dir: &Path) -> Result<Self, Failure> {
        if !model.is_file() {
            return Err(fail(format!("no model at {}: set LABFY_TEST_GGUF (tests/llama-fixture)", model.display())));
        }
        let version = Command::new(bin)
            .arg("--version")
            .output()
            .map_err(|e| fail(format!("cannot run {}: {e} (set LABFY_LLAMA_SERVER)", bin.display())))?;
        let version = String::from_utf8_lossy(&version.stderr)
            .lines()
            .chain(String::from_utf8_lossy(&version.stdout).lines())
            .find_map(|l| l.strip_prefix("version: ").map(str::to_owned))
            .unwrap_or_else(|| "(unknown version)".into());
        let mut last = String::new();
        for attempt in 0..START_TRIES {
            let port = free_port()?;
            let log = dir.join(format!("llama-server-{attempt}.log"));
            let out = File::create(&log)?;
            let child = Command::new(bin)
                .env_clear()
                .arg("-m")
                .arg(model)
                .args(["--host", "127.0.0.1", "--port", &port.to_string()])
                .args(["-c", &CONTEXT_TOKENS.to_string(), "-t", &THREADS.to_string(), "--no-webui"])
                .stdin(Stdio::null())
                .stdout(out.try_clone()?)
                .stderr(out)
                .spawn()
                .map_err(|e| fail(format!("cannot start {}: {e}", bin.display())))?;
            let mut server = Self { child, port, log, version: version.clone() };
            // A taken port makes it exit within ~50 ms; give it a moment.
            std::thread::sleep(Duration::from_millis(300));
            match server.exited()? {
                None => return Ok(server),
                Some(why) => last = why,
            }
        }
        Err(fail(format!("llama-server did not start in {START_TRIES} tries: {last}")))
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// Why it has exited (its status and the end of its log), or `None`
    /// while it runs.
    fn exited(&mut self) -> Result<Option<String>, Failure> {
        Ok(self.child.try_wait()?.map(|status| {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(5).collect::<Vec<_>>().into_iter().rev().collect();
            format!("llama-server exited ({status}): {}", tail.join(" | "))
        }))
    }

    /// Waits until `GET /health` answers `200` (the model is loaded).
    async fn wait_ready(&mut self, client: &LocalModelClient) -> Result<(), Failure> {
        let started = Instant::now();
        loop {
            if let Readiness::Ready = client.status().await {
                println!("llama-server ready in {:.1} s", started.elapsed().as_secs_f64());
                return Ok(());
            }
            if let Some(why) = self.exited()? {
                return Err(fail(why));
            }
            if started.elapsed() > READY_TIMEOUT {
                return Err(fail(format!("llama-server not ready after {} s", READY_TIMEOUT.as_secs())));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Its peak resident memory so far (`VmHWM`), as text.
    fn peak_rss_mib(&self) -> String {
        std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmHWM:"))
                    .and_then(|v| v.split_whitespace().next())
                    .and_then(|kib| kib.parse::<u64>().ok())
            })
            .map_or_else(|| "unknown".into(), |kib| format!("{} MiB", kib / 1024))
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        crate::common::stop_child(&mut self.child, STOP_GRACE);
    }
}

/// A loopback port free right now (never [`FORBIDDEN_PORT`]).
fn free_port() -> Result<u16, Failure> {
    loop {
        let port = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?.port();
        if port != FORBIDDEN_PORT {
            return Ok(port);
        }
    }
}

// ---------------------------------------------------------------- SPECIMEN

/// A fresh SPECIMEN (seed 1) in `dir` and the gateway over it.
struct Fixture {
    gateway: Arc<AgentGateway>,
    scope: Scope,
    investigation: ObjectRef,
    env: Environment,
}

impl Fixture {
    fn new(dir: &Path, size: u64) -> Result<Self, Failure> {
        let mut store = Store::open(dir)?;
        let out = specimen::generate(&mut store, SpecimenSpec { seed: 1, size }, &mut |_, _| {})?;
        let SpecimenOutcome::Created { workspace, investigation, .. } = out else {
            return Err(fail(format!("no SPECIMEN was written in {}: {out:?}", dir.display())));
        };
        let gateway = Arc::new(AgentGateway::new(Arc::new(DirectBackend::new(store))).map_err(fail)?);
        Ok(Self {
            gateway,
            scope: Scope { workspace: workspace.id(), class: WorkspaceClass::Specimen },
            investigation,
            env: Environment::offline("benchmark: no egress"),
        })
    }
}

// ---------------------------------------------------------------- overhead

/// What one runtime round took, part by part.
struct Round {
    total: Duration,
    chat: Duration,
    parse: Duration,
    gateway: Duration,
    outcome: String,
}

/// Part 1: one runtime round against the bare request, interleaved.
async fn overhead(
    args: &RuntimeBenchArgs,
    client: &LocalModelClient,
    addr: SocketAddr,
    dir: &Path,
) -> Result<(), Failure> {
    let fx = Fixture::new(&dir.join("overhead"), args.size)?;
    let runtime = AgentRuntime::start(fx.gateway.clone(), Some(client.clone()));
    let question = QUESTIONS[OVERHEAD_QUESTION];
    let inv = fx.investigation.to_string();
    let (request, known) = runtime.first_round_request(fx.scope, &fx.env, question, &inv, &[]);
    runtime.close();
    // The very body the client sends: the request, the model id, no stream.
    let body = String::from_utf8(request.wire_body(client.config().model()).map_err(fail)?).map_err(fail)?;
    println!();
    println!("## 1. One runtime round against the same request sent bare ({} timed pairs, interleaved)", args.rounds);
    println!(
        "question: {question}\nrequest: {} messages, {} bytes of prompt text, {} bytes of JSON body, \
         response_format {} bytes, max_tokens {}",
        request.messages.len(),
        request.messages.iter().map(|m| m.content.len()).sum::<usize>(),
        body.len(),
        request.response_format.as_ref().map_or(0, |f| f.text().len()),
        request.max_tokens.unwrap_or(0),
    );

    // One untimed pair: the prompt enters llama-server's cache for both.
    let warm = runtime_round(&fx, client, &request, &known, 0).await?;
    let (_, reply) = bare_round(addr, &body).await?;
    let usage = reply.get("usage").cloned().unwrap_or(Value::Null);
    let answer = reply.pointer("/choices/0/message/content").and_then(Value::as_str).unwrap_or_default();
    println!("runtime round outcome: {}", warm.outcome);
    println!(
        "bare answer ({} prompt tokens, {} generated): {}",
        usage.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0),
        usage.get("completion_tokens").and_then(Value::as_u64).unwrap_or(0),
        labfy_core::bounded::truncate_chars(&answer.split_whitespace().collect::<Vec<_>>().join(" "), 200)
    );

    let mut through = Vec::with_capacity(args.rounds);
    let mut bare = Vec::with_capacity(args.rounds);
    let mut ratios = Vec::with_capacity(args.rounds);
    let (mut chat, mut parse, mut gateway) = (Vec::new(), Vec::new(), Vec::new());
    let (mut prompt_ms, mut predicted_ms, mut generated) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..args.rounds {
        // Alternate which goes first, so that drift hits both alike.
        let (r, (b, reply)) = if i % 2 == 0 {
            let r = runtime_round(&fx, client, &request, &known, i + 1).await?;
            (r, bare_round(addr, &body).await?)
        } else {
            let b = bare_round(addr, &body).await?;
            (runtime_round(&fx, client, &request, &known, i + 1).await?, b)
        };
        ratios.push(r.total.as_secs_f64() / b.as_secs_f64().max(1e-9));
        through.push(r.total);
        chat.push(r.chat);
        parse.push(r.parse);
        gateway.push(r.gateway);
        bare.push(b);
        let timing = |k: &str| reply.pointer(&format!("/timings/{k}")).and_then(Value::as_f64).unwrap_or(0.0);
        prompt_ms.push(timing("prompt_ms"));
        predicted_ms.push(timing("predicted_ms"));
        generated.push(timing("predicted_n"));
    }
    for v in [&mut through, &mut bare, &mut chat, &mut parse, &mut gateway] {
        v.sort();
    }
    ratios.sort_by(f64::total_cmp);
    let p = |v: &[Duration]| (percentile(v, 0.5), percentile(v, 0.0), percentile(v, 1.0));
    let line = |name: &str, v: &[Duration]| {
        let (p50, min, max) = p(v);
        println!("{name:<52} p50 {:>9.2} ms  min {:>9.2}  max {:>9.2}", ms(p50), ms(min), ms(max));
    };
    line("bare POST to llama-server (same body)", &bare);
    line("runtime round (chat + parse + gateway call)", &through);
    line("  of which LocalModelClient::chat", &chat);
    line("  of which parse_action + check_refs", &parse);
    line("  of which the gateway call (blocking pool)", &gateway);
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    let (b50, r50) = (percentile(&bare, 0.5), percentile(&through, 0.5));
    println!(
        "{:<52} {:>6.3}   (per-pair ratios {:.3}–{:.3}, median {:.3}; p50 difference {:+.2} ms)",
        "ratio runtime / bare, p50 (target ≤ 1.05)",
        r50.as_secs_f64() / b50.as_secs_f64().max(1e-9),
        ratios.first().copied().unwrap_or(0.0),
        ratios.last().copied().unwrap_or(0.0),
        ratios.get(ratios.len() / 2).copied().unwrap_or(0.0),
        ms(r50) - ms(b50),
    );
    let (pm, gm, gn) = (median(&mut prompt_ms), median(&mut predicted_ms), median(&mut generated));
    println!(
        "llama-server's own timings of the bare requests, median: prompt {pm:.1} ms, generation {gm:.1} ms \
         for {gn:.0} tokens ({:.1} tok/s) — {:.0} % of the bare p50",
        gn / (gm / 1e3).max(1e-9),
        100.0 * (pm + gm) / ms(b50).max(1e-9)
    );
    Ok(())
}

/// One runtime round: the client's chat, the parser, the gateway call of a
/// tool call (on the blocking pool, as the worker does), timed in parts. The
/// gateway turn is opened before the clock starts (once per turn in the
/// runtime).
async fn runtime_round(
    fx: &Fixture,
    client: &LocalModelClient,
    request: &ChatRequest,
    known: &HashSet<String>,
    i: usize,
) -> Result<Round, Failure> {
    let new = NewTurn {
        question: QUESTIONS[OVERHEAD_QUESTION].into(),
        investigation_id: None,
        exclusions: vec![],
        mode: Some(TurnMode::LocalModel),
        lang: Lang::Fr,
    };
    let turn = fx.gateway.open_turn(fx.scope, &new).map_err(fail)?;
    let catalog = fx.gateway.catalog();
    let start = Instant::now();
    let answer = client.chat(request).await.map_err(|e| fail(format!("the model request failed: {e}")))?;
    let chat = start.elapsed();
    let parsed = if answer.is_truncated() {
        Err(ProtocolError::Truncated)
    } else {
        protocol::parse_action(&answer.content, catalog).and_then(|a| protocol::check_refs(&a, known).map(|()| a))
    };
    let parse = start.elapsed() - chat;
    let outcome = match parsed {
        Ok(Action::ToolCall(call)) => {
            let tool = call.tool_id().as_str().to_owned();
            let req = CallRequest {
                turn_id: turn.turn_id,
                call_id: Uuid::new_v4(),
                tool_id: tool.clone(),
                input: Value::Object(call.arguments().clone()),
                context: CallContext {
                    investigation_id: Some(turn.investigation_id.to_string()),
                    purpose: Some("agent local".into()),
                },
                object_refs: vec![],
                idempotency_key: format!("bench:{}:{i}", turn.turn_id),
            };
            let (gw, env, scope) = (fx.gateway.clone(), fx.env.clone(), fx.scope);
            let result =
                tokio::task::spawn_blocking(move || gw.call_by(scope, &env, req, MODEL_ACTOR)).await.map_err(fail)?;
            match result {
                Ok(r) => format!("tool_call {tool} → {:?}", r.status),
                Err(e) => format!("tool_call {tool} → refused: {e}"),
            }
        }
        Ok(Action::Final(_)) => "final".to_owned(),
        Err(e) => format!("refused by the parser: {}", e.code()),
    };
    let total = start.elapsed();
    let gateway = total - chat - parse;
    fx.gateway.fail_turn(fx.scope, turn.turn_id, "benchmark round done");
    Ok(Round { total, chat, parse, gateway, outcome })
}

/// The same body POSTed on a fresh connection by a bare client; the reply is
/// parsed after the clock stops.
async fn bare_round(addr: SocketAddr, body: &str) -> Result<(Duration, Value), Failure> {
    let start = Instant::now();
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {addr}\r\nAccept: application/json\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    let mut reply = Vec::new();
    (&mut stream).take(MAX_BARE_RESPONSE_BYTES as u64).read_to_end(&mut reply).await?;
    let took = start.elapsed();
    let text = String::from_utf8_lossy(&reply);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return Err(fail("the bare request got no HTTP answer"));
    };
    if !head.starts_with("HTTP/1.1 200") {
        return Err(fail(format!("the bare request got {}", head.lines().next().unwrap_or_default())));
    }
    // Chunked or not: the JSON object is between the first `{` and the last `}`.
    let json = match (body.find('{'), body.rfind('}')) {
        (Some(a), Some(b)) if a < b => &body[a..=b],
        _ => return Err(fail("the bare request's answer holds no JSON object")),
    };
    Ok((took, serde_json::from_str(json).map_err(fail)?))
}

// ------------------------------------------------------------------- turns

/// One finished turn, as the bench reads it back.
struct TurnFigures {
    turn: RuntimeTurn,
    refused: Vec<String>,
    tools: Vec<String>,
    /// The `tool.result` details of failed calls (with their diagnostic).
    failures: Vec<String>,
    took: Duration,
}

/// Part 2: every question as a real turn, in one mode.
async fn turns(
    args: &RuntimeBenchArgs,
    client: &LocalModelClient,
    constrained: bool,
    dir: &Path,
) -> Result<(), Failure> {
    let mode = if constrained { "with response_format" } else { "without response_format" };
    let fx = Fixture::new(&dir.join(if constrained { "constrained" } else { "free" }), args.size)?;
    let rt = AgentRuntime::start_with(fx.gateway.clone(), Some(client.clone()), RuntimeOptions { constrained });
    println!();
    println!("## 2. Real turns {mode} ({} questions)", args.questions);
    println!(
        "{:>2}  {:<26} {:>6} {:>5} {:>7} {:>7} {:>7}  tools called / end",
        "#", "status", "rounds", "tools", "repairs", "refused", "s"
    );
    let mut cursor = 0;
    let mut all = Vec::new();
    // Long enough for every round the budget allows to time out once.
    let patience = Duration::from_secs(args.timeout) * (labfy_runtime::runtime::MAX_ROUNDS + 1);
    for (i, question) in QUESTIONS.iter().take(args.questions).enumerate() {
        let start = Instant::now();
        let t = rt
            .start_turn(
                fx.scope,
                fx.env.clone(),
                StartTurn {
                    question: (*question).to_owned(),
                    investigation_id: None,
                    exclusions: vec![],
                    idempotency_key: format!("bench-{constrained}-{i}"),
                    tools: None,
                    lang: Lang::Fr,
                },
            )
            .map_err(fail)?;
        let turn = loop {
            let now = rt.turn(fx.scope, t.turn_id).map_err(fail)?;
            if !matches!(now.status, RuntimeStatus::Queued | RuntimeStatus::Running) {
                break now;
            }
            if start.elapsed() > patience {
                rt.cancel(fx.scope, t.turn_id).map_err(fail)?;
                break rt.turn(fx.scope, t.turn_id).map_err(fail)?;
            }
            tokio::time::sleep(POLL).await;
        };
        let took = start.elapsed();
        let (mut refused, mut tools, mut failures) = (Vec::new(), Vec::new(), Vec::new());
        loop {
            let page = rt.events(fx.scope, cursor, labfy_runtime::runtime::MAX_EVENTS_PER_POLL);
            if page.missed {
                return Err(fail("runtime events were evicted before the benchmark read them"));
            }
            for e in page.events.iter().filter(|e| e.turn_id == t.turn_id) {
                match e.kind {
                    "model.answer" => {
                        if let Some(what) = e.detail.strip_prefix("refused: ") {
                            refused.push(what.split_whitespace().next().unwrap_or_default().to_owned());
                        }
                    }
                    // `tool: Status`, without a failure's diagnostic.
                    "tool.result" => {
                        tools.push(e.detail.split(" — ").next().unwrap_or_default().to_owned());
                        if e.detail.contains(" — ") {
                            failures.push(e.detail.clone());
                        }
                    }
                    _ => {}
                }
            }
            cursor = page.next_cursor;
            if page.events.len() < labfy_runtime::runtime::MAX_EVENTS_PER_POLL {
                break;
            }
        }
        let end = turn.error.clone().or_else(|| turn.summary.clone()).unwrap_or_default();
        println!(
            "{:>2}  {:<26} {:>6} {:>5} {:>7} {:>7} {:>7.1}  {} / {}",
            i + 1,
            format!("{:?}", turn.status),
            turn.rounds,
            turn.tool_calls,
            turn.repairs,
            refused.len(),
            took.as_secs_f64(),
            runs(&tools),
            labfy_core::bounded::truncate_chars(&end.replace('\n', " "), 90),
        );
        all.push(TurnFigures { turn, refused, tools, failures, took });
    }
    rt.close();
    summary(mode, &all);
    Ok(())
}

/// `a, a, b` as `a ×2, b`; `—` when empty.
fn runs(items: &[String]) -> String {
    let mut out: Vec<(String, usize)> = Vec::new();
    for item in items {
        match out.last_mut() {
            Some((last, n)) if last == item => *n += 1,
            _ => out.push((item.clone(), 1)),
        }
    }
    if out.is_empty() {
        return "—".into();
    }
    let parts: Vec<String> =
        out.into_iter().map(|(item, n)| if n == 1 { item } else { format!("{item} ×{n}") }).collect();
    parts.join(", ")
}

/// The per-mode figures.
fn summary(mode: &str, all: &[TurnFigures]) {
    let n = all.len().max(1) as f64;
    let mut by_status: BTreeMap<String, usize> = BTreeMap::new();
    let mut codes: BTreeMap<&str, usize> = BTreeMap::new();
    let (mut rounds, mut calls, mut repairs, mut refused, mut answers) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut tool_results = 0usize;
    for f in all {
        *by_status.entry(format!("{:?}", f.turn.status)).or_default() += 1;
        rounds += u64::from(f.turn.rounds);
        calls += u64::from(f.turn.tool_calls);
        repairs += u64::from(f.turn.repairs);
        refused += f.refused.len() as u64;
        // Every round got an answer, except the last of a turn whose model
        // request failed.
        answers += u64::from(f.turn.rounds) - u64::from(f.turn.status == RuntimeStatus::ModelUnavailable);
        for c in &f.refused {
            *codes.entry(c.as_str()).or_default() += 1;
        }
        tool_results += f.tools.iter().filter(|t| t.ends_with(": Completed")).count();
    }
    let mut took: Vec<Duration> = all.iter().map(|f| f.took).collect();
    took.sort();
    println!("### {mode}: {} turns", all.len());
    let statuses: Vec<String> = by_status.iter().map(|(s, c)| format!("{s} {c}")).collect();
    println!("turns by end status: {}", statuses.join(", "));
    println!(
        "mean rounds {:.2}, mean tool calls {:.2} ({tool_results} COMPLETED results), repairs per turn {:.2}",
        rounds as f64 / n,
        calls as f64 / n,
        repairs as f64 / n
    );
    let codes: Vec<String> = codes.iter().map(|(c, k)| format!("{c} {k}")).collect();
    println!(
        "protocol errors: {refused} refused / {answers} answers = {:.1} %{}",
        100.0 * refused as f64 / answers.max(1) as f64,
        if codes.is_empty() { String::new() } else { format!(" ({})", codes.join(", ")) }
    );
    // Why tool calls failed, most frequent first (the gateway's diagnostics).
    let mut why: BTreeMap<&str, usize> = BTreeMap::new();
    for f in all {
        for d in &f.failures {
            *why.entry(d.as_str()).or_default() += 1;
        }
    }
    let mut why: Vec<(&str, usize)> = why.into_iter().collect();
    why.sort_by_key(|w| std::cmp::Reverse(w.1));
    for (d, n) in why.iter().take(5) {
        println!("failed call ×{n}: {}", labfy_core::bounded::truncate_chars(d, 160));
    }
    println!(
        "turn wall time: p50 {:.1} s, max {:.1} s, total {:.0} s",
        percentile(&took, 0.5).as_secs_f64(),
        took.last().copied().unwrap_or_default().as_secs_f64(),
        took.iter().sum::<Duration>().as_secs_f64()
    );
}
