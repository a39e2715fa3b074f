//! The `labfy.agent_model_action.v1` protocol (SPEC M5, M9): what a local
//! model may answer, the strict parser of that answer, the reference check,
//! the JSON Schema given to llama-server's constrained decoding, and the one
//! repair request.
//!
//! # The contract
//!
//! The seed (`LOCAL_MODEL_AGENT_RUNTIME_V1`, "Protocole, turns et sécurité")
//! says: *« Le modèle produit uniquement un objet JSON du contrat
//! `labfy.agent_model_action.v1` : un `tool_call` avec `tool_id` et
//! `arguments`, ou un `final` avec `text`. »* It names the contract, the two
//! action kinds and their fields, not the fields that carry the contract and
//! the kind; they are `contract` and `type`:
//!
//! ```json
//! {"contract":"labfy.agent_model_action.v1","type":"tool_call","tool_id":"graph.get_node","arguments":{"node_id":"entity:…"}}
//! {"contract":"labfy.agent_model_action.v1","type":"final","text":"…"}
//! ```
//!
//! Nothing else: no other field at any level (the tools' input schemas are
//! closed, G4), no key twice in any object, no text, Markdown or second value
//! around the object, and nothing that grants, approves or widens (the model
//! never authorizes itself, M5, M8). Bounds: [`MAX_ANSWER_BYTES`],
//! [`MAX_ARGUMENTS_BYTES`], [`MAX_FINAL_TEXT_CHARS`], [`MAX_JSON_DEPTH`].
//!
//! # Use
//!
//! - [`parse_action`] turns the model's text into an [`Action`] or a
//!   [`ProtocolError`] whose message is the reason [`repair_message`] sends
//!   back (one repair; a second failure is `MODEL_PROTOCOL_ERROR`, M5).
//! - [`check_refs`] refuses a reference the runtime never showed the model
//!   (M9: ids are copied exactly, never invented or altered).
//! - [`ActionSchema`] (and [`action_schema`], [`response_format`]) is the
//!   same contract as a JSON Schema 2020-12 for `response_format`. Constrained
//!   decoding shapes the answer; the parser still checks every answer.

mod error;
mod schema;
mod strict_json;

use std::collections::HashSet;

use labfy_core::ObjectRef;
use labfy_gateway::{Catalog, Tool, ToolId};
use serde_json::{Map, Value, json};

pub use error::{MAX_ECHO_CHARS, MAX_REASON_CHARS, ProtocolError};
pub use schema::{
    ACTION_SCHEMA_NAME, ActionSchema, Answered, MAX_KNOWN_REFS_PER_FIELD, action_schema, response_format,
    single_ref_field,
};

use error::echo;

/// The contract every answer names in its `contract` field (M5).
pub const CONTRACT: &str = "labfy.agent_model_action.v1";
/// `type` of an action that calls one tool.
pub const TYPE_TOOL_CALL: &str = "tool_call";
/// `type` of the turn's final answer.
pub const TYPE_FINAL: &str = "final";
/// Largest answer, in bytes of UTF-8, surrounding whitespace included. The
/// client's `max_tokens` keeps a normal answer far below it.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// Largest `arguments`, in bytes of their compact JSON serialisation.
pub const MAX_ARGUMENTS_BYTES: usize = 32 * 1024;
/// Longest `text` of a final answer, in characters (Unicode scalar values,
/// as JSON Schema's `maxLength` counts them).
pub const MAX_FINAL_TEXT_CHARS: usize = 4_000;
/// Deepest nesting of objects and arrays in an answer (the answer itself is
/// level 1; the catalog's inputs need 3).
pub const MAX_JSON_DEPTH: usize = 16;

/// What a field name or a `tool_id` must not look like: words of authority.
/// Matched, lower-cased, as substrings of the name. Such a field is refused
/// anyway (every object is closed); matching it only names the refusal for
/// what it is — an attempt at self-authorization (M5).
const AUTHORITY_WORDS: [&str; 17] = [
    "grant",
    "authori",
    "approv",
    "permission",
    "privilege",
    "consent",
    "scope",
    "policy",
    "policies",
    "override",
    "bypass",
    "sudo",
    "admin",
    "elevat",
    "trust",
    "allowlist",
    "whitelist",
];

/// A parsed, valid answer of the model.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Call one tool of the catalog.
    ToolCall(ToolCall),
    /// End the turn with an answer for the analyst.
    Final(FinalAnswer),
}

impl Action {
    /// The action as its canonical contract object (what the runtime replays
    /// to the model as its own previous turn).
    pub fn to_value(&self) -> Value {
        match self {
            Self::ToolCall(call) => json!({
                "contract": CONTRACT,
                "type": TYPE_TOOL_CALL,
                "tool_id": call.tool.as_str(),
                "arguments": call.arguments,
            }),
            Self::Final(answer) => json!({"contract": CONTRACT, "type": TYPE_FINAL, "text": answer.text}),
        }
    }

    /// [`Self::to_value`] as compact JSON text in the contract's key order —
    /// `contract`, `type`, then `tool_id` and `arguments` (the arguments'
    /// own keys sorted), or `text` — the order constrained decoding writes
    /// (see [`ActionSchema::response_format_text`]). The runtime replays
    /// this, so the model's history reads as it was written.
    pub fn to_text(&self) -> String {
        let head = format!("{{\"contract\":{},", Value::from(CONTRACT));
        match self {
            Self::ToolCall(call) => format!(
                "{head}\"type\":{},\"tool_id\":{},\"arguments\":{}}}",
                Value::from(TYPE_TOOL_CALL),
                Value::from(call.tool.as_str()),
                Value::Object(call.arguments.clone()),
            ),
            Self::Final(answer) => {
                format!("{head}\"type\":{},\"text\":{}}}", Value::from(TYPE_FINAL), Value::from(answer.text.as_str()))
            }
        }
    }
}

/// A `tool_call` whose `tool_id` is in the catalog and whose `arguments`
/// passed that tool's published schema (G4). Only [`parse_action`] makes one.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    tool: ToolId,
    arguments: Map<String, Value>,
    refs: Vec<ArgumentRef>,
}

impl ToolCall {
    /// The tool.
    pub fn tool_id(&self) -> ToolId {
        self.tool
    }

    /// The arguments, exactly as the model wrote them (the gateway's `input`).
    pub fn arguments(&self) -> &Map<String, Value> {
        &self.arguments
    }

    /// Every reference in the arguments (the fields the catalog marks with
    /// `x-labfy-ref`), by field name, then array position.
    pub fn refs(&self) -> &[ArgumentRef] {
        &self.refs
    }
}

/// One reference found in a tool call's arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgumentRef {
    /// Where: `arguments.node_id`, `arguments.selection_ids[1]`.
    pub field: String,
    /// The reference, well formed and of a kind the field accepts.
    pub value: ObjectRef,
}

/// A `final` answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinalAnswer {
    text: String,
}

impl FinalAnswer {
    /// The text for the analyst: untrusted model output, shown with
    /// `textContent` only (M10).
    pub fn text(&self) -> &str {
        &self.text
    }
}

/// Parses the model's answer strictly (M5).
///
/// In order: size; framing (one JSON object and nothing around it, a prefix
/// refused as [`ProtocolError::Truncated`]); unique keys and bounded depth at
/// every level; the envelope (claims of authority first, then `contract`,
/// `type`, the fields of that type, their JSON types); for a `tool_call`, the
/// `tool_id` in `catalog`, the size of `arguments`, undeclared fields that
/// claim authority, the tool's own published schema (`Tool::validate`, the
/// gateway's check, G4), and the syntax and kind of every reference.
///
/// Content is not judged: an instruction inside a string is data (M2).
/// `finish_reason: "length"` is the caller's to refuse as
/// [`ProtocolError::Truncated`] before calling this.
pub fn parse_action(raw: &str, catalog: &Catalog) -> Result<Action, ProtocolError> {
    let mut top = strict_json::parse_object(raw)?;

    // Claims of authority come first: they are the reason that matters most.
    for key in top.keys() {
        if !ENVELOPE_FIELDS.contains(&key.as_str()) && looks_like_authority(key) {
            return Err(ProtocolError::SelfAuthorization { what: format!("top-level field {}", echo(key)) });
        }
    }
    let contract = string_field(&top, "contract")?;
    if contract != CONTRACT {
        return Err(ProtocolError::UnknownContract { found: echo(contract) });
    }
    let kind = string_field(&top, "type")?;
    match kind {
        TYPE_TOOL_CALL => {
            only_fields(&top, &TOOL_CALL_FIELDS, "a tool_call has exactly contract, type, tool_id and arguments")?;
            let tool_id = string_field(&top, "tool_id")?;
            let tool = lookup_tool(catalog, tool_id)?;
            let arguments = match top.remove("arguments") {
                Some(Value::Object(map)) => map,
                Some(other) => {
                    return Err(ProtocolError::WrongType {
                        field: "arguments",
                        expected: "an object",
                        found: json_type(&other),
                    });
                }
                None => return Err(ProtocolError::MissingField { field: "arguments" }),
            };
            tool_call(tool, arguments).map(Action::ToolCall)
        }
        TYPE_FINAL => {
            only_fields(&top, &FINAL_FIELDS, "a final has exactly contract, type and text")?;
            let text = string_field(&top, "text")?;
            let chars = text.chars().count();
            if chars == 0 {
                return Err(ProtocolError::EmptyText);
            }
            if chars > MAX_FINAL_TEXT_CHARS {
                return Err(ProtocolError::TextTooLong { chars, max: MAX_FINAL_TEXT_CHARS });
            }
            Ok(Action::Final(FinalAnswer { text: text.to_owned() }))
        }
        other if looks_like_authority(other) => {
            Err(ProtocolError::SelfAuthorization { what: format!("type {}", echo(other)) })
        }
        other => Err(ProtocolError::UnknownType { found: echo(other) }),
    }
}

/// Refuses any reference of `action` that is not in `known`, the exact
/// `kind:uuid` strings the runtime has shown the model (the turn's context
/// and the `object_refs` of earlier results). An invented or altered id is
/// refused naming its field (M9). A `final` text may cite ids too (the UI
/// links them, M10): every `kind:uuid` in it must have been shown as well,
/// so an answer cannot point the analyst at an object the turn never read.
///
/// Passing this check grants nothing: the gateway still resolves every
/// reference in the workspace and applies policy (G5, G13).
pub fn check_refs(action: &Action, known: &HashSet<String>) -> Result<(), ProtocolError> {
    let call = match action {
        Action::ToolCall(call) => call,
        Action::Final(f) => {
            return match cited_refs(f.text()).find(|r| !known.contains(&r.to_string())) {
                Some(r) => Err(ProtocolError::UnknownReference { field: "text".into(), value: format!("`{r}`") }),
                None => Ok(()),
            };
        }
    };
    for r in &call.refs {
        let text = r.value.to_string();
        if !known.contains(&text) {
            return Err(ProtocolError::UnknownReference { field: r.field.clone(), value: format!("`{text}`") });
        }
    }
    Ok(())
}

/// The object ids `text` cites: each word (ASCII letters, digits, `:`, `-`,
/// `_`) that parses as a canonical `kind:uuid`.
pub fn cited_refs(text: &str) -> impl Iterator<Item = ObjectRef> + '_ {
    text.split(|c: char| !(c.is_ascii_alphanumeric() || c == ':' || c == '-' || c == '_'))
        .filter(|w| w.contains(':'))
        .filter_map(|w| w.parse::<ObjectRef>().ok().filter(|r| r.to_string() == w))
}

/// The one format repair request sent back after a refused answer (M5):
/// the reason and the contract, nothing else. It never asks for reasoning.
pub fn repair_message(error: &ProtocolError) -> String {
    format!(
        "Your previous answer was refused: {reason}.\n\
         Answer again with exactly one JSON object and nothing else (no Markdown, no text before or after it), \
         either\n\
         {{\"contract\":\"{CONTRACT}\",\"type\":\"{TYPE_TOOL_CALL}\",\"tool_id\":\"<a tool_id of the catalog>\",\
         \"arguments\":{{<the tool's arguments>}}}}\n\
         or\n\
         {{\"contract\":\"{CONTRACT}\",\"type\":\"{TYPE_FINAL}\",\"text\":\"<your answer>\"}}\n\
         Copy object ids exactly as tool results showed them. This is the only correction: \
         another invalid answer ends the turn.",
        reason = error.reason()
    )
}

/// Every field of the envelope, whatever the type.
const ENVELOPE_FIELDS: [&str; 5] = ["contract", "type", "tool_id", "arguments", "text"];
/// The fields of a `tool_call`.
const TOOL_CALL_FIELDS: [&str; 4] = ["contract", "type", "tool_id", "arguments"];
/// The fields of a `final`.
const FINAL_FIELDS: [&str; 3] = ["contract", "type", "text"];

/// True when a field name or a `tool_id` speaks of authority.
fn looks_like_authority(name: &str) -> bool {
    let lower = name.to_lowercase();
    AUTHORITY_WORDS.iter().any(|w| lower.contains(w))
}

/// The JSON type of `value`, for a reason.
fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The required string field `field` of the envelope.
fn string_field<'m>(map: &'m Map<String, Value>, field: &'static str) -> Result<&'m str, ProtocolError> {
    match map.get(field) {
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(ProtocolError::WrongType { field, expected: "a string", found: json_type(other) }),
        None => Err(ProtocolError::MissingField { field }),
    }
}

/// Refuses the first field of `map` outside `allowed`.
fn only_fields(map: &Map<String, Value>, allowed: &[&str], says: &'static str) -> Result<(), ProtocolError> {
    match map.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(extra) => Err(ProtocolError::ExtraField { field: echo(extra), allowed: says }),
        None => Ok(()),
    }
}

/// The catalog tool named `tool_id`, exactly.
fn lookup_tool<'c>(catalog: &'c Catalog, tool_id: &str) -> Result<&'c Tool, ProtocolError> {
    if let Some(tool) = ToolId::from_name(tool_id).and_then(|id| catalog.get(id)) {
        return Ok(tool);
    }
    if looks_like_authority(tool_id) {
        return Err(ProtocolError::SelfAuthorization {
            what: format!("tool_id {} is no catalog tool, and no tool grants or approves", echo(tool_id)),
        });
    }
    Err(ProtocolError::UnknownTool { tool_id: echo(tool_id) })
}

/// Checks a tool call's arguments: size, undeclared claims of authority, the
/// tool's published schema, then the references it marks.
fn tool_call(tool: &Tool, mut arguments: Map<String, Value>) -> Result<ToolCall, ProtocolError> {
    drop_repeated_refs(input_schema(tool), &mut arguments);
    let arguments = Value::Object(arguments);
    let bytes = arguments.to_string().len();
    if bytes > MAX_ARGUMENTS_BYTES {
        return Err(ProtocolError::ArgumentsTooLarge { bytes, max: MAX_ARGUMENTS_BYTES });
    }
    let schema = input_schema(tool);
    if let Some(field) = undeclared_authority(schema, &arguments, "arguments") {
        return Err(ProtocolError::SelfAuthorization {
            what: format!("field {field} is not an argument of `{}`", tool.id.as_str()),
        });
    }
    tool.validate(&arguments)
        .map_err(|diagnostic| ProtocolError::InvalidArguments { tool_id: tool.id.as_str(), diagnostic })?;
    let mut refs = Vec::new();
    collect_refs(schema, &arguments, "arguments", &mut refs)?;
    let Value::Object(arguments) = arguments else {
        // Built as an object above.
        return Err(ProtocolError::WrongType { field: "arguments", expected: "an object", found: "another value" });
    };
    Ok(ToolCall { tool: tool.id, arguments, refs })
}

/// In a set of references (an argument whose schema is a `uniqueItems`
/// array of `x-labfy-ref` strings, such as `research.prepare`'s
/// `selection_ids`), an id named again is dropped, the first kept: naming
/// an object twice selects it once, and decoding grammars cannot forbid the
/// repeat (llama-server ignores `uniqueItems`; a small model repeats).
/// Nothing else is changed: every item is still checked by the schema and
/// as a reference, and any other repeat is refused by the schema.
fn drop_repeated_refs(schema: &Value, arguments: &mut Map<String, Value>) {
    let Some(props) = schema.get("properties").and_then(Value::as_object) else { return };
    for (name, prop) in props {
        let set_of_refs = prop.get("uniqueItems") == Some(&Value::Bool(true))
            && prop.get("items").and_then(|i| i.get("x-labfy-ref")).is_some();
        if let (true, Some(Value::Array(items))) = (set_of_refs, arguments.get_mut(name)) {
            let mut seen: Vec<Value> = Vec::with_capacity(items.len());
            items.retain(|item| {
                let again = item.is_string() && seen.contains(item);
                if !again {
                    seen.push(item.clone());
                }
                !again
            });
        }
    }
}

/// The tool's published input schema (G4).
fn input_schema(tool: &Tool) -> &Value {
    tool.contract.get("input_schema").unwrap_or(&Value::Null)
}

/// The first field of `instance` that its (closed) schema does not declare
/// and whose name speaks of authority, as `arguments.<path>`.
fn undeclared_authority(schema: &Value, instance: &Value, path: &str) -> Option<String> {
    match instance {
        Value::Object(map) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
            map.iter().find_map(|(key, value)| {
                let at = format!("{path}.{key}");
                match properties.and_then(|p| p.get(key)) {
                    Some(sub) => undeclared_authority(sub, value, &at),
                    None if closed && looks_like_authority(key) => Some(echo(&at)),
                    None => None,
                }
            })
        }
        Value::Array(items) => schema.get("items").and_then(|sub| {
            items.iter().enumerate().find_map(|(i, item)| undeclared_authority(sub, item, &format!("{path}[{i}]")))
        }),
        _ => None,
    }
}

/// Walks `instance` along `schema` and parses every string the schema marks
/// with `x-labfy-ref` (the catalog's annotation, G5): well formed, and of a
/// kind the field accepts.
fn collect_refs(schema: &Value, instance: &Value, path: &str, out: &mut Vec<ArgumentRef>) -> Result<(), ProtocolError> {
    if let Some(kinds) = schema.get("x-labfy-ref").and_then(Value::as_array) {
        if let Some(text) = instance.as_str() {
            let value: ObjectRef = text
                .parse()
                .map_err(|e| ProtocolError::InvalidReference { field: path.to_owned(), detail: format!("{e}") })?;
            if !kinds.iter().any(|k| k.as_str() == Some(value.kind().as_str())) {
                let accepted: Vec<&str> = kinds.iter().filter_map(Value::as_str).collect();
                return Err(ProtocolError::InvalidReference {
                    field: path.to_owned(),
                    detail: format!(
                        "a `{}:` reference is not accepted here (expected {})",
                        value.kind(),
                        accepted.join(", ")
                    ),
                });
            }
            out.push(ArgumentRef { field: path.to_owned(), value });
        }
        return Ok(());
    }
    match instance {
        Value::Object(map) => {
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (key, value) in map {
                    if let Some(sub) = properties.get(key) {
                        collect_refs(sub, value, &format!("{path}.{key}"), out)?;
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(sub) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    collect_refs(sub, item, &format!("{path}[{i}]"), out)?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests;
