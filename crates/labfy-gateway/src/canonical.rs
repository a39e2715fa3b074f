//! Canonical JSON: object keys sorted by their UTF-8 bytes, no insignificant
//! whitespace, serde_json's number and string spelling. Fingerprints (R5) and
//! call intents (G7) hash this form, so they do not depend on key order or on
//! whether some dependency switches serde_json to insertion order.

use serde_json::Value;

/// The canonical text of `value`.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write(value, &mut out);
    out
}

fn write(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::from(k.as_str()).to_string());
                out.push(':');
                write(&map[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::canonical_json;

    #[test]
    fn key_order_and_whitespace_do_not_matter() {
        let a: serde_json::Value = serde_json::from_str(r#"{"b": 1, "a": {"y": [1, 2], "x": "é"}}"#).unwrap();
        let b = json!({"a": {"x": "é", "y": [1, 2]}, "b": 1});
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_eq!(canonical_json(&a), r#"{"a":{"x":"é","y":[1,2]},"b":1}"#);
    }

    #[test]
    fn different_values_differ() {
        assert_ne!(canonical_json(&json!({"a": 1})), canonical_json(&json!({"a": "1"})));
        assert_ne!(canonical_json(&json!([1, 2])), canonical_json(&json!([2, 1])));
    }
}
