//! Serper (Google results as JSON): `POST /serper/search {"q", "num", "page"}` →
//! `{"searchParameters": {...}, "organic": [{"title", "link", "snippet", "date", "position"}]}`.
//! Widely used wrappers also send `q`, `num`, `page`, `gl`, `hl`, `type` (and `api_key`) as
//! query-string parameters, with an empty `POST` body or as a `GET`: both are read, and a body
//! field wins over the same parameter in the query string. Pages are `num` results each, within
//! the 20 results stillweb ranks. Errors are `{"message", "statusCode"}`, as Serper sends them.
//!
//! Serper's Google Scholar, `POST /serper/scholar` (the same parameters, also as a query string
//! or a `GET`), searches the scholar collection (`--scholar-collection`) and answers
//! `{"organic": [{"title", "link", "publicationInfo", "snippet", "year", "citedBy",
//! "position"}]}` ([`scholar_result`] says what fills the fields a corpus lacks); without a
//! scholar collection it is a 404 naming the flags.
//!
//! Serper's page scrape, `POST /serper/scrape {"url", "includeMarkdown"}` → `{"text",
//! "markdown" (with `includeMarkdown`), "metadata": {"title", "date"}, "url", "credits"}`, reads
//! a page under the visit rules: only one the session was shown.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::error::{ApiError, ErrorCode};
use crate::routes::SessionSources;
use crate::routes::dialect::ErrorDialect;
use crate::service::search::MAX_K;
use crate::service::{Query, answer, visit};
use crate::state::AppState;

/// Serper's options, from the query string and the JSON body merged (the body wins).
#[derive(Debug)]
struct SerperRequest {
    q: String,
    num: i64,
    page: i64,
    kind: String,
}

/// Which Serper endpoint: web search or Google Scholar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Engine {
    Search,
    Scholar,
}

pub async fn search(
    State(state): State<AppState>,
    sources: SessionSources,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Response {
    run(&state, Engine::Search, sources, query.as_deref(), &body)
        .await
        .into_response()
}

/// `/serper/scholar`: Serper's Google Scholar search, over the scholar collection.
pub async fn scholar(
    State(state): State<AppState>,
    sources: SessionSources,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Response {
    run(&state, Engine::Scholar, sources, query.as_deref(), &body)
        .await
        .into_response()
}

/// The string field `name` of a merged request, or a 422 saying it is missing or not a string.
fn required_string(fields: &Map<String, Value>, name: &str) -> Result<String, ApiError> {
    match fields.get(name) {
        Some(Value::String(value)) => Ok(value.clone()),
        Some(_) => Err(ApiError::invalid(format!("`{name}` must be a string"))),
        None => Err(ApiError::invalid(format!(
            "`{name}` is required (in the JSON body or the query string)"
        ))),
    }
}

/// Query-string parameters, then the body's fields over them.
fn merged(query: Option<&str>, body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    let mut fields = Map::new();
    for (name, value) in url::form_urlencoded::parse(query.unwrap_or_default().as_bytes()) {
        fields.insert(name.into_owned(), Value::String(value.into_owned()));
    }
    if !body.iter().all(u8::is_ascii_whitespace) {
        match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(object)) => fields.extend(object),
            Ok(_) => return Err(ApiError::invalid("the body must be a JSON object")),
            Err(e) => return Err(ApiError::invalid(format!("the body is not JSON: {e}"))),
        }
    }
    Ok(fields)
}

/// A whole number given as a JSON number or as text (`"10"`, as query strings give it).
fn integer(fields: &Map<String, Value>, name: &str) -> Result<Option<i64>, ApiError> {
    match fields.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .map(Some)
            .ok_or_else(|| ApiError::invalid(format!("`{name}` must be a whole number"))),
        Some(Value::String(s)) => {
            s.trim().parse().map(Some).map_err(|_| {
                ApiError::invalid(format!("`{name}` must be a whole number, got `{s}`"))
            })
        }
        Some(_) => Err(ApiError::invalid(format!(
            "`{name}` must be a whole number"
        ))),
    }
}

fn parse_request(query: Option<&str>, body: &[u8]) -> Result<SerperRequest, ApiError> {
    let fields = merged(query, body)?;
    let q = required_string(&fields, "q")?;
    let kind = match fields.get("type") {
        Some(Value::String(t)) => t.clone(),
        _ => "search".to_string(),
    };
    Ok(SerperRequest {
        q,
        num: integer(&fields, "num")?.unwrap_or(10).clamp(1, 100),
        page: integer(&fields, "page")?.unwrap_or(1).max(1),
        kind,
    })
}

async fn run(
    state: &AppState,
    engine: Engine,
    sources: SessionSources,
    query: Option<&str>,
    body: &[u8],
) -> Result<Response, ApiError> {
    let request = parse_request(query, body)?;
    let session = sources.resolve(None)?;
    if engine == Engine::Scholar {
        state.choose_scholar()?;
    }
    let (num, page) = (request.num, request.page);
    let start = (page - 1).saturating_mul(num);
    let k = start.saturating_add(num).min(MAX_K);
    let hits = if start >= MAX_K {
        Vec::new()
    } else {
        let query = Query {
            query: request.q.clone(),
            k: Some(k),
            rerank: None,
            rerank_pool: None,
            explain: false,
            mode: None,
        };
        answer(state, session.as_ref(), query).await?.hits
    };
    let organic: Vec<_> = hits
        .into_iter()
        .enumerate()
        .skip(usize::try_from(start).unwrap_or(usize::MAX))
        .map(|(i, h)| match engine {
            Engine::Search => {
                let mut item = json!({
                    "title": h.title,
                    "link": h.url,
                    "snippet": h.snippet,
                    "position": i + 1,
                });
                if !h.date.is_empty() {
                    item["date"] = h.date.into();
                }
                item
            }
            Engine::Scholar => scholar_result(h, i + 1),
        })
        .collect();
    let kind = match engine {
        Engine::Search => request.kind,
        Engine::Scholar => "scholar".to_string(),
    };
    Ok(Json(json!({
        "searchParameters": {
            "q": request.q,
            "type": kind,
            "num": num,
            "page": page,
            "engine": "stillweb",
        },
        "organic": organic,
        "credits": 1,
    }))
    .into_response())
}

/// One Google Scholar result in Serper's shape. What a corpus page does not know gets a neutral
/// value rather than a missing field (clients index them): `year` from the page's date (`null`
/// without one, or with the corpus's stand-in for none, 1970-01-01), `citedBy` 0, and
/// `publicationInfo` the link's host, after the year when there is one (Scholar's "authors -
/// venue, year - host" without authors or venue).
fn scholar_result(hit: stillweb_index::Hit, position: usize) -> Value {
    let year: Option<i64> = Some(hit.date.as_str())
        .filter(|date| !date.starts_with(stillweb_corpus::manifest::NO_DATE))
        .and_then(|date| date.get(..4))
        .filter(|y| y.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|y| y.parse().ok());
    let host = url::Url::parse(&hit.url)
        .ok()
        .and_then(|u| u.host_str().map(str::to_string))
        .unwrap_or_default();
    let publication_info = match year {
        Some(year) => format!("{year} - {host}"),
        None => host,
    };
    json!({
        "title": hit.title,
        "link": hit.url,
        "publicationInfo": publication_info,
        "snippet": hit.snippet,
        "year": year,
        "citedBy": 0,
        "position": position,
    })
}

pub async fn scrape(
    State(state): State<AppState>,
    sources: SessionSources,
    RawQuery(query): RawQuery,
    body: Bytes,
) -> Response {
    run_scrape(&state, sources, query.as_deref(), &body)
        .await
        .into_response()
}

async fn run_scrape(
    state: &AppState,
    sources: SessionSources,
    query: Option<&str>,
    body: &[u8],
) -> Result<Response, ApiError> {
    let fields = merged(query, body)?;
    let url = required_string(&fields, "url")?;
    let markdown = match fields.get("includeMarkdown") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::String(s)) if s == "true" || s == "false" => s == "true",
        Some(_) => return Err(ApiError::invalid("`includeMarkdown` must be true or false")),
    };
    let Some(session) = sources.resolve(None)? else {
        return Err(ApiError::new(
            ErrorCode::SessionRequired,
            "a page is scraped only for the session that was shown it: name it in the base URL (/s/{session}/serper) or the X-Session-Id header",
        ));
    };
    let page = visit(state, &session, &url).await?;
    let mut body = json!({
        "text": page.text,
        "metadata": {"title": page.title, "date": page.date},
        "url": page.url,
        "credits": 1,
    });
    if markdown {
        body["markdown"] = Value::String(format!("# {}\n\n{}", page.title, page.text));
    }
    Ok(Json(body).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_string_and_body_merge_with_the_body_winning() {
        let r = parse_request(Some("q=from+url&num=5&page=2&gl=us&api_key=k"), b"").expect("ok");
        assert_eq!((r.q.as_str(), r.num, r.page), ("from url", 5, 2));
        let r = parse_request(Some("q=from+url&num=5"), br#"{"q": "from body"}"#).expect("ok");
        assert_eq!((r.q.as_str(), r.num), ("from body", 5));
        let r = parse_request(None, br#"{"q": "x", "num": "7", "type": "news"}"#).expect("ok");
        assert_eq!((r.num, r.kind.as_str()), (7, "news"));
        let e = parse_request(Some("num=3"), b" ").expect_err("no q");
        assert!(e.message.contains("`q` is required"), "{}", e.message);
        let e = parse_request(Some("q=a&num=ten"), b"").expect_err("bad num");
        assert!(
            e.message.contains("`num` must be a whole number"),
            "{}",
            e.message
        );
    }
}

/// Serper's error shape: `{"message": "...", "statusCode": 400}`.
#[derive(Debug, Clone, Copy)]
pub struct Errors;

impl ErrorDialect for Errors {
    fn body(&self, _code: ErrorCode, status: StatusCode, message: &str) -> Value {
        json!({"message": message, "statusCode": status.as_u16()})
    }
}
