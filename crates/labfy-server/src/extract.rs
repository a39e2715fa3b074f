//! Extractors whose rejections use the one error format (STYLE 6).

use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use labfy_core::{ObjectRef, RefKind};
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// `Json<T>` whose rejections are `{error:{code,message}}`.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(Self(v)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
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
