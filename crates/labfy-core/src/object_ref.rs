//! Namespaced object references (SPEC G5): `evidence:<uuid>`, `entity:<uuid>`, …

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use uuid::Uuid;

/// Longest reference accepted by the parser: the longest namespace, a colon
/// and a hyphenated UUID. Anything longer is refused before any other work.
pub const MAX_REF_LEN: usize = 16 + 1 + 36;

/// The namespaces an [`ObjectRef`] can name. Closed: an unknown namespace is
/// an error, never a new kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RefKind {
    /// A workspace (`SPECIMEN` or `REAL`).
    Workspace,
    /// An investigation inside a workspace.
    Investigation,
    /// An evidence item (a document with content and a SHA-256).
    Evidence,
    /// An entity (person, organisation, domain, …).
    Entity,
    /// A typed relation between two objects.
    Relation,
    /// A provenance record (producer, inputs, time).
    Provenance,
    /// A job (a unit of background work).
    Job,
    /// A human grant.
    Grant,
    /// A research campaign run under a grant.
    Campaign,
    /// A research request prepared by an agent, waiting for a human decision.
    ResearchRequest,
    /// A tool request prepared by an agent (install, integrate, change or
    /// promote a capability: the pauses A, B, C1, C2 of SPEC X2), waiting
    /// for a human decision.
    ToolRequest,
}

impl RefKind {
    /// Every namespace, in a stable order.
    pub const ALL: [RefKind; 11] = [
        Self::Workspace,
        Self::Investigation,
        Self::Evidence,
        Self::Entity,
        Self::Relation,
        Self::Provenance,
        Self::Job,
        Self::Grant,
        Self::Campaign,
        Self::ResearchRequest,
        Self::ToolRequest,
    ];

    /// The namespace as written in a reference.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Workspace => "workspace",
            Self::Investigation => "investigation",
            Self::Evidence => "evidence",
            Self::Entity => "entity",
            Self::Relation => "relation",
            Self::Provenance => "provenance",
            Self::Job => "job",
            Self::Grant => "grant",
            Self::Campaign => "campaign",
            Self::ResearchRequest => "research_request",
            Self::ToolRequest => "tool_request",
        }
    }

    /// Looks a namespace up by its exact (lower-case) name.
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl fmt::Display for RefKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a string is not a valid reference. Every variant names the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RefError {
    /// Nothing was given.
    #[error("empty reference: expected `<namespace>:<uuid>`, e.g. `evidence:1b4e28ba-2fa1-11d2-883f-0016d3cca427`")]
    Empty,
    /// Longer than any valid reference.
    #[error("reference too long ({len} bytes, at most {MAX_REF_LEN})")]
    TooLong {
        /// Length of the refused input in bytes.
        len: usize,
    },
    /// A UUID without its namespace.
    #[error("bare UUID refused: prefix it with its namespace, e.g. `evidence:{0}`")]
    BareUuid(String),
    /// No `:` separator, and not a UUID either.
    #[error("malformed reference: expected `<namespace>:<uuid>`")]
    Malformed,
    /// The namespace is not one Labfy knows.
    #[error(
        "unknown namespace `{0}`: expected one of workspace, investigation, evidence, entity, relation, provenance, job, grant, campaign, research_request, tool_request"
    )]
    UnknownNamespace(String),
    /// The part after the colon is not a canonical lower-case hyphenated UUID.
    #[error("invalid UUID in reference: expected 36 lower-case hex characters with hyphens (8-4-4-4-12)")]
    InvalidUuid,
    /// A reference of another namespace was given where one kind is required.
    #[error("expected a `{expected}:` reference, got a `{found}:` one")]
    WrongKind {
        /// The namespace the caller required.
        expected: RefKind,
        /// The namespace that was given.
        found: RefKind,
    },
}

/// A namespaced identifier: a [`RefKind`] and a UUID, written `kind:uuid`.
///
/// The textual form is canonical: lower-case namespace, lower-case hyphenated
/// UUID, nothing around it. Two references are equal exactly when their text
/// is equal, which is what lets the gateway resolve them "exactly".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectRef {
    kind: RefKind,
    id: Uuid,
}

impl ObjectRef {
    /// Builds a reference from its parts.
    pub fn new(kind: RefKind, id: Uuid) -> Self {
        Self { kind, id }
    }

    /// The namespace.
    pub fn kind(&self) -> RefKind {
        self.kind
    }

    /// The UUID.
    pub fn id(&self) -> Uuid {
        self.id
    }

    /// Parses `text` and requires the namespace `expected`.
    pub fn parse_kind(text: &str, expected: RefKind) -> Result<Self, RefError> {
        let r: ObjectRef = text.parse()?;
        if r.kind != expected {
            return Err(RefError::WrongKind { expected, found: r.kind });
        }
        Ok(r)
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind.as_str(), self.id.as_hyphenated())
    }
}

/// True when `s` is a UUID in canonical lower-case hyphenated form.
fn is_canonical_uuid(s: &str) -> bool {
    s.len() == 36
        && s.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_digit() || (b'a'..=b'f').contains(&b),
        })
}

impl FromStr for ObjectRef {
    type Err = RefError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.is_empty() {
            return Err(RefError::Empty);
        }
        if text.len() > MAX_REF_LEN {
            return Err(RefError::TooLong { len: text.len() });
        }
        let Some((ns, id)) = text.split_once(':') else {
            return Err(if Uuid::try_parse(text).is_ok() {
                RefError::BareUuid(text.to_ascii_lowercase())
            } else {
                RefError::Malformed
            });
        };
        let kind = RefKind::from_name(ns).ok_or_else(|| {
            // The namespace is echoed only when it is short printable ASCII.
            let shown: String = ns.chars().filter(|c| c.is_ascii_graphic()).take(16).collect();
            RefError::UnknownNamespace(shown)
        })?;
        if !is_canonical_uuid(id) {
            return Err(RefError::InvalidUuid);
        }
        let id = Uuid::try_parse(id).map_err(|_| RefError::InvalidUuid)?;
        Ok(Self { kind, id })
    }
}

impl Serialize for ObjectRef {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ObjectRef {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// The canonical text of a UUID in a reference, as a regular expression.
const UUID_PATTERN: &str = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";

/// The JSON Schema of a reference of `namespaces` (`a|b|…`) in the API's
/// OpenAPI document: a string of the canonical form.
fn ref_schema(namespaces: &str, description: &str) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    utoipa::openapi::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .pattern(Some(format!("^({namespaces}):{UUID_PATTERN}$")))
        .max_length(Some(MAX_REF_LEN))
        .description(Some(description))
        .into()
}

impl utoipa::PartialSchema for ObjectRef {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        let names: Vec<&str> = RefKind::ALL.iter().map(|k| k.as_str()).collect();
        ref_schema(&names.join("|"), "A namespaced reference `<namespace>:<uuid>` (SPEC G5).")
    }
}

impl utoipa::ToSchema for ObjectRef {}

/// Defines a reference that can name only one namespace: what crosses a
/// process boundary where the kind is fixed (a grant, a campaign), so that a
/// message naming the wrong kind fails to decode instead of being parsed by
/// every receiver in its own way (issue 14: `labfy-core` types on the wire).
macro_rules! typed_ref {
    ($(#[$doc:meta])* $name:ident => $kind:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(Uuid);

        impl $name {
            /// The one namespace this reference names.
            pub const KIND: RefKind = RefKind::$kind;

            /// The reference to the object with this UUID.
            pub fn new(id: Uuid) -> Self {
                Self(id)
            }

            /// The UUID.
            pub fn id(&self) -> Uuid {
                self.0
            }

            /// The same reference, untyped.
            pub fn object_ref(&self) -> ObjectRef {
                ObjectRef::new(Self::KIND, self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.object_ref(), f)
            }
        }

        impl FromStr for $name {
            type Err = RefError;

            fn from_str(text: &str) -> Result<Self, Self::Err> {
                ObjectRef::parse_kind(text, Self::KIND).map(|r| Self(r.id()))
            }
        }

        impl From<$name> for ObjectRef {
            fn from(r: $name) -> Self {
                r.object_ref()
            }
        }

        impl PartialEq<ObjectRef> for $name {
            fn eq(&self, other: &ObjectRef) -> bool {
                self.object_ref() == *other
            }
        }

        impl PartialEq<$name> for ObjectRef {
            fn eq(&self, other: &$name) -> bool {
                *self == other.object_ref()
            }
        }

        impl TryFrom<ObjectRef> for $name {
            type Error = RefError;

            fn try_from(r: ObjectRef) -> Result<Self, Self::Error> {
                if r.kind() == Self::KIND {
                    Ok(Self(r.id()))
                } else {
                    Err(RefError::WrongKind { expected: Self::KIND, found: r.kind() })
                }
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = String::deserialize(d)?;
                text.parse().map_err(serde::de::Error::custom)
            }
        }

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                ref_schema(Self::KIND.as_str(), concat!("A `", stringify!($name), "`: one namespace only."))
            }
        }

        impl utoipa::ToSchema for $name {}
    };
}

typed_ref! {
    /// `grant:<uuid>`: a human grant, and nothing else.
    GrantRef => Grant
}

typed_ref! {
    /// `campaign:<uuid>`: a research campaign, and nothing else.
    CampaignRef => Campaign
}

typed_ref! {
    /// `job:<uuid>`: a job (an import, an extraction), and nothing else.
    JobRef => Job
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "1b4e28ba-2fa1-11d2-883f-0016d3cca427";

    #[test]
    fn every_namespace_round_trips() {
        for kind in RefKind::ALL {
            let text = format!("{kind}:{ID}");
            let r: ObjectRef = text.parse().unwrap();
            assert_eq!(r.kind(), kind);
            assert_eq!(r.to_string(), text);
            assert!(text.len() <= MAX_REF_LEN, "MAX_REF_LEN too small for {kind}");
        }
    }

    #[test]
    fn bare_uuid_is_refused_with_a_hint() {
        let err = ID.parse::<ObjectRef>().unwrap_err();
        assert_eq!(err, RefError::BareUuid(ID.into()));
        assert!(err.to_string().contains(&format!("evidence:{ID}")));
        // Upper-case bare UUIDs are still recognised as bare UUIDs.
        assert!(matches!(ID.to_uppercase().parse::<ObjectRef>(), Err(RefError::BareUuid(_))));
    }

    #[test]
    fn unknown_namespace_is_refused() {
        let err = format!("document:{ID}").parse::<ObjectRef>().unwrap_err();
        assert_eq!(err, RefError::UnknownNamespace("document".into()));
        assert!(matches!(format!("Evidence:{ID}").parse::<ObjectRef>(), Err(RefError::UnknownNamespace(_))));
    }

    #[test]
    fn non_canonical_uuids_are_refused() {
        for bad in [
            format!("evidence:{}", ID.to_uppercase()),
            format!("evidence:{}", ID.replace('-', "")),
            format!("evidence:{{{ID}}}"),
            format!("evidence: {ID}"),
            format!("evidence:{ID}x"),
            "evidence:".to_string(),
            format!("evidence:urn:uuid:{ID}"),
        ] {
            let err = bad.parse::<ObjectRef>().unwrap_err();
            assert!(matches!(err, RefError::InvalidUuid | RefError::TooLong { .. }), "{bad}: {err:?}");
        }
    }

    #[test]
    fn malformed_empty_and_oversized_inputs_are_refused() {
        assert_eq!("".parse::<ObjectRef>().unwrap_err(), RefError::Empty);
        assert_eq!("hello".parse::<ObjectRef>().unwrap_err(), RefError::Malformed);
        let long = "x".repeat(MAX_REF_LEN + 1);
        assert_eq!(long.parse::<ObjectRef>().unwrap_err(), RefError::TooLong { len: MAX_REF_LEN + 1 });
    }

    #[test]
    fn parse_kind_requires_the_namespace() {
        let err = ObjectRef::parse_kind(&format!("entity:{ID}"), RefKind::Evidence).unwrap_err();
        assert_eq!(err, RefError::WrongKind { expected: RefKind::Evidence, found: RefKind::Entity });
        assert!(ObjectRef::parse_kind(&format!("evidence:{ID}"), RefKind::Evidence).is_ok());
    }

    #[test]
    fn serde_uses_the_text_form_and_validates() {
        let r: ObjectRef = serde_json::from_str(&format!("\"entity:{ID}\"")).unwrap();
        assert_eq!(serde_json::to_string(&r).unwrap(), format!("\"entity:{ID}\""));
        assert!(serde_json::from_str::<ObjectRef>(&format!("\"{ID}\"")).is_err());
    }
    /// The OpenAPI schema's pattern says what the parser accepts.
    #[test]
    fn the_schema_pattern_is_the_parsers() {
        use utoipa::PartialSchema as _;
        let json = serde_json::to_value(ObjectRef::schema()).unwrap();
        let pattern = json["pattern"].as_str().unwrap();
        assert!(pattern.starts_with("^(workspace|investigation|evidence|") && pattern.ends_with("$"), "{pattern}");
        let json = serde_json::to_value(GrantRef::schema()).unwrap();
        assert_eq!(json["pattern"], format!("^(grant):{UUID_PATTERN}$"));
        assert_eq!(json["maxLength"], MAX_REF_LEN);
    }

    #[test]
    fn typed_references_name_one_namespace() {
        let g: GrantRef = format!("grant:{ID}").parse().unwrap();
        assert_eq!(g.to_string(), format!("grant:{ID}"));
        let untyped = ObjectRef::parse_kind(&format!("grant:{ID}"), RefKind::Grant).unwrap();
        assert_eq!(ObjectRef::from(g), untyped);
        assert!(g == untyped, "typed == untyped");
        assert!(untyped == g, "untyped == typed");
        assert!(g != ObjectRef::new(RefKind::Campaign, g.id()), "same UUID, another namespace");
        assert_eq!(
            format!("campaign:{ID}").parse::<GrantRef>().unwrap_err(),
            RefError::WrongKind { expected: RefKind::Grant, found: RefKind::Campaign }
        );
        assert!(matches!(ID.parse::<CampaignRef>(), Err(RefError::BareUuid(_))));
        let c: CampaignRef = serde_json::from_str(&format!("\"campaign:{ID}\"")).unwrap();
        assert_eq!(serde_json::to_string(&c).unwrap(), format!("\"campaign:{ID}\""));
        assert_eq!(CampaignRef::try_from(c.object_ref()), Ok(c));
        assert!(CampaignRef::try_from(g.object_ref()).is_err());
        let wrong = serde_json::from_str::<CampaignRef>(&format!("\"grant:{ID}\"")).unwrap_err();
        assert!(wrong.to_string().contains("expected a `campaign:` reference"), "{wrong}");
    }
}
