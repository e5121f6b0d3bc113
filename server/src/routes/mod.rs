//! HTTP handlers, one module per endpoint group.

pub mod health;
pub mod search;
pub mod visit;

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::{StatusCode, Uri};

use crate::error::{ApiError, ErrorCode};

/// A JSON body extractor whose rejections use the API's error body.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApiJson<T>(pub T);

impl<S, T> FromRequest<S> for ApiJson<T>
where
    axum::Json<T>: FromRequest<S, Rejection = JsonRejection>,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(value)) => Ok(ApiJson(value)),
            Err(rejection) => Err(match rejection {
                _ if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                    ApiError::new(ErrorCode::PayloadTooLarge, "request body is too large")
                }
                JsonRejection::MissingJsonContentType(_) => {
                    ApiError::invalid("expected a JSON body with `Content-Type: application/json`")
                }
                other => ApiError::invalid(other.body_text()),
            }),
        }
    }
}

/// Answers unknown paths with the API's error body.
pub async fn fallback(uri: Uri) -> ApiError {
    ApiError::new(
        ErrorCode::RouteNotFound,
        format!(
            "no endpoint at {}; see openapi.yaml for the API",
            uri.path()
        ),
    )
}

/// Checks an optional session id from a request.
pub fn check_session(session: Option<&str>) -> Result<Option<&str>, ApiError> {
    match session {
        None => Ok(None),
        Some(id) if crate::session::valid_session_id(id) => Ok(Some(id)),
        Some(_) => Err(ApiError::invalid(format!(
            "`session` must be 1 to {} characters of letters, digits, '.', '_', ':' or '-'",
            crate::session::MAX_SESSION_ID_LEN
        ))),
    }
}
