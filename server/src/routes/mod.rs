//! HTTP handlers, one module per endpoint group.

pub mod batch;
pub mod dialect;
pub mod error_layer;
pub mod health;
pub mod ops;
pub mod rerank;
pub mod search;
pub mod sessions;
pub mod visit;

use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, FromRequestParts, RawPathParams, Request};
use axum::http::Uri;
use axum::http::request::Parts;

use crate::access::Caller;
use crate::error::{ApiError, ErrorCode};
use crate::session::SessionId;

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
            // (Body size is checked before extraction, by `ops::observe`.)
            Err(rejection) => Err(match rejection {
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

/// Header that carries the session for clients that cannot add a body field.
pub const SESSION_HEADER: &str = "x-session-id";

/// The session as the URL path (`/s/{session}/...`) and the `X-Session-Id` header give it; a
/// handler combines them with its body field through [`SessionSources::resolve`].
#[derive(Debug, Clone)]
pub struct SessionSources {
    path: Option<String>,
    header: Option<String>,
    /// Whose namespace the session is in (set by `ops::observe` from the API key; the open
    /// namespace on a route it does not observe).
    caller: Caller,
}

impl<S: Send + Sync> FromRequestParts<S> for SessionSources {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        // A `/s/{session}` prefix that does not decode (`/s/%FF/...`) is refused, not dropped:
        // dropping it would run the request outside the session the caller named.
        let params = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::invalid(format!("the path's session: {}", e.body_text())))?;
        let path = params
            .iter()
            .find(|(name, _)| *name == "session")
            .map(|(_, value)| value.to_string());
        let header = match parts.headers.get(SESSION_HEADER) {
            None => None,
            Some(value) => Some(
                value
                    .to_str()
                    .map_err(|_| ApiError::invalid("`X-Session-Id` is not valid text"))?
                    .to_string(),
            ),
        };
        Ok(SessionSources {
            path,
            header,
            caller: parts
                .extensions
                .get::<Caller>()
                .cloned()
                .unwrap_or_else(Caller::open),
        })
    }
}

impl SessionSources {
    /// The one session the request names (body field, header or path prefix), validated, in
    /// the caller's namespace; an error if they name different sessions.
    pub fn resolve(&self, body: Option<&str>) -> Result<Option<SessionId>, ApiError> {
        let named: Vec<(&str, &str)> = [
            ("body field `session`", body),
            ("header `X-Session-Id`", self.header.as_deref()),
            ("path prefix `/s/{session}`", self.path.as_deref()),
        ]
        .into_iter()
        .filter_map(|(source, id)| id.map(|id| (source, id)))
        .collect();
        if let Some((first_source, first)) = named.first()
            && let Some((other_source, other)) = named.iter().find(|(_, id)| id != first)
        {
            return Err(ApiError::invalid(format!(
                "conflicting sessions: {first_source} says `{first}`, {other_source} says `{other}`"
            )));
        }
        Ok(
            crate::service::limits::check_session(named.first().map(|(_, id)| *id))?
                .map(|id| self.session(id)),
        )
    }

    /// `id` (validated) in the caller's namespace.
    pub fn session(&self, id: &str) -> SessionId {
        SessionId::new(self.caller(), id)
    }

    /// Who sent the request (the open namespace when the server takes no keys).
    pub fn caller(&self) -> &Caller {
        &self.caller
    }
}
