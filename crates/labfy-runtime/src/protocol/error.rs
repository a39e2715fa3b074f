//! Why an answer of the model is refused (SPEC M5, M9).
//!
//! Every variant's message is a short, human-readable reason that is sent back
//! to the model in the one format repair request (M5). Anything the model
//! wrote that a reason repeats (a key, a `tool_id`, a contract) is escaped and
//! cut to [`MAX_ECHO_CHARS`]; the whole reason to [`MAX_REASON_CHARS`].

use labfy_core::ErrorKind;
use labfy_core::bounded::truncate_chars;

/// Longest echo of a model-supplied string (a key, a `tool_id`, a contract)
/// inside a reason, in characters.
pub const MAX_ECHO_CHARS: usize = 64;
/// Longest reason, in characters.
pub const MAX_REASON_CHARS: usize = 800;

/// A refused answer: what is wrong with it (M5), or which reference was never
/// shown to the model (M9).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtocolError {
    /// Nothing but whitespace.
    #[error("empty answer: expected one JSON object")]
    Empty,
    /// More bytes than [`MAX_ANSWER_BYTES`](super::MAX_ANSWER_BYTES).
    #[error("answer too large: {bytes} bytes, at most {max}")]
    TooLarge {
        /// Size of the answer.
        bytes: usize,
        /// The bound.
        max: usize,
    },
    /// A Markdown code fence (```` ``` ````) before or after the object.
    #[error("Markdown around the JSON (a ``` fence): send the bare JSON object, no fence")]
    Markdown,
    /// Prose before the object (the JSON is never extracted from it).
    #[error("text before the JSON object: the answer must start with `{{`")]
    TextBefore,
    /// Prose after the object's closing brace.
    #[error("text after the JSON object: the answer must end with its closing `}}`")]
    TextAfter,
    /// A second JSON value after the first.
    #[error("more than one JSON value: send exactly one JSON object")]
    MultipleValues,
    /// No JSON at all.
    #[error("no JSON object in the answer: send exactly one JSON object")]
    NoJson,
    /// Valid JSON, but not an object.
    #[error("the answer is {found}, not a JSON object")]
    NotAnObject {
        /// What it is instead (`an array`, `a string`, …).
        found: &'static str,
    },
    /// A JSON syntax error inside the object.
    #[error("invalid JSON: {detail}")]
    InvalidJson {
        /// The parser's message with its line and column (bounded).
        detail: String,
    },
    /// The input ends inside the object: a prefix of JSON.
    #[error("truncated answer: the JSON object stops before it is complete; send a shorter, complete object")]
    Truncated,
    /// A key repeated in one object, at any depth.
    #[error("duplicate key {key} in {at}: a key may appear only once per object")]
    DuplicateKey {
        /// The key, escaped and bounded.
        key: String,
        /// The object holding it (`the top-level object`, `arguments`, …).
        at: String,
    },
    /// Nested deeper than [`MAX_JSON_DEPTH`](super::MAX_JSON_DEPTH).
    #[error("JSON nested too deeply: at most {max} levels")]
    TooDeep {
        /// The bound.
        max: usize,
    },
    /// A required field of the contract is absent.
    #[error("missing field `{field}`")]
    MissingField {
        /// Its name.
        field: &'static str,
    },
    /// A field the contract does not have.
    #[error("unexpected field {field}: {allowed}")]
    ExtraField {
        /// The field, escaped and bounded.
        field: String,
        /// What the object may hold.
        allowed: &'static str,
    },
    /// A contract field of the wrong JSON type.
    #[error("field `{field}` must be {expected}, not {found}")]
    WrongType {
        /// The field.
        field: &'static str,
        /// The type required.
        expected: &'static str,
        /// The type found.
        found: &'static str,
    },
    /// `contract` is not `labfy.agent_model_action.v1`.
    #[error("unknown contract {found}: `contract` must be `labfy.agent_model_action.v1`")]
    UnknownContract {
        /// The value given, escaped and bounded.
        found: String,
    },
    /// `type` is neither `tool_call` nor `final`.
    #[error("unknown type {found}: `type` must be `tool_call` or `final`")]
    UnknownType {
        /// The value given, escaped and bounded.
        found: String,
    },
    /// `tool_id` is not a tool of the catalog.
    #[error("unknown tool_id {tool_id}: use a tool_id of the catalog exactly as listed")]
    UnknownTool {
        /// The value given, escaped and bounded.
        tool_id: String,
    },
    /// The answer tries to create, extend or claim authority (a grant, an
    /// approval, a scope): only a human grants, never the model (M5, M8).
    #[error("self-authorization refused: {what}; the model cannot grant, approve or widen anything, only a human can")]
    SelfAuthorization {
        /// What looked like a claim of authority, and where.
        what: String,
    },
    /// `arguments` serialised is larger than
    /// [`MAX_ARGUMENTS_BYTES`](super::MAX_ARGUMENTS_BYTES).
    #[error("arguments too large: {bytes} bytes, at most {max}")]
    ArgumentsTooLarge {
        /// Size of the compact serialisation.
        bytes: usize,
        /// The bound.
        max: usize,
    },
    /// `arguments` fail the tool's own published JSON Schema (G4).
    #[error("arguments of `{tool_id}` do not match its schema: {diagnostic}")]
    InvalidArguments {
        /// The tool.
        tool_id: &'static str,
        /// The gateway's bounded schema diagnostic.
        diagnostic: String,
    },
    /// A reference field holds something that is not a `kind:uuid` of an
    /// accepted kind (G5).
    #[error("invalid reference in `{field}`: {detail}")]
    InvalidReference {
        /// Where (`arguments.node_id`, `arguments.selection_ids[1]`).
        field: String,
        /// Why, and how to write it.
        detail: String,
    },
    /// `final.text` is empty.
    #[error("`text` of a final answer is empty")]
    EmptyText,
    /// `final.text` is longer than
    /// [`MAX_FINAL_TEXT_CHARS`](super::MAX_FINAL_TEXT_CHARS).
    #[error("`text` of a final answer is too long: {chars} characters, at most {max}")]
    TextTooLong {
        /// Its length in characters.
        chars: usize,
        /// The bound.
        max: usize,
    },
    /// A reference that was never shown to the model: invented or altered
    /// (M9).
    #[error("`{field}` is {value}, an id that was never shown: copy object ids exactly from tool results")]
    UnknownReference {
        /// Where.
        field: String,
        /// The reference (canonical `kind:uuid`).
        value: String,
    },
}

impl ProtocolError {
    /// Stable machine-readable code (events, logs, tests).
    pub fn code(&self) -> &'static str {
        match self {
            Self::Empty => "EMPTY",
            Self::TooLarge { .. } => "TOO_LARGE",
            Self::Markdown => "MARKDOWN",
            Self::TextBefore => "TEXT_BEFORE_JSON",
            Self::TextAfter => "TEXT_AFTER_JSON",
            Self::MultipleValues => "MULTIPLE_VALUES",
            Self::NoJson => "NO_JSON",
            Self::NotAnObject { .. } => "NOT_AN_OBJECT",
            Self::InvalidJson { .. } => "INVALID_JSON",
            Self::Truncated => "TRUNCATED",
            Self::DuplicateKey { .. } => "DUPLICATE_KEY",
            Self::TooDeep { .. } => "TOO_DEEP",
            Self::MissingField { .. } => "MISSING_FIELD",
            Self::ExtraField { .. } => "EXTRA_FIELD",
            Self::WrongType { .. } => "WRONG_TYPE",
            Self::UnknownContract { .. } => "UNKNOWN_CONTRACT",
            Self::UnknownType { .. } => "UNKNOWN_TYPE",
            Self::UnknownTool { .. } => "UNKNOWN_TOOL",
            Self::SelfAuthorization { .. } => "SELF_AUTHORIZATION",
            Self::ArgumentsTooLarge { .. } => "ARGUMENTS_TOO_LARGE",
            Self::InvalidArguments { .. } => "INVALID_ARGUMENTS",
            Self::InvalidReference { .. } => "INVALID_REFERENCE",
            Self::EmptyText => "EMPTY_TEXT",
            Self::TextTooLong { .. } => "TEXT_TOO_LONG",
            Self::UnknownReference { .. } => "UNKNOWN_REFERENCE",
        }
    }

    /// The shared classification (STYLE 5): the model sent bad input;
    /// self-authorization is a policy refusal.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::SelfAuthorization { .. } => ErrorKind::Forbidden,
            _ => ErrorKind::InvalidInput,
        }
    }

    /// The reason, bounded to [`MAX_REASON_CHARS`]: what the repair request
    /// says, and what an event may carry.
    pub fn reason(&self) -> String {
        truncate_chars(&self.to_string(), MAX_REASON_CHARS)
    }
}

/// `text` escaped (control and invisible characters written as escapes), cut
/// to [`MAX_ECHO_CHARS`] and put in backticks: the safe way to repeat what
/// the model wrote.
pub(crate) fn echo(text: &str) -> String {
    let escaped: String = text.chars().flat_map(char::escape_debug).collect();
    format!("`{}`", truncate_chars(&escaped, MAX_ECHO_CHARS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn echo_escapes_and_bounds() {
        assert_eq!(echo("a\nb"), "`a\\nb`");
        assert_eq!(echo("\u{202e}x"), "`\\u{202e}x`");
        let long = "x".repeat(500);
        assert_eq!(echo(&long).chars().count(), MAX_ECHO_CHARS + 2);
    }

    #[test]
    fn reasons_are_bounded() {
        let e = ProtocolError::InvalidArguments { tool_id: "graph.get_node", diagnostic: "y".repeat(5_000) };
        assert_eq!(e.reason().chars().count(), MAX_REASON_CHARS);
        assert_eq!(e.code(), "INVALID_ARGUMENTS");
        assert_eq!(ProtocolError::SelfAuthorization { what: "x".into() }.kind(), ErrorKind::Forbidden);
    }
}
