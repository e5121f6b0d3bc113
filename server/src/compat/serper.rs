//! Serper (Google results as JSON): `POST /serper/search {"q", "num", "page"}` →
//! `{"searchParameters": {...}, "organic": [{"title", "link", "snippet", "date", "position"}]}`.
//! Widely used wrappers also send `q`, `num`, `page`, `gl`, `hl`, `type` (and `api_key`) as
//! query-string parameters, with an empty `POST` body or as a `GET`: both are read, and a body
//! field wins over the same parameter in the query string. Pages are `num` results each, within
//! the 20 results stillweb ranks. Google's `tbs` date tools ([`tools`]) filter and sort by date,
//! and a dated result's `date` is Google's (`3 days ago` by the collection's frozen clock, else
//! `Mar 5, 2024`). Errors are `{"message", "statusCode"}`, as Serper sends them (400 for a
//! request it cannot read).
//!
//! Serper's Google Scholar, `POST /serper/scholar` (the same parameters, also as a query string
//! or a `GET`), searches the scholar collection (`--scholar-collection`) and answers
//! `{"organic": [{"title", "link", "publicationInfo", "snippet", "year", "citedBy",
//! "position"}]}` ([`scholar_result`] says what fills the fields a corpus lacks; `as_ylo` /
//! `as_yhi` keep the years between them); without a
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
use stillweb_corpus::date::{self, DateFilter, DateRange, Past, parse_us_day};

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
    /// Google's `tbs` as given (echoed in `searchParameters`), and what it asks for.
    tbs: Option<String>,
    tools: Tools,
}

/// What Google's `tbs` ("to be searched") asks for: a date filter, and results by date.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Tools {
    dates: DateFilter,
    by_date: bool,
}

/// Reads `tbs`: comma-separated `qdr:h|d|w|m|y` with an optional count (`qdr:d3`: the past
/// three days, counted back from the collection's frozen clock), a custom range
/// (`cdr:1,cd_min:M/D/YYYY,cd_max:M/D/YYYY`, both days included), `sbd:1` (sort by date) and
/// `li:1` (verbatim, which a frozen corpus always is). Anything else is refused by name.
fn tools(tbs: &str) -> Result<Tools, ApiError> {
    let refuse = |what: String| ApiError::invalid(format!("`tbs`: {what}"));
    let mut tools = Tools::default();
    let (mut min, mut max) = (None, None);
    for part in tbs.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = part.split_once(':').unwrap_or((part, ""));
        match key {
            "qdr" => {
                let (unit, count) = value.split_at(value.len().min(1));
                let count: u32 = match count {
                    "" => 1,
                    n => n.parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                        refuse(format!("`{part}` has no count of 1 or more after `{unit}`"))
                    })?,
                };
                tools.dates.past = Some(match unit {
                    "h" => Past::Hours(count),
                    "d" => Past::Days(count),
                    "w" => Past::Weeks(count),
                    "m" => Past::Months(count),
                    "y" => Past::Years(count),
                    _ => {
                        return Err(refuse(format!(
                            "unknown `{part}`; qdr takes h, d, w, m or y, optionally with a count (qdr:d3)"
                        )));
                    }
                });
            }
            "cdr" if value == "1" || value == "0" => {}
            "cd_min" => {
                min = Some(parse_us_day(value).map_err(|e| refuse(format!("cd_min: {e}")))?)
            }
            "cd_max" => {
                max = Some(parse_us_day(value).map_err(|e| refuse(format!("cd_max: {e}")))?)
            }
            "sbd" if value == "1" || value == "0" => tools.by_date = value == "1",
            "li" if value == "1" => {}
            _ => {
                return Err(refuse(format!(
                    "unknown `{part}`; stillweb reads qdr:h|d|w|m|y[N], cdr:1,cd_min:M/D/YYYY,cd_max:M/D/YYYY, sbd:1 and li:1"
                )));
            }
        }
    }
    if let (Some(min), Some(max)) = (min, max)
        && min > max
    {
        return Err(refuse(format!(
            "cd_min ({}) is after cd_max ({})",
            date::day(min),
            date::day(max)
        )));
    }
    tools.dates.range = DateRange {
        from: min,
        until: max.map(|m| m + date::DAY),
    };
    Ok(tools)
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
    let tbs = match fields.get("tbs") {
        None | Some(Value::Null) => None,
        Some(Value::String(t)) => Some(t.clone()),
        Some(_) => return Err(ApiError::invalid("`tbs` must be a string, e.g. qdr:w")),
    };
    let mut tools = tbs.as_deref().map(tools).transpose()?.unwrap_or_default();
    tools.dates.range = tools.dates.range.intersect(years(&fields)?);
    Ok(SerperRequest {
        q,
        num: integer(&fields, "num")?.unwrap_or(10).clamp(1, 100),
        page: integer(&fields, "page")?.unwrap_or(1).max(1),
        kind,
        tools,
        tbs,
    })
}

/// Google Scholar's year range, `as_ylo` to `as_yhi`, both years included.
fn years(fields: &Map<String, Value>) -> Result<DateRange, ApiError> {
    let year = |name: &str| -> Result<Option<(i64, i64)>, ApiError> {
        integer(fields, name)?
            .map(|y| {
                Some(y)
                    .filter(|y| (1000..=9999).contains(y))
                    .and_then(|y| date::parse_period(&y.to_string()))
                    .ok_or_else(|| {
                        ApiError::invalid(format!("`{name}` must be a four-digit year, got {y}"))
                    })
            })
            .transpose()
    };
    let (low, high) = (year("as_ylo")?, year("as_yhi")?);
    if let (Some(l), Some(h)) = (low, high)
        && l.0 > h.0
    {
        return Err(ApiError::invalid("`as_ylo` is after `as_yhi`"));
    }
    Ok(DateRange {
        from: low.map(|(start, _)| start),
        until: high.map(|(_, end)| end),
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
    let (mut hits, as_of) = if start >= MAX_K {
        (Vec::new(), None)
    } else {
        let query = Query {
            dates: request.tools.dates,
            ..Query::new(request.q.clone(), Some(k))
        };
        let answer = answer(state, session.as_ref(), query).await?;
        (answer.hits, answer.as_of)
    };
    if request.tools.by_date {
        // Newest first, undated last; equal dates keep their rank.
        hits.sort_by_key(|h| std::cmp::Reverse(date::document_instant(&h.date)));
    }
    let organic: Vec<_> = hits
        .into_iter()
        .enumerate()
        .skip(usize::try_from(start).unwrap_or(usize::MAX))
        .map(|(i, h)| match engine {
            Engine::Search => {
                let published = date::document_instant(&h.date);
                let mut item = json!({
                    "title": h.title,
                    "link": h.url,
                    "snippet": h.snippet,
                    "position": i + 1,
                });
                if let Some(t) = published {
                    item["date"] = date::google_date(t, as_of.unwrap_or(t)).into();
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
    let mut parameters = json!({
        "q": request.q,
        "type": kind,
        "num": num,
        "page": page,
        "engine": "stillweb",
    });
    if let Some(tbs) = request.tbs {
        parameters["tbs"] = tbs.into();
    }
    Ok(Json(json!({
        "searchParameters": parameters,
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
    let year: Option<i64> =
        date::document_instant(&hit.date).and_then(|t| date::day(t).get(..4)?.parse().ok());
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
    fn tbs_reads_googles_date_tools_and_refuses_the_rest_by_name() {
        let day = |d: &str| date::parse_day(d).expect("day");
        assert_eq!(
            tools("qdr:w").expect("valid").dates.past,
            Some(Past::Weeks(1))
        );
        assert_eq!(
            tools("qdr:d3").expect("valid").dates.past,
            Some(Past::Days(3))
        );
        assert_eq!(
            tools("qdr:h").expect("valid").dates.past,
            Some(Past::Hours(1))
        );
        let custom = tools("cdr:1,cd_min:1/1/2020,cd_max:12/31/2020,sbd:1").expect("valid");
        assert_eq!(
            custom.dates.range,
            DateRange::between(day("2020-01-01"), day("2021-01-01"))
        );
        assert!(custom.by_date && custom.dates.past.is_none());
        assert_eq!(tools("").expect("valid"), Tools::default());
        for (bad, says) in [
            ("qdr:x", "unknown `qdr:x`"),
            ("qdr:d0", "count of 1 or more"),
            ("qdr:dd", "count of 1 or more"),
            ("cdr:1,cd_min:2020-01-01", "M/D/YYYY"),
            (
                "cdr:1,cd_min:2/1/2020,cd_max:1/1/2020",
                "cd_min (2020-02-01) is after cd_max",
            ),
            ("isz:l", "unknown `isz:l`"),
        ] {
            let e = tools(bad).expect_err(bad);
            assert!(e.message.starts_with("`tbs`: "), "{}", e.message);
            assert!(e.message.contains(says), "{bad}: {}", e.message);
        }
    }

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
        let r = parse_request(Some("q=a&as_ylo=2019&as_yhi=2020"), b"").expect("years");
        assert_eq!(
            r.tools.dates.range,
            DateRange::between(
                date::parse_day("2019-01-01").expect("valid"),
                date::parse_day("2021-01-01").expect("valid")
            )
        );
        let e = parse_request(Some("q=a&as_ylo=2021&as_yhi=2020"), b"").expect_err("years");
        assert!(
            e.message.contains("`as_ylo` is after `as_yhi`"),
            "{}",
            e.message
        );
        let e = parse_request(Some("q=a&as_ylo=99"), b"").expect_err("year");
        assert!(e.message.contains("four-digit year"), "{}", e.message);
        let e = parse_request(Some("q=a&tbs=qdr:x"), b"").expect_err("bad tbs");
        assert!(
            e.message.contains("`tbs`: unknown `qdr:x`"),
            "{}",
            e.message
        );
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
    /// Serper answers a request it cannot read or serve as asked with a 400.
    fn status(&self, code: ErrorCode) -> StatusCode {
        match code {
            ErrorCode::InvalidRequest | ErrorCode::RerankUnavailable => StatusCode::BAD_REQUEST,
            code => crate::routes::dialect::native_status(code),
        }
    }

    fn body(&self, _code: ErrorCode, status: StatusCode, message: &str) -> Value {
        json!({"message": message, "statusCode": status.as_u16()})
    }
}
