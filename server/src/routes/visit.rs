//! `POST /v1/visit`: visit_web, limited to URLs the session has been shown.

use std::time::Instant;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use stillweb_corpus::url_norm::normalize_url;

use super::{ApiJson, check_session};
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
    ApiJson(request): ApiJson<VisitRequest>,
) -> Result<Json<VisitResponse>, ApiError> {
    let Some(session) = check_session(request.session.as_deref())?.map(str::to_string) else {
        return Err(ApiError::new(
            ErrorCode::SessionRequired,
            "visits need the `session` whose search results showed the URL",
        ));
    };
    let key = normalize_url(&request.url).map_err(|e| ApiError::invalid(format!("`url`: {e}")))?;
    let index = state.index.clone();
    let lookup_key = key.clone();
    let doc = state
        .pool
        .run(move || index.doc_by_url(&lookup_key).map_err(ApiError::internal))
        .await?;
    let Some(doc) = doc else {
        return Err(ApiError::new(
            ErrorCode::UrlNotFound,
            format!("{} is not in this corpus", request.url),
        ));
    };
    if !state.sessions.has_seen(&session, &key, Instant::now()) {
        return Err(ApiError::new(
            ErrorCode::UrlNotSeen,
            format!(
                "{} was not in any search result shown to session `{session}`; search for it first",
                request.url
            ),
        ));
    }
    Ok(Json(VisitResponse {
        title: doc.title,
        url: doc.url,
        date: doc.date,
        text: doc.text,
    }))
}
