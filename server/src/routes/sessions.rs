//! `GET /v1/sessions/{id}` (the session's transcript) and `DELETE /v1/sessions/{id}` (end it),
//! for sessions in the caller's namespace: under API keys, another key's `e1` is not found.

use axum::Json;
use axum::extract::{RawPathParams, State};
use axum::http::StatusCode;

use crate::error::{ApiError, ErrorCode};
use crate::routes::SessionSources;
use crate::service::limits::check_session;
use crate::session::Transcript;
use crate::state::AppState;

fn not_found(id: &str) -> ApiError {
    ApiError::new(
        ErrorCode::SessionNotFound,
        format!("no session `{id}`: it never searched, expired after its idle time, or was ended"),
    )
}

/// The `{id}` path parameter (under `/s/{session}/` there is a second one, which names the
/// caller's session, not the one asked about).
fn id_param(params: &RawPathParams) -> String {
    params
        .iter()
        .find(|(name, _)| *name == "id")
        .map(|(_, value)| value.to_string())
        .unwrap_or_default()
}

pub async fn transcript(
    State(state): State<AppState>,
    sources: SessionSources,
    params: RawPathParams,
) -> Result<Json<Transcript>, ApiError> {
    let id = id_param(&params);
    check_session(Some(&id))?;
    state
        .sessions
        .transcript(&sources.session(&id))
        .await?
        .map(Json)
        .ok_or_else(|| not_found(&id))
}

pub async fn end(
    State(state): State<AppState>,
    sources: SessionSources,
    params: RawPathParams,
) -> Result<StatusCode, ApiError> {
    let id = id_param(&params);
    check_session(Some(&id))?;
    if state.sessions.end(&sources.session(&id)).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(not_found(&id))
    }
}
