//! The action contract as a JSON Schema 2020-12, for llama-server's
//! `response_format` (SPEC M5; beyond the seed).
//!
//! One `anyOf` branch per offered tool — `contract`, `type` and `tool_id` as
//! constants, `arguments` the tool's own closed input schema (G4) — plus the
//! `final` branch. Every string is bounded (`const`, `enum`, `maxLength` or
//! `pattern`): an unbounded string lets constrained decoding run to
//! `finish_reason: "length"`. Reference fields (`x-labfy-ref`) also get the
//! `pattern` of a canonical `kind:uuid` of their kinds, the same rule the
//! parser applies, so decoding cannot produce a malformed id.
//!
//! `anyOf` rather than `oneOf`: the branches are disjoint by construction
//! (distinct `type`/`tool_id` constants, so "exactly one" and "at least one"
//! agree), `anyOf` stops at the first match, and some grammar back-ends
//! (llguidance) accept `anyOf` only.
//!
//! What a schema cannot say stays the parser's alone: duplicate keys, text
//! around the object, truncation, the byte bounds, and whether a reference
//! was shown before (M9).
//!
//! Property order matters to llama-server: its grammar emits properties in
//! the order of the schema text. [`ActionSchema::response_format_text`]
//! writes every `properties` in `required` order (`contract`, `type`,
//! `tool_id`, `arguments`), which a `serde_json::Value` (sorted keys) cannot
//! keep. The runtime sends that text ([`ActionSchema::wire_response_format`]):
//! with sorted keys the model would write `arguments` before `tool_id`,
//! choose its arguments first, and then the first tool they fit.

use std::collections::{HashMap, HashSet};

use labfy_gateway::catalog::{SCHEMA_DIALECT, fingerprint};
use labfy_gateway::{Catalog, Tool, ToolId};
use serde_json::{Map, Value, json};

use super::{CONTRACT, MAX_FINAL_TEXT_CHARS, TYPE_FINAL, TYPE_TOOL_CALL};
use crate::client::ResponseFormat;

/// Most known ids offered as the `enum` of one reference field.
pub const MAX_KNOWN_REFS_PER_FIELD: usize = 64;

/// `response_format.json_schema.name` (OpenAI's `^[a-zA-Z0-9_-]{1,64}$`: no
/// dots).
pub const ACTION_SCHEMA_NAME: &str = "labfy_agent_model_action_v1";

/// The action schema for a set of tools, with its fingerprint.
#[derive(Debug, Clone, PartialEq)]
pub struct ActionSchema {
    schema: Value,
    fingerprint: String,
}

impl ActionSchema {
    /// The schema offering exactly `tools` (in the order given, each once):
    /// the runtime passes the tools available to the turn.
    pub fn new<'a>(tools: impl IntoIterator<Item = &'a Tool>) -> Self {
        Self::build(tools, None, &Answered::new(), true)
    }

    /// The schema offering `tools`, with every reference field limited to
    /// the ids of its kinds in `known` — the ids the model was shown — as an
    /// `enum` (at most [`MAX_KNOWN_REFS_PER_FIELD`], sorted): constrained
    /// decoding then copies ids exactly (M9) instead of inventing
    /// pattern-valid ones. A field with no known id of its kinds keeps the
    /// pattern; the parser still checks every id against what was shown.
    pub fn with_known_refs<'a>(tools: impl IntoIterator<Item = &'a Tool>, known: &HashSet<String>) -> Self {
        Self::build(tools, Some(known), &Answered::new(), true)
    }

    /// A round of a turn: like [`Self::with_known_refs`] (or
    /// [`Self::tools_only`] when `allow_final` is false), and a tool whose
    /// only argument is one reference ([`single_ref_field`]) is not offered
    /// again with an id it has already answered in `answered` — the same
    /// call would return the same result, already in the conversation.
    /// When every known id of such a tool is answered, the tool is not
    /// offered at all.
    pub fn for_round<'a>(
        tools: impl IntoIterator<Item = &'a Tool>,
        known: &HashSet<String>,
        answered: &Answered,
        allow_final: bool,
    ) -> Self {
        Self::build(tools, Some(known), answered, allow_final)
    }

    /// Like [`Self::with_known_refs`], without the `final` branch: the
    /// runtime's first round, where the model must read the investigation
    /// through a tool before it may answer (an answer grounded in nothing is
    /// not offered).
    pub fn tools_only<'a>(tools: impl IntoIterator<Item = &'a Tool>, known: &HashSet<String>) -> Self {
        Self::build(tools, Some(known), &Answered::new(), false)
    }

    /// The schema offering `final` alone: the runtime's last round, once the
    /// turn's tool calls or rounds are spent — the model concludes from what
    /// it has read instead of asking for a call the budget would refuse.
    pub fn final_only() -> Self {
        Self::build(std::iter::empty(), None, &Answered::new(), true)
    }

    fn build<'a>(
        tools: impl IntoIterator<Item = &'a Tool>,
        known: Option<&HashSet<String>>,
        answered: &Answered,
        allow_final: bool,
    ) -> Self {
        let mut branches = Vec::new();
        let mut seen = Vec::new();
        for tool in tools {
            let input = tool.contract.get("input_schema");
            // A single-reference tool offers only the ids it has not answered.
            let narrowed: Option<HashSet<String>> = match (known, answered.get(&tool.id)) {
                (Some(k), Some(done)) if input.and_then(single_ref_field).is_some() => {
                    Some(k.difference(done).cloned().collect())
                }
                _ => None,
            };
            let known = narrowed.as_ref().or(known);
            // With known ids, a tool whose required reference has no id of
            // its kinds shown yet is not offered: it could only be called
            // with an invented id (M9).
            let callable = known.is_none_or(|k| input.is_none_or(|input| satisfiable(input, k)));
            if callable && !seen.contains(&tool.id) {
                seen.push(tool.id);
                branches.push(tool_branch(tool, known));
            }
        }
        if allow_final || branches.is_empty() {
            branches.push(final_branch());
        }
        let schema = json!({
            "$schema": SCHEMA_DIALECT,
            "title": CONTRACT,
            "anyOf": branches,
        });
        let fingerprint = fingerprint(&schema);
        Self { schema, fingerprint }
    }

    /// The schema offering every tool of `catalog`.
    pub fn for_catalog(catalog: &Catalog) -> Self {
        Self::new(catalog.tools())
    }

    /// The JSON Schema 2020-12.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// SHA-256 (hex) of the schema's canonical JSON (the gateway's
    /// `canonical_json`: keys sorted, no whitespace). Deterministic; changes
    /// with any tool contract or bound.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    /// `response_format` in the one form llama-server enforces:
    /// `{"type":"json_schema","json_schema":{"name":…,"strict":true,"schema":…}}`.
    pub fn response_format(&self) -> Value {
        json!({
            "type": "json_schema",
            "json_schema": {"name": ACTION_SCHEMA_NAME, "strict": true, "schema": self.schema},
        })
    }

    /// [`Self::response_format_text`] as the client sends it: what the
    /// runtime puts in every constrained request.
    pub fn wire_response_format(&self) -> ResponseFormat {
        ResponseFormat::from_text(self.response_format_text())
            .unwrap_or_else(|_| ResponseFormat::from(&self.response_format()))
    }

    /// [`Self::response_format`] as JSON text whose `properties` follow each
    /// object's `required` order (then the rest, sorted): the order the
    /// grammar makes the model write them in. Parses back to exactly
    /// [`Self::response_format`].
    pub fn response_format_text(&self) -> String {
        let mut out = String::from("{\"type\":\"json_schema\",\"json_schema\":{\"name\":");
        out.push_str(&Value::from(ACTION_SCHEMA_NAME).to_string());
        out.push_str(",\"strict\":true,\"schema\":");
        write_ordered(&self.schema, &mut out);
        out.push_str("}}");
        out
    }
}

/// The action schema offering every tool of `catalog`.
pub fn action_schema(catalog: &Catalog) -> Value {
    ActionSchema::for_catalog(catalog).schema
}

/// `response_format` (the enforced OpenAI form) offering every tool of
/// `catalog`.
pub fn response_format(catalog: &Catalog) -> Value {
    ActionSchema::for_catalog(catalog).response_format()
}

fn tool_branch(tool: &Tool, known: Option<&HashSet<String>>) -> Value {
    let arguments = tool
        .contract
        .get("input_schema")
        .map_or_else(|| json!({"type": "object"}), |input| decoding_schema_with(input, known));
    json!({
        "type": "object",
        "properties": {
            "contract": {"const": CONTRACT},
            "type": {"const": TYPE_TOOL_CALL},
            "tool_id": {"const": tool.id.as_str()},
            "arguments": arguments,
        },
        "required": ["contract", "type", "tool_id", "arguments"],
        "additionalProperties": false,
    })
}

fn final_branch() -> Value {
    json!({
        "type": "object",
        "properties": {
            "contract": {"const": CONTRACT},
            "type": {"const": TYPE_FINAL},
            "text": {"type": "string", "minLength": 1, "maxLength": MAX_FINAL_TEXT_CHARS},
        },
        "required": ["contract", "type", "text"],
        "additionalProperties": false,
    })
}

/// A tool's published input schema as a subschema: its own `$schema` dropped
/// (one dialect, declared at the root), every `x-labfy-ref` string given the
/// `pattern` of its kinds.
#[cfg(test)]
pub(super) fn decoding_schema(input: &Value) -> Value {
    decoding_schema_with(input, None)
}

fn decoding_schema_with(input: &Value, known: Option<&HashSet<String>>) -> Value {
    match input {
        Value::Object(map) => {
            let mut out: Map<String, Value> = map
                .iter()
                .filter(|(k, _)| k.as_str() != "$schema")
                .map(|(k, v)| (k.clone(), decoding_schema_with(v, known)))
                .collect();
            if let Some(kinds) = map.get("x-labfy-ref").and_then(Value::as_array) {
                let kinds: Vec<&str> = kinds.iter().filter_map(Value::as_str).collect();
                let mut shown: Vec<&String> = known
                    .map(|k| {
                        k.iter()
                            .filter(|id| id.split_once(':').is_some_and(|(kind, _)| kinds.contains(&kind)))
                            .collect()
                    })
                    .unwrap_or_default();
                shown.sort();
                shown.truncate(MAX_KNOWN_REFS_PER_FIELD);
                if shown.is_empty() {
                    out.insert("pattern".into(), Value::from(ref_pattern(&kinds)));
                } else {
                    out.insert(
                        "enum".into(),
                        Value::Array(shown.into_iter().map(|s| Value::from(s.as_str())).collect()),
                    );
                }
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(|i| decoding_schema_with(i, known)).collect()),
        other => other.clone(),
    }
}

/// The ids each single-reference tool has answered in a turn.
pub type Answered = HashMap<ToolId, HashSet<String>>;

/// The field of a tool input schema whose only property is one required,
/// scalar reference (`investigation.get_overview`'s `investigation_id`,
/// `graph.get_node`'s `node_id`, …): such a call is determined by that id.
pub fn single_ref_field(input: &Value) -> Option<&str> {
    let props = input.get("properties")?.as_object()?;
    let (name, prop) = props.iter().next().filter(|_| props.len() == 1)?;
    let required = input.get("required")?.as_array()?;
    let is_required = required.len() == 1 && required[0].as_str() == Some(name.as_str());
    (is_required && prop.get("type").and_then(Value::as_str) == Some("string") && prop.get("x-labfy-ref").is_some())
        .then_some(name.as_str())
}

/// Whether every *required* reference field of `schema` (at any depth, and
/// in arrays that need at least one item) has an id of its kinds in `known`.
fn satisfiable(schema: &Value, known: &HashSet<String>) -> bool {
    let Some(obj) = schema.as_object() else { return true };
    if let Some(kinds) = obj.get("x-labfy-ref").and_then(Value::as_array) {
        let kinds: Vec<&str> = kinds.iter().filter_map(Value::as_str).collect();
        return known.iter().any(|id| id.split_once(':').is_some_and(|(kind, _)| kinds.contains(&kind)));
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        let required = obj.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str);
        for name in required {
            if props.get(name).is_some_and(|p| !satisfiable(p, known)) {
                return false;
            }
        }
    }
    let needs_items = obj.get("minItems").and_then(Value::as_u64).is_some_and(|n| n > 0);
    if needs_items {
        if let Some(items) = obj.get("items") {
            return satisfiable(items, known);
        }
    }
    true
}

/// `^(evidence|entity):<canonical lower-case hyphenated uuid>$`: what
/// `ObjectRef` parses, restricted to `kinds`. Anchored and plain (groups,
/// classes, counted repeats) as llama-server's pattern converter requires.
fn ref_pattern(kinds: &[&str]) -> String {
    format!("^({}):[0-9a-f]{{8}}-[0-9a-f]{{4}}-[0-9a-f]{{4}}-[0-9a-f]{{4}}-[0-9a-f]{{12}}$", kinds.join("|"))
}

/// Compact JSON of `value` with each `properties` object written in its
/// sibling `required` order, then the other properties, sorted.
pub(super) fn write_ordered(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let required: Vec<&str> = map
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            out.push('{');
            for (i, (key, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::from(key.as_str()).to_string());
                out.push(':');
                match v {
                    Value::Object(properties) if key == "properties" => write_properties(properties, &required, out),
                    _ => write_ordered(v, out),
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_ordered(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

fn write_properties(properties: &Map<String, Value>, required: &[&str], out: &mut String) {
    let mut named: Vec<&str> = Vec::new();
    for name in required {
        if properties.contains_key(*name) && !named.contains(name) {
            named.push(name);
        }
    }
    let first = named.iter().filter_map(|name| properties.get_key_value(*name));
    let rest = properties.iter().filter(|(k, _)| !named.contains(&k.as_str()));
    out.push('{');
    for (i, (key, schema)) in first.chain(rest).enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&Value::from(key.as_str()).to_string());
        out.push(':');
        write_ordered(schema, out);
    }
    out.push('}');
}
