//! Which API a route imitates ([`Dialect`], by its path prefix), and how an API writes its
//! errors ([`ErrorDialect`]: status and body for every [`ErrorCode`]). The compatible APIs'
//! modules (`compat/`) each implement [`ErrorDialect`]; `in_dialect`, the router's outermost
//! layer, picks the one for a route. Nothing here knows any compatible module, so they stay
//! leaves of the module tree.

use axum::Json;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::error::{ApiError, ErrorCode};

/// Header naming the stable error code on every error response, whatever the body's dialect.
pub const ERROR_CODE_HEADER: HeaderName = HeaderName::from_static("x-stillweb-error");

/// How one API answers errors: its HTTP status for each of the service's [`ErrorCode`]s, and
/// its body. Every implementation maps every code by an exhaustive match (no fallback arm), so a
/// new code does not compile until each API's vocabulary has a place for it.
pub trait ErrorDialect: Sync {
    /// The status this API answers `code` with (by default the native one).
    fn status(&self, code: ErrorCode) -> StatusCode {
        native_status(code)
    }

    /// The body of an error `code` answered with `status`.
    fn body(&self, code: ErrorCode, status: StatusCode, message: &str) -> Value;

    /// `e` as this API would answer it.
    fn render(&self, e: &ApiError) -> Response {
        self.respond(self.status(e.code), e.code, &e.message)
    }

    /// An error body of this API with the given status, and the stable code in
    /// `X-Stillweb-Error`.
    fn respond(&self, status: StatusCode, code: ErrorCode, message: &str) -> Response {
        let mut response = (status, Json(self.body(code, status, message))).into_response();
        response
            .headers_mut()
            .insert(ERROR_CODE_HEADER, HeaderValue::from_static(code.as_str()));
        response
    }
}

/// The native API's status for each code.
pub fn native_status(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::InvalidRequest => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorCode::SessionRequired => StatusCode::BAD_REQUEST,
        ErrorCode::UrlNotSeen => StatusCode::FORBIDDEN,
        ErrorCode::UrlNotFound => StatusCode::NOT_FOUND,
        ErrorCode::SessionNotFound => StatusCode::NOT_FOUND,
        ErrorCode::CollectionNotFound => StatusCode::NOT_FOUND,
        ErrorCode::RouteNotFound => StatusCode::NOT_FOUND,
        ErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
        ErrorCode::RerankUnavailable => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorCode::Overloaded | ErrorCode::RateLimited => StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::Unauthorized => StatusCode::UNAUTHORIZED,
        ErrorCode::Forbidden => StatusCode::FORBIDDEN,
        ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::Timeout => StatusCode::GATEWAY_TIMEOUT,
        ErrorCode::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
        ErrorCode::NotReady | ErrorCode::ShardUnavailable | ErrorCode::SessionStoreUnavailable => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        ErrorCode::ReloadRefused => StatusCode::CONFLICT,
        ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// The native API: `{"error": {"code": "url_not_seen", "message": "..."}}`.
#[derive(Debug, Clone, Copy)]
pub struct Native;

impl ErrorDialect for Native {
    fn body(&self, code: ErrorCode, _status: StatusCode, message: &str) -> Value {
        json!({"error": {"code": code, "message": message}})
    }
}

/// The API a route speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    Native,
    SearchR1,
    Serper,
    Brave,
    Tavily,
    Exa,
    Jina,
    Mcp,
}

impl Dialect {
    /// Every dialect (the error-body snapshot test goes through each).
    pub const ALL: [Dialect; 8] = [
        Dialect::Native,
        Dialect::SearchR1,
        Dialect::Serper,
        Dialect::Brave,
        Dialect::Tavily,
        Dialect::Exa,
        Dialect::Jina,
        Dialect::Mcp,
    ];

    /// The dialect of the route `path` belongs to, by its first segment after an optional
    /// `/s/{session}` prefix.
    pub fn of(path: &str) -> Dialect {
        // Past the `/c/{collection}` and `/s/{session}` prefixes, in that order.
        let mut rest = path.trim_start_matches('/');
        for prefix in ["c/", "s/"] {
            if let Some(after) = rest.strip_prefix(prefix) {
                rest = after.split_once('/').map_or("", |(_, rest)| rest);
            }
        }
        match rest.split('/').next().unwrap_or_default() {
            "retrieve" | "access" | "search-r1" => Dialect::SearchR1,
            "serper" => Dialect::Serper,
            "brave" => Dialect::Brave,
            "tavily" => Dialect::Tavily,
            "exa" => Dialect::Exa,
            "jina" => Dialect::Jina,
            "mcp" => Dialect::Mcp,
            _ => Dialect::Native,
        }
    }
}

impl IntoResponse for ApiError {
    /// The native body; the error also rides along as a response extension, so that
    /// `in_dialect` (the router's outermost layer) can write it in the shape of the route it
    /// answers.
    fn into_response(self) -> Response {
        let mut response = Native.render(&self);
        response.extensions_mut().insert(self);
        response
    }
}

#[cfg(test)]
mod tests {
    use super::Dialect;

    #[test]
    fn routes_are_read_by_their_prefix() {
        assert_eq!(Dialect::of("/retrieve"), Dialect::SearchR1);
        assert_eq!(Dialect::of("/s/ep-1/search-r1/retrieve"), Dialect::SearchR1);
        assert_eq!(Dialect::of("/s/ep-1/serper/nope"), Dialect::Serper);
        assert_eq!(Dialect::of("/tavily/extract"), Dialect::Tavily);
        assert_eq!(Dialect::of("/mcp"), Dialect::Mcp);
        assert_eq!(Dialect::of("/v1/search"), Dialect::Native);
        assert_eq!(Dialect::of("/s/x"), Dialect::Native);
        assert_eq!(Dialect::of("/c/scholar/serper/scholar"), Dialect::Serper);
        assert_eq!(Dialect::of("/c/web/s/ep-1/retrieve"), Dialect::SearchR1);
        assert_eq!(Dialect::of("/c/web/mcp"), Dialect::Mcp);
        assert_eq!(Dialect::of("/"), Dialect::Native);
    }
}
