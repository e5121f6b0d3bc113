//! MCP over streamable HTTP at `/mcp`: JSON-RPC requests by `POST`, answered with
//! `application/json` (no server-initiated stream, so `GET` is 405). Tools: `web_search` and
//! `visit_web`; BrowseComp-Plus's `search` and `get_document`; `scholar_search` where the
//! server has a scholar collection (its papers are read with `visit_web` and the collection). The MCP session (`Mcp-Session-Id`, assigned at `initialize`) is the stillweb
//! session, so a visit obeys the seen-URL rule of the same MCP session; with a `/s/{session}/mcp`
//! URL the session is that one. `DELETE /mcp` ends it. Tool failures (an unseen URL, a bad
//! argument) are tool results with `isError: true`, as the protocol asks, not JSON-RPC errors.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::error::{ApiError, ErrorCode};
use crate::routes::SessionSources;
use crate::routes::dialect::ErrorDialect;
use crate::service::search::answer_in;
use crate::service::visit::visit_in;
use crate::service::{Query, answer};
use crate::session::SessionId;
use crate::state::AppState;

/// Protocol revisions this endpoint speaks; the newest is offered when the client's is unknown.
const PROTOCOL_VERSIONS: [&str; 3] = ["2025-06-18", "2025-03-26", "2024-11-05"];
const SESSION_HEADER: &str = "mcp-session-id";

fn rpc_error(id: Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}

/// The tools offered: `scholar_search` only where the server has a scholar collection.
fn tools(state: &AppState) -> Value {
    let mut tools = base_tools();
    if let (Ok(_), Some(list)) = (state.scholar(), tools.as_array_mut()) {
        let name = &state.config.scholar_collection;
        list.push(search_tool(
            "scholar_search",
            &format!("Search scientific papers (the frozen paper collection `{name}`). Same query syntax as web_search. Read a paper with visit_web, giving the url and \"collection\": \"{name}\"."),
            "Number of papers (default 10).",
        ));
    }
    tools
}

/// A searching tool: `query`, and `k` described as `k_description`.
fn search_tool(name: &str, description: &str, k_description: &str) -> Value {
    json!({
        "name": name,
        "description": description,
        "inputSchema": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to search for."},
                "k": {"type": "integer", "minimum": 1, "maximum": 20, "description": k_description},
                "published_after": {"type": "string", "description": "Only pages dated on or after this (YYYY-MM-DD)."},
                "published_before": {"type": "string", "description": "Only pages dated before this (YYYY-MM-DD)."}
            },
            "required": ["query"]
        }
    })
}

/// The page-reading tools' optional `collection` argument.
fn collection_argument() -> Value {
    json!({"type": "string", "description": "The collection whose search returned it (default: web search's)."})
}

fn base_tools() -> Value {
    json!([
        search_tool(
            "web_search",
            "Search the web (a frozen corpus). Supports \"exact phrases\", site:host, -word, OR, after:YYYY-MM-DD and before:YYYY-MM-DD. Returns ranked results with title, URL, date and a snippet; their URLs can then be read with visit_web.",
            "Number of results (default 10).",
        ),
        {
            "name": "visit_web",
            "description": "Read the full text of a page that an earlier web_search in this session returned.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "url": {"type": "string", "description": "A URL from a search result."},
                    "collection": collection_argument()
                },
                "required": ["url"]
            }
        },
        search_tool(
            "search",
            "Search the document collection (BrowseComp-Plus's tool). Returns the best documents as docid, score and snippet; read one with get_document.",
            "Number of documents (default 5).",
        ),
        {
            "name": "get_document",
            "description": "Read the full text of a document by the docid an earlier search in this session returned.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "docid": {"type": "string", "description": "A docid from a search result."},
                    "collection": collection_argument()
                },
                "required": ["docid"]
            }
        }
    ])
}

fn tool_result(text: String, is_error: bool, structured: Option<Value>) -> Value {
    let mut result = json!({"content": [{"type": "text", "text": text}], "isError": is_error});
    if let Some(s) = structured {
        result["structuredContent"] = s;
    }
    result
}

/// A fresh session id for an `initialize` without one: 128 random bits, since the id is what
/// unlocks the session's pages.
fn new_session_id() -> String {
    format!("mcp-{}", crate::ids::session_id())
}

/// An HTTP-level refusal with a JSON-RPC error body (no request id to answer).
fn refuse(status: StatusCode, message: impl Into<String>) -> Response {
    (status, Json(rpc_error(Value::Null, -32600, message))).into_response()
}

/// The session the request names: `Mcp-Session-Id` and a `/s/{session}/mcp` path must agree,
/// and either must be a valid session id. The error is the refusal's message.
fn request_session(
    sources: &SessionSources,
    headers: &HeaderMap,
) -> Result<Option<SessionId>, String> {
    let header = match headers.get(SESSION_HEADER) {
        None => None,
        Some(v) => Some(
            v.to_str()
                .map_err(|_| "`Mcp-Session-Id` is not valid text".to_string())?,
        ),
    };
    let path = sources.resolve(None).map_err(|e| e.message)?;
    match (header, path) {
        (Some(h), Some(p)) if h != p.id() => Err(format!(
            "conflicting sessions: header `Mcp-Session-Id` says `{h}`, path prefix `/s/{{session}}` says `{p}`"
        )),
        (Some(h), _) => crate::service::limits::check_session(Some(h))
            .map(|s| s.map(|id| sources.session(id)))
            .map_err(|e| format!("`Mcp-Session-Id`: {}", e.message)),
        (None, p) => Ok(p),
    }
}

pub async fn post(
    State(state): State<AppState>,
    sources: SessionSources,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let message: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return (
                StatusCode::BAD_REQUEST,
                Json(rpc_error(Value::Null, -32700, format!("parse error: {e}"))),
            )
                .into_response();
        }
    };
    let mut session = match request_session(&sources, &headers) {
        Ok(s) => s,
        Err(message) => return refuse(StatusCode::BAD_REQUEST, message),
    };
    let messages = match &message {
        // JSON-RPC batches (protocol 2025-03-26; 2025-06-18 has none) are capped like search
        // batches: each call may return a whole page.
        Value::Array(items) if items.len() > state.config.max_batch => {
            return refuse(
                StatusCode::BAD_REQUEST,
                format!(
                    "a JSON-RPC batch holds at most {} messages, got {}",
                    state.config.max_batch,
                    items.len()
                ),
            );
        }
        Value::Array(items) => items.clone(),
        single => vec![single.clone()],
    };
    let mut replies = Vec::new();
    for m in messages {
        let method = m.get("method").and_then(Value::as_str).unwrap_or_default();
        let Some(id) = m.get("id").cloned() else {
            continue; // a notification (initialized, cancelled...) or a response: nothing to say
        };
        if method == "initialize" && session.is_none() {
            session = Some(sources.session(&new_session_id()));
        }
        replies.push(handle(&state, session.as_ref(), method, id, m.get("params")).await);
    }
    if replies.is_empty() {
        return StatusCode::ACCEPTED.into_response();
    }
    let body = if message.is_array() {
        Value::Array(replies)
    } else {
        replies.remove(0)
    };
    let mut response = Json(body).into_response();
    if let Some(s) = session.and_then(|s| HeaderValue::from_str(s.id()).ok()) {
        response.headers_mut().insert(SESSION_HEADER, s);
    }
    response
}

async fn handle(
    state: &AppState,
    session: Option<&SessionId>,
    method: &str,
    id: Value,
    params: Option<&Value>,
) -> Value {
    let result = match method {
        "initialize" => {
            let asked = params
                .and_then(|p| p.get("protocolVersion"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            let version = PROTOCOL_VERSIONS
                .iter()
                .find(|v| **v == asked)
                .unwrap_or(&PROTOCOL_VERSIONS[0]);
            json!({
                "protocolVersion": version,
                "capabilities": {"tools": {"listChanged": false}},
                "serverInfo": {"name": "stillweb", "version": env!("CARGO_PKG_VERSION")},
                "instructions": "web_search finds pages in a frozen web corpus; visit_web reads a page a search in this session returned."
            })
        }
        "ping" => json!({}),
        "tools/list" => json!({"tools": tools(state)}),
        "tools/call" => {
            let name = params
                .and_then(|p| p.get("name"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            let arguments = params
                .and_then(|p| p.get("arguments"))
                .cloned()
                .unwrap_or(json!({}));
            match name {
                "web_search" => web_search(state, session, &arguments, false).await,
                "scholar_search" => web_search(state, session, &arguments, true).await,
                "visit_web" => visit_web(state, session, &arguments).await,
                "search" => search(state, session, &arguments).await,
                "get_document" => get_document(state, session, &arguments).await,
                other => {
                    return rpc_error(id, -32602, format!("unknown tool `{other}`"));
                }
            }
        }
        other => return rpc_error(id, -32601, format!("method `{other}` not found")),
    };
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// `request` with the tool call's `published_after` / `published_before` (strings; anything
/// else is read as text, and refused by the search with the field's name).
fn dated(request: Query, arguments: &Value) -> Query {
    let text = |name: &str| {
        arguments
            .get(name)
            .filter(|v| !v.is_null())
            .map(|v| match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
    };
    Query {
        published_after: text("published_after"),
        published_before: text("published_before"),
        ..request
    }
}

/// `web_search`, or with `scholar` `scholar_search` (the same over the scholar collection).
async fn web_search(
    state: &AppState,
    session: Option<&SessionId>,
    arguments: &Value,
    scholar: bool,
) -> Value {
    let Some(query) = arguments.get("query").and_then(Value::as_str) else {
        return tool_result("`query` (a string) is required".into(), true, None);
    };
    let corpus = match if scholar {
        state.scholar()
    } else {
        Ok(state.corpus())
    } {
        Ok(corpus) => corpus,
        Err(e) => return tool_error(&e),
    };
    let request = dated(
        Query::new(query, arguments.get("k").and_then(Value::as_i64)),
        arguments,
    );
    match answer_in(state, &corpus, session, request).await {
        Ok(answer) => {
            let mut text = String::new();
            for (i, h) in answer.hits.iter().enumerate() {
                text.push_str(&format!(
                    "{}. {}\nURL: {}\nDate: {}\n{}\n\n",
                    i + 1,
                    h.title,
                    h.url,
                    h.date,
                    h.snippet
                ));
            }
            if answer.hits.is_empty() {
                text.push_str("No results.");
            }
            let results: Vec<Value> = answer
                .hits
                .iter()
                .map(|h| json!({"title": h.title, "url": h.url, "date": h.date, "snippet": h.snippet}))
                .collect();
            tool_result(
                text.trim_end().to_string(),
                false,
                Some(json!({"results": results})),
            )
        }
        Err(e) => tool_error(&e),
    }
}

async fn visit_web(state: &AppState, session: Option<&SessionId>, arguments: &Value) -> Value {
    let Some(url) = arguments.get("url").and_then(Value::as_str) else {
        return tool_result("`url` (a string) is required".into(), true, None);
    };
    read_page(state, session, arguments, url, None).await
}

/// BrowseComp-Plus's `search`: documents as `docid` (the page's URL, unique in the corpus and
/// what `get_document` takes back), `score` and `snippet`.
async fn search(state: &AppState, session: Option<&SessionId>, arguments: &Value) -> Value {
    let Some(query) = arguments.get("query").and_then(Value::as_str) else {
        return tool_result("`query` (a string) is required".into(), true, None);
    };
    let request = dated(
        Query::new(
            query,
            Some(arguments.get("k").and_then(Value::as_i64).unwrap_or(5)),
        ),
        arguments,
    );
    match answer(state, session, request).await {
        Ok(answer) => {
            let results: Vec<Value> = answer
                .hits
                .iter()
                .map(|h| json!({"docid": h.url, "score": h.score, "snippet": h.snippet}))
                .collect();
            let text = serde_json::to_string_pretty(&results).unwrap_or_default();
            tool_result(text, false, Some(json!({"results": results})))
        }
        Err(e) => tool_error(&e),
    }
}

/// BrowseComp-Plus's `get_document`: the page a `search` of this session returned as `docid`.
async fn get_document(state: &AppState, session: Option<&SessionId>, arguments: &Value) -> Value {
    let Some(docid) = arguments.get("docid").and_then(Value::as_str) else {
        return tool_result("`docid` (a string) is required".into(), true, None);
    };
    read_page(state, session, arguments, docid, Some(docid)).await
}

/// A page under the visit rules, from the collection the arguments name (default: the
/// request's), as a tool's result (with `docid` in its structured content when asked for by
/// one).
async fn read_page(
    state: &AppState,
    session: Option<&SessionId>,
    arguments: &Value,
    url: &str,
    docid: Option<&str>,
) -> Value {
    let Some(session) = session else {
        return tool_result(
            "session_required: initialize an MCP session first".into(),
            true,
            None,
        );
    };
    let corpus = match arguments.get("collection") {
        None | Some(Value::Null) => Ok(state.corpus()),
        Some(Value::String(name)) => state.collection(name),
        Some(_) => Err(ApiError::invalid("`collection` must be a string")),
    };
    let corpus = match corpus {
        Ok(corpus) => corpus,
        Err(e) => return tool_error(&e),
    };
    match visit_in(state, &corpus, session, url).await {
        Ok(p) => {
            let text = format!(
                "Title: {}\nURL: {}\nDate: {}\n\n{}",
                p.title, p.url, p.date, p.text
            );
            let structured = docid
                .map(|id| json!({"docid": id, "title": p.title, "url": p.url, "text": p.text}));
            tool_result(text, false, structured)
        }
        Err(e) => tool_error(&e),
    }
}

/// A failed tool call's result: the error's code and message.
fn tool_error(e: &ApiError) -> Value {
    tool_result(format!("{}: {}", e.code.name(), e.message), true, None)
}

/// `GET /mcp`: this server opens no server-to-client stream.
pub async fn get() -> Response {
    (
        StatusCode::METHOD_NOT_ALLOWED,
        [("allow", "POST, DELETE")],
        "this MCP endpoint answers POSTed JSON-RPC with JSON and opens no event stream",
    )
        .into_response()
}

/// `DELETE /mcp`: ends the MCP session (and the stillweb session it is).
pub async fn delete(
    State(state): State<AppState>,
    sources: SessionSources,
    headers: HeaderMap,
) -> Response {
    match request_session(&sources, &headers) {
        Ok(Some(session)) => match state.sessions.end(&session).await {
            Ok(_) => StatusCode::OK.into_response(),
            Err(e) => Errors.render(&ApiError::from(e)),
        },
        Ok(None) => refuse(
            StatusCode::BAD_REQUEST,
            "`Mcp-Session-Id` header (or a /s/{session}/mcp URL) required",
        ),
        Err(message) => refuse(StatusCode::BAD_REQUEST, message),
    }
}

/// A JSON-RPC error answering no particular request (errors outside any JSON-RPC call: a wrong
/// method, a body too large).
#[derive(Debug, Clone, Copy)]
pub struct Errors;

impl ErrorDialect for Errors {
    fn body(&self, _code: ErrorCode, status: StatusCode, message: &str) -> Value {
        json!({
            "jsonrpc": "2.0",
            "id": Value::Null,
            "error": {
                "code": if status.is_server_error() { -32603 } else { -32600 },
                "message": message,
            },
        })
    }
}
