//! Endpoints in the shapes of APIs that agent code is already written against, each under its own
//! prefix so that overriding a client's base URL lands on it. Every one of them goes through the
//! native search ([`crate::service::answer`]) and visit
//! ([`crate::service::visit`]) paths: same ranking, same session rules, same limits;
//! only the request and response shapes (and the error shapes) differ.
//!
//! | API | endpoints |
//! |---|---|
//! | Search-R1 retrieval server | `POST /retrieve`, `POST /search-r1/retrieve` |
//! | Serper | `POST` or `GET /serper/search` |
//! | Brave Search | `GET /brave/res/v1/web/search` |
//! | Tavily | `POST /tavily/search`, `POST /tavily/extract` |
//! | Exa | `POST /exa/search`, `POST /exa/contents` |
//! | Jina Reader | `GET /jina/{url}` |
//! | MCP (streamable HTTP) | `POST /mcp` |
//!
//! Each module also says how its API writes errors (an `Errors` implementing
//! [`crate::routes::dialect::ErrorDialect`]). Handlers answer errors as native
//! [`crate::error::ApiError`]s; [`crate::routes::error_layer::in_dialect`], the router's outermost
//! layer, writes them (and the router's own 404/405s) in the dialect of the route prefix, so a
//! handler never picks an error shape itself. Nothing outside the router imports these modules.

pub mod brave;
pub mod exa;
pub mod jina;
pub mod mcp;
pub mod search_r1;
pub mod serper;
pub mod tavily;

use crate::service::search::MAX_K;

/// A result count asked of an API that allows more than stillweb returns, clamped to 1..=20.
fn clamp_count(n: Option<i64>, default: i64) -> i64 {
    n.unwrap_or(default).clamp(1, MAX_K)
}

/// Include/exclude domain lists as query operators (`site:a OR site:b -site:c`).
fn domain_operators(include: &[String], exclude: &[String]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let include: Vec<String> = include
        .iter()
        .map(|d| d.trim())
        .filter(|d| !d.is_empty())
        .map(|d| format!("site:{d}"))
        .collect();
    if !include.is_empty() {
        parts.push(include.join(" OR "));
    }
    parts.extend(
        exclude
            .iter()
            .map(|d| d.trim())
            .filter(|d| !d.is_empty())
            .map(|d| format!("-site:{d}")),
    );
    parts.join(" ")
}

/// `query` with the domain operators appended.
fn with_domains(query: &str, include: &[String], exclude: &[String]) -> String {
    let operators = domain_operators(include, exclude);
    if operators.is_empty() {
        query.to_string()
    } else {
        format!("{query} {operators}")
    }
}

/// A fresh id for the APIs whose responses carry one (random: see [`crate::ids`]).
pub fn new_request_id() -> String {
    crate::ids::request_id()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn domains_become_operators() {
        assert_eq!(
            domain_operators(&["a.org".into(), "b.org".into()], &["c.org".into()]),
            "site:a.org OR site:b.org -site:c.org"
        );
        assert_eq!(with_domains("q", &[], &[]), "q");
        assert_eq!(clamp_count(Some(100), 10), 20);
        assert_eq!(clamp_count(None, 5), 5);
        assert_eq!(clamp_count(Some(0), 5), 1);
    }
}
