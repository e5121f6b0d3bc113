//! Shared by the server's integration tests: the workspace's test support (data, models, the
//! samples index, the real binary on a loopback port) and the in-process router calls.
#![allow(dead_code)]

use std::path::Path;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use clap::Parser;
use serde_json::Value;
use stillweb_server::{AppState, Args, app, prepare};
use tower::ServiceExt;

#[allow(unused_imports)]
pub use stillweb_test_support::{
    Server, agent, fetched, in_ci, repo, samples_index, shared_data, skip,
};

/// Starts this crate's `stillweb-server` binary on `index` at port 0.
pub fn spawn_server(index: &Path, extra: &[&str]) -> Server {
    stillweb_test_support::spawn_server(env!("CARGO_BIN_EXE_stillweb-server"), index, extra)
}

/// The client environment's python (`scripts/client-venv`), or `None` (a failure under CI) when
/// it was not made.
pub fn client_python() -> Option<std::path::PathBuf> {
    let cache = std::env::var_os("STILLWEB_CACHE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| stillweb_models::models_dir().join(".."));
    let python = cache.join("venv-clients/bin/python");
    fetched(&python, "scripts/client-venv").then_some(python)
}

/// Starts this crate's `stillweb-server` binary with exactly `args`.
pub fn spawn_with(args: &[&str]) -> Server {
    stillweb_test_support::spawn_with(env!("CARGO_BIN_EXE_stillweb-server"), args)
}

/// The server's state over `index`, configured by `extra` flags (in process, no socket).
pub fn state(index: &Path, extra: &[&str]) -> AppState {
    let mut args = vec!["stillweb-server", "--index", index.to_str().expect("path")];
    args.extend_from_slice(extra);
    prepare(Args::parse_from(args).validate().expect("config")).expect("state")
}

pub async fn call(
    state: &AppState,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    call_with(state, method, path, &[], body).await
}

pub async fn call_with(
    state: &AppState,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut request = Request::builder().method(method).uri(path);
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let request = match body {
        Some(b) => request
            .header("content-type", "application/json")
            .body(Body::from(b.to_string())),
        None => request.body(Body::empty()),
    }
    .expect("request");
    let (status, _, bytes) = send(state, request).await;
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

pub fn code(body: &Value) -> &str {
    body["error"]["code"].as_str().unwrap_or("")
}

/// Sends `request` through the whole router in process: status, headers and raw body.
pub async fn send(
    state: &AppState,
    request: Request<Body>,
) -> (StatusCode, axum::http::HeaderMap, axum::body::Bytes) {
    let response = app(state.clone()).oneshot(request).await.expect("response");
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 28)
        .await
        .expect("body");
    (status, headers, bytes)
}

/// POSTs `body` as JSON to a real server at `base`: the status and the JSON body (null if none).
pub fn post(base: &str, path: &str, body: Value) -> (u16, Value) {
    let mut response = agent()
        .post(format!("{base}{path}"))
        .send_json(body)
        .expect("request");
    let status = response.status().as_u16();
    (
        status,
        response.body_mut().read_json().unwrap_or(Value::Null),
    )
}

/// GETs `path` from a real server at `base`: the status and the JSON body (null if none).
pub fn get(base: &str, path: &str) -> (u16, Value) {
    let mut response = agent()
        .get(format!("{base}{path}"))
        .call()
        .expect("request");
    let status = response.status().as_u16();
    (
        status,
        response.body_mut().read_json().unwrap_or(Value::Null),
    )
}

/// `stillweb-loadtest`, built beside the server binary (`cargo test --workspace` builds it), or
/// `None` after [`skip`].
pub fn loadtest_binary() -> Option<std::path::PathBuf> {
    let server = std::path::PathBuf::from(env!("CARGO_BIN_EXE_stillweb-server"));
    let path = server.with_file_name("stillweb-loadtest");
    if path.is_file() {
        Some(path)
    } else {
        skip(&format!(
            "{} is missing; run `cargo build -p stillweb-loadtest` (cargo test --workspace builds it)",
            path.display()
        ));
        None
    }
}

/// Drives open-loop agent episodes (8 a second for 8 s: search, visits of shown pages, end) with
/// `loadtest` at `target`, calls `kill` 3 s in, and returns the load's report once it is done,
/// after checking that no request failed and no episode was lost.
pub fn episodes_surviving(
    loadtest: &Path,
    target: &str,
    queries: &Path,
    out: &Path,
    kill: impl FnOnce(),
) -> Value {
    let mut load = std::process::Command::new(loadtest)
        .args(["--target", target, "--workload", "episode"])
        .args(["--rate", "8", "--duration", "8", "--timeout-ms", "10000"])
        .args(["--queries", queries.to_str().expect("path")])
        .args(["--out", out.to_str().expect("path")])
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("start the load");
    std::thread::sleep(std::time::Duration::from_secs(3));
    kill();
    let status = load.wait().expect("load finished");
    assert!(status.success(), "stillweb-loadtest failed");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).expect("report"))
            .expect("parse report");
    let episodes = report["episodes"]["completed"].as_u64().expect("episodes");
    eprintln!("{episodes} episodes, {} errors", report["errors"]);
    assert!(episodes >= 40, "{report:#}");
    assert_eq!(report["errors"], 0, "{report:#}");
    assert_eq!(report["episodes"]["failed"], 0, "{report:#}");
    report
}
