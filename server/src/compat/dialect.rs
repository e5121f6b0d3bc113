//! Error bodies in the shape of the API a route imitates. Every error a client can get — a
//! handler's refusal, an unknown path, a wrong method, a body too large or too slow — is written
//! here, in the dialect of the route prefix it was sent to, so that a client library that parses
//! its API's error shape never meets an empty or plain-text body. [`in_dialect`] is the outermost
//! layer of the router; errors that handlers answer as native [`ApiError`]s are rewritten by it.

use axum::Json;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::middleware::Next;
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
}

/// The native API's status for each code.
pub fn native_status(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::InvalidRequest => StatusCode::UNPROCESSABLE_ENTITY,
        ErrorCode::SessionRequired => StatusCode::BAD_REQUEST,
        ErrorCode::UrlNotSeen => StatusCode::FORBIDDEN,
        ErrorCode::UrlNotFound => StatusCode::NOT_FOUND,
        ErrorCode::SessionNotFound => StatusCode::NOT_FOUND,
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
        let path = path.trim_start_matches('/');
        let rest = match path.strip_prefix("s/") {
            Some(after) => after.split_once('/').map_or("", |(_, rest)| rest),
            None => path,
        };
        match rest.split('/').next().unwrap_or_default() {
            "retrieve" | "search-r1" => Dialect::SearchR1,
            "serper" => Dialect::Serper,
            "brave" => Dialect::Brave,
            "tavily" => Dialect::Tavily,
            "exa" => Dialect::Exa,
            "jina" => Dialect::Jina,
            "mcp" => Dialect::Mcp,
            _ => Dialect::Native,
        }
    }

    /// How this API writes errors (each compatible module holds its own).
    pub fn errors(self) -> &'static dyn ErrorDialect {
        match self {
            Dialect::Native => &Native,
            Dialect::SearchR1 => &super::search_r1::Errors,
            Dialect::Serper => &super::serper::Errors,
            Dialect::Brave => &super::brave::Errors,
            Dialect::Tavily => &super::tavily::Errors,
            Dialect::Exa => &super::exa::Errors,
            Dialect::Jina => &super::jina::Errors,
            Dialect::Mcp => &super::mcp::Errors,
        }
    }

    /// `e` as this API would answer it.
    pub fn error(self, e: &ApiError) -> Response {
        self.respond(self.errors().status(e.code), e.code, &e.message)
    }

    /// An error body in this dialect with the given status, and the stable code in
    /// `X-Stillweb-Error`.
    pub fn respond(self, status: StatusCode, code: ErrorCode, message: &str) -> Response {
        let body = self.errors().body(code, status, message);
        let mut response = (status, Json(body)).into_response();
        response
            .headers_mut()
            .insert(ERROR_CODE_HEADER, HeaderValue::from_static(code.as_str()));
        response
    }
}

impl IntoResponse for ApiError {
    /// The native body; the error also rides along as a response extension, so that
    /// [`in_dialect`] can write it in the shape of the route it answers.
    fn into_response(self) -> Response {
        let mut response = Dialect::Native.error(&self);
        response.extensions_mut().insert(self);
        response
    }
}

/// The code of an error response that carries no [`ApiError`]: axum's own answers.
fn code_for(status: StatusCode) -> ErrorCode {
    match status {
        StatusCode::NOT_FOUND => ErrorCode::RouteNotFound,
        StatusCode::METHOD_NOT_ALLOWED => ErrorCode::MethodNotAllowed,
        StatusCode::REQUEST_TIMEOUT => ErrorCode::BodyTimeout,
        StatusCode::PAYLOAD_TOO_LARGE => ErrorCode::PayloadTooLarge,
        s if s.is_server_error() => ErrorCode::Internal,
        _ => ErrorCode::InvalidRequest,
    }
}

/// Rewrites every error response into the dialect of the route it was sent to: native
/// [`ApiError`]s (which carry themselves as a response extension) and axum's empty or plain-text
/// rejections (404, 405, 413, 415...). Responses that already have a JSON body are left alone.
pub async fn in_dialect(request: Request, next: Next) -> Response {
    let dialect = Dialect::of(request.uri().path());
    let method = request.method().clone();
    let path = request.uri().path().to_string();
    let response = next.run(request).await;
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let native = response.extensions().get::<ApiError>().cloned();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    // A dialect body from a compat handler, or a native error on a native route: as it is.
    if (native.is_none() && is_json) || (native.is_some() && dialect == Dialect::Native) {
        return response;
    }
    let (parts, body) = response.into_parts();
    let rewritten = match native {
        Some(e) => dialect.error(&e),
        None => {
            let code = code_for(status);
            let message = match code {
                ErrorCode::RouteNotFound => {
                    format!("no endpoint at {path}; see openapi.yaml for the API")
                }
                // axum sets `Allow` outside the route's layers, so it is not here to quote.
                ErrorCode::MethodNotAllowed => format!(
                    "{path} does not answer {method}; the `Allow` header lists the methods it does"
                ),
                // axum's other rejections say what was wrong in a short plain-text body.
                _ => {
                    let text = axum::body::to_bytes(body, 4096).await.unwrap_or_default();
                    let text = String::from_utf8_lossy(&text).trim().to_string();
                    if text.is_empty() {
                        status.canonical_reason().unwrap_or("error").to_string()
                    } else {
                        text
                    }
                }
            };
            dialect.respond(status, code, &message)
        }
    };
    // Keep the headers that are not about the old body (request id, `Allow`, `Retry-After`...).
    let (mut new_parts, new_body) = rewritten.into_parts();
    for (name, value) in &parts.headers {
        if name != header::CONTENT_TYPE
            && name != header::CONTENT_LENGTH
            && !new_parts.headers.contains_key(name)
        {
            new_parts.headers.insert(name.clone(), value.clone());
        }
    }
    Response::from_parts(new_parts, Body::new(new_body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_are_read_by_their_prefix() {
        assert_eq!(Dialect::of("/retrieve"), Dialect::SearchR1);
        assert_eq!(Dialect::of("/s/ep-1/search-r1/retrieve"), Dialect::SearchR1);
        assert_eq!(Dialect::of("/s/ep-1/serper/nope"), Dialect::Serper);
        assert_eq!(Dialect::of("/tavily/extract"), Dialect::Tavily);
        assert_eq!(Dialect::of("/mcp"), Dialect::Mcp);
        assert_eq!(Dialect::of("/v1/search"), Dialect::Native);
        assert_eq!(Dialect::of("/s/x"), Dialect::Native);
        assert_eq!(Dialect::of("/"), Dialect::Native);
    }

    /// Every code's status and body in every dialect, snapshotted (`src/compat/snapshots/`): a
    /// change to any error a client library parses shows up in review. Request ids are random,
    /// so they are masked.
    #[test]
    fn every_error_in_every_dialect() {
        for dialect in Dialect::ALL {
            let errors = dialect.errors();
            let all: Vec<Value> = ErrorCode::ALL
                .iter()
                .map(|&code| {
                    let status = errors.status(code);
                    let mut body = errors.body(code, status, "what went wrong, and what to do");
                    for pointer in ["/requestId", "/error/id"] {
                        if let Some(id) = body.pointer_mut(pointer) {
                            *id = json!("[request id]");
                        }
                    }
                    json!({"code": code, "status": status.as_u16(), "body": body})
                })
                .collect();
            insta::assert_json_snapshot!(format!("errors_{dialect:?}").to_lowercase(), all);
        }
    }
}
