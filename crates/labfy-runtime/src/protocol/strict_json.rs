//! Strict framing of the model's answer: exactly one JSON object, nothing
//! around it, no key twice in any object (SPEC M5).
//!
//! Two passes over the (bounded) text, both with `serde_json`'s own tokenizer,
//! so strings, escapes and numbers are read exactly as JSON defines them:
//!
//! 1. **Framing.** A `StreamDeserializer` reads the first value as
//!    `IgnoredAny` and reports the byte offset where it ends. An error that
//!    reaches the end of the input is a truncated answer; any other one is a
//!    syntax error. What follows the value decides between "more than one
//!    JSON value", "Markdown" and "text after". The JSON is never extracted
//!    from prose: prose before it is refused as such.
//! 2. **Strictness.** A `DeserializeSeed` rebuilds the value and fails on the
//!    first key an object already holds. Keys are compared *after* `serde_json`
//!    decoded their escapes, so `"a"` and `"\u0061"` are the same key, as
//!    every JSON reader would see them (serde_json itself silently keeps the
//!    last one). The seed also bounds nesting to [`MAX_JSON_DEPTH`].

use std::cell::RefCell;
use std::fmt;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::error::{ProtocolError, echo};
use super::{MAX_ANSWER_BYTES, MAX_JSON_DEPTH};

/// The four whitespace characters of JSON (RFC 8259 §2); anything else
/// around the object is text.
const JSON_WS: [char; 4] = [' ', '\t', '\n', '\r'];

/// Longest syntax diagnostic kept, in characters.
const MAX_SYNTAX_DETAIL_CHARS: usize = 160;

/// Parses `raw` as exactly one JSON object with unique keys at every depth.
pub(super) fn parse_object(raw: &str) -> Result<Map<String, Value>, ProtocolError> {
    if raw.len() > MAX_ANSWER_BYTES {
        return Err(ProtocolError::TooLarge { bytes: raw.len(), max: MAX_ANSWER_BYTES });
    }
    let text = raw.trim_matches(JSON_WS);
    if text.is_empty() {
        return Err(ProtocolError::Empty);
    }
    if is_fence(text) {
        return Err(ProtocolError::Markdown);
    }
    if !text.starts_with('{') {
        return Err(not_an_object(text));
    }

    // 1. Framing: where does the first value end?
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<IgnoredAny>();
    match stream.next() {
        Some(Ok(_)) => {}
        Some(Err(e)) => return Err(syntax(text, &e)),
        None => return Err(ProtocolError::Empty),
    }
    let end = stream.byte_offset();
    let rest = text.get(end..).unwrap_or_default().trim_start_matches(JSON_WS);
    if !rest.is_empty() {
        return Err(trailing(rest));
    }

    // 2. Strictness: unique keys, bounded depth.
    let value = strict_value(text)?;
    match value {
        Value::Object(map) => Ok(map),
        // The text starts with `{` and parsed whole: an object.
        other => Err(ProtocolError::NotAnObject { found: type_name(&other) }),
    }
}

/// Rebuilds the one value of `text`, refusing duplicate keys and deep nesting.
fn strict_value(text: &str) -> Result<Value, ProtocolError> {
    let violation = RefCell::new(None);
    let mut de = serde_json::Deserializer::from_str(text);
    let seed = Strict { depth: 0, path: String::new(), violation: &violation };
    let parsed = seed.deserialize(&mut de).and_then(|v| de.end().map(|()| v));
    match parsed {
        Ok(v) => Ok(v),
        Err(e) => Err(violation.into_inner().unwrap_or_else(|| syntax(text, &e))),
    }
}

/// A Markdown code fence opens or closes here.
fn is_fence(text: &str) -> bool {
    text.starts_with("```") || text.starts_with("~~~")
}

/// The answer does not start with `{`: say what it is.
fn not_an_object(text: &str) -> ProtocolError {
    if text.starts_with('[') {
        return ProtocolError::NotAnObject { found: "an array" };
    }
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Value>();
    if let Some(Ok(value)) = stream.next() {
        let rest = text.get(stream.byte_offset()..).unwrap_or_default();
        // `"Sure" {…}` is prose that happens to start like JSON.
        if !rest.contains('{') {
            return ProtocolError::NotAnObject { found: type_name(&value) };
        }
    }
    if text.contains("```") || text.contains("~~~") {
        ProtocolError::Markdown
    } else if text.contains('{') {
        ProtocolError::TextBefore
    } else {
        ProtocolError::NoJson
    }
}

/// Something follows the first value.
fn trailing(rest: &str) -> ProtocolError {
    if is_fence(rest) {
        return ProtocolError::Markdown;
    }
    if rest.starts_with('{') || rest.starts_with('[') {
        return ProtocolError::MultipleValues;
    }
    let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<IgnoredAny>();
    match stream.next() {
        Some(Ok(_)) => ProtocolError::MultipleValues,
        _ => ProtocolError::TextAfter,
    }
}

/// A `serde_json` error while reading the object that starts `text`.
fn syntax(text: &str, e: &serde_json::Error) -> ProtocolError {
    if e.is_eof() || number_cut_short(text, e) {
        return ProtocolError::Truncated;
    }
    let detail = e.to_string();
    if detail.starts_with("recursion limit exceeded") {
        return ProtocolError::TooDeep { max: MAX_JSON_DEPTH };
    }
    ProtocolError::InvalidJson { detail: labfy_core::bounded::truncate_chars(&detail, MAX_SYNTAX_DETAIL_CHARS) }
}

/// True when the input ran out inside a number (`-`, `1.`, `2e`, `2e+`):
/// `serde_json` calls that an invalid number, not an end of file. The test is
/// exact rather than a guess: the error sits on the last byte, and one more
/// digit turns it into an end-of-file error — a prefix of valid JSON.
fn number_cut_short(text: &str, e: &serde_json::Error) -> bool {
    let line = text.bytes().filter(|b| *b == b'\n').count() + 1;
    let column = text.len() - text.rfind('\n').map_or(0, |i| i + 1);
    if e.line() != line || e.column() < column || !text.ends_with(['-', '+', '.', 'e', 'E']) {
        return false;
    }
    let extended = format!("{text}0");
    let mut stream = serde_json::Deserializer::from_str(&extended).into_iter::<IgnoredAny>();
    matches!(stream.next(), Some(Err(e)) if e.is_eof())
}

/// "an object", "an array", … for a reason.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Pass 2: rebuilds a value, refusing duplicate keys and nesting deeper than
/// [`MAX_JSON_DEPTH`]. The violation itself is kept aside (serde's error type
/// carries only text) and takes precedence over the generic error.
struct Strict<'a> {
    /// Containers above this value.
    depth: usize,
    /// Where this value sits, dotted (`arguments.selection_ids[0]`); empty at
    /// the top.
    path: String,
    violation: &'a RefCell<Option<ProtocolError>>,
}

impl<'a> Strict<'a> {
    fn child(&self, path: String) -> Strict<'a> {
        Strict { depth: self.depth + 1, path, violation: self.violation }
    }

    fn fail<E: de::Error>(&self, violation: ProtocolError) -> E {
        *self.violation.borrow_mut() = Some(violation);
        E::custom("strict JSON violation")
    }

    fn enter<E: de::Error>(&self) -> Result<(), E> {
        if self.depth >= MAX_JSON_DEPTH {
            return Err(self.fail(ProtocolError::TooDeep { max: MAX_JSON_DEPTH }));
        }
        Ok(())
    }

    fn where_(&self) -> String {
        if self.path.is_empty() { "the top-level object".to_owned() } else { format!("`{}`", self.path) }
    }

    fn key_path(&self, key: &str) -> String {
        let key = if key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !key.is_empty() {
            key.to_owned()
        } else {
            let quoted = echo(key);
            format!("[{}]", quoted.trim_matches('`'))
        };
        if self.path.is_empty() { key } else { format!("{}.{key}", self.path) }
    }
}

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        // JSON has no NaN or infinity; serde_json never produces them.
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.enter()?;
        let mut items = Vec::new();
        loop {
            let child = self.child(format!("{}[{}]", self.path, items.len()));
            match seq.next_element_seed(child)? {
                Some(item) => items.push(item),
                None => break,
            }
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.enter()?;
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if out.contains_key(&key) {
                return Err(self.fail(ProtocolError::DuplicateKey { key: echo(&key), at: self.where_() }));
            }
            let value = map.next_value_seed(self.child(self.key_path(&key)))?;
            out.insert(key, value);
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(raw: &str) -> ProtocolError {
        parse_object(raw).unwrap_err()
    }

    #[test]
    fn one_object_with_json_whitespace_is_accepted() {
        let map = parse_object(" \n\t{\"a\": [1, {\"b\": null}], \"c\": \"\\u0041\"}\r\n").unwrap();
        assert_eq!(map["c"], "A");
        assert_eq!(map["a"][1]["b"], Value::Null);
    }

    #[test]
    fn framing_errors_are_distinct() {
        assert_eq!(err(""), ProtocolError::Empty);
        assert_eq!(err(" \n "), ProtocolError::Empty);
        assert_eq!(err("```json\n{}\n```"), ProtocolError::Markdown);
        assert_eq!(err("{}\n```"), ProtocolError::Markdown);
        assert_eq!(err("Here it is: ```json {} ```"), ProtocolError::Markdown);
        assert_eq!(err("Sure! {\"a\":1}"), ProtocolError::TextBefore);
        assert_eq!(err("\"Sure\" {\"a\":1}"), ProtocolError::TextBefore);
        assert_eq!(err("{\"a\":1} Done."), ProtocolError::TextAfter);
        assert_eq!(err("{\"a\":1}}"), ProtocolError::TextAfter);
        assert_eq!(err("{\"a\":1}{\"a\":2}"), ProtocolError::MultipleValues);
        assert_eq!(err("{\"a\":1}\n[2]"), ProtocolError::MultipleValues);
        assert_eq!(err("{\"a\":1} \"x\""), ProtocolError::MultipleValues);
        assert_eq!(err("I will call a tool."), ProtocolError::NoJson);
        assert_eq!(err("[{\"a\":1}]"), ProtocolError::NotAnObject { found: "an array" });
        assert_eq!(err("\"{}\""), ProtocolError::NotAnObject { found: "a string" });
        assert_eq!(err("42"), ProtocolError::NotAnObject { found: "a number" });
        assert_eq!(err("null"), ProtocolError::NotAnObject { found: "null" });
        assert_eq!(err("\u{feff}{}"), ProtocolError::TextBefore);
        assert!(matches!(err("{\"a\" 1}"), ProtocolError::InvalidJson { .. }));
        assert!(matches!(err("{'a': 1}"), ProtocolError::InvalidJson { .. }));
        assert!(matches!(err("{\"a\":1,}"), ProtocolError::InvalidJson { .. }));
        assert!(matches!(err("{\"a\":1]"), ProtocolError::InvalidJson { .. }));
        assert!(matches!(err("{\"a\":-."), ProtocolError::InvalidJson { .. }));
        assert!(matches!(err("{\"a\":1.e"), ProtocolError::InvalidJson { .. }));
        assert!(matches!(err("{\"a\":01"), ProtocolError::InvalidJson { .. }));
    }

    #[test]
    fn every_prefix_is_truncated() {
        let full = r#"{"a":[1,-2.5e+3,0.5E-2,true,false,null,"x\"\u00e9\n\ud83d\ude00"],"b":{"c":{}}}"#;
        for end in 1..full.len() {
            assert_eq!(parse_object(&full[..end]), Err(ProtocolError::Truncated), "prefix {:?}", &full[..end]);
        }
        assert!(parse_object(full).is_ok());
    }

    #[test]
    fn duplicate_keys_are_refused_at_every_depth() {
        let dup = |raw: &str| match err(raw) {
            ProtocolError::DuplicateKey { key, at } => (key, at),
            other => panic!("{raw}: {other:?}"),
        };
        assert_eq!(dup(r#"{"a":1,"a":1}"#), ("`a`".into(), "the top-level object".into()));
        assert_eq!(dup(r#"{"a":1,"\u0061":2}"#), ("`a`".into(), "the top-level object".into()));
        assert_eq!(dup(r#"{"x":{"y":{"k":1,"k":2}}}"#), ("`k`".into(), "`x.y`".into()));
        assert_eq!(dup(r#"{"l":[{"k":1},{"k":1,"\u006b":1}]}"#), ("`k`".into(), "`l[1]`".into()));
        assert_eq!(dup(r#"{"é":1,"\u00e9":1}"#), ("`é`".into(), "the top-level object".into()));
        // Distinct keys that merely look alike are distinct.
        assert!(parse_object(r#"{"a":1,"A":1,"a ":1,"\u00e9":1,"e\u0301":1}"#).is_ok());
    }

    #[test]
    fn depth_is_bounded() {
        let nest = |n: usize| format!("{}{}", "{\"a\":".repeat(n - 1) + "{", "}".repeat(n));
        assert!(parse_object(&nest(MAX_JSON_DEPTH)).is_ok());
        assert_eq!(err(&nest(MAX_JSON_DEPTH + 1)), ProtocolError::TooDeep { max: MAX_JSON_DEPTH });
        assert_eq!(err(&nest(1_000)), ProtocolError::TooDeep { max: MAX_JSON_DEPTH });
    }
}
