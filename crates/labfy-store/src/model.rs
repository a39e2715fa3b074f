//! The shapes the read models return. They serialise to the JSON the HTTP API
//! publishes, so the server adds no parallel projection of its own.

use chrono::{DateTime, Utc};
use labfy_core::ObjectRef;
use serde::{Deserialize, Serialize};

/// Class of a workspace (SPEC W1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum WorkspaceClass {
    /// Synthetic data, for demos, tests and benchmarks; touches no network.
    Specimen,
    /// Real data.
    Real,
}

impl WorkspaceClass {
    /// The stored spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Specimen => "SPECIMEN",
            Self::Real => "REAL",
        }
    }

    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s {
            "SPECIMEN" => Some(Self::Specimen),
            "REAL" => Some(Self::Real),
            _ => None,
        }
    }
}

/// A workspace as listed.
#[derive(Debug, Clone, Serialize)]
pub struct WorkspaceSummary {
    /// `workspace:<uuid>`.
    pub id: ObjectRef,
    /// Display name.
    pub name: String,
    /// `SPECIMEN` or `REAL`.
    pub class: WorkspaceClass,
    /// `GENERATING` or `READY`.
    pub status: String,
    /// RFC 3339.
    pub created_at: String,
    /// Number of investigations.
    pub investigation_count: i64,
    /// When it was archived (RFC 3339); `None` while it is in use.
    pub archived_at: Option<String>,
}

/// An investigation as listed.
#[derive(Debug, Clone, Serialize)]
pub struct InvestigationSummary {
    /// `investigation:<uuid>`.
    pub id: ObjectRef,
    /// Title.
    pub title: String,
    /// One-paragraph summary.
    pub summary: String,
    /// RFC 3339.
    pub created_at: String,
    /// Number of evidence items.
    pub evidence_count: i64,
    /// When it was archived (RFC 3339); `None` while it is in use.
    pub archived_at: Option<String>,
    /// Received from another appliance (SPEC I4): read-only.
    pub received: Option<ReceivedMark>,
}

/// How an investigation received from another appliance is marked (SPEC
/// I4): it is read-only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReceivedMark {
    /// SHA-256 of the bundle's manifest, as the sender can check it.
    pub fingerprint: String,
    /// When it was received here (RFC 3339).
    pub received_at: String,
}

impl ReceivedMark {
    pub(crate) fn of(fingerprint: Option<String>, received_at: Option<String>) -> Option<Self> {
        Some(Self { fingerprint: fingerprint?, received_at: received_at? })
    }
}

/// Short form of the workspace inside an overview.
#[derive(Debug, Clone, Serialize)]
pub struct WorkspaceBrief {
    /// `workspace:<uuid>`.
    pub id: ObjectRef,
    /// Display name.
    pub name: String,
    /// Class.
    pub class: WorkspaceClass,
}

/// Object counts of an investigation.
#[derive(Debug, Clone, Serialize)]
pub struct Counts {
    /// Evidence items.
    pub evidence: i64,
    /// Entities.
    pub entities: i64,
    /// Relations.
    pub relations: i64,
    /// Provenance records.
    pub provenance: i64,
    /// Jobs.
    pub jobs: i64,
}

/// A kind and how many objects have it.
#[derive(Debug, Clone, Serialize)]
pub struct KindCount {
    /// Kind name.
    pub kind: String,
    /// Count.
    pub count: i64,
}

/// An entity with the number of evidence items that mention it.
#[derive(Debug, Clone, Serialize)]
pub struct EntityBrief {
    /// `entity:<uuid>`.
    pub id: ObjectRef,
    /// person, organisation, domain, email, location, phone.
    pub kind: String,
    /// Display name.
    pub name: String,
    /// Evidence items mentioning it.
    pub evidence_count: i64,
}

/// An evidence item as listed.
#[derive(Debug, Clone, Serialize)]
pub struct EvidenceBrief {
    /// `evidence:<uuid>`.
    pub id: ObjectRef,
    /// Title.
    pub title: String,
    /// Where it came from (URL, file, person).
    pub source: String,
    /// Media type.
    pub mime: String,
    /// When it was collected (RFC 3339).
    pub collected_at: String,
}

/// A job.
#[derive(Debug, Clone, Serialize)]
pub struct Job {
    /// `job:<uuid>`.
    pub id: ObjectRef,
    /// What the job does.
    pub kind: String,
    /// QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED.
    pub status: String,
    /// 0.0–1.0.
    pub progress: f64,
    /// RFC 3339.
    pub created_at: String,
    /// RFC 3339.
    pub updated_at: String,
    /// Short human-readable detail.
    pub detail: String,
    /// Its figures, by kind (an extraction's: `ExtractionStats`); `{}` when
    /// it has none.
    pub stats: serde_json::Value,
}

/// The overview of one investigation.
#[derive(Debug, Clone, Serialize)]
pub struct Overview {
    /// The investigation.
    pub investigation: InvestigationBrief,
    /// Its workspace.
    pub workspace: WorkspaceBrief,
    /// Object counts.
    pub counts: Counts,
    /// Entities per kind.
    pub entity_kinds: Vec<KindCount>,
    /// Most mentioned entities.
    pub top_entities: Vec<EntityBrief>,
    /// Most recently collected evidence.
    pub recent_evidence: Vec<EvidenceBrief>,
    /// Latest jobs.
    pub jobs: Vec<Job>,
}

/// Short form of an investigation.
#[derive(Debug, Clone, Serialize)]
pub struct InvestigationBrief {
    /// `investigation:<uuid>`.
    pub id: ObjectRef,
    /// Title.
    pub title: String,
    /// Summary.
    pub summary: String,
    /// RFC 3339.
    pub created_at: String,
    /// Received from another appliance (SPEC I4): read-only.
    pub received: Option<ReceivedMark>,
}

/// One full-text search hit.
#[derive(Debug, Clone, Serialize)]
pub struct SearchHit {
    /// `evidence:<uuid>`.
    pub id: ObjectRef,
    /// Title.
    pub title: String,
    /// Source.
    pub source: String,
    /// Media type.
    pub mime: String,
    /// RFC 3339.
    pub collected_at: String,
    /// A bounded extract; matches are wrapped in U+E000 … U+E001.
    pub snippet: String,
}

/// A full-text search answer.
#[derive(Debug, Clone, Serialize)]
pub struct SearchResult {
    /// The query as received.
    pub query: String,
    /// Best hits first.
    pub hits: Vec<SearchHit>,
    /// True when more hits exist than were returned.
    pub truncated: bool,
    /// Set when the query matched so many items that only this many, the
    /// most recent, were ranked (`SEARCH_RANK_WINDOW`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ranked_among: Option<u32>,
    /// The query read as a selector (SPEC A5), when it is one; its pieces
    /// lead `hits`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selector: Option<SelectorFound>,
    /// Entities whose name begins with the query, shown before the pieces.
    pub entities: EntityMatches,
}

/// The entities a search found by name (SPEC A5).
#[derive(Debug, Clone, Default, Serialize)]
pub struct EntityMatches {
    /// The most mentioned first, at most `SEARCH_ENTITIES_SHOWN`.
    pub items: Vec<EntityBrief>,
    /// How many of each kind, the most first (the facets).
    pub kinds: Vec<KindCount>,
    /// Whether more names begin with the query than were weighed.
    pub more: bool,
}

/// A search query that is a selector, and what the extraction found of it.
#[derive(Debug, Clone, Serialize)]
pub struct SelectorFound {
    /// Its kind (`iban`, `phone`, `email`, `domain`, …).
    pub kind: String,
    /// Its normalised value (`FR76…` compact, `+33…`).
    pub value: String,
    /// The entities of that value in the investigation (one, or more when a
    /// domain is written with and without `www.`).
    pub entities: Vec<ObjectRef>,
    /// How many pieces mention it.
    pub pieces: u64,
}

/// Short form of an entity.
#[derive(Debug, Clone, Serialize)]
pub struct EntityRefBrief {
    /// `entity:<uuid>`.
    pub id: ObjectRef,
    /// Entity kind.
    pub kind: String,
    /// Display name.
    pub name: String,
}

/// An entity shared across several evidence items.
#[derive(Debug, Clone, Serialize)]
pub struct Correlation {
    /// The shared entity.
    pub entity: EntityRefBrief,
    /// How many evidence items mention it.
    pub evidence_count: i64,
    /// A few of those evidence items.
    pub sample_evidence: Vec<ObjectRef>,
}

/// An entity mentioned by an evidence item.
#[derive(Debug, Clone, Serialize)]
pub struct MentionedEntity {
    /// `entity:<uuid>`.
    pub id: ObjectRef,
    /// Entity kind.
    pub kind: String,
    /// Display name.
    pub name: String,
    /// Relation kind (`mentions`).
    pub relation: String,
}

/// Everything about an evidence item except its content.
#[derive(Debug, Clone, Serialize)]
pub struct EvidenceSummary {
    /// `evidence:<uuid>`.
    pub id: ObjectRef,
    /// Its investigation.
    pub investigation_id: ObjectRef,
    /// Title.
    pub title: String,
    /// Source.
    pub source: String,
    /// Media type.
    pub mime: String,
    /// SHA-256 of the content (hex).
    pub sha256: String,
    /// Size of the content in bytes.
    pub byte_len: i64,
    /// Size of the content in characters.
    pub char_len: i64,
    /// RFC 3339.
    pub collected_at: String,
    /// RFC 3339.
    pub created_at: String,
    /// Entities it mentions (bounded).
    pub entities: Vec<MentionedEntity>,
    /// The fetch it came from, when a campaign fetched it through egress.
    pub fetch: Option<FetchProvenance>,
    /// Each import of its bytes (SPEC C2), oldest first; empty when it was
    /// not imported.
    pub imports: Vec<ImportRecord>,
    /// Whether its original bytes are kept in the blob store (they can be
    /// downloaded).
    pub original: bool,
}

/// A bounded slice of an evidence item's text.
#[derive(Debug, Clone, Serialize)]
pub struct Excerpt {
    /// `evidence:<uuid>`.
    pub id: ObjectRef,
    /// First character returned.
    pub offset: i64,
    /// Characters returned.
    pub length: i64,
    /// Characters in the whole content.
    pub total_chars: i64,
    /// The text.
    pub text: String,
    /// True when content continues past this slice.
    pub truncated: bool,
}

/// Short form of any graph node.
#[derive(Debug, Clone, Serialize)]
pub struct NodeBrief {
    /// The node's reference.
    pub id: ObjectRef,
    /// Its namespace (`evidence`, `entity`, …).
    pub kind: String,
    /// Human label (title, name, …).
    pub label: String,
    /// Finer kind (entity kind, media type), when there is one.
    pub subkind: Option<String>,
}

/// A graph node with its details.
#[derive(Debug, Clone, Serialize)]
pub struct Node {
    /// The node's reference.
    pub id: ObjectRef,
    /// Its namespace.
    pub kind: String,
    /// Human label.
    pub label: String,
    /// Finer kind.
    pub subkind: Option<String>,
    /// Kind-specific fields.
    pub details: serde_json::Map<String, serde_json::Value>,
    /// Number of relations touching it.
    pub degree: i64,
}

/// The relation part of a neighbour.
#[derive(Debug, Clone, Serialize)]
pub struct RelationBrief {
    /// `relation:<uuid>`.
    pub id: ObjectRef,
    /// Relation kind.
    pub kind: String,
    /// `out` when the node is the source, `in` when it is the target.
    pub direction: &'static str,
    /// 0.0–1.0.
    pub confidence: f64,
}

/// One neighbour of a node.
#[derive(Debug, Clone, Serialize)]
pub struct Neighbor {
    /// The edge.
    pub relation: RelationBrief,
    /// The node at its other end.
    pub node: NodeBrief,
}

/// Neighbours of a node (bounded).
#[derive(Debug, Clone, Serialize)]
pub struct Neighbors {
    /// The node asked about.
    pub node: NodeBrief,
    /// All relations touching it, including those not returned.
    pub total: i64,
    /// The first neighbours.
    pub neighbors: Vec<Neighbor>,
}

/// One provenance record in a trace.
#[derive(Debug, Clone, Serialize)]
pub struct ProvenanceRecord {
    /// `provenance:<uuid>`.
    pub id: ObjectRef,
    /// What it describes.
    pub object: NodeBrief,
    /// Who or what produced the object.
    pub producer: String,
    /// The activity.
    pub activity: String,
    /// RFC 3339.
    pub created_at: String,
    /// Distance from the traced object (0 = its own record).
    pub depth: u32,
    /// The inputs it was produced from.
    pub inputs: Vec<NodeBrief>,
    /// For a `tor_fetch` record: the fetch's metadata (SPEC E5).
    pub fetch: Option<FetchProvenance>,
}

/// What egress reported about the fetch behind a `tor_fetch` provenance
/// record (SPEC E5). Every field is as stored: URLs normalised, header values
/// bounded and stripped of control characters. Untrusted data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FetchProvenance {
    /// The campaign that fetched it.
    pub campaign: ObjectRef,
    /// The item's position in the campaign (0 first).
    pub position: u32,
    /// The grant it ran under.
    pub grant: ObjectRef,
    /// The URL asked.
    pub url: String,
    /// The URL of the response, after redirects.
    pub final_url: String,
    /// Every hop followed, in order.
    pub redirects: Vec<String>,
    /// HTTP status of the final response.
    pub http_status: u16,
    /// Selected response headers (lower-case names).
    pub headers: Vec<(String, String)>,
    /// The `content-type` header as received (bounded).
    pub content_type: Option<String>,
    /// SHA-256 of the body, lower-case hex.
    pub body_sha256: String,
    /// Body length in bytes.
    pub body_bytes: u64,
    /// RFC 3339: when the fetch began.
    pub started_at: String,
    /// Milliseconds from the request to the end of the body.
    pub elapsed_ms: u64,
    /// The campaign's Tor isolation label.
    pub isolation: String,
    /// How Tor reached the final URL's host (SPEC F3).
    pub route: TorRoute,
}

/// How a fetch went through Tor (SPEC F3), from the final URL's host: arti
/// reaches a `.onion` name only through the onion service's own rendezvous
/// circuit, and any other host only through an exit relay, so the host says
/// which (egress links no other path, P4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TorRoute {
    /// Through an exit relay to the host on the Internet.
    Exit,
    /// To an onion service, end to end inside Tor; no exit relay sees it.
    OnionService,
}

impl TorRoute {
    /// The route to `url`'s host.
    pub fn of_url(url: &str) -> Self {
        let host = url::Url::parse(url).ok().and_then(|u| u.host_str().map(str::to_owned)).unwrap_or_default();
        if host.ends_with(".onion") { Self::OnionService } else { Self::Exit }
    }
}

/// Provenance of an object, following inputs back (bounded).
#[derive(Debug, Clone, Serialize)]
pub struct ProvenanceTrace {
    /// The traced object.
    pub root: ObjectRef,
    /// Records, breadth first.
    pub records: Vec<ProvenanceRecord>,
    /// True when a bound stopped the walk.
    pub truncated: bool,
}

/// A stored grant (SPEC W4).
#[derive(Debug, Clone, Serialize)]
pub struct Grant {
    /// `grant:<uuid>`.
    pub id: ObjectRef,
    /// Its workspace.
    pub workspace_id: ObjectRef,
    /// Its investigation.
    pub investigation_id: ObjectRef,
    /// Scope (hosts / URL patterns), as decided.
    pub scope: ResearchScope,
    /// Budget (requests, bytes), as decided.
    pub budget: ResearchBudget,
    /// RFC 3339.
    pub expires_at: String,
    /// Tool contract fingerprints the decision was made under.
    pub contract_fingerprints: serde_json::Value,
    /// Who decided.
    pub decided_by: String,
    /// RFC 3339.
    pub decided_at: String,
    /// When revoked, if it was.
    pub revoked_at: Option<String>,
    /// Who revoked it, if anyone.
    pub revoked_by: Option<String>,
}

/// One audit log row.
#[derive(Debug, Clone, Serialize)]
pub struct AuditEntry {
    /// Monotonic sequence.
    pub seq: i64,
    /// RFC 3339.
    pub at: String,
    /// Who acted.
    pub actor: String,
    /// What was done.
    pub action: String,
    /// Object concerned, if any.
    pub object_ref: Option<String>,
    /// JSON detail.
    pub detail: serde_json::Value,
}

/// True when `grant` is unrevoked and its expiry is in the future.
pub fn grant_is_active(grant: &Grant, now: DateTime<Utc>) -> bool {
    grant.revoked_at.is_none()
        && DateTime::parse_from_rfc3339(&grant.expires_at).is_ok_and(|t| t.with_timezone(&Utc) > now)
}

/// Hosts a grant allows (SPEC E3). `*.example.org` allows sub-domains of
/// `example.org`, not `example.org` itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResearchScope {
    /// Host names or `*.` patterns, lower case (1–16).
    pub hosts: Vec<String>,
}

/// How much a grant allows (SPEC E3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResearchBudget {
    /// Requests (1–1000).
    pub max_requests: u32,
    /// Bytes received in all (1 B – 1 GiB).
    pub max_bytes: u64,
}

/// An import provenance record, for an evidence item's detail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ImportRecord {
    /// File name.
    pub original_name: String,
    /// Path as given.
    pub original_path: String,
    /// Size in bytes.
    pub byte_len: i64,
    /// SHA-256 of the bytes.
    pub sha256: String,
    /// How the parser read it (`text`, `pdf`…).
    pub format: String,
    /// Parser set version.
    pub parser_version: i64,
    /// Character encoding of its text, where it had one.
    pub encoding: Option<String>,
    /// Format fields.
    pub metadata: serde_json::Value,
    /// The parser's notes.
    pub notes: serde_json::Value,
    /// Who imported it.
    pub imported_by: String,
    /// When.
    pub imported_at: String,
    /// The job.
    pub job: Option<ObjectRef>,
}
