//! API keys (`--api-keys FILE`): who may call, in which session namespace, and how often.
//!
//! ```toml
//! [[key]]
//! name = "team-a"   # 1–64 of [A-Za-z0-9._-]: the key's session namespace and metrics label
//! key = "…"         # the secret, at least 16 characters (`openssl rand -hex 32`)
//! rate = 20         # optional: requests per second, a token bucket per server
//! burst = 40        # optional: the bucket's size (default: the rate, at least 1)
//! role = "client"   # optional: `client` (default), `metrics` (only `GET /metrics`) or
//!                   # `operator` (a client that also lists and reads every key's sessions,
//!                   # and reads /metrics)
//! as_of = "2024-03-05"  # optional: the web as of that day (or ISO 8601 instant): no page
//!                   # dated later is ever searched or visited with this key, in any API
//! ```
//!
//! Every endpoint but `/healthz` and `/readyz` then needs a key, taken where each API's own
//! clients send it: `Authorization: Bearer` everywhere (native, Search-R1, Jina, MCP, Tavily's
//! client), `X-API-KEY` or `?api_key=` on Serper routes, `X-Subscription-Token` on Brave's,
//! `x-api-key` on Exa's, and `api_key` in the body on Tavily's. Once any key has the `metrics`
//! role, `/metrics` answers only those keys. Without `--api-keys` nothing is checked and every
//! caller shares one namespace.
//!
//! Sessions are namespaced by key: the same session id under two keys is two sessions. Rate
//! limits are per server process (with N front servers a key gets up to N times its rate).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::HeaderMap;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use stillweb_corpus::date::as_of_cutoff;

use crate::error::{ApiError, ErrorCode};
use crate::routes::dialect::Dialect;

/// The session namespace of every caller when the server takes no keys.
pub const OPEN_NAMESPACE: &str = "-";

/// Shortest secret accepted: a key is the only thing between a caller and another team's
/// sessions.
const MIN_KEY_CHARS: usize = 16;

/// Who sent a request, as far as sessions and metrics care.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The key's name, or [`OPEN_NAMESPACE`] without keys.
    pub namespace: Arc<str>,
    /// An operator key: may list and read the sessions of every key.
    pub operator: bool,
    /// The key's `as_of`, as the first instant it may not see (pages dated at or after it are
    /// never searched or visited): an evaluation's "the web as of the question's date".
    pub sees_before: Option<i64>,
}

impl Caller {
    /// The caller of a server without keys.
    pub fn open() -> Caller {
        Caller {
            namespace: Arc::from(OPEN_NAMESPACE),
            operator: false,
            sees_before: None,
        }
    }
}

/// What a key may call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Every API endpoint (and `/metrics` while no key has the metrics role).
    #[default]
    Client,
    /// `GET /metrics` only: for a Prometheus scraper.
    Metrics,
    /// A client that also lists and reads every key's sessions (`?key=`), and reads `/metrics`.
    Operator,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyFile {
    #[serde(default)]
    key: Vec<KeyEntry>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyEntry {
    name: String,
    key: String,
    rate: Option<f64>,
    burst: Option<f64>,
    #[serde(default)]
    role: Role,
    as_of: Option<String>,
}

/// A refused request: the error, and for a rate limit how long to wait.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    pub error: ApiError,
    pub retry_after: Option<Duration>,
}

impl Refusal {
    fn new(code: ErrorCode, message: impl Into<String>) -> Refusal {
        Refusal {
            error: ApiError::new(code, message),
            retry_after: None,
        }
    }
}

/// Which check a route gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guard {
    /// `/healthz`, `/readyz` (load balancers and probes carry no key) and the console's files.
    Open,
    /// `/metrics`.
    Metrics,
    /// Everything else.
    Api,
}

impl Guard {
    /// The guard of a route pattern as axum matched it.
    pub fn of(route: &str) -> Guard {
        match route {
            // The console's files hold no data; the API calls they make carry the key.
            "/healthz" | "/readyz" | "/ui" | "/ui/" | "/ui/app.js" | "/ui/app.css"
            | "/ui/favicon.svg" => Guard::Open,
            "/metrics" => Guard::Metrics,
            _ => Guard::Api,
        }
    }
}

/// A token bucket: `rate` tokens a second, up to `burst`.
#[derive(Debug)]
struct Bucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl Bucket {
    fn new(rate: f64, burst: f64, now: Instant) -> Bucket {
        Bucket {
            rate,
            burst,
            tokens: burst,
            last: now,
        }
    }

    /// Takes a token, or says how long until one is there.
    fn take(&mut self, now: Instant) -> Result<(), Duration> {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / self.rate))
        }
    }
}

#[derive(Debug)]
struct Key {
    caller: Caller,
    role: Role,
    bucket: Option<Mutex<Bucket>>,
}

/// The keys of `--api-keys`, looked up by the SHA-256 of the secret (so no secret is compared
/// byte by byte, and none is kept in memory as given).
pub struct Keys {
    by_digest: HashMap<[u8; 32], Key>,
    metrics_role: bool,
    names: Vec<String>,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Names only: the debug form ends up in the startup log.
        f.debug_struct("Keys").field("names", &self.names).finish()
    }
}

fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// Whether `name` can be a key's name (and so a session namespace).
pub(crate) fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

impl Keys {
    /// Reads and checks a key file; the error names the file and what to fix.
    pub fn load(path: &Path) -> Result<Keys, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--api-keys {}: cannot read it: {e}", path.display()))?;
        Keys::parse(&text, Instant::now())
            .map_err(|e| format!("--api-keys {}: {e}", path.display()))
    }

    fn parse(text: &str, now: Instant) -> Result<Keys, String> {
        let file: KeyFile = toml::from_str(text).map_err(|e| e.to_string())?;
        if file.key.is_empty() {
            return Err("no [[key]] tables; add at least one with `name` and `key`".into());
        }
        let mut by_digest = HashMap::new();
        let mut names = HashSet::new();
        for (i, entry) in file.key.iter().enumerate() {
            let at = format!("[[key]] #{} (`{}`)", i + 1, entry.name);
            if !valid_name(&entry.name) {
                return Err(format!(
                    "{at}: `name` must be 1 to 64 letters, digits, '.', '_' or '-'"
                ));
            }
            if !names.insert(entry.name.clone()) {
                return Err(format!("{at}: another key has the same name"));
            }
            if entry.key.chars().count() < MIN_KEY_CHARS {
                return Err(format!(
                    "{at}: `key` is shorter than {MIN_KEY_CHARS} characters; make one with `openssl rand -hex 32`"
                ));
            }
            let bucket = match (entry.rate, entry.burst) {
                (None, None) => None,
                (None, Some(_)) => return Err(format!("{at}: `burst` needs a `rate`")),
                (Some(rate), burst) => {
                    let burst = burst.unwrap_or(rate.max(1.0));
                    if !(rate.is_finite() && rate > 0.0) {
                        return Err(format!(
                            "{at}: `rate` must be a positive number of requests per second"
                        ));
                    }
                    if !(burst.is_finite() && burst >= 1.0) {
                        return Err(format!("{at}: `burst` must be at least 1"));
                    }
                    Some(Mutex::new(Bucket::new(rate, burst, now)))
                }
            };
            let sees_before = entry
                .as_of
                .as_deref()
                .map(|text| as_of_cutoff(text).map_err(|e| format!("{at}: `as_of`: {e}")))
                .transpose()?;
            let key = Key {
                caller: Caller {
                    namespace: Arc::from(entry.name.as_str()),
                    operator: entry.role == Role::Operator,
                    sees_before,
                },
                role: entry.role,
                bucket,
            };
            if by_digest.insert(digest(&entry.key), key).is_some() {
                return Err(format!("{at}: another key has the same secret"));
            }
        }
        Ok(Keys {
            metrics_role: by_digest.values().any(|k| k.role == Role::Metrics),
            names: file.key.into_iter().map(|k| k.name).collect(),
            by_digest,
        })
    }

    /// How many keys there are (for `/info`, which names none).
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// Never true: a key file without keys is refused.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Who sent a request to a route with `guard`, in `dialect`, with these headers, query
    /// string and body; or why it is refused.
    pub fn authorize(
        &self,
        guard: Guard,
        dialect: Dialect,
        headers: &HeaderMap,
        query: Option<&str>,
        body: &[u8],
        now: Instant,
    ) -> Result<Caller, Refusal> {
        if guard == Guard::Open {
            return Ok(Caller::open());
        }
        let Some(secret) = presented(dialect, headers, query, body) else {
            return Err(Refusal::new(
                ErrorCode::Unauthorized,
                format!("this server takes API keys: {}", where_keys_go(dialect)),
            ));
        };
        let Some(key) = self.by_digest.get(&digest(&secret)) else {
            return Err(Refusal::new(
                ErrorCode::Unauthorized,
                "the API key is not one this server knows",
            ));
        };
        let allowed = match guard {
            Guard::Metrics => {
                matches!(key.role, Role::Metrics | Role::Operator) || !self.metrics_role
            }
            _ => matches!(key.role, Role::Client | Role::Operator),
        };
        if !allowed {
            return Err(Refusal::new(
                ErrorCode::Forbidden,
                format!(
                    "the key `{}` may not call this endpoint (it has the {:?} role)",
                    key.caller.namespace, key.role
                ),
            ));
        }
        if let Some(bucket) = &key.bucket {
            let mut bucket = bucket
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Err(wait) = bucket.take(now) {
                return Err(Refusal {
                    error: ApiError::new(
                        ErrorCode::RateLimited,
                        format!(
                            "the key `{}` is over its rate of {} requests per second; retry after the Retry-After seconds",
                            key.caller.namespace, bucket.rate
                        ),
                    ),
                    retry_after: Some(wait),
                });
            }
        }
        Ok(key.caller.clone())
    }
}

/// Where a client of `dialect` puts its key, for the 401's message.
fn where_keys_go(dialect: Dialect) -> &'static str {
    match dialect {
        Dialect::Serper => "send one in the `X-API-KEY` header (or `Authorization: Bearer`)",
        Dialect::Brave => {
            "send one in the `X-Subscription-Token` header (or `Authorization: Bearer`)"
        }
        Dialect::Exa => "send one in the `x-api-key` header (or `Authorization: Bearer`)",
        Dialect::Tavily => "send one as `Authorization: Bearer KEY` or `api_key` in the body",
        Dialect::Native | Dialect::SearchR1 | Dialect::Jina | Dialect::Mcp => {
            "send one as `Authorization: Bearer KEY`"
        }
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

/// The key the request carries where its API's clients put it, else as a bearer token.
fn presented(
    dialect: Dialect,
    headers: &HeaderMap,
    query: Option<&str>,
    body: &[u8],
) -> Option<String> {
    let own = match dialect {
        Dialect::Serper => header(headers, "x-api-key")
            .map(str::to_string)
            .or_else(|| {
                url::form_urlencoded::parse(query.unwrap_or_default().as_bytes())
                    .find(|(name, _)| name == "api_key")
                    .map(|(_, value)| value.into_owned())
            }),
        Dialect::Brave => header(headers, "x-subscription-token").map(str::to_string),
        Dialect::Exa => header(headers, "x-api-key").map(str::to_string),
        Dialect::Tavily => serde_json::from_slice::<serde_json::Value>(body)
            .ok()
            .and_then(|v| v.get("api_key")?.as_str().map(str::to_string)),
        Dialect::Native | Dialect::SearchR1 | Dialect::Jina | Dialect::Mcp => None,
    };
    own.filter(|k| !k.is_empty()).or_else(|| {
        let value = header(headers, "authorization")?;
        let (scheme, token) = value.split_once(' ')?;
        scheme
            .eq_ignore_ascii_case("bearer")
            .then(|| token.trim().to_string())
            .filter(|t| !t.is_empty())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
[[key]]
name = "team-a"
key = "aaaaaaaaaaaaaaaaaaaa"

[[key]]
name = "team-b"
key = "bbbbbbbbbbbbbbbbbbbb"
rate = 2
burst = 3

[[key]]
name = "prometheus"
key = "mmmmmmmmmmmmmmmmmmmm"
role = "metrics"
"#;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.insert(*name, value.parse().expect("header"));
        }
        h
    }

    fn call(keys: &Keys, guard: Guard, dialect: Dialect, h: &HeaderMap) -> Result<String, Refusal> {
        keys.authorize(guard, dialect, h, None, b"", Instant::now())
            .map(|c| c.namespace.to_string())
    }

    #[test]
    fn each_api_takes_the_key_where_its_clients_send_it() {
        let keys = Keys::parse(FILE, Instant::now()).expect("keys");
        let bearer = headers(&[("authorization", "Bearer aaaaaaaaaaaaaaaaaaaa")]);
        for dialect in Dialect::ALL {
            assert_eq!(
                call(&keys, Guard::Api, dialect, &bearer).expect("bearer"),
                "team-a"
            );
        }
        let own = [
            (Dialect::Serper, "x-api-key"),
            (Dialect::Brave, "x-subscription-token"),
            (Dialect::Exa, "x-api-key"),
        ];
        for (dialect, name) in own {
            let h = headers(&[(name, "aaaaaaaaaaaaaaaaaaaa")]);
            assert_eq!(call(&keys, Guard::Api, dialect, &h).expect(name), "team-a");
            // Another API's header is not a key on this one.
            let e = call(&keys, Guard::Api, Dialect::Native, &h).expect_err("not native");
            assert_eq!(e.error.code, ErrorCode::Unauthorized);
        }
        let tavily = keys.authorize(
            Guard::Api,
            Dialect::Tavily,
            &HeaderMap::new(),
            None,
            br#"{"query": "q", "api_key": "aaaaaaaaaaaaaaaaaaaa"}"#,
            Instant::now(),
        );
        assert_eq!(tavily.expect("tavily body").namespace.as_ref(), "team-a");
        let serper = keys.authorize(
            Guard::Api,
            Dialect::Serper,
            &HeaderMap::new(),
            Some("q=x&api_key=aaaaaaaaaaaaaaaaaaaa"),
            b"",
            Instant::now(),
        );
        assert_eq!(serper.expect("serper query").namespace.as_ref(), "team-a");
    }

    #[test]
    fn missing_and_unknown_keys_are_unauthorized_and_probes_are_open() {
        let keys = Keys::parse(FILE, Instant::now()).expect("keys");
        let none = HeaderMap::new();
        let e = call(&keys, Guard::Api, Dialect::Brave, &none).expect_err("no key");
        assert_eq!(e.error.code, ErrorCode::Unauthorized);
        assert!(e.error.message.contains("X-Subscription-Token"), "{e:?}");
        let wrong = headers(&[("authorization", "Bearer aaaaaaaaaaaaaaaaaaaX")]);
        let e = call(&keys, Guard::Api, Dialect::Native, &wrong).expect_err("wrong key");
        assert_eq!(e.error.code, ErrorCode::Unauthorized);
        assert_eq!(
            call(&keys, Guard::Open, Dialect::Native, &none).expect("open"),
            "-"
        );
    }

    #[test]
    fn metrics_keys_only_scrape_and_only_they_scrape_once_they_exist() {
        let keys = Keys::parse(FILE, Instant::now()).expect("keys");
        let scraper = headers(&[("authorization", "Bearer mmmmmmmmmmmmmmmmmmmm")]);
        let client = headers(&[("authorization", "Bearer aaaaaaaaaaaaaaaaaaaa")]);
        assert!(call(&keys, Guard::Metrics, Dialect::Native, &scraper).is_ok());
        let e = call(&keys, Guard::Api, Dialect::Native, &scraper).expect_err("scraper");
        assert_eq!(e.error.code, ErrorCode::Forbidden);
        let e = call(&keys, Guard::Metrics, Dialect::Native, &client).expect_err("client");
        assert_eq!(e.error.code, ErrorCode::Forbidden);
        // Without a metrics key, any client key scrapes.
        let open = Keys::parse(
            "[[key]]\nname = \"a\"\nkey = \"aaaaaaaaaaaaaaaaaaaa\"\n",
            Instant::now(),
        )
        .expect("keys");
        assert!(call(&open, Guard::Metrics, Dialect::Native, &client).is_ok());
    }

    #[test]
    fn a_key_over_its_rate_waits_for_its_bucket() {
        let start = Instant::now();
        let keys = Keys::parse(FILE, start).expect("keys");
        let h = headers(&[("authorization", "Bearer bbbbbbbbbbbbbbbbbbbb")]);
        let at = |ms: u64| start + Duration::from_millis(ms);
        let take = |ms| keys.authorize(Guard::Api, Dialect::Native, &h, None, b"", at(ms));
        for _ in 0..3 {
            assert!(take(0).is_ok(), "the burst");
        }
        let refused = take(0).expect_err("over the rate");
        assert_eq!(refused.error.code, ErrorCode::RateLimited);
        assert_eq!(refused.retry_after, Some(Duration::from_millis(500)));
        // Two tokens a second: one back after 500 ms.
        assert!(take(500).is_ok());
        assert!(take(500).is_err());
    }

    #[test]
    fn bad_files_are_refused_with_what_to_fix() {
        let cases = [
            ("", "no [[key]]"),
            (
                "[[key]]\nname = \"a b\"\nkey = \"aaaaaaaaaaaaaaaaaaaa\"",
                "`name`",
            ),
            ("[[key]]\nname = \"a\"\nkey = \"short\"", "openssl rand"),
            (
                "[[key]]\nname = \"a\"\nkey = \"aaaaaaaaaaaaaaaaaaaa\"\nrate = 0",
                "`rate`",
            ),
            (
                "[[key]]\nname = \"a\"\nkey = \"aaaaaaaaaaaaaaaaaaaa\"\nburst = 3",
                "needs a `rate`",
            ),
            (
                "[[key]]\nname = \"a\"\nkey = \"aaaaaaaaaaaaaaaaaaaa\"\nrole = \"root\"",
                "role",
            ),
            (
                "[[key]]\nname = \"a\"\nkey = \"aaaaaaaaaaaaaaaaaaaa\"\nscope = 1",
                "scope",
            ),
            (
                "[[key]]\nname = \"a\"\nkey = \"aaaaaaaaaaaaaaaaaaaa\"\n[[key]]\nname = \"a\"\nkey = \"bbbbbbbbbbbbbbbbbbbb\"",
                "same name",
            ),
            (
                "[[key]]\nname = \"a\"\nkey = \"aaaaaaaaaaaaaaaaaaaa\"\n[[key]]\nname = \"b\"\nkey = \"aaaaaaaaaaaaaaaaaaaa\"",
                "same secret",
            ),
        ];
        for (text, says) in cases {
            let e = Keys::parse(text, Instant::now()).expect_err(text);
            assert!(e.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn debug_output_names_keys_without_their_secrets() {
        let keys = Keys::parse(FILE, Instant::now()).expect("keys");
        let shown = format!("{keys:?}");
        assert!(
            shown.contains("team-a") && !shown.contains("aaaa"),
            "{shown}"
        );
    }
}
