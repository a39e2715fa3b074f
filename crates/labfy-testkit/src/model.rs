//! A scripted OpenAI-compatible model server (llama-server's HTTP/1.1 side).

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The port a model endpoint may never use (the server's own default).
pub const FORBIDDEN_PORT: u16 = 8080;
/// How long a chat request waits for its reply to be scripted by default:
/// a test may script the answer after it has seen the request.
pub const SCRIPT_PATIENCE: Duration = Duration::from_secs(20);
/// Longest head read (bytes).
const MAX_HEAD: usize = 64 * 1024;

/// One scripted reply to a chat request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// `choices[0].message.content`, `finish_reason: "stop"`.
    Answer(String),
    /// The same, cut by the token limit (`finish_reason: "length"`).
    Cut(String),
    /// An answer after a delay (counted in [`ScriptedModel::late_done`]).
    Late(Duration, String),
    /// 503 « Loading model », as llama-server answers while it loads.
    Busy,
    /// The connection closed without a word.
    Close,
    /// Never answers (the client's cancel or deadline ends it).
    Hang,
    /// This status line and JSON body.
    Status(&'static str, &'static str),
}

/// How the server answers chat requests.
enum Answers {
    /// The next scripted reply, waiting this long for one to be scripted;
    /// none by then is a 500 « nothing scripted ».
    Script(Duration),
    /// Whatever this function of the request says.
    Rule(fn(&Value) -> String),
}

#[derive(Default)]
struct Log {
    script: VecDeque<Reply>,
    requests: Vec<Value>,
    late_done: usize,
}

/// The model server; clones share it.
#[derive(Clone)]
pub struct ScriptedModel {
    addr: SocketAddr,
    log: Arc<Mutex<Log>>,
}

impl ScriptedModel {
    /// A server answering its script, each request waiting up to
    /// [`SCRIPT_PATIENCE`] for its reply to be scripted.
    pub async fn start() -> Self {
        Self::serve(Answers::Script(SCRIPT_PATIENCE)).await
    }

    /// A server answering its script, a request that finds none answered
    /// 500 after `patience` (`Duration::ZERO`: at once).
    pub async fn with_patience(patience: Duration) -> Self {
        Self::serve(Answers::Script(patience)).await
    }

    /// A server answering every chat request with `rule(request)`.
    pub async fn obeying(rule: fn(&Value) -> String) -> Self {
        Self::serve(Answers::Rule(rule)).await
    }

    async fn serve(answers: Answers) -> Self {
        let listener = loop {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            if l.local_addr().unwrap().port() != FORBIDDEN_PORT {
                break l;
            }
        };
        let addr = listener.local_addr().unwrap();
        let log = Arc::new(Mutex::new(Log::default()));
        let (shared, answers) = (log.clone(), Arc::new(answers));
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, shared.clone(), answers.clone()));
            }
        });
        Self { addr, log }
    }

    /// Its address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn log(&self) -> MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Scripts the next reply.
    pub fn push(&self, reply: Reply) {
        self.log().script.push_back(reply);
    }

    /// Scripts the next answer.
    pub fn answer(&self, content: impl Into<String>) {
        self.push(Reply::Answer(content.into()));
    }

    /// Drops the replies scripted and not yet used.
    pub fn clear_script(&self) {
        self.log().script.clear();
    }

    /// Chat requests received so far.
    pub fn count(&self) -> usize {
        self.log().requests.len()
    }

    /// The `i`th chat request's body (from 0).
    pub fn request(&self, i: usize) -> Value {
        self.log().requests[i].clone()
    }

    /// Every chat request's body, in arrival order.
    pub fn requests(&self) -> Vec<Value> {
        self.log().requests.clone()
    }

    /// Late answers whose delay ran out (written or not: the client may
    /// have gone).
    pub fn late_done(&self) -> usize {
        self.log().late_done
    }

    /// Waits up to `patience` until `n` chat requests have arrived, and
    /// returns the `n`th.
    pub async fn nth(&self, n: usize, patience: Duration) -> Value {
        let deadline = Instant::now() + patience;
        while self.count() < n {
            assert!(Instant::now() < deadline, "the model got {} requests, never {n}", self.count());
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.request(n - 1)
    }
}

async fn serve(mut stream: TcpStream, log: Arc<Mutex<Log>>, answers: Arc<Answers>) {
    let Some((head, body)) = read_request(&mut stream).await else { return };
    if head.starts_with("GET /health ") {
        respond(&mut stream, "200 OK", r#"{"status":"ok"}"#).await;
        return;
    }
    if !head.starts_with("POST /v1/chat/completions ") {
        respond(&mut stream, "404 Not Found", r#"{"error":{"message":"no such path"}}"#).await;
        return;
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let lock = || log.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    lock().requests.push(body.clone());
    let patience = match answers.as_ref() {
        Answers::Rule(rule) => {
            respond(&mut stream, "200 OK", &completion(&rule(&body), "stop")).await;
            return;
        }
        Answers::Script(patience) => *patience,
    };
    let deadline = Instant::now() + patience;
    let reply = loop {
        if let Some(r) = lock().script.pop_front() {
            break Some(r);
        }
        if Instant::now() >= deadline {
            break None;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    match reply {
        None => respond(&mut stream, "500 Internal Server Error", r#"{"error":{"message":"nothing scripted"}}"#).await,
        Some(Reply::Answer(c)) => respond(&mut stream, "200 OK", &completion(&c, "stop")).await,
        Some(Reply::Cut(c)) => respond(&mut stream, "200 OK", &completion(&c, "length")).await,
        Some(Reply::Late(delay, c)) => {
            tokio::time::sleep(delay).await;
            respond(&mut stream, "200 OK", &completion(&c, "stop")).await;
            lock().late_done += 1;
        }
        Some(Reply::Busy) => {
            let busy = r#"{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}"#;
            respond(&mut stream, "503 Service Unavailable", busy).await;
        }
        Some(Reply::Close) => drop(stream),
        Some(Reply::Hang) => {
            // Hold the connection until the client goes.
            let mut buf = [0_u8; 1024];
            while matches!(stream.read(&mut buf).await, Ok(n) if n > 0) {}
        }
        Some(Reply::Status(status, body)) => respond(&mut stream, status, body).await,
    }
}

/// One HTTP/1.1 request: its head and its `Content-Length` body.
async fn read_request(stream: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0_u8; 8192];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > MAX_HEAD {
            return None;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    let length = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length").then(|| value.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = buf[end..].to_vec();
    while body.len() < length {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some((head, body))
}

async fn respond(stream: &mut TcpStream, status: &str, body: &str) {
    let text = format!(
        "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(text.as_bytes()).await;
    let _ = stream.shutdown().await;
}

/// A llama-server style completion of `content`.
pub fn completion(content: &str, finish_reason: &str) -> String {
    json!({
        "id": "chatcmpl-test", "object": "chat.completion", "model": "fake-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn post(addr: SocketAddr, path: &str, body: &str) -> String {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let req = format!("POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n{body}", body.len());
        s.write_all(req.as_bytes()).await.unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out).await;
        out
    }

    #[tokio::test]
    async fn it_answers_its_script_in_order_and_records_every_request() {
        let m = ScriptedModel::with_patience(Duration::ZERO).await;
        m.answer("un");
        m.push(Reply::Cut("deux".into()));
        m.push(Reply::Busy);
        let first = post(m.addr(), "/v1/chat/completions", r#"{"n":1}"#).await;
        assert!(first.starts_with("HTTP/1.1 200") && first.contains(r#""content":"un""#), "{first}");
        assert!(post(m.addr(), "/v1/chat/completions", "{}").await.contains(r#""finish_reason":"length""#));
        assert!(post(m.addr(), "/v1/chat/completions", "{}").await.starts_with("HTTP/1.1 503"));
        // Script spent, no patience: 500 at once.
        assert!(post(m.addr(), "/v1/chat/completions", "{}").await.starts_with("HTTP/1.1 500"));
        assert!(post(m.addr(), "/v1/models", "{}").await.starts_with("HTTP/1.1 404"));
        assert_eq!(m.count(), 4, "the 404 is not a chat request");
        assert_eq!(m.request(0), json!({"n": 1}));
        assert_ne!(m.addr().port(), FORBIDDEN_PORT);
    }

    #[tokio::test]
    async fn a_rule_answers_from_the_request() {
        fn echo(r: &Value) -> String {
            r["q"].as_str().unwrap_or("?").to_uppercase()
        }
        let m = ScriptedModel::obeying(echo).await;
        assert!(post(m.addr(), "/v1/chat/completions", r#"{"q":"abc"}"#).await.contains(r#""content":"ABC""#));
        assert_eq!(m.nth(1, Duration::from_secs(1)).await, json!({"q": "abc"}));
    }
}
