//! HTTP errors in one place (STYLE 6): every refusal is `{error:{code,message}}`.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use labfy_core::ErrorKind;
use labfy_store::StoreError;
use serde_json::json;

/// Longest message an error body carries.
pub const MAX_ERROR_MESSAGE_CHARS: usize = 512;

/// An API refusal or failure.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    message: String,
    retry_after: Option<u64>,
}

impl ApiError {
    /// A refusal with an explicit status, code and message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self { status, code, message: message.into(), retry_after: None }
    }

    /// 400: the input is wrong.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, ErrorKind::InvalidInput.code(), message)
    }

    /// A refusal of `kind`, with the status that kind always has.
    pub fn of_kind(kind: ErrorKind, message: impl Into<String>) -> Self {
        let message: String = message.into();
        let status = match kind {
            ErrorKind::InvalidInput => StatusCode::BAD_REQUEST,
            ErrorKind::NotFound => StatusCode::NOT_FOUND,
            ErrorKind::Conflict => StatusCode::CONFLICT,
            ErrorKind::Forbidden => StatusCode::FORBIDDEN,
            ErrorKind::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            ErrorKind::Storage => StatusCode::INTERNAL_SERVER_ERROR,
            ErrorKind::Internal => return Self::internal(&message),
        };
        Self::new(status, kind.code(), message)
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, ErrorKind::NotFound.code(), message)
    }

    /// 429 with `Retry-After` in whole seconds.
    pub fn rate_limited(retry_after_secs: u64) -> Self {
        Self {
            status: StatusCode::TOO_MANY_REQUESTS,
            code: "RATE_LIMITED",
            message: format!("too many changes in a short time; retry in {retry_after_secs} s"),
            retry_after: Some(retry_after_secs),
        }
    }

    /// 500 whose detail goes to the log only.
    pub fn internal(detail: &dyn std::fmt::Display) -> Self {
        tracing::error!(%detail, "internal error");
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, ErrorKind::Internal.code(), "internal error; see the server log")
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        if e.kind() == ErrorKind::Storage {
            // The analyst is the operator: a damaged or unusable data file is
            // worth saying plainly (it names only their own file).
            tracing::error!(error = %e, "storage failure");
        }
        Self::of_kind(e.kind(), e.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let message = labfy_core::bounded::truncate_chars(&self.message, MAX_ERROR_MESSAGE_CHARS);
        let body = json!({"error": {"code": self.code, "message": message}});
        let mut response = (self.status, Json(body)).into_response();
        if let Some(secs) = self.retry_after {
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

/// Result alias of handlers.
pub type ApiResult<T> = Result<T, ApiError>;
