//! `GET /v1/sessions` (the caller's live sessions), `GET /v1/sessions/{id}` (a transcript),
//! `PUT /v1/sessions/{id}` (pin it to an as-of date) and `DELETE /v1/sessions/{id}` (end it),
//! for sessions in the caller's namespace: under API keys, another key's `e1` is neither listed
//! nor found.

use axum::Json;
use axum::extract::{Query, RawPathParams, State};
use axum::http::StatusCode;

use serde::{Deserialize, Serialize};

use stillweb_corpus::date::{as_of_cutoff, rfc3339};

use crate::access::Caller;
use crate::error::{ApiError, ErrorCode};
use crate::gold::TranscriptLabels;
use crate::routes::{ApiJson, SessionSources};
use crate::service::limits::check_session;
use crate::session::{Pin, SessionId, Transcript};
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
                    sees_before: None,
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

/// `PUT /v1/sessions/{id}`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinRequest {
    /// The day (`YYYY-MM-DD`, itself included) or ISO 8601 instant the session sees the web as
    /// of.
    pub as_of: String,
}

/// `PUT /v1/sessions/{id}`: pins the session (starting it if new) to the web as of a date, as
/// an evaluation does for a question asked on that date: no page dated later is searched or
/// visited in it, in any API. The same pin again is a no-op (a retried call succeeds); a pin
/// never moves, so another date is refused.
pub async fn pin(
    State(state): State<AppState>,
    sources: SessionSources,
    Query(of): Query<OfKey>,
    params: RawPathParams,
    ApiJson(request): ApiJson<PinRequest>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let id = id_param(&params);
    check_session(Some(&id))?;
    let wanted = Pin {
        sees_before: as_of_cutoff(&request.as_of)
            .map_err(|e| ApiError::invalid(format!("`as_of`: {e}")))?,
        as_of: request.as_of.trim().to_string(),
    };
    let session = asked(&sources, &of, &id)?;
    let held = state.sessions.pin(&session, wanted.clone()).await?;
    if held.sees_before != wanted.sees_before {
        return Err(ApiError::invalid(format!(
            "session `{id}` is pinned to `{}` already, and a pin never moves; start another session for `{}`",
            held.as_of, wanted.as_of
        )));
    }
    Ok(Json(serde_json::json!({
        "session": id,
        "as_of": held.as_of,
        "sees_before": rfc3339(held.sees_before),
    })))
}
