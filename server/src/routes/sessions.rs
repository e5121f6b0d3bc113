//! `GET /v1/sessions` (the caller's live sessions), `GET /v1/sessions/{id}` (a transcript) and
//! `DELETE /v1/sessions/{id}` (end it), for sessions in the caller's namespace: under API keys,
//! another key's `e1` is neither listed nor found.

use axum::Json;
use axum::extract::{Query, RawPathParams, State};
use axum::http::StatusCode;

use serde::{Deserialize, Serialize};

use crate::access::Caller;
use crate::error::{ApiError, ErrorCode};
use crate::gold::TranscriptLabels;
use crate::routes::SessionSources;
use crate::service::limits::check_session;
use crate::session::{SessionId, Transcript};
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

/// Most sessions one listing returns.
const MAX_LISTED: usize = 1000;

/// `GET /v1/sessions`: the caller's live sessions, most recently used first; an operator key's
/// listing holds every key's, each with its `key`.
pub async fn list(
    State(state): State<AppState>,
    sources: SessionSources,
) -> Result<Json<serde_json::Value>, ApiError> {
    let caller = sources.caller();
    let namespace = (!caller.operator).then_some(&*caller.namespace);
    let sessions = state.sessions.recent(namespace, MAX_LISTED).await?;
    Ok(Json(serde_json::json!({
        "sessions": sessions
            .into_iter()
            .map(|s| {
                let mut item = serde_json::json!({"session": s.session, "last_used": s.last_used});
                if caller.operator {
                    item["key"] = s.namespace.into();
                }
                item
            })
            .collect::<Vec<_>>(),
    })))
}

/// `?key=NAME`: another key's session, for an operator key.
#[derive(Debug, Deserialize)]
pub struct OfKey {
    pub key: Option<String>,
}

/// Session `id` of the namespace the request asks for: its own, or (an operator's) `?key=`'s.
fn asked(sources: &SessionSources, of: &OfKey, id: &str) -> Result<SessionId, ApiError> {
    let caller = sources.caller();
    match &of.key {
        Some(key) if key.as_str() != &*caller.namespace => {
            if !crate::access::valid_name(key) {
                return Err(ApiError::invalid(
                    "`key` is an API key's name: 1 to 64 letters, digits, '.', '_' or '-'",
                ));
            }
            if !caller.operator {
                return Err(ApiError::new(
                    ErrorCode::Forbidden,
                    "only an operator key may read or end another key's sessions (`?key=`)",
                ));
            }
            Ok(SessionId::new(
                &Caller {
                    namespace: key.as_str().into(),
                    operator: false,
                },
                id,
            ))
        }
        _ => Ok(sources.session(id)),
    }
}

/// A transcript, with its labels when the server has `--gold`.
#[derive(Debug, Serialize)]
pub struct LabelledTranscript {
    #[serde(flatten)]
    pub transcript: Transcript,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub labels: Option<TranscriptLabels>,
}

pub async fn transcript(
    State(state): State<AppState>,
    sources: SessionSources,
    Query(of): Query<OfKey>,
    params: RawPathParams,
) -> Result<Json<LabelledTranscript>, ApiError> {
    let id = id_param(&params);
    check_session(Some(&id))?;
    let transcript = state
        .sessions
        .transcript(&asked(&sources, &of, &id)?)
        .await?
        .ok_or_else(|| not_found(&id))?;
    let labels = state.config.gold.as_ref().map(|g| g.label(&transcript));
    Ok(Json(LabelledTranscript { transcript, labels }))
}

pub async fn end(
    State(state): State<AppState>,
    sources: SessionSources,
    Query(of): Query<OfKey>,
    params: RawPathParams,
) -> Result<StatusCode, ApiError> {
    let id = id_param(&params);
    check_session(Some(&id))?;
    if state.sessions.end(&asked(&sources, &of, &id)?).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(not_found(&id))
    }
}
