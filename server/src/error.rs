//! The API's error vocabulary: one small code enum, mapped to HTTP status by an exhaustive match,
//! and one stable body: `{"error": {"code": "url_not_seen", "message": "..."}}`.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// Stable, machine-readable error codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The request is malformed or a parameter is out of range.
    InvalidRequest,
    /// The endpoint needs a session and none was given.
    SessionRequired,
    /// The URL exists in the corpus but was not shown to this session.
    UrlNotSeen,
    /// The URL is not in the corpus.
    UrlNotFound,
    /// No such session (never used, expired, or ended).
    SessionNotFound,
    /// No such endpoint.
    RouteNotFound,
    /// The endpoint exists but does not answer this HTTP method (see the `Allow` header).
    MethodNotAllowed,
    /// The request asks for reranking but the server has no reranker.
    RerankUnavailable,
    /// The server is at its concurrency limit; retry after the `Retry-After` seconds.
    Overloaded,
    /// The request body is larger than the server accepts.
    PayloadTooLarge,
    /// The request did not finish within the request timeout.
    Timeout,
    /// The client did not send its request body within the body read timeout.
    BodyTimeout,
    /// The server is starting or shutting down.
    NotReady,
    /// A bug or an I/O failure; details are in the server log.
    Internal,
}

impl ErrorCode {
    /// The code as it appears in error bodies (`url_not_seen`).
    pub fn name(self) -> String {
        self.as_str().to_string()
    }

    /// The code as it appears in error bodies and the `X-Stillweb-Error` header.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::SessionRequired => "session_required",
            ErrorCode::UrlNotSeen => "url_not_seen",
            ErrorCode::UrlNotFound => "url_not_found",
            ErrorCode::SessionNotFound => "session_not_found",
            ErrorCode::RouteNotFound => "route_not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::RerankUnavailable => "rerank_unavailable",
            ErrorCode::Overloaded => "overloaded",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::Timeout => "timeout",
            ErrorCode::BodyTimeout => "body_timeout",
            ErrorCode::NotReady => "not_ready",
            ErrorCode::Internal => "internal",
        }
    }

    /// Every code, in declaration order (checked against `openapi.yaml` by a test).
    pub const ALL: [ErrorCode; 14] = [
        ErrorCode::InvalidRequest,
        ErrorCode::SessionRequired,
        ErrorCode::UrlNotSeen,
        ErrorCode::UrlNotFound,
        ErrorCode::SessionNotFound,
        ErrorCode::RouteNotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::RerankUnavailable,
        ErrorCode::Overloaded,
        ErrorCode::PayloadTooLarge,
        ErrorCode::Timeout,
        ErrorCode::BodyTimeout,
        ErrorCode::NotReady,
        ErrorCode::Internal,
    ];

    pub fn status(self) -> StatusCode {
        match self {
            ErrorCode::InvalidRequest => StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::SessionRequired => StatusCode::BAD_REQUEST,
            ErrorCode::UrlNotSeen => StatusCode::FORBIDDEN,
            ErrorCode::UrlNotFound => StatusCode::NOT_FOUND,
            ErrorCode::SessionNotFound => StatusCode::NOT_FOUND,
            ErrorCode::RouteNotFound => StatusCode::NOT_FOUND,
            ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ErrorCode::RerankUnavailable => StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::Overloaded => StatusCode::TOO_MANY_REQUESTS,
            ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ErrorCode::Timeout => StatusCode::GATEWAY_TIMEOUT,
            ErrorCode::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
            ErrorCode::NotReady => StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// An error answered to the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub code: ErrorCode,
    pub message: String,
}

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(ErrorCode::InvalidRequest, message)
    }

    /// Logs the cause and answers a generic message: internals stay out of responses.
    pub fn internal(cause: impl std::fmt::Display) -> ApiError {
        tracing::error!(error = %cause, "internal error");
        ApiError::new(
            ErrorCode::Internal,
            "internal error; the cause is in the server log",
        )
    }
}

/// The error body: `{"error": {"code": ..., "message": ...}}`.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Clone, Serialize)]
pub struct ErrorDetail {
    pub code: ErrorCode,
    pub message: String,
}

impl ApiError {
    pub fn body(self) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                code: self.code,
                message: self.message,
            },
        }
    }
}

impl IntoResponse for ApiError {
    /// The native body; the error also rides along as a response extension, so that
    /// [`crate::compat::dialect::in_dialect`] can write it in the shape of the route it answers.
    fn into_response(self) -> Response {
        let status = self.code.status();
        let mut response = (status, Json(self.clone().body())).into_response();
        response.headers_mut().insert(
            crate::compat::dialect::ERROR_CODE_HEADER,
            axum::http::HeaderValue::from_static(self.code.as_str()),
        );
        response.extensions_mut().insert(self);
        response
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorCode;

    /// Adding a variant breaks this match, which is the reminder to extend `ALL`.
    fn position(code: ErrorCode) -> usize {
        match code {
            ErrorCode::InvalidRequest => 0,
            ErrorCode::SessionRequired => 1,
            ErrorCode::UrlNotSeen => 2,
            ErrorCode::UrlNotFound => 3,
            ErrorCode::SessionNotFound => 4,
            ErrorCode::RouteNotFound => 5,
            ErrorCode::MethodNotAllowed => 6,
            ErrorCode::RerankUnavailable => 7,
            ErrorCode::Overloaded => 8,
            ErrorCode::PayloadTooLarge => 9,
            ErrorCode::Timeout => 10,
            ErrorCode::BodyTimeout => 11,
            ErrorCode::NotReady => 12,
            ErrorCode::Internal => 13,
        }
    }

    #[test]
    fn all_lists_every_code_once() {
        for (i, code) in ErrorCode::ALL.iter().enumerate() {
            assert_eq!(position(*code), i);
            // The hand-written names are the serialised ones.
            assert_eq!(serde_json::json!(code), code.as_str());
        }
    }
}
