//! Searching: one query ([`answer`]), many in order ([`answer_many`]), each validated against
//! the service's limits, run through the search pipeline over the corpus's parts with the result
//! and query-embedding caches, timed by stage, and recorded in the session's transcript.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::Deserialize;
use stillweb_corpus::date::{DateFilter, DateRange, parse_instant};
use stillweb_corpus::url_norm::normalize_url;
use stillweb_index::search::{Mode, StageTimings, pipeline};
use stillweb_index::{Hit, ParsedQuery, SearchParams, SearchResults, parse};

use super::limits::check_kept;
use super::models::ServerModels;
use crate::corpus::{Corpus, seen_key};
use crate::error::{ApiError, ErrorCode};
use crate::session::SessionId;
use crate::state::AppState;

/// Most results a compatible endpoint hands out, as the live APIs do, and the native default of
/// `--max-k`.
pub const MAX_K: i64 = 20;
pub const DEFAULT_K: i64 = 10;

/// One query's parameters, as a search or a batch entry gives them.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Query {
    pub query: String,
    #[serde(default)]
    pub k: Option<i64>,
    #[serde(default)]
    pub rerank: Option<bool>,
    #[serde(default)]
    pub rerank_pool: Option<i64>,
    /// Explain each result's rank.
    #[serde(default)]
    pub explain: bool,
    /// `bm25`, `dense` or `hybrid` for this query instead of the server's `--mode`.
    #[serde(default)]
    pub mode: Option<String>,
    /// Only pages dated at or after this (`YYYY-MM-DD` or an ISO 8601 date-time).
    #[serde(default)]
    pub published_after: Option<String>,
    /// Only pages dated before this.
    #[serde(default)]
    pub published_before: Option<String>,
    /// The date filter a compatible API's own parameters ask for (the native API's are the two
    /// fields above).
    #[serde(skip)]
    pub dates: DateFilter,
}

impl Query {
    /// `query` for `k` results, everything else the default.
    pub fn new(query: impl Into<String>, k: Option<i64>) -> Query {
        Query {
            query: query.into(),
            k,
            ..Query::default()
        }
    }

    /// The dates it keeps on `corpus`: its API's filter (a period counts back from the
    /// collection's frozen clock) and the native bounds.
    fn published(&self, corpus: &Corpus) -> Result<DateRange, ApiError> {
        let native = published_range(
            self.published_after.as_deref(),
            self.published_before.as_deref(),
        )?;
        Ok(self
            .dates
            .resolve(corpus.info.dates.as_of)
            .intersect(native))
    }
}

/// The optional date field `name` read with `parse` (a `stillweb_corpus::date` reader), or
/// refused with the field's name and what to write: every API's date parameters are read so.
pub fn date_field(
    name: &str,
    text: Option<&str>,
    parse: fn(&str) -> Result<i64, String>,
) -> Result<Option<i64>, ApiError> {
    text.map(|t| parse(t).map_err(|e| ApiError::invalid(format!("`{name}`: {e}"))))
        .transpose()
}

/// The native bounds `published_after` (included) and `published_before` (excluded), each a
/// `YYYY-MM-DD` or an ISO 8601 date-time, refused by name when unreadable or out of order.
pub fn published_range(after: Option<&str>, before: Option<&str>) -> Result<DateRange, ApiError> {
    let range = DateRange {
        from: date_field("published_after", after, parse_instant)?,
        until: date_field("published_before", before, parse_instant)?,
    };
    if let (Some(a), Some(b)) = (range.from, range.until)
        && a >= b
    {
        return Err(ApiError::invalid(format!(
            "`published_after` ({}) must be before `published_before` ({})",
            after.unwrap_or_default(),
            before.unwrap_or_default()
        )));
    }
    Ok(range)
}

/// A search's ranked pages, before any API's response shape is applied.
#[derive(Debug, Clone)]
pub struct Answer {
    /// The query as searched (trimmed), as the session's transcript records it.
    pub query: String,
    pub hits: Vec<Hit>,
    pub relaxed: bool,
    pub reranked: bool,
    /// Where the time went (the native endpoint sends it as `Server-Timing`).
    pub timing: Timing,
    /// With `explain`: the numbers behind each hit's rank, in hit order.
    pub explained: Option<stillweb_index::search::explain::Explained>,
    /// The build that answered (a reload may have swapped it since).
    pub build_id: String,
    /// The collection searched (`None`: the one corpus of `--index`).
    pub collection: Option<Arc<str>>,
    /// The collection's frozen clock, which APIs that write "3 days ago" count from.
    pub as_of: Option<i64>,
}

impl Answer {
    /// The collection searched, as requests name it.
    pub fn collection(&self) -> &str {
        self.collection
            .as_deref()
            .unwrap_or(crate::config::DEFAULT_COLLECTION)
    }
}

/// Most operators (phrases, `site:`, `-term`, each `OR` alternative) one query may hold: each is
/// a filter clause over the whole index, so a query of hundreds would cost seconds.
pub const MAX_QUERY_OPERATORS: usize = 32;

/// Validates and runs one query; with a session, records it and makes its results visitable.
/// Every single-search endpoint, native or compatible, goes through here (batches through
/// [`answer_many`], which records in query order).
pub async fn answer(
    state: &AppState,
    session: Option<&SessionId>,
    request: Query,
) -> Result<Answer, ApiError> {
    answer_in(state, &state.corpus(), session, request).await
}

/// [`answer`] in `corpus` (a collection other than the request's).
pub async fn answer_in(
    state: &AppState,
    corpus: &Corpus,
    session: Option<&SessionId>,
    request: Query,
) -> Result<Answer, ApiError> {
    let sees = state.visible_dates(session).await?;
    let answer = search_on(state, corpus, request, sees).await?;
    if let Some(session) = session {
        record(state, session, &answer).await?;
    }
    Ok(answer)
}

/// Validates and runs one query on `corpus` among the pages dated within `sees` (what the
/// caller may see), recording it nowhere.
async fn search_on(
    state: &AppState,
    corpus: &Corpus,
    request: Query,
    sees: DateRange,
) -> Result<Answer, ApiError> {
    let query = request.query.trim().to_string();
    if query.is_empty() {
        return Err(ApiError::invalid("`query` is empty"));
    }
    check_kept("`query`", &query, state.config.max_query_chars)?;
    let k = request.k.unwrap_or(DEFAULT_K);
    let max_k = state.config.max_k;
    if !(1..=max_k).contains(&k) {
        return Err(ApiError::invalid(format!(
            "`k` must be between 1 and {max_k}, got {k}"
        )));
    }
    let mut parsed = parse(&query);
    parsed.published = parsed
        .published
        .intersect(request.published(corpus)?)
        .intersect(sees);
    let operators = parsed.operator_count();
    if operators > MAX_QUERY_OPERATORS {
        return Err(ApiError::invalid(format!(
            "`query` has {operators} operators (phrases, site:, -term, date bounds); the limit is {MAX_QUERY_OPERATORS}"
        )));
    }
    let mut params = SearchParams {
        k: usize::try_from(k).unwrap_or(1),
        rerank_pool: rerank_pool(state, corpus, request.rerank, request.rerank_pool)?,
        explain: request.explain,
        weights: corpus.mode.weights(),
        ..state.config.search.clone()
    };
    if let Some(mode) = &request.mode {
        params.weights = query_mode(corpus, mode)?.weights();
    }
    let reranked = params.rerank_pool > 0;
    let started = Instant::now();
    let timed = run_search(state, corpus, parsed, params).await?;
    let timing = Timing {
        stages: timed.results.timings,
        cached: timed.cached,
        total: started.elapsed(),
    };
    let SearchResults {
        hits,
        relaxed,
        explained,
        ..
    } = timed.results;
    Ok(Answer {
        query,
        hits,
        relaxed,
        reranked,
        timing,
        explained,
        build_id: corpus.build_id().to_string(),
        collection: corpus.named().cloned(),
        as_of: corpus.info.dates.as_of,
    })
}

/// A query's own retrieval mode: one the server can run (dense and hybrid need its query
/// embedder, which it loads when its `--mode` uses vectors).
fn query_mode(corpus: &Corpus, mode: &str) -> Result<Mode, ApiError> {
    let parsed: Mode = mode
        .parse()
        .map_err(|e: String| ApiError::invalid(format!("`mode`: {e}")))?;
    match parsed {
        Mode::Rerank => Err(ApiError::invalid(
            "`mode` is bm25, dense or hybrid; reranking is `\"rerank\": true`",
        )),
        m if m.uses_dense() && corpus.embedder_id().is_none() => Err(ApiError::invalid(format!(
            "`mode` {mode} needs vectors, and this server runs BM25 only (an index built with --no-dense, or --mode bm25)"
        ))),
        m => Ok(m),
    }
}

/// Writes `answer` to `session`'s transcript and makes its results visitable there; fails
/// (closed) when the session store cannot: a search whose shown URLs were not recorded must not
/// answer, or a later visit would be wrongly refused.
pub async fn record(
    state: &AppState,
    session: &SessionId,
    answer: &Answer,
) -> Result<(), ApiError> {
    let collection = answer.collection.as_deref();
    let shown: Vec<(String, String)> = answer
        .hits
        .iter()
        .filter_map(|h| {
            let key = normalize_url(&h.url).ok()?;
            Some((h.url.clone(), seen_key(collection, &key)))
        })
        .collect();
    state
        .sessions
        .record_search(session, collection, &answer.query, &shown)
        .await?;
    if let Some(gold) = &state.config.gold {
        let urls: Vec<String> = answer.hits.iter().map(|h| h.url.clone()).collect();
        if gold.note_shown(&session.member(), &urls) {
            state.metrics.gold("surfaced");
        }
    }
    Ok(())
}

/// The request's rerank pool: 0 when not reranking; an error for a pool outside
/// 0..=--max-rerank-pool (whether or not the server has a reranker), or when the request asks
/// for a reranker the server does not have.
fn rerank_pool(
    state: &AppState,
    corpus: &Corpus,
    rerank: Option<bool>,
    pool: Option<i64>,
) -> Result<usize, ApiError> {
    let max = state.config.max_rerank_pool;
    if let Some(n) = pool
        && !(0..=max as i64).contains(&n)
    {
        return Err(ApiError::invalid(format!(
            "`rerank_pool` must be between 0 (no reranking) and {max}, got {n}"
        )));
    }
    let has_reranker = corpus.reranker_id().is_some();
    let wanted = rerank.unwrap_or(has_reranker && pool != Some(0));
    if !wanted {
        return Ok(0);
    }
    if !has_reranker {
        return Err(ApiError::new(
            ErrorCode::RerankUnavailable,
            "this server has no reranker (start it with --reranker DIR); omit `rerank` or send false",
        ));
    }
    match pool {
        None => Ok(state.config.search.rerank_pool),
        Some(n) if n >= 1 => Ok(usize::try_from(n).unwrap_or(1)),
        Some(n) => Err(ApiError::invalid(format!(
            "`rerank_pool` must be between 1 and {max} when `rerank` is true, got {n}"
        ))),
    }
}

/// A search's results with where the time went.
#[derive(Debug, Clone)]
pub struct Timed {
    pub results: SearchResults,
    /// Served from the result cache.
    pub cached: bool,
}

/// Runs one search through the pipeline over the corpus's parts. Identical searches on the same
/// build are answered from the bounded result cache; query vectors come from the bounded
/// embedding cache when the same text was embedded before.
pub async fn run_search(
    state: &AppState,
    corpus: &Corpus,
    query: ParsedQuery,
    params: SearchParams,
) -> Result<Timed, ApiError> {
    // Keyed by collection and build: an entry of one build is never served for another.
    let key = format!(
        "{}\u{1}{}\u{1}{params:?}\u{1}{query:?}",
        corpus.collection(),
        corpus.build_id()
    );
    state.metrics.search(corpus.collection());
    if let Some(results) = state.results.get(&key) {
        state.metrics.cache("results", true);
        return Ok(Timed {
            results: SearchResults {
                timings: StageTimings::default(),
                ..(*results).clone()
            },
            cached: true,
        });
    }
    state.metrics.cache("results", false);
    // Bounded by the request's time limit (the `observe` middleware), not per search.
    let parts = corpus.stages(&state.pool);
    let dense = corpus.info.dense.is_some();
    let models = ServerModels { state, corpus };
    let results = pipeline::search(&parts, dense, &models, &query, &params).await?;
    let timed = Timed {
        results,
        cached: false,
    };
    let t = timed.results.timings;
    for (stage, elapsed) in [
        ("filter", t.filter),
        ("embed", t.embed),
        ("candidates", t.candidates),
        ("chunks", t.chunks),
        ("rerank", t.rerank),
        ("fetch", t.fetch),
    ] {
        state.metrics.stage(stage, elapsed);
    }
    state.results.insert(key, Arc::new(timed.results.clone()));
    Ok(timed)
}

/// One search's time by stage, as the caller saw it.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    pub stages: StageTimings,
    pub cached: bool,
    pub total: Duration,
}

/// Runs `queries` with at most two per search thread in flight, or one embedding batch
/// (`--embed-batch-queries`) where that is more (so the pool stays busy while results travel
/// back, the queries are embedded together, and a batch of thousands holds a bounded number of
/// searches at once), and returns each query's answer or error in query order. With a session, the answered
/// searches are recorded in query order. An internal failure (a panicked task) fails the whole
/// batch; a query's own error is its entry's.
pub async fn answer_many(
    state: &AppState,
    session: Option<&SessionId>,
    queries: Vec<Query>,
) -> Result<Vec<Result<Answer, ApiError>>, ApiError> {
    let queries: Arc<Vec<Query>> = Arc::new(queries);
    // One build answers the whole batch, and one cutoff (the tasks below run outside the
    // request's task, which knows its caller).
    let corpus = state.corpus();
    let sees = state.visible_dates(session).await?;
    let next = Arc::new(AtomicUsize::new(0));
    // Enough in flight that their queries meet in one embedding batch.
    let workers = (state.config.search_threads * 2)
        .max(state.config.embed_batch.unwrap_or(0))
        .clamp(1, queries.len().max(1));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..workers {
        let (state, queries, next) = (state.clone(), queries.clone(), next.clone());
        let corpus = Arc::clone(&corpus);
        tasks.spawn(async move {
            let mut done = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(query) = queries.get(i) else {
                    return done;
                };
                done.push((i, search_on(&state, &corpus, query.clone(), sees).await));
            }
        });
    }
    let mut answers: Vec<Option<Result<Answer, ApiError>>> = Vec::new();
    answers.resize_with(queries.len(), || None);
    while let Some(joined) = tasks.join_next().await {
        for (i, answer) in joined.map_err(ApiError::internal)? {
            answers[i] = Some(answer);
        }
    }
    let answers: Vec<Result<Answer, ApiError>> = answers
        .into_iter()
        .map(|a| a.unwrap_or_else(|| Err(ApiError::internal("a batch entry got no answer"))))
        .collect();
    if let Some(session) = session {
        for answer in answers.iter().flatten() {
            record(state, session, answer).await?;
        }
    }
    Ok(answers)
}
