//! HTTP to the server under test: keep-alive connections, loopback only (a load tester must not
//! be pointed at someone else's service), a per-request timeout.

use std::net::{IpAddr, ToSocketAddrs};
use std::time::Duration;

use anyhow::{Context, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// What one request got back.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub body: Bytes,
    /// The `Server-Timing` header, when the endpoint sends one.
    pub server_timing: Option<String>,
}

/// Why a request got no reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    Timeout,
    Connection,
}

#[derive(Debug, Clone)]
pub struct Client {
    http: HyperClient<HttpConnector, Full<Bytes>>,
    base: String,
    timeout: Duration,
}

impl Client {
    /// A client for `target` (`http://127.0.0.1:8080`, `http://localhost:8080`): refused unless
    /// every address it names is a loopback address.
    pub fn new(target: &str, timeout: Duration, max_connections: usize) -> anyhow::Result<Client> {
        let url = url::Url::parse(target).with_context(|| format!("--target {target:?}"))?;
        if url.scheme() != "http" {
            bail!("--target {target}: only plain http on loopback is supported");
        }
        let host = url
            .host_str()
            .with_context(|| format!("--target {target} has no host"))?;
        let port = url.port_or_known_default().unwrap_or(80);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let addrs: Vec<IpAddr> = (host, port)
            .to_socket_addrs()
            .with_context(|| format!("resolving --target host {host}"))?
            .map(|a| a.ip())
            .collect();
        if addrs.is_empty() || !addrs.iter().all(IpAddr::is_loopback) {
            bail!(
                "--target {target} is not a loopback address ({addrs:?}): stillweb-loadtest only \
                 loads a server on this machine"
            );
        }
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let http = HyperClient::builder(TokioExecutor::new())
            .pool_max_idle_per_host(max_connections)
            .pool_idle_timeout(Duration::from_secs(30))
            .build(connector);
        Ok(Client {
            http,
            base: target.trim_end_matches('/').to_string(),
            timeout,
        })
    }

    pub fn base(&self) -> &str {
        &self.base
    }

    pub async fn post_json(&self, path: &str, body: &serde_json::Value) -> Result<Reply, Failure> {
        let request = Request::post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|_| Failure::Connection)?;
        self.send(request).await
    }

    pub async fn get(&self, path: &str) -> Result<Reply, Failure> {
        self.send_empty("GET", path).await
    }

    pub async fn delete(&self, path: &str) -> Result<Reply, Failure> {
        self.send_empty("DELETE", path).await
    }

    async fn send_empty(&self, method: &str, path: &str) -> Result<Reply, Failure> {
        let request = Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base))
            .body(Full::new(Bytes::new()))
            .map_err(|_| Failure::Connection)?;
        self.send(request).await
    }

    async fn send(&self, request: Request<Full<Bytes>>) -> Result<Reply, Failure> {
        let exchange = async {
            let response = self
                .http
                .request(request)
                .await
                .map_err(|_| Failure::Connection)?;
            let status = response.status().as_u16();
            let server_timing = response
                .headers()
                .get("server-timing")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|_| Failure::Connection)?
                .to_bytes();
            Ok(Reply {
                status,
                body,
                server_timing,
            })
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .unwrap_or(Err(Failure::Timeout))
    }
}

/// Stage durations (ms) and the cache flag from a `Server-Timing` header such as
/// `embed;dur=1.20, candidates;dur=3.40, cache;desc="hit"`.
pub fn parse_server_timing(header: &str) -> (Vec<(String, f64)>, bool) {
    let mut stages = Vec::new();
    let mut cached = false;
    for metric in header.split(',') {
        let mut parts = metric.trim().split(';');
        let name = parts.next().unwrap_or_default().trim();
        for param in parts {
            let param = param.trim();
            if let Some(ms) = param.strip_prefix("dur=")
                && let Ok(ms) = ms.parse::<f64>()
            {
                stages.push((name.to_string(), ms));
            } else if name == "cache" && param == "desc=\"hit\"" {
                cached = true;
            }
        }
    }
    (stages, cached)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_a_target_off_this_machine() {
        let t = Duration::from_secs(1);
        assert!(Client::new("http://127.0.0.1:9", t, 4).is_ok());
        assert!(Client::new("http://[::1]:9", t, 4).is_ok());
        let err = Client::new("http://192.0.2.1:80", t, 4)
            .expect_err("not loopback")
            .to_string();
        assert!(err.contains("not a loopback address"), "{err}");
        assert!(Client::new("https://127.0.0.1:9", t, 4).is_err());
    }

    #[test]
    fn server_timing_stages_and_cache_flag() {
        let (stages, cached) = parse_server_timing(
            "embed;dur=1.20, candidates;dur=3.40, total;dur=5, cache;desc=\"hit\"",
        );
        assert_eq!(
            stages,
            vec![
                ("embed".to_string(), 1.2),
                ("candidates".to_string(), 3.4),
                ("total".to_string(), 5.0)
            ]
        );
        assert!(cached);
        assert!(!parse_server_timing("total;dur=1").1);
    }
}
