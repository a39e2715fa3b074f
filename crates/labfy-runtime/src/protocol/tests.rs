//! Unit tests of the protocol's internals; the behaviour as a whole is in
//! `tests/protocol.rs`.

use labfy_core::{ObjectRef, RefKind};
use serde_json::json;

use super::schema::{decoding_schema, write_ordered};
use super::*;

#[test]
fn authority_words_match_names_of_authority_only() {
    for name in ["grant", "grant_id", "Authorization", "approved", "scope", "permissions", "sudo", "trust_level"] {
        assert!(looks_like_authority(name), "{name}");
    }
    for name in ["contract", "node_id", "query", "selection_ids", "question", "exclusions", "limit", "text", "url"] {
        assert!(!looks_like_authority(name), "{name}");
    }
}

#[test]
fn ref_pattern_accepts_exactly_what_object_ref_parses() {
    let decoded = decoding_schema(&json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "string", "maxLength": 64, "x-labfy-ref": ["evidence", "entity"],
    }));
    assert!(decoded.get("$schema").is_none(), "nested $schema dropped");
    let validator = jsonschema::draft202012::new(&decoded).unwrap();
    let id = "1b4e28ba-2fa1-11d2-883f-0016d3cca427";
    for (text, ok) in [
        (format!("evidence:{id}"), true),
        (format!("entity:{id}"), true),
        (format!("relation:{id}"), false),
        (id.to_owned(), false),
        (format!("evidence:{}", id.to_uppercase()), false),
        (format!("Evidence:{id}"), false),
        (format!(" evidence:{id}"), false),
        (format!("evidence:{id}\n"), false),
        (format!("evidence:{id}0"), false),
        (format!("evidence:{}", id.replace('-', "")), false),
        (format!("evidence:{{{id}}}"), false),
    ] {
        assert_eq!(validator.is_valid(&json!(text)), ok, "pattern on {text:?}");
        let parsed =
            text.parse::<ObjectRef>().ok().filter(|r| [RefKind::Evidence, RefKind::Entity].contains(&r.kind()));
        assert_eq!(parsed.is_some(), ok, "ObjectRef on {text:?}");
    }
}

#[test]
fn ordered_text_follows_required_then_sorted() {
    let schema = json!({
        "type": "object",
        "properties": {"a": {"type": "string"}, "z": {"type": "object", "properties": {"y": {}, "b": {}}, "required": ["y"]}, "m": {}},
        "required": ["z", "m", "z", "absent"],
    });
    let mut text = String::new();
    write_ordered(&schema, &mut text);
    assert_eq!(
        text,
        r#"{"properties":{"z":{"properties":{"y":{},"b":{}},"required":["y"],"type":"object"},"m":{},"a":{"type":"string"}},"required":["z","m","z","absent"],"type":"object"}"#
    );
    assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), schema);
}
