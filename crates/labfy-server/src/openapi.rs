//! The HTTP API as an OpenAPI 3.1 document (issue 19, SPEC S): generated
//! from the routes' own annotations and request types (`utoipa`), one
//! document per routes module merged here (`crate::routes::openapi`), served at
//! `/api/v1/openapi.json` behind the same guards as every other route (a
//! session; the document names no secret).
//!
//! What it promises, and a client nobody here wrote (schemathesis, in
//! `.ci/run`) checks: every route with its method, path and query
//! parameters; every request body's schema, closed as the server reads it
//! (`deny_unknown_fields` is `additionalProperties: false`); the success
//! status of each route; and the one refusal format — every other status is
//! the `default` response, `{"error": {"code", "message"}}`. Success bodies
//! are described as JSON objects or arrays (their fields are the store's read
//! models, documented in the crates that own them).
//! The tests below keep the document and the routers in step;
//! `tests/http.rs` sends every documented operation to its handler.

use utoipa::openapi::path::Operation;
use utoipa::openapi::security::{
    ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityRequirement, SecurityScheme,
};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
use utoipa::{Modify, OpenApi, PartialSchema, ToSchema};

use crate::security::CSRF_HEADER;

/// The one refusal format of the API (STYLE 6).
#[derive(ToSchema)]
#[schema(as = Refusal)]
#[allow(dead_code)] // A schema only: `ApiError` writes the JSON.
pub struct RefusalBody {
    /// What went wrong.
    error: RefusalDetail,
}

/// The inside of a refusal.
#[derive(ToSchema)]
#[allow(dead_code)]
pub struct RefusalDetail {
    /// A stable code, upper case (`INVALID_INPUT`, `NOT_FOUND`, `CONFLICT`,
    /// `FORBIDDEN`, `BAD_CSRF_TOKEN`, `RATE_LIMITED`, `UNAVAILABLE`, …).
    code: String,
    /// A sentence, bounded.
    message: String,
}

/// The document's frame: its title and description, the refusal schema and
/// the reference schemas the parts name.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Labfy",
        description = "The workspace server's HTTP API (localhost only). Every route needs the session cookie a \
                       one-time login link sets (`labfy open`); every request that changes something also needs \
                       `Origin` equal to the server's own origin and the session's `X-CSRF-Token`."
    ),
    components(schemas(RefusalBody, RefusalDetail, labfy_core::ObjectRef, labfy_core::GrantRef))
)]
struct Frame;

/// The whole document, from each routes module's part
/// (`crate::routes::openapi` names them).
pub fn document(parts: impl IntoIterator<Item = utoipa::openapi::OpenApi>) -> utoipa::openapi::OpenApi {
    let mut doc = Frame::openapi();
    for part in parts {
        doc.merge(part);
    }
    // Once every part is in: each operation gets the refusal and security.
    Refusals.modify(&mut doc);
    doc
}

/// Gives every operation the `default` response (the refusal format) and
/// its security: the session cookie, and the CSRF header on a mutation.
struct Refusals;

impl Modify for Refusals {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let components = doc.components.get_or_insert_with(Default::default);
        components.responses.insert(
            "Refusal".into(),
            RefOr::T(
                ResponseBuilder::new()
                    .description("A refusal or a failure, always in this one format.")
                    .content("application/json", ContentBuilder::new().schema(Some(RefusalBody::schema())).build())
                    .build(),
            ),
        );
        components.security_schemes.insert(
            "session".into(),
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "The session a one-time login link (`labfy open`) hands to the page, sent as \
                         `Authorization: Bearer <session>`; never a cookie (cookies are not scoped by port).",
                    ))
                    .build(),
            ),
        );
        components.security_schemes.insert(
            "csrf".into(),
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                CSRF_HEADER,
                "The session's token (`GET /api/v1/session`), on every request that changes something.",
            ))),
        );
        let session = SecurityRequirement::new("session", Vec::<String>::new());
        let both = SecurityRequirement::new("session", Vec::<String>::new()).add("csrf", Vec::<String>::new());
        for item in doc.paths.paths.values_mut() {
            let reads = [&mut item.get, &mut item.head];
            for op in reads.into_iter().flatten() {
                refused_and_secured(op, &session);
            }
            let writes = [&mut item.post, &mut item.put, &mut item.delete, &mut item.patch];
            for op in writes.into_iter().flatten() {
                refused_and_secured(op, &both);
            }
        }
    }
}

fn refused_and_secured(op: &mut Operation, security: &SecurityRequirement) {
    op.responses.responses.insert("default".into(), RefOr::Ref(Ref::from_response_name("Refusal")));
    op.security = Some(vec![security.clone()]);
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    /// `(METHOD, path)` of every `/api/v1` route the routers register, read
    /// from their source: a route added without its annotation, or an
    /// annotation whose route is gone, fails here.
    fn registered() -> BTreeSet<(String, String)> {
        let sources = [
            include_str!("routes/api.rs"),
            include_str!("routes/agent.rs"),
            include_str!("routes/runtime.rs"),
            include_str!("routes/resources.rs"),
            include_str!("routes/egress.rs"),
            include_str!("routes/import.rs"),
            include_str!("routes/cases.rs"),
            include_str!("routes/export.rs"),
            include_str!("routes/tools.rs"),
        ];
        let mut out = BTreeSet::new();
        for source in sources {
            let flat = source.split_whitespace().collect::<Vec<_>>().join(" ").replace(".route( \"", ".route(\"");
            for part in flat.split(".route(\"").skip(1) {
                let Some((path, rest)) = part.split_once('"') else { continue };
                if !path.starts_with("/api/v1/") {
                    continue;
                }
                // The handlers of this route: the rest of the `.route(` call.
                let mut depth = 0i32;
                let end = rest
                    .char_indices()
                    .find(|&(_, c)| {
                        depth += match c {
                            '(' => 1,
                            ')' => -1,
                            _ => 0,
                        };
                        depth < 0
                    })
                    .map_or(rest.len(), |(i, _)| i);
                let handlers = &rest[..end];
                for method in ["get", "post", "delete", "put", "patch"] {
                    let called = handlers.match_indices(&format!("{method}(")).any(|(i, _)| {
                        i == 0
                            || !(handlers.as_bytes()[i - 1].is_ascii_alphanumeric()
                                || handlers.as_bytes()[i - 1] == b'_')
                    });
                    if called {
                        out.insert((method.to_uppercase(), path.to_owned()));
                    }
                }
            }
        }
        out
    }

    fn documented(doc: &utoipa::openapi::OpenApi) -> BTreeSet<(String, String)> {
        let mut out = BTreeSet::new();
        for (path, item) in &doc.paths.paths {
            let ops = [("GET", &item.get), ("POST", &item.post), ("DELETE", &item.delete), ("PUT", &item.put)];
            for (method, op) in ops {
                if op.is_some() {
                    out.insert((method.to_owned(), path.clone()));
                }
            }
        }
        out
    }

    #[test]
    fn every_route_is_documented_and_nothing_else() {
        let doc = crate::routes::openapi();
        let (routes, documented) = (registered(), documented(&doc));
        assert!(routes.len() > 50, "the route reader found only {routes:?}");
        let missing: Vec<_> = routes.difference(&documented).collect();
        let stale: Vec<_> = documented.difference(&routes).collect();
        assert!(missing.is_empty(), "routes without an OpenAPI annotation: {missing:?}");
        assert!(stale.is_empty(), "documented routes no router registers: {stale:?}");
    }

    #[test]
    fn every_operation_refuses_in_the_one_format_and_is_secured() {
        let doc = serde_json::to_value(crate::routes::openapi()).unwrap();
        assert_eq!(doc["openapi"], "3.1.0");
        assert_eq!(doc["components"]["schemas"]["Refusal"]["required"], serde_json::json!(["error"]));
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                let what = format!("{method} {path}");
                assert_eq!(op["responses"]["default"]["$ref"], "#/components/responses/Refusal", "{what}");
                let codes: Vec<&String> = op["responses"].as_object().unwrap().keys().collect();
                assert!(codes.iter().any(|c| c.starts_with('2')), "{what}: no success status in {codes:?}");
                let security = op["security"][0].as_object().unwrap();
                assert!(security.contains_key("session"), "{what}");
                assert_eq!(security.contains_key("csrf"), method != "get", "{what}");
            }
        }
        // Request bodies are closed as the server reads them.
        let note = &doc["components"]["schemas"]["NewNote"];
        assert_eq!(note["additionalProperties"], false, "{note}");
        assert_eq!(note["required"], serde_json::json!(["title", "content"]), "{note}");
    }
}
