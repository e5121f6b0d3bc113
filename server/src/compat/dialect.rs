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

    /// `e` as this API would answer it.
    pub fn error(self, e: &ApiError) -> Response {
        let status = match (self, e.code) {
            // Tavily and Exa answer bad requests with 400 (their clients map it to their own
            // exception types).
            (Dialect::Tavily, ErrorCode::InvalidRequest | ErrorCode::SessionRequired)
            | (Dialect::Exa, ErrorCode::InvalidRequest) => StatusCode::BAD_REQUEST,
            (_, code) => code.status(),
        };
        self.respond(status, e.code, &e.message)
    }

    /// An error body in this dialect with the given status.
    pub fn respond(self, status: StatusCode, code: ErrorCode, message: &str) -> Response {
        let body = match self {
            Dialect::Native => json!({"error": {"code": code, "message": message}}),
            // FastAPI's shape.
            Dialect::SearchR1 => json!({"detail": message}),
            Dialect::Serper => json!({"message": message, "statusCode": status.as_u16()}),
            Dialect::Brave => json!({
                "type": "ErrorResponse",
                "error": {
                    "id": crate::ids::request_id(),
                    "status": status.as_u16(),
                    "code": match code {
                        ErrorCode::InvalidRequest => "VALIDATION",
                        ErrorCode::Timeout | ErrorCode::BodyTimeout => "TIMEOUT",
                        ErrorCode::Overloaded => "RATE_LIMITED",
                        ErrorCode::RouteNotFound => "RESOURCE_NOT_FOUND",
                        _ => "GENERIC",
                    },
                    "detail": message,
                    "meta": {"component": "stillweb"},
                },
            }),
            Dialect::Tavily => json!({"detail": {"error": message}}),
            Dialect::Exa => json!({
                "requestId": crate::ids::request_id(),
                "error": message,
                "tag": match code {
                    ErrorCode::InvalidRequest => "INVALID_REQUEST_BODY",
                    ErrorCode::Timeout | ErrorCode::BodyTimeout => "TIMEOUT",
                    ErrorCode::RouteNotFound => "NOT_FOUND",
                    _ => "INTERNAL_ERROR",
                },
            }),
            Dialect::Jina => {
                let name = match code {
                    ErrorCode::UrlNotSeen => "SecurityCompromiseError",
                    ErrorCode::UrlNotFound | ErrorCode::RouteNotFound => "AssertionFailureError",
                    ErrorCode::SessionRequired | ErrorCode::InvalidRequest => {
                        "ParamValidationError"
                    }
                    _ => "ServiceError",
                };
                json!({
                    "data": null,
                    "code": status.as_u16(),
                    "name": name,
                    "status": u32::from(status.as_u16()) * 100,
                    "message": message,
                    "readableMessage": format!("{name}: {message}"),
                })
            }
            // A JSON-RPC error answering no particular request.
            Dialect::Mcp => json!({
                "jsonrpc": "2.0",
                "id": Value::Null,
                "error": {
                    "code": if status.is_server_error() { -32603 } else { -32600 },
                    "message": message,
                },
            }),
        };
        let mut response = (status, Json(body)).into_response();
        response
            .headers_mut()
            .insert(ERROR_CODE_HEADER, HeaderValue::from_static(code.as_str()));
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
}
