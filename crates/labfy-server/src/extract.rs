//! Extractors whose rejections use the one error format (STYLE 6).

use axum::body::Bytes;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use labfy_core::{ObjectRef, RefError, RefKind};
use serde::de::DeserializeOwned;
use std::str::FromStr;

use crate::error::ApiError;

/// `Json<T>` whose rejections are `{error:{code,message}}`, and which
/// refuses an object holding a key twice at any depth (SPEC T5: one body,
/// one meaning — `serde_json` alone would keep the last).
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        if !json_content_type(req.headers()) {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "INVALID_INPUT",
                "Expected request with `Content-Type: application/json`",
            ));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|r| {
            ApiError::new(r.status(), "INVALID_INPUT", labfy_core::bounded::truncate_chars(&r.body_text(), 300))
        })?;
        let axum::Json(value) = axum::Json::<T>::from_bytes(&bytes).map_err(json_rejection)?;
        labfy_core::json::check_unique_keys(&bytes).map_err(|e| {
            ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "INVALID_INPUT",
                labfy_core::bounded::truncate_chars(&e, 300),
            )
        })?;
        Ok(Self(value))
    }
}

/// `application/json` or `application/<something>+json`, parameters allowed.
fn json_content_type(headers: &axum::http::HeaderMap) -> bool {
    let Some(value) = headers.get(axum::http::header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

fn json_rejection(r: JsonRejection) -> ApiError {
    ApiError::new(r.status(), "INVALID_INPUT", labfy_core::bounded::truncate_chars(&r.body_text(), 300))
}

/// `Query<T>` whose rejections are `{error:{code,message}}`.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(v)) => Ok(Self(v)),
            Err(r) => Err(query_rejection(r)),
        }
    }
}

fn query_rejection(r: QueryRejection) -> ApiError {
    ApiError::bad_request(labfy_core::bounded::truncate_chars(&r.body_text(), 300))
}

/// Parses a path segment as a reference, optionally of one required kind.
pub fn path_ref(text: &str, kind: Option<RefKind>) -> Result<ObjectRef, ApiError> {
    let parsed = match kind {
        Some(k) => ObjectRef::parse_kind(text, k),
        None => text.parse(),
    };
    parsed.map_err(|e| ApiError::bad_request(e.to_string()))
}

/// A path segment that must name one kind of object (`GrantRef`,
/// `CampaignRef`): the type says which, a refusal says why.
pub fn path_typed<T: FromStr<Err = RefError>>(text: &str) -> Result<T, ApiError> {
    text.parse().map_err(|e: RefError| ApiError::bad_request(e.to_string()))
}
