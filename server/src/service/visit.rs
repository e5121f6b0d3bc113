//! Visiting: one URL ([`visit`]) or many in order ([`visit_many`]), each allowed only when the
//! session was shown it, and each attempt written to the session's transcript with its outcome.

use serde::Serialize;
use stillweb_corpus::url_norm::normalize_url;

use super::limits::{MAX_URL_CHARS, check_kept};
use crate::corpus::{Corpus, seen_key};
use crate::error::{ApiError, ErrorCode};
use crate::session::SessionId;
use crate::state::AppState;

/// A visited page, as every visiting endpoint returns it.
#[derive(Debug, Clone, Serialize)]
pub struct Page {
    pub title: String,
    pub url: String,
    pub date: String,
    pub text: String,
    /// Its chunks as `[start, end)` offsets in `text`, counted in Unicode code points (sent only
    /// when a native visit asks with `"chunks": true`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunks: Option<Vec<[usize; 2]>>,
    /// The chunks' byte spans, as the index stores them.
    #[serde(skip)]
    pub chunk_bytes: Vec<[u32; 2]>,
}

impl Page {
    /// The page with its chunk spans in code points (what JavaScript's `Array.from(text)`
    /// indexes).
    pub fn with_chunks(mut self) -> Page {
        let mut byte_to_char = vec![0usize; self.text.len() + 1];
        let mut chars = 0;
        for (i, (at, _)) in self.text.char_indices().enumerate() {
            byte_to_char[at] = i;
            chars = i + 1;
        }
        byte_to_char[self.text.len()] = chars;
        let point = |byte: u32| byte_to_char.get(byte as usize).copied().unwrap_or(chars);
        self.chunks = Some(
            self.chunk_bytes
                .iter()
                .map(|&[start, end]| [point(start), point(end)])
                .collect(),
        );
        self
    }
}

/// [`page`], with the attempt and its outcome (`ok` or the error code) written to the
/// session's transcript. Every endpoint that visits goes through here.
pub async fn visit(state: &AppState, session: &SessionId, url: &str) -> Result<Page, ApiError> {
    visit_in(state, &state.corpus(), session, url).await
}

/// [`visit`] in `corpus` (a collection other than the request's).
pub async fn visit_in(
    state: &AppState,
    corpus: &Corpus,
    session: &SessionId,
    url: &str,
) -> Result<Page, ApiError> {
    // An over-long URL is refused before anything is kept of it.
    check_kept("`url`", url, MAX_URL_CHARS)?;
    let result = page(state, corpus, session, url).await;
    let outcome = match &result {
        Ok(_) => "ok".to_string(),
        Err(e) => e.code.name(),
    };
    // Fail closed: a visit the transcript cannot show is not answered either.
    let collection = corpus.named().map(|name| &**name);
    state
        .sessions
        .record_visit(session, collection, url, &outcome)
        .await?;
    if let (Ok(_), Some(gold)) = (&result, &state.config.gold)
        && gold.note_visited(&session.member(), url)
    {
        state.metrics.gold("visited");
    }
    result
}

/// The page at `url`, if it is in `corpus` and `session` was shown it from there.
async fn page(
    state: &AppState,
    corpus: &Corpus,
    session: &SessionId,
    url: &str,
) -> Result<Page, ApiError> {
    let key = normalize_url(url).map_err(|e| ApiError::invalid(format!("`url`: {e}")))?;
    let doc = corpus.page(&state.pool, &key).await?;
    let named = corpus.named().map(|name| &**name);
    let Some(doc) = doc else {
        return Err(ApiError::new(
            ErrorCode::UrlNotFound,
            match named {
                Some(name) => format!("{url} is not in collection `{name}`"),
                None => format!("{url} is not in this corpus"),
            },
        ));
    };
    // A page the caller may not see (dated past its key's or session's `as_of`) answers as one
    // never shown.
    let visible = state.visible_dates(Some(session)).await?;
    let hidden =
        visible.is_bounded() && !visible.keeps(stillweb_corpus::date::document_instant(&doc.date));
    if hidden
        || !state
            .sessions
            .has_seen(session, &seen_key(named, &key))
            .await?
    {
        return Err(ApiError::new(
            ErrorCode::UrlNotSeen,
            match named {
                Some(name) => format!(
                    "{url} was not in any search result of collection `{name}` shown to session `{session}`; search for it there first"
                ),
                None => format!(
                    "{url} was not in any search result shown to session `{session}`; search for it first"
                ),
            },
        ));
    }
    Ok(Page {
        title: doc.title,
        url: doc.url,
        date: doc.date,
        text: doc.text,
        chunks: None,
        chunk_bytes: doc.chunks,
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

#[cfg(test)]
mod tests {
    use super::Page;

    #[test]
    fn chunk_spans_are_counted_in_code_points() {
        let text = "Émile Zola. Ça va.".to_string();
        let page = Page {
            title: String::new(),
            url: String::new(),
            date: String::new(),
            chunk_bytes: vec![[0, 12], [13, 20]],
            chunks: None,
            text,
        }
        .with_chunks();
        assert_eq!(page.chunks, Some(vec![[0, 11], [12, 18]]));
        let chars: Vec<char> = page.text.chars().collect();
        assert_eq!(chars[12..18].iter().collect::<String>(), "Ça va.");
    }
}
