//! The OpenAI-compatible chat messages, as sent and as read back (SPEC M3;
//! notes/llama-server.md: `choices[0].message.content`, `finish_reason`,
//! `usage`).

use labfy_core::bounded::truncate_chars;
use serde::{Deserialize, Serialize};

use super::error::ClientError;

/// Longest diagnostic taken from a server answer into an error, in
/// characters (control characters are replaced by spaces first).
pub const MAX_DIAGNOSTIC_CHARS: usize = 200;

/// Longest `finish_reason` kept when it is not `stop` or `length`.
const MAX_FINISH_REASON_CHARS: usize = 32;

/// A chat request, without the model id: the client adds the configured one
/// and `"stream": false`.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct ChatRequest {
    /// The conversation, oldest first.
    pub messages: Vec<ChatMessage>,
    /// Upper bound on generated tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Sampling temperature.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Sampling seed, for reproducible runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Constrained decoding, e.g. `{"type":"json_schema","json_schema":{…}}`
    /// (the form llama-server enforces; see notes/llama-server.md). The
    /// answer is still checked by the protocol parser (M5).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ResponseFormat>,
}

impl ChatRequest {
    /// The JSON body the client POSTs: this request, `model` and
    /// `"stream": false`, with `response_format` written verbatim.
    pub fn wire_body(&self, model: &str) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec(&WireRequest { model, request: self, stream: false })
    }
}

/// A `response_format` as JSON text, sent exactly as written.
///
/// Key order is part of its meaning for llama-server: the grammar it builds
/// from a JSON schema makes the model write an object's properties in the
/// order of the schema text. A `serde_json::Value` sorts keys, which would
/// put an action's `arguments` before its `tool_id` — the model would choose
/// the arguments first and the tool after (measured: it then picks whichever
/// tool those arguments fit first). So the text is kept as given
/// ([`crate::protocol::ActionSchema::response_format_text`] writes
/// `contract`, `type`, `tool_id`, `arguments`).
#[derive(Debug, Clone)]
pub struct ResponseFormat(Box<serde_json::value::RawValue>);

impl ResponseFormat {
    /// `text`, which must be one JSON object.
    pub fn from_text(text: String) -> Result<Self, serde_json::Error> {
        let raw = serde_json::value::RawValue::from_string(text)?;
        if !raw.get().trim_start().starts_with('{') {
            return Err(serde::de::Error::custom("a response_format must be a JSON object"));
        }
        Ok(Self(raw))
    }

    /// The text as sent.
    pub fn text(&self) -> &str {
        self.0.get()
    }
}

impl From<&serde_json::Value> for ResponseFormat {
    /// `value` in its own (sorted) key order.
    fn from(value: &serde_json::Value) -> Self {
        // A `Value` always serialises (its keys are strings).
        Self(serde_json::value::to_raw_value(value).unwrap_or_default())
    }
}

impl PartialEq for ResponseFormat {
    /// Same text, byte for byte (order included).
    fn eq(&self, other: &Self) -> bool {
        self.text() == other.text()
    }
}

impl Serialize for ResponseFormat {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

/// One message of a chat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChatMessage {
    /// Who speaks.
    pub role: Role,
    /// What is said.
    pub content: String,
}

/// The speaker of a [`ChatMessage`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions from Labfy.
    System,
    /// The analyst's request, or tool results marked `UNTRUSTED_DATA` (M2).
    User,
    /// A previous answer of the model.
    Assistant,
}

impl ChatMessage {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self { role: Role::System, content: content.into() }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self { role: Role::User, content: content.into() }
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self { role: Role::Assistant, content: content.into() }
    }
}

/// The request as it goes on the wire.
#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    #[serde(flatten)]
    request: &'a ChatRequest,
    stream: bool,
}

/// The useful part of a chat completion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatResponse {
    /// `choices[0].message.content`: the model's text, to be parsed by the
    /// protocol (M5). Untrusted.
    pub content: String,
    /// `choices[0].finish_reason`.
    pub finish_reason: FinishReason,
    /// `usage`, when the server reports it.
    pub usage: Option<Usage>,
}

impl ChatResponse {
    /// Whether generation stopped on the token limit: the content is then
    /// likely a cut JSON prefix, to be treated as a protocol error.
    pub fn is_truncated(&self) -> bool {
        self.finish_reason == FinishReason::Length
    }
}

/// Why generation stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinishReason {
    /// A natural stop (end of generation or a stop sequence).
    Stop,
    /// The token limit was reached: the content is cut.
    Length,
    /// Another reason, as the server spelled it (bounded).
    Other(String),
    /// The server gave none (`null` or absent).
    Missing,
}

/// Token counts reported by the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// Tokens in the prompt.
    pub prompt_tokens: u64,
    /// Tokens generated.
    pub completion_tokens: u64,
}

#[derive(Deserialize)]
struct WireResponse {
    choices: Vec<WireChoice>,
    #[serde(default)]
    usage: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct WireChoice {
    message: WireMessage,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Option<String>,
}

/// Reads a `200` body. Unknown fields (`id`, `timings`…) are ignored; a
/// missing choice or content is [`ClientError::Malformed`].
pub(crate) fn parse_chat_response(body: &[u8]) -> Result<ChatResponse, ClientError> {
    let wire: WireResponse = serde_json::from_slice(body).map_err(|e| ClientError::Malformed {
        reason: diagnostic(&format!("not a chat completion ({} bytes): {e}", body.len())),
    })?;
    let Some(choice) = wire.choices.into_iter().next() else {
        return Err(ClientError::Malformed { reason: "no choices".to_owned() });
    };
    let Some(content) = choice.message.content else {
        return Err(ClientError::Malformed { reason: "choices[0].message.content is missing or null".to_owned() });
    };
    let finish_reason = match choice.finish_reason.as_deref() {
        None => FinishReason::Missing,
        Some("stop") => FinishReason::Stop,
        Some("length") => FinishReason::Length,
        Some(other) => FinishReason::Other(truncate_chars(&sanitize(other), MAX_FINISH_REASON_CHARS)),
    };
    let usage = wire.usage.as_ref().and_then(|u| {
        Some(Usage {
            prompt_tokens: u.get("prompt_tokens")?.as_u64()?,
            completion_tokens: u.get("completion_tokens")?.as_u64()?,
        })
    });
    Ok(ChatResponse { content, finish_reason, usage })
}

/// The OpenAI-style `error.message` (or `error` as a string, or `message`)
/// of an error body, bounded; `None` when there is none.
pub(crate) fn error_message(body: &[u8]) -> Option<String> {
    let value: serde_json::Value = serde_json::from_slice(body).ok()?;
    let message = value
        .pointer("/error/message")
        .or_else(|| value.get("error").filter(|e| e.is_string()))
        .or_else(|| value.get("message"))?
        .as_str()?;
    Some(diagnostic(message))
}

/// Whether an error body says the prompt does not fit the context window:
/// llama-server's `error.type` `exceed_context_size_error`, or OpenAI's
/// `error.code` `context_length_exceeded`.
pub(crate) fn is_context_exceeded(body: &[u8]) -> bool {
    let Ok(value) = serde_json::from_slice::<serde_json::Value>(body) else { return false };
    value.pointer("/error/type").and_then(serde_json::Value::as_str) == Some("exceed_context_size_error")
        || value.pointer("/error/code").and_then(serde_json::Value::as_str) == Some("context_length_exceeded")
}

/// Text from the server made fit for an error or a log line: control
/// characters replaced, cut to [`MAX_DIAGNOSTIC_CHARS`].
pub(crate) fn diagnostic(text: &str) -> String {
    truncate_chars(&sanitize(text), MAX_DIAGNOSTIC_CHARS)
}

fn sanitize(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse(v: serde_json::Value) -> Result<ChatResponse, ClientError> {
        parse_chat_response(v.to_string().as_bytes())
    }

    #[test]
    fn a_response_format_goes_on_the_wire_as_written() {
        let format = ResponseFormat::from_text(r#"{"z":1,"a":{"y":2,"b":3}}"#.to_owned()).unwrap();
        let request = ChatRequest { response_format: Some(format), ..ChatRequest::default() };
        let body = String::from_utf8(request.wire_body("m").unwrap()).unwrap();
        assert!(body.contains(r#""response_format":{"z":1,"a":{"y":2,"b":3}}"#), "{body}");
        // From a Value: its own sorted order.
        let sorted = ResponseFormat::from(&json!({"z": 1, "a": 2}));
        assert_eq!(sorted.text(), r#"{"a":2,"z":1}"#);
        // Only one JSON object.
        for bad in ["[1]", "not json", r#"{"a":1} {"b":2}"#, ""] {
            assert!(ResponseFormat::from_text(bad.to_owned()).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_llama_server_answer_is_read() {
        let r = parse(json!({
            "id": "chatcmpl-1", "object": "chat.completion", "model": "/m.gguf",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "{\"x\":1}"}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
            "timings": {"predicted_per_second": 50.0}
        }))
        .unwrap();
        assert_eq!(r.content, "{\"x\":1}");
        assert_eq!(r.finish_reason, FinishReason::Stop);
        assert!(!r.is_truncated());
        assert_eq!(r.usage, Some(Usage { prompt_tokens: 12, completion_tokens: 5 }));
    }

    #[test]
    fn finish_reasons_are_classified() {
        let with = |f: serde_json::Value| {
            parse(json!({"choices": [{"finish_reason": f, "message": {"content": ""}}]})).unwrap().finish_reason
        };
        assert_eq!(with(json!("length")), FinishReason::Length);
        assert_eq!(with(json!(null)), FinishReason::Missing);
        assert_eq!(with(json!("tool_calls")), FinishReason::Other("tool_calls".into()));
        match with(json!("x\n".repeat(100))) {
            FinishReason::Other(s) => {
                assert!(s.chars().count() <= MAX_FINISH_REASON_CHARS && !s.contains('\n'))
            }
            other => panic!("{other:?}"),
        }
        let r = parse(json!({"choices": [{"message": {"content": "a"}}]})).unwrap();
        assert_eq!(r.finish_reason, FinishReason::Missing);
        assert_eq!(r.usage, None);
    }

    #[test]
    fn odd_usage_is_dropped_not_fatal() {
        for usage in [json!(null), json!("x"), json!({"prompt_tokens": -1, "completion_tokens": 2}), json!({})] {
            let r = parse(json!({"choices": [{"message": {"content": "a"}}], "usage": usage})).unwrap();
            assert_eq!(r.usage, None);
        }
    }

    #[test]
    fn malformed_answers_are_errors_with_bounded_reasons() {
        for v in [
            json!({}),
            json!({"choices": []}),
            json!({"choices": [{}]}),
            json!({"choices": [{"message": {"content": null}}]}),
            json!({"choices": [{"message": {"content": 5}}]}),
            json!({"choices": "x".repeat(10_000)}),
            json!([1, 2]),
        ] {
            match parse(v.clone()) {
                Err(ClientError::Malformed { reason }) => {
                    assert!(reason.chars().count() <= MAX_DIAGNOSTIC_CHARS, "{reason}");
                }
                other => panic!("{v}: {other:?}"),
            }
        }
        let junk = format!("{{\"choices\": [\"{}", "y".repeat(50_000));
        match parse_chat_response(junk.as_bytes()) {
            Err(ClientError::Malformed { reason }) => assert!(reason.chars().count() <= MAX_DIAGNOSTIC_CHARS),
            other => panic!("{other:?}"),
        }
        assert!(matches!(parse_chat_response(b"\xff\xfe"), Err(ClientError::Malformed { .. })));
        // Duplicate keys are refused by the typed reader.
        assert!(matches!(
            parse_chat_response(br#"{"choices":[],"choices":[{"message":{"content":"a"}}]}"#),
            Err(ClientError::Malformed { .. })
        ));
    }

    #[test]
    fn error_messages_are_extracted_and_bounded() {
        let loading = br#"{"error":{"message":"Loading model","type":"unavailable_error","code":503}}"#;
        assert_eq!(error_message(loading).as_deref(), Some("Loading model"));
        assert_eq!(error_message(br#"{"error":"plain"}"#).as_deref(), Some("plain"));
        assert_eq!(error_message(br#"{"message":"top"}"#).as_deref(), Some("top"));
        assert_eq!(error_message(b"<html>502</html>"), None);
        assert_eq!(error_message(br#"{"error":{"code":1}}"#), None);
        let long = json!({"error": {"message": format!("a\r\nb{}", "z".repeat(5000))}}).to_string();
        let m = error_message(long.as_bytes()).unwrap();
        assert_eq!(m.chars().count(), MAX_DIAGNOSTIC_CHARS);
        assert!(m.starts_with("a  b") && m.ends_with('…'));
    }

    #[test]
    fn the_wire_request_carries_the_model_and_no_stream() {
        let request = ChatRequest {
            messages: vec![ChatMessage::system("s"), ChatMessage::user("u"), ChatMessage::assistant("a")],
            max_tokens: Some(64),
            ..ChatRequest::default()
        };
        let v = serde_json::to_value(WireRequest { model: "m", request: &request, stream: false }).unwrap();
        assert_eq!(
            v,
            json!({"model": "m", "stream": false, "max_tokens": 64, "messages": [
                {"role": "system", "content": "s"},
                {"role": "user", "content": "u"},
                {"role": "assistant", "content": "a"}]})
        );
    }
}
