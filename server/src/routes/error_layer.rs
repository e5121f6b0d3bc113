//! The router's outermost layer: every error response rewritten in the dialect of the route it
//! answers, so that a client library that parses its API's error shape never meets an empty or
//! plain-text body: a handler's native [`ApiError`], an unknown path, a wrong method, a body too
//! large or too slow. Here, and only here, each [`Dialect`] is paired with its compatible
//! module's error writer.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;

use crate::compat;
use crate::error::{ApiError, ErrorCode};
use crate::routes::dialect::{Dialect, ErrorDialect, Native};

/// How the API `dialect` writes errors (each compatible module holds its own).
pub fn errors(dialect: Dialect) -> &'static dyn ErrorDialect {
    match dialect {
        Dialect::Native => &Native,
        Dialect::SearchR1 => &compat::search_r1::Errors,
        Dialect::Serper => &compat::serper::Errors,
        Dialect::Brave => &compat::brave::Errors,
        Dialect::Tavily => &compat::tavily::Errors,
        Dialect::Exa => &compat::exa::Errors,
        Dialect::Jina => &compat::jina::Errors,
        Dialect::Mcp => &compat::mcp::Errors,
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
        Some(e) => errors(dialect).render(&e),
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
            errors(dialect).respond(status, code, &message)
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
    use serde_json::{Value, json};

    use super::*;

    /// Every code's status and body in every dialect, snapshotted (`src/routes/snapshots/`): a
    /// change to any error a client library parses shows up in review. Request ids are random,
    /// so they are masked.
    #[test]
    fn every_error_in_every_dialect() {
        for dialect in Dialect::ALL {
            let errors = errors(dialect);
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
