//! Capability manifests and their registry (SPEC X2, the seed's « manifeste
//! de capability »): the ground the optional catalog stands on. A
//! capability is a small program the sandbox runs (`sandbox.exec`'s
//! machinery: a name of the operator's allow-list, no network), described
//! by a manifest that says exactly what it takes and gives:
//!
//! - `id` (dotted lower-case words), `version`, `description`;
//! - `input_schema`: a **closed** JSON Schema — an object, and every object
//!   it describes with `additionalProperties: false`, so the model cannot
//!   pass what the human did not see;
//! - `output`: `text` or `json`, and its largest size;
//! - `risk_level`, `network` (only `none` is accepted);
//! - `program` (a name of the allow-list) and `script` (what it runs: the
//!   input as JSON in its first argument, the chosen evidence as text files
//!   in `/input`);
//! - `tests`: inputs and files with the exit code and output expected, run
//!   before anything is installed or promoted.
//!
//! The manifest's fingerprint (SHA-256 of its canonical JSON) is what a
//! human approves: a manifest that changes after approval no longer matches
//! (like a changed tool contract). Here the manifests are read, checked and
//! found by `search`; `provision.rs` proposes, integrates, executes and
//! changes them behind the human pauses A, B, C1, C2.

use std::collections::BTreeMap;
use std::path::Path;

use labfy_core::RiskLevel;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::catalog::fingerprint;

/// Largest script, bytes.
pub const MAX_SCRIPT_BYTES: usize = 64 * 1024;
/// Largest manifest file, bytes.
pub const MAX_MANIFEST_BYTES: usize = 256 * 1024;
/// Largest output a capability may declare, bytes.
pub const MAX_OUTPUT_BYTES: u32 = 1024 * 1024;
/// Most tests one manifest carries.
pub const MAX_TESTS: usize = 16;
/// Most manifests a registry reads from a folder.
pub const MAX_INSTALLED: usize = 256;
/// Largest input of one run, bytes of compact JSON: it is the script's first
/// argument, and the governor takes arguments of at most 256 bytes
/// (`labfy_ipc` `MAX_SANDBOX_ARG_BYTES`).
pub const MAX_INPUT_BYTES: usize = 256;

/// The manifests shipped with Labfy (`crates/labfy-gateway/capabilities/`).
pub const SHIPPED: &[(&str, &str)] = &[
    ("text.count_words.json", include_str!("../capabilities/text.count_words.json")),
    ("text.find_duplicate_lines.json", include_str!("../capabilities/text.find_duplicate_lines.json")),
];

/// What a capability gives back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutputKind {
    /// Plain text.
    Text,
    /// One JSON document.
    Json,
}

/// The output contract.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputContract {
    /// Text or JSON.
    pub kind: OutputKind,
    /// Largest output, bytes.
    pub max_bytes: u32,
}

/// One test of a manifest: run in the sandbox before any human decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CapabilityTest {
    /// What it shows.
    pub name: String,
    /// The input (valid against the input schema).
    pub input: Value,
    /// Files in `/input`: name → text.
    #[serde(default)]
    pub files: BTreeMap<String, String>,
    /// The exit code expected.
    #[serde(default)]
    pub expect_exit: i32,
    /// Text the output must hold.
    pub stdout_contains: String,
}

/// A capability manifest, as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    /// `word.word…`, lower case.
    pub id: String,
    /// `major.minor.patch`.
    pub version: String,
    /// What it does, for the human and the model.
    pub description: String,
    /// The closed JSON Schema of its input.
    pub input_schema: Value,
    /// What it gives.
    pub output: OutputContract,
    /// Its risk level.
    pub risk_level: RiskLevel,
    /// Network contact: only `none`.
    pub network: String,
    /// A name of the operator's sandbox allow-list.
    pub program: String,
    /// The script the program runs.
    pub script: String,
    /// Its tests (at least one).
    pub tests: Vec<CapabilityTest>,
}

/// Where a capability comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// Shipped with Labfy.
    Shipped,
    /// Placed by the operator in the installed folder.
    Installed,
    /// A change promoted into the workspace's registry by a human (C2).
    Promoted,
    /// A change on trial (C1), read from its tool request.
    Trial,
}

/// A checked manifest.
#[derive(Debug, Clone)]
pub struct Capability {
    /// The manifest.
    pub manifest: Manifest,
    /// SHA-256 of its canonical JSON: what a human approves.
    pub fingerprint: String,
    /// Where it comes from.
    pub origin: Origin,
}

/// Why a manifest is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("capability manifest {source_name}: {reason}")]
pub struct ManifestError {
    /// The file (or `-`).
    pub source_name: String,
    /// Why, in words.
    pub reason: String,
}

/// Reads and checks one manifest against the operator's allow-list.
pub fn check(source_name: &str, text: &str, allow_list: &[&str], origin: Origin) -> Result<Capability, ManifestError> {
    let refuse = |reason: String| ManifestError { source_name: source_name.to_owned(), reason };
    if text.len() > MAX_MANIFEST_BYTES {
        return Err(refuse(format!("{} bytes, at most {MAX_MANIFEST_BYTES}", text.len())));
    }
    let manifest: Manifest = serde_json::from_str(text).map_err(|e| refuse(format!("does not read: {e}")))?;
    checked(manifest, allow_list, origin).map_err(refuse)
}

/// Checks a manifest given as JSON (a proposed change, a stored one).
pub fn check_value(
    source_name: &str,
    value: &Value,
    allow_list: &[&str],
    origin: Origin,
) -> Result<Capability, ManifestError> {
    let refuse = |reason: String| ManifestError { source_name: source_name.to_owned(), reason };
    let bytes = value.to_string().len();
    if bytes > MAX_MANIFEST_BYTES {
        return Err(refuse(format!("{bytes} bytes, at most {MAX_MANIFEST_BYTES}")));
    }
    let manifest: Manifest =
        serde_json::from_value(value.clone()).map_err(|e| refuse(format!("does not read: {e}")))?;
    checked(manifest, allow_list, origin).map_err(refuse)
}

fn checked(manifest: Manifest, allow_list: &[&str], origin: Origin) -> Result<Capability, String> {
    check_manifest(&manifest, allow_list)?;
    let value = serde_json::to_value(&manifest).map_err(|e| e.to_string())?;
    Ok(Capability { fingerprint: fingerprint(&value), manifest, origin })
}

impl Capability {
    /// The manifest as JSON (what a tool request stores).
    pub fn manifest_json(&self) -> Value {
        serde_json::to_value(&self.manifest).unwrap_or(Value::Null)
    }

    /// The input schema, compiled.
    pub fn validate_input(&self, input: &Value) -> Result<(), String> {
        let validator = jsonschema::draft202012::new(&self.manifest.input_schema)
            .map_err(|e| format!("input_schema does not compile: {e}"))?;
        let errors: Vec<String> = validator
            .iter_errors(input)
            .take(4)
            .map(|e| {
                let at = e.instance_path().to_string();
                format!("input{at}: {}", labfy_core::bounded::truncate_chars(&e.to_string(), 160))
            })
            .collect();
        if !errors.is_empty() {
            return Err(errors.join("; "));
        }
        let bytes = input.to_string().len();
        if bytes > MAX_INPUT_BYTES {
            return Err(format!("input of {bytes} bytes: a run takes at most {MAX_INPUT_BYTES} bytes of input"));
        }
        Ok(())
    }
}

fn check_manifest(m: &Manifest, allow_list: &[&str]) -> Result<(), String> {
    let word = |w: &str| {
        !w.is_empty()
            && w.starts_with(|c: char| c.is_ascii_lowercase())
            && w.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    };
    let parts: Vec<&str> = m.id.split('.').collect();
    if m.id.len() > 64 || parts.len() < 2 || !parts.iter().all(|p| word(p)) {
        return Err(format!("id {:?} is not two or more dotted lower-case words (64 characters at most)", m.id));
    }
    let numbers: Vec<&str> = m.version.split('.').collect();
    if numbers.len() != 3
        || !numbers.iter().all(|n| !n.is_empty() && n.len() <= 6 && n.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(format!("version {:?} is not major.minor.patch", m.version));
    }
    let chars = m.description.chars().count();
    if m.description.trim().is_empty() || chars > 500 {
        return Err(format!("the description must say what it does in 1–500 characters ({chars})"));
    }
    if m.network != "none" {
        return Err(format!("network contact {:?}: a capability runs with no network (`none` only)", m.network));
    }
    if !allow_list.contains(&m.program.as_str()) {
        return Err(format!(
            "program {:?} is not on the operator's sandbox allow-list ({})",
            m.program,
            if allow_list.is_empty() { "empty".to_owned() } else { allow_list.join(", ") }
        ));
    }
    if m.script.trim().is_empty() || m.script.len() > MAX_SCRIPT_BYTES {
        return Err(format!("the script must hold 1 byte to {MAX_SCRIPT_BYTES} ({} bytes)", m.script.len()));
    }
    if m.output.max_bytes == 0 || m.output.max_bytes > MAX_OUTPUT_BYTES {
        return Err(format!("the output's largest size must be 1 byte to {MAX_OUTPUT_BYTES}"));
    }
    closed("input_schema", &m.input_schema)?;
    if m.input_schema.get("type").and_then(Value::as_str) != Some("object") {
        return Err("input_schema must describe an object".into());
    }
    let validator =
        jsonschema::draft202012::new(&m.input_schema).map_err(|e| format!("input_schema is not a JSON Schema: {e}"))?;
    if m.tests.is_empty() || m.tests.len() > MAX_TESTS {
        return Err(format!("1 to {MAX_TESTS} tests are needed ({})", m.tests.len()));
    }
    for t in &m.tests {
        if let Some(e) = validator.iter_errors(&t.input).next() {
            return Err(format!("test {:?}: its input does not fit input_schema: {e}", t.name));
        }
        if let Some(bad) = t.files.keys().find(|f| !safe_file_name(f)) {
            return Err(format!("test {:?}: file name {bad:?} is not a plain name", t.name));
        }
        if t.input.to_string().len() > MAX_INPUT_BYTES {
            return Err(format!("test {:?}: its input is longer than {MAX_INPUT_BYTES} bytes of JSON", t.name));
        }
    }
    Ok(())
}

/// A schema is closed when every object it describes says
/// `additionalProperties: false`, and it points nowhere else (`$ref` only
/// inside itself).
fn closed(at: &str, schema: &Value) -> Result<(), String> {
    match schema {
        Value::Object(map) => {
            let describes_object = map.get("type").and_then(Value::as_str) == Some("object")
                || map.contains_key("properties")
                || map.contains_key("patternProperties");
            if describes_object && map.get("additionalProperties") != Some(&Value::Bool(false)) {
                return Err(format!("{at} is open: an object must say \"additionalProperties\": false"));
            }
            if let Some(r) = map.get("$ref").and_then(Value::as_str) {
                if !r.starts_with("#/") {
                    return Err(format!("{at} refers outside the manifest ({r:?})"));
                }
            }
            for (k, v) in map {
                closed(&format!("{at}.{k}"), v)?;
            }
            Ok(())
        }
        Value::Array(items) => items.iter().enumerate().try_for_each(|(i, v)| closed(&format!("{at}[{i}]"), v)),
        _ => Ok(()),
    }
}

fn safe_file_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// The capabilities this appliance knows: the shipped ones and those
/// installed in a folder; a manifest that does not pass is left out and
/// said (`refused`), never half-used.
#[derive(Debug, Default)]
pub struct Registry {
    caps: Vec<Capability>,
    refused: Vec<ManifestError>,
}

impl Registry {
    /// The shipped manifests, and `installed` (`*.json`) when given.
    pub fn load(installed: Option<&Path>, allow_list: &[&str]) -> Self {
        let mut r = Self::default();
        for (name, text) in SHIPPED {
            r.add(check(name, text, allow_list, Origin::Shipped));
        }
        if let Some(dir) = installed {
            let mut files: Vec<_> = match std::fs::read_dir(dir) {
                Ok(entries) => entries.filter_map(Result::ok).map(|e| e.path()).collect(),
                Err(e) => {
                    r.refused.push(ManifestError { source_name: dir.display().to_string(), reason: e.to_string() });
                    Vec::new()
                }
            };
            files.retain(|p| p.extension().is_some_and(|x| x == "json"));
            files.sort();
            for path in files.into_iter().take(MAX_INSTALLED) {
                let name = path.display().to_string();
                let read = std::fs::read_to_string(&path)
                    .map_err(|e| ManifestError { source_name: name.clone(), reason: e.to_string() });
                r.add(read.and_then(|text| check(&name, &text, allow_list, Origin::Installed)));
            }
        }
        r
    }

    /// Adds what humans promoted into this workspace's registry (C2): a
    /// promoted manifest replaces the one of the same id (its new version).
    pub fn with_promoted<'m>(mut self, promoted: impl IntoIterator<Item = &'m Value>, allow_list: &[&str]) -> Self {
        for value in promoted {
            let name = value.get("id").and_then(Value::as_str).unwrap_or("-").to_owned();
            match check_value(&format!("promoted {name}"), value, allow_list, Origin::Promoted) {
                Ok(c) => {
                    self.caps.retain(|old| old.manifest.id != c.manifest.id);
                    self.caps.push(c);
                }
                Err(e) => self.refused.push(e),
            }
        }
        self
    }

    fn add(&mut self, checked: Result<Capability, ManifestError>) {
        match checked {
            Ok(c) if self.get(&c.manifest.id).is_some() => self.refused.push(ManifestError {
                source_name: c.manifest.id.clone(),
                reason: "another manifest has this id already".into(),
            }),
            Ok(c) => self.caps.push(c),
            Err(e) => self.refused.push(e),
        }
    }

    /// The capability `id`.
    pub fn get(&self, id: &str) -> Option<&Capability> {
        self.caps.iter().find(|c| c.manifest.id == id)
    }

    /// Every capability, in id order.
    pub fn all(&self) -> Vec<&Capability> {
        let mut v: Vec<&Capability> = self.caps.iter().collect();
        v.sort_by(|a, b| a.manifest.id.cmp(&b.manifest.id));
        v
    }

    /// The manifests left out, with why.
    pub fn refused(&self) -> &[ManifestError] {
        &self.refused
    }

    /// Capabilities whose id or description holds the most of `query`'s
    /// words (case and accents aside, folded as the search index folds
    /// them), best first; at most `limit`.
    pub fn search(&self, query: &str, limit: usize) -> Vec<&Capability> {
        let words: Vec<String> = query
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| w.chars().count() >= 2)
            .map(labfy_store::fold_word)
            .collect();
        let mut scored: Vec<(usize, &Capability)> = self
            .caps
            .iter()
            .map(|c| {
                let hay = labfy_store::fold_word(&format!("{} {}", c.manifest.id, c.manifest.description));
                (words.iter().filter(|w| hay.contains(w.as_str())).count(), c)
            })
            .filter(|(n, _)| *n > 0 || words.is_empty())
            .collect();
        scored.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.manifest.id.cmp(&b.1.manifest.id)));
        scored.into_iter().take(limit).map(|(_, c)| c).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ALLOWED: &[&str] = &["python3", "jq"];

    fn shipped(id: &str) -> Manifest {
        let (_, text) = SHIPPED.iter().find(|(name, _)| name.starts_with(id)).unwrap();
        serde_json::from_str(text).unwrap()
    }

    fn refused(m: &Manifest) -> String {
        check("test.json", &serde_json::to_string(m).unwrap(), ALLOWED, Origin::Installed).unwrap_err().reason
    }

    #[test]
    fn the_shipped_manifests_pass_and_are_found() {
        let r = Registry::load(None, ALLOWED);
        assert!(r.refused().is_empty(), "{:?}", r.refused());
        assert_eq!(r.all().len(), SHIPPED.len());
        let found = r.search("dédoublonner les lignes en double (duplicate lines)", 5);
        assert_eq!(found[0].manifest.id, "text.find_duplicate_lines");
        assert_eq!(r.search("compter les mots", 5)[0].manifest.id, "text.count_words");
        assert!(r.search("zzz", 5).is_empty());
        // Without python3 on the allow-list: said, not half-used.
        let none = Registry::load(None, &["jq"]);
        assert!(none.all().is_empty());
        assert!(none.refused().iter().all(|e| e.reason.contains("allow-list")), "{:?}", none.refused());
    }

    #[test]
    fn open_networked_or_unlisted_manifests_are_refused_with_their_reason() {
        let good = shipped("text.count_words");
        let mut m = good.clone();
        m.input_schema["additionalProperties"] = json!(true);
        assert!(refused(&m).contains("is open"));
        let mut m = good.clone();
        m.input_schema["properties"]["nested"] = json!({"type": "object", "properties": {"x": {"type": "string"}}});
        assert!(refused(&m).contains("input_schema.properties.nested is open"), "{}", refused(&m));
        let mut m = good.clone();
        m.input_schema["properties"]["far"] = json!({"$ref": "https://example.org/schema.json"});
        assert!(refused(&m).contains("refers outside"));
        let m = Manifest { network: "tor".into(), ..good.clone() };
        assert!(refused(&m).contains("no network"));
        let m = Manifest { program: "bash".into(), ..good.clone() };
        assert!(refused(&m).contains("allow-list"));
        let m = Manifest { id: "Count".into(), ..good.clone() };
        assert!(refused(&m).contains("dotted"));
        let m = Manifest { tests: vec![], ..good.clone() };
        assert!(refused(&m).contains("tests are needed"));
        let mut m = good.clone();
        m.tests[0].input = json!({"top": 3, "extra": 1});
        assert!(refused(&m).contains("does not fit input_schema"));
        let mut m = good.clone();
        m.tests[0].files.insert("../etc/passwd".into(), "x".into());
        assert!(refused(&m).contains("not a plain name"));
        let m = Manifest { script: "x".repeat(MAX_SCRIPT_BYTES + 1), ..good.clone() };
        assert!(refused(&m).contains("script"));
        let mut extra = serde_json::to_value(&good).unwrap();
        extra["approved"] = json!(true);
        let e = check("x.json", &extra.to_string(), ALLOWED, Origin::Installed).unwrap_err();
        assert!(e.reason.contains("unknown field"), "{e}");
    }

    #[test]
    fn a_changed_manifest_has_another_fingerprint() {
        let good = shipped("text.count_words");
        let a = check("a", &serde_json::to_string(&good).unwrap(), ALLOWED, Origin::Shipped).unwrap();
        let again = check("a", &serde_json::to_string_pretty(&good).unwrap(), ALLOWED, Origin::Shipped).unwrap();
        assert_eq!(a.fingerprint, again.fingerprint, "layout does not count");
        let changed = Manifest { script: format!("{}\nimport os\n", good.script), ..good };
        let b = check("b", &serde_json::to_string(&changed).unwrap(), ALLOWED, Origin::Shipped).unwrap();
        assert_ne!(a.fingerprint, b.fingerprint);
    }

    #[test]
    fn installed_manifests_are_read_checked_and_never_shadow_the_shipped_ones() {
        let dir = tempfile::TempDir::new().unwrap();
        let mut mine = shipped("text.count_words");
        mine.id = "text.count_lines".into();
        std::fs::write(dir.path().join("mine.json"), serde_json::to_string(&mine).unwrap()).unwrap();
        std::fs::write(dir.path().join("twin.json"), SHIPPED[0].1).unwrap();
        std::fs::write(dir.path().join("broken.json"), "{").unwrap();
        std::fs::write(dir.path().join("notes.txt"), "ignored").unwrap();
        let r = Registry::load(Some(dir.path()), ALLOWED);
        assert_eq!(r.get("text.count_lines").unwrap().origin, Origin::Installed);
        assert_eq!(r.get("text.count_words").unwrap().origin, Origin::Shipped);
        let reasons: Vec<String> = r.refused().iter().map(ToString::to_string).collect();
        assert_eq!(reasons.len(), 2, "{reasons:?}");
        assert!(reasons.iter().any(|e| e.contains("broken.json") && e.contains("does not read")), "{reasons:?}");
        assert!(reasons.iter().any(|e| e.contains("has this id already")), "{reasons:?}");
    }

    /// Each shipped manifest's own tests, run with the host's python3 on a
    /// folder standing for `/input` (the sandbox runs them for real once
    /// `capability.execute` is wired; this keeps the shipped scripts true).
    #[test]
    fn the_shipped_manifests_pass_their_own_tests() {
        let python = std::process::Command::new("python3").arg("-V").output().is_ok();
        if !labfy_testkit::present(python, "SANDBOX", "no python3") {
            return;
        }
        for (name, text) in SHIPPED {
            let m: Manifest = serde_json::from_str(text).unwrap();
            for t in &m.tests {
                let dir = tempfile::TempDir::new().unwrap();
                for (file, content) in &t.files {
                    std::fs::write(dir.path().join(file), content).unwrap();
                }
                let out = std::process::Command::new("python3")
                    .args(["-I", "-B", "-c", &m.script, &t.input.to_string()])
                    .arg(dir.path())
                    .output()
                    .unwrap();
                let stdout = String::from_utf8_lossy(&out.stdout);
                assert_eq!(
                    out.status.code(),
                    Some(t.expect_exit),
                    "{name} {:?}: {stdout}{}",
                    t.name,
                    String::from_utf8_lossy(&out.stderr)
                );
                assert!(stdout.contains(&t.stdout_contains), "{name} {:?}: {stdout}", t.name);
                if m.output.kind == OutputKind::Json {
                    serde_json::from_str::<Value>(&stdout)
                        .unwrap_or_else(|e| panic!("{name} {:?}: not JSON: {e}", t.name));
                }
            }
        }
    }
}
