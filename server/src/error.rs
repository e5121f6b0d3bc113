//! The service's error vocabulary: one small code enum and the error every service call returns.
//! No HTTP here: each API's status and body for a code are its dialect's
//! ([`crate::routes::dialect::ErrorDialect`]).

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
    /// The request names a collection the server does not serve (see `/info`).
    CollectionNotFound,
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
    /// A coordinator could reach no replica of a shard of its index within the time limit.
    ShardUnavailable,
    /// The shared session store (Redis) cannot be reached; searches and visits fail closed.
    SessionStoreUnavailable,
    /// The server takes API keys and the request carried none, or one it does not know.
    Unauthorized,
    /// The request's API key is valid but not for this endpoint (a metrics-only key, say).
    Forbidden,
    /// The request's API key is over its rate; retry after the `Retry-After` seconds.
    RateLimited,
    /// `POST /admin/reload` found the new build unfit (missing, damaged, another embedder); the
    /// build that served before keeps serving.
    ReloadRefused,
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
            ErrorCode::CollectionNotFound => "collection_not_found",
            ErrorCode::RouteNotFound => "route_not_found",
            ErrorCode::MethodNotAllowed => "method_not_allowed",
            ErrorCode::RerankUnavailable => "rerank_unavailable",
            ErrorCode::Overloaded => "overloaded",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::Timeout => "timeout",
            ErrorCode::BodyTimeout => "body_timeout",
            ErrorCode::NotReady => "not_ready",
            ErrorCode::ShardUnavailable => "shard_unavailable",
            ErrorCode::SessionStoreUnavailable => "session_store_unavailable",
            ErrorCode::Unauthorized => "unauthorized",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::RateLimited => "rate_limited",
            ErrorCode::ReloadRefused => "reload_refused",
            ErrorCode::Internal => "internal",
        }
    }

    /// Every code, in declaration order (checked against `openapi.yaml` by a test).
    pub const ALL: [ErrorCode; 21] = [
        ErrorCode::InvalidRequest,
        ErrorCode::SessionRequired,
        ErrorCode::UrlNotSeen,
        ErrorCode::UrlNotFound,
        ErrorCode::SessionNotFound,
        ErrorCode::CollectionNotFound,
        ErrorCode::RouteNotFound,
        ErrorCode::MethodNotAllowed,
        ErrorCode::RerankUnavailable,
        ErrorCode::Overloaded,
        ErrorCode::PayloadTooLarge,
        ErrorCode::Timeout,
        ErrorCode::BodyTimeout,
        ErrorCode::NotReady,
        ErrorCode::ShardUnavailable,
        ErrorCode::SessionStoreUnavailable,
        ErrorCode::Unauthorized,
        ErrorCode::Forbidden,
        ErrorCode::RateLimited,
        ErrorCode::ReloadRefused,
        ErrorCode::Internal,
    ];
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

    /// The reranker is served by a tier (`--reranker-url`) and none of its servers answered.
    pub fn rerank_unavailable(why: impl std::fmt::Display) -> ApiError {
        tracing::warn!(error = %why, "rerank tier unavailable");
        ApiError::new(
            ErrorCode::RerankUnavailable,
            format!("the reranker {why}; retry, or send \"rerank\": false"),
        )
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

/// A failure inside the index's stages: a reranker tier that did not answer is
/// `rerank_unavailable`, anything else internal.
impl From<stillweb_index::IndexError> for ApiError {
    fn from(e: stillweb_index::IndexError) -> ApiError {
        match e {
            stillweb_index::IndexError::RerankUnavailable(why) => ApiError::rerank_unavailable(why),
            e => ApiError::internal(e),
        }
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
            ErrorCode::CollectionNotFound => 5,
            ErrorCode::RouteNotFound => 6,
            ErrorCode::MethodNotAllowed => 7,
            ErrorCode::RerankUnavailable => 8,
            ErrorCode::Overloaded => 9,
            ErrorCode::PayloadTooLarge => 10,
            ErrorCode::Timeout => 11,
            ErrorCode::BodyTimeout => 12,
            ErrorCode::NotReady => 13,
            ErrorCode::ShardUnavailable => 14,
            ErrorCode::SessionStoreUnavailable => 15,
            ErrorCode::Unauthorized => 16,
            ErrorCode::Forbidden => 17,
            ErrorCode::RateLimited => 18,
            ErrorCode::ReloadRefused => 19,
            ErrorCode::Internal => 20,
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
