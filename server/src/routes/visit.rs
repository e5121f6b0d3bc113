//! `POST /v1/visit`: visit_web, limited to URLs the session has been shown.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use stillweb_corpus::url_norm::normalize_url;

use super::{ApiJson, SessionSources};
use crate::error::{ApiError, ErrorCode};
use crate::state::AppState;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VisitRequest {
    pub url: String,
    #[serde(default)]
    pub session: Option<String>,
}

#[derive(Debug, Serialize)]
pub struct VisitResponse {
    pub title: String,
    pub url: String,
    pub date: String,
    pub text: String,
}

pub async fn visit(
    State(state): State<AppState>,
    sources: SessionSources,
    ApiJson(request): ApiJson<VisitRequest>,
) -> Result<Json<VisitResponse>, ApiError> {
    let Some(session) = sources.resolve(request.session.as_deref())? else {
        return Err(ApiError::new(
            ErrorCode::SessionRequired,
            "visits need the session whose search results showed the URL (body field `session`, \
             header `X-Session-Id` or path prefix `/s/{session}`)",
        ));
    };
    visit_recorded(&state, &session, &request.url)
        .await
        .map(Json)
}

/// [`visit_page`], with the attempt and its outcome (`ok` or the error code) written to the
/// session's transcript. Every endpoint that visits goes through here.
pub async fn visit_recorded(
    state: &AppState,
    session: &str,
    url: &str,
) -> Result<VisitResponse, ApiError> {
    // An over-long URL is refused before anything is kept of it.
    super::check_kept("`url`", url, super::MAX_URL_CHARS)?;
    let result = visit_page(state, session, url).await;
    let outcome = match &result {
        Ok(_) => "ok".to_string(),
        Err(e) => e.code.name(),
    };
    state
        .sessions
        .record_visit(session, url, &outcome, SystemTime::now());
    result
}

/// The page at `url`, if it is in the corpus and `session` was shown it.
pub async fn visit_page(
    state: &AppState,
    session: &str,
    url: &str,
) -> Result<VisitResponse, ApiError> {
    let key = normalize_url(url).map_err(|e| ApiError::invalid(format!("`url`: {e}")))?;
    let index = Arc::clone(state.retriever.index());
    let lookup_key = key.clone();
    let doc = state
        .pool
        .run(move || index.doc_by_url(&lookup_key).map_err(ApiError::internal))
        .await?;
    let Some(doc) = doc else {
        return Err(ApiError::new(
            ErrorCode::UrlNotFound,
            format!("{url} is not in this corpus"),
        ));
    };
    if !state.sessions.has_seen(session, &key, Instant::now()) {
        return Err(ApiError::new(
            ErrorCode::UrlNotSeen,
            format!(
                "{url} was not in any search result shown to session `{session}`; search for it first"
            ),
        ));
    }
    Ok(VisitResponse {
        title: doc.title,
        url: doc.url,
        date: doc.date,
        text: doc.text,
    })
}
