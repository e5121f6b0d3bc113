//! Shared by the server's integration tests: the samples index and the real binary on a
//! loopback port.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use clap::Parser;
use serde_json::Value;
use stillweb_server::{AppState, Args, app, prepare};
use tower::ServiceExt;

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The samples index, built once per test binary; `None` (with a message) without shared data.
pub fn samples_index() -> Option<&'static Path> {
    static INDEX: OnceLock<Option<(tempfile::TempDir, PathBuf)>> = OnceLock::new();
    INDEX
        .get_or_init(|| {
            let shared = std::env::var_os("STILLWEB_SHARED_DATA")
                .map(PathBuf::from)
                .unwrap_or_else(|| repo().join("../shared/data"));
            if !shared.is_dir() {
                eprintln!("SKIPPED: shared data folder {} not found", shared.display());
                return None;
            }
            let dir = tempfile::tempdir().expect("tempdir");
            let out = dir.path().join("samples");
            let corpus = stillweb_corpus::manifest::CorpusManifest::load(
                &repo().join("corpus-manifests/samples.toml"),
            )
            .expect("manifest");
            stillweb_index::build_index(&corpus, &out, &stillweb_index::BuildOptions::default())
                .expect("build");
            Some((dir, out))
        })
        .as_ref()
        .map(|(_, p)| p.as_path())
}

/// Starts the real binary on port 0 and returns it with its base URL.
pub fn spawn_server(index: &Path, extra: &[&str]) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_stillweb-server"))
        .args([
            "--index",
            index.to_str().expect("path"),
            "--listen",
            "127.0.0.1:0",
        ])
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn server");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read line");
    let url = line.trim().rsplit(' ').next().expect("url").to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "{line}");
    (child, url)
}

/// Kills the server when dropped, so that a failing test does not leave it running (holding the
/// test harness's output pipe open).
pub struct KillOnDrop(pub Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
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
