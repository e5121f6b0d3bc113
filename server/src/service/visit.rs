//! Visiting: one URL ([`visit`]) or many in order ([`visit_many`]), each allowed only when the
//! session was shown it, and each attempt written to the session's transcript with its outcome.

use std::sync::Arc;

use serde::Serialize;
use stillweb_corpus::url_norm::normalize_url;

use super::limits::{MAX_URL_CHARS, check_kept};
use crate::error::{ApiError, ErrorCode};
use crate::session::SessionId;
use crate::state::{AppState, Backend};

/// A visited page, as every visiting endpoint returns it.
#[derive(Debug, Clone, Serialize)]
pub struct Page {
    pub title: String,
    pub url: String,
    pub date: String,
    pub text: String,
}

/// [`page`], with the attempt and its outcome (`ok` or the error code) written to the
/// session's transcript. Every endpoint that visits goes through here.
pub async fn visit(state: &AppState, session: &SessionId, url: &str) -> Result<Page, ApiError> {
    // An over-long URL is refused before anything is kept of it.
    check_kept("`url`", url, MAX_URL_CHARS)?;
    let result = page(state, session, url).await;
    let outcome = match &result {
        Ok(_) => "ok".to_string(),
        Err(e) => e.code.name(),
    };
    // Fail closed: a visit the transcript cannot show is not answered either.
    state.sessions.record_visit(session, url, &outcome).await?;
    result
}

/// The page at `url`, if it is in the corpus and `session` was shown it.
async fn page(state: &AppState, session: &SessionId, url: &str) -> Result<Page, ApiError> {
    let key = normalize_url(url).map_err(|e| ApiError::invalid(format!("`url`: {e}")))?;
    let doc = match &state.backend {
        Backend::Index(retriever) => {
            let index = Arc::clone(retriever.index());
            let lookup_key = key.clone();
            state
                .pool
                .run(move || index.doc_by_url(&lookup_key).map_err(ApiError::internal))
                .await?
        }
        Backend::Shards(coordinator) => coordinator.page(&key).await?,
    };
    let Some(doc) = doc else {
        return Err(ApiError::new(
            ErrorCode::UrlNotFound,
            format!("{url} is not in this corpus"),
        ));
    };
    if !state.sessions.has_seen(session, &key).await? {
        return Err(ApiError::new(
            ErrorCode::UrlNotSeen,
            format!(
                "{url} was not in any search result shown to session `{session}`; search for it first"
            ),
        ));
    }
    Ok(Page {
        title: doc.title,
        url: doc.url,
        date: doc.date,
        text: doc.text,
    })
}

/// Visits `urls` in order for `session` (each recorded as [`visit`] records it); each URL gets
/// its page or its own error, so one unseen URL does not fail the others. Without a session,
/// every URL gets `session_required` with `why` (what the endpoint needs).
pub async fn visit_many(
    state: &AppState,
    session: Option<&SessionId>,
    urls: &[String],
    why: &str,
) -> Vec<Result<Page, ApiError>> {
    let mut pages = Vec::with_capacity(urls.len());
    for url in urls {
        pages.push(match session {
            Some(session) => visit(state, session, url).await,
            None => Err(ApiError::new(ErrorCode::SessionRequired, why)),
        });
    }
    pages
}
