//! `POST /v1/visit`: visit_web, limited to URLs the session has been shown.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;

use super::{ApiJson, SessionSources};
use crate::error::{ApiError, ErrorCode};
use crate::service::{self, Page};
use crate::state::AppState;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VisitRequest {
    pub url: String,
    #[serde(default)]
    pub session: Option<String>,
    /// Also return the page's chunk spans (`chunks`).
    #[serde(default)]
    pub chunks: bool,
    /// The collection whose search showed the URL (default: the path's `/c/{name}/`, else the
    /// first).
    #[serde(default)]
    pub collection: Option<String>,
}

pub async fn visit(
    State(state): State<AppState>,
    sources: SessionSources,
    ApiJson(request): ApiJson<VisitRequest>,
) -> Result<Json<Page>, ApiError> {
    state.choose(request.collection.as_deref())?;
    let Some(session) = sources.resolve(request.session.as_deref())? else {
        return Err(ApiError::new(
            ErrorCode::SessionRequired,
            "visits need the session whose search results showed the URL (body field `session`, \
             header `X-Session-Id` or path prefix `/s/{session}`)",
        ));
    };
    let page = service::visit(&state, &session, &request.url).await?;
    Ok(Json(if request.chunks {
        page.with_chunks()
    } else {
        page
    }))
}
