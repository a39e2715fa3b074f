//! JSON with one meaning (SPEC T5, M5): no object may hold a key twice, at
//! any depth. `serde_json` silently keeps the last of two equal keys, so a
//! body could say one thing to one reader and another to the next; every
//! JSON body Labfy reads from an untrusted side is checked here first.
//!
//! Keys are compared after `serde_json` decoded their escapes (`"a"` and
//! `"\u0061"` are the same key), with its own tokenizer; nesting is bounded.
//!
//! And JSON with one spelling: [`canonical`], object keys sorted by their
//! UTF-8 bytes, no insignificant whitespace, serde_json's number and string
//! spelling. Fingerprints (R5), call intents (G7) and the STIX ids of
//! observables (I3) hash this form, so they do not depend on key order or
//! on whether some dependency switches serde_json to insertion order.

use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};

/// Deepest nesting of arrays and objects accepted.
pub const MAX_DEPTH: usize = 64;

/// Checks that `bytes` is one JSON value whose objects hold each key once.
/// The error names the duplicated key (bounded) or the syntax problem.
pub fn check_unique_keys(bytes: &[u8]) -> Result<(), String> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    Unique { depth: 0 }.deserialize(&mut de).map_err(|e| e.to_string())?;
    de.end().map_err(|e| e.to_string())
}

struct Unique {
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for Unique {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Unique {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let depth = self.deeper::<A::Error>()?;
        while seq.next_element_seed(Unique { depth })?.is_some() {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let depth = self.deeper::<A::Error>()?;
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            if !seen.insert(key.clone()) {
                let shown: String = key.chars().take(64).collect();
                return Err(de::Error::custom(format!("duplicate key `{shown}`")));
            }
            map.next_value_seed(Unique { depth })?;
        }
        Ok(())
    }
}

impl Unique {
    fn deeper<E: de::Error>(&self) -> Result<usize, E> {
        if self.depth >= MAX_DEPTH {
            return Err(E::custom(format!("nested deeper than {MAX_DEPTH}")));
        }
        Ok(self.depth + 1)
    }
}

/// The canonical text of `value`.
pub fn canonical(value: &serde_json::Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &serde_json::Value, out: &mut String) {
    match value {
        serde_json::Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&serde_json::Value::from(k.as_str()).to_string());
                out.push(':');
                write_canonical(&map[k], out);
            }
            out.push('}');
        }
        serde_json::Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_key_twice_is_refused_at_any_depth_and_named() {
        assert!(check_unique_keys(br#"{"a":1,"b":{"c":[{"d":1}]}}"#).is_ok());
        let e = check_unique_keys(br#"{"a":1,"a":2}"#).unwrap_err();
        assert!(e.contains("duplicate key `a`"), "{e}");
        let e = check_unique_keys(br#"{"input":{"query":"x","query":"y"}}"#).unwrap_err();
        assert!(e.contains("`query`"), "{e}");
        let e = check_unique_keys(br#"[{"k":1},{"k":1,"\u006b":2}]"#).unwrap_err();
        assert!(e.contains("`k`"), "escapes are decoded before comparing: {e}");
        // The same key in sibling objects is fine.
        assert!(check_unique_keys(br#"[{"k":1},{"k":2}]"#).is_ok());
    }

    #[test]
    fn nesting_is_bounded_at_the_edge() {
        let nest = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(check_unique_keys(nest(MAX_DEPTH).as_bytes()).is_ok());
        assert!(check_unique_keys(nest(MAX_DEPTH + 1).as_bytes()).unwrap_err().contains("nested"));
    }

    #[test]
    fn syntax_and_trailing_bytes_are_refused() {
        assert!(check_unique_keys(b"{\"a\":").is_err());
        assert!(check_unique_keys(b"{} {}").is_err());
        assert!(check_unique_keys(b"").is_err());
    }
}

#[cfg(test)]
mod canonical_tests {
    use serde_json::json;

    use super::canonical as canonical_json;

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
