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

#[test]
fn known_refs_become_the_enum_of_reference_fields() {
    use std::collections::HashSet;
    let catalog = labfy_gateway::Catalog::build().unwrap();
    let tool = catalog.tools().iter().find(|t| t.id.as_str() == "graph.get_node").unwrap();
    let inv = "investigation:0190a0b0-0000-7000-8000-000000000001".to_owned();
    let ent = "entity:0190a0b0-0000-7000-8000-000000000002".to_owned();
    let known: HashSet<String> = [inv.clone(), ent.clone()].into();
    let with = super::ActionSchema::with_known_refs([tool], &known);
    let text = with.schema().to_string();
    assert!(text.contains(&ent), "{text}");
    let plain = super::ActionSchema::new([tool]);
    assert!(!plain.schema().to_string().contains(&ent));
    assert_ne!(with.fingerprint(), plain.fingerprint());
    // A tool whose required reference has no id shown yet is not offered.
    let none = super::ActionSchema::with_known_refs([tool], &HashSet::new());
    assert!(!none.schema().to_string().contains("graph.get_node"));
    let only_inv: HashSet<String> = [inv.clone()].into();
    let overview = catalog.tools().iter().find(|t| t.id.as_str() == "investigation.get_overview").unwrap();
    let summary = catalog.tools().iter().find(|t| t.id.as_str() == "evidence.get_summary").unwrap();
    let s = super::ActionSchema::with_known_refs([summary, overview], &only_inv).schema().to_string();
    assert!(s.contains("investigation.get_overview") && !s.contains("evidence.get_summary"), "{s}");
    // The enum holds only ids of the field's kinds.
    let enums: Vec<&serde_json::Value> = find_all(with.schema(), "enum");
    assert!(!enums.is_empty());
    for e in enums {
        for v in e.as_array().unwrap() {
            let s = v.as_str().unwrap();
            if s.contains(':') && s.len() > 40 {
                assert!(s == inv || s == ent, "{s}");
            }
        }
    }
}

fn find_all<'a>(v: &'a serde_json::Value, key: &str) -> Vec<&'a serde_json::Value> {
    let mut out = Vec::new();
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                if k == key {
                    out.push(x);
                }
                out.extend(find_all(x, key));
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| out.extend(find_all(x, key))),
        _ => {}
    }
    out
}
