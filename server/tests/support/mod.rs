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
    Server, agent, fetched, in_ci, metrics_text, repo, samples_index, shared_data, skip,
};

/// The random-weight Qwen3 reranker fixture, if `models/make-fixtures` has built it.
pub fn qwen3_fixture() -> Option<std::path::PathBuf> {
    let dir = stillweb_models::config::fixtures_dir().join("qwen3-reranker-tiny");
    fetched(&dir.join("model.toml"), "models/make-fixtures").then_some(dir)
}

/// Copies the directory `from` (an index) to `to`, recursively.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for entry in std::fs::read_dir(from).expect("read dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

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

/// PUTs `body` as JSON to a real server at `base`: the status and the JSON body (null if none).
pub fn put(base: &str, path: &str, body: Value) -> (u16, Value) {
    let mut response = agent()
        .put(format!("{base}{path}"))
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

/// Checks a `/v1/search` answer given with `"explain": true`: every normalised signal is its raw
/// value mapped by the context's range, the chunk score and the fused score recompose from the
/// parts with the context's weights, each result's score is its reranker score (reranked) or
/// its fused score, and the results are in score order.
pub fn assert_explained(body: &Value) {
    let ctx = &body["explain"];
    assert!(ctx.is_object(), "no explain context: {body}");
    let f = |v: &Value| v.as_f64();
    let weight = |name: &str| f(&ctx["weights"][name]).expect("weight");
    let norm = |value: Option<f64>, range: &Value| -> f64 {
        match (value, f(&range[0]), f(&range[1])) {
            (Some(v), Some(lo), Some(hi)) if hi > lo => (v - lo) / (hi - lo),
            (Some(_), _, _) => 1.0,
            (None, _, _) => 0.0,
        }
    };
    let close = |a: f64, b: f64, what: &str| {
        assert!((a - b).abs() < 1e-4, "{what}: {a} vs {b} in {body}");
    };
    let reranked = ctx["reranked"].as_bool().expect("reranked");
    let results = body["results"].as_array().expect("results");
    assert!(!results.is_empty(), "{body}");
    let mut previous = f64::INFINITY;
    let mut previous_fused_rank = 0;
    for r in results {
        let e = &r["explain"];
        assert!(e.is_object(), "a result without its explanation: {r}");
        let value = |k: &str| f(&e[k]);
        for (raw, normalised, range) in [
            ("chunk_bm25", "chunk_bm25_normalized", "chunk_bm25_range"),
            (
                "chunk_cosine",
                "chunk_cosine_normalized",
                "chunk_cosine_range",
            ),
            ("doc_bm25", "doc_bm25_normalized", "doc_bm25_range"),
            ("chunk_score", "chunk_score_normalized", "chunk_score_range"),
        ] {
            close(
                norm(value(raw), &ctx[range]),
                value(normalised).expect("normalised"),
                normalised,
            );
        }
        close(
            weight("bm25_chunk") * value("chunk_bm25_normalized").unwrap_or(0.0)
                + weight("dense_chunk") * value("chunk_cosine_normalized").unwrap_or(0.0),
            value("chunk_score").expect("chunk score"),
            "chunk_score",
        );
        if ctx["fusion"]["method"] == "weighted" {
            close(
                value("chunk_score_normalized").expect("normalised")
                    + weight("bm25_doc") * value("doc_bm25_normalized").expect("doc"),
                value("fused_score").expect("fused"),
                "fused_score",
            );
        }
        let score = f(&r["score"]).expect("score");
        let expected = match (reranked, value("rerank_score")) {
            (true, Some(s)) => s,
            (true, None) => 0.0,
            (false, _) => value("fused_score").expect("fused"),
        };
        close(score, expected, "score");
        assert!(
            score <= previous + 1e-6,
            "results out of score order: {body}"
        );
        previous = score;
        let fused_rank = e["fused_rank"].as_u64().expect("fused rank");
        if !reranked {
            assert!(
                fused_rank > previous_fused_rank,
                "fused ranks out of order: {body}"
            );
        }
        previous_fused_rank = fused_rank;
    }
}

/// Runs the client-library script `script` (in `tests/clients/`) with `python` and `args`, and
/// asserts that it passed every check (it prints "N checks passed").
pub fn client_checks_pass(python: &Path, script: &str, args: &[&str]) {
    let output = std::process::Command::new(python)
        .arg(repo().join("server/tests/clients").join(script))
        .args(args)
        .output()
        .expect("run python");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stdout}{stderr}");
    assert!(
        output.status.success(),
        "{script} failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("checks passed"), "{stdout}");
}

/// Starts the server binary with `flag FILE`, FILE holding `contents`, and returns what it said
/// on stderr, having asserted that it refused to start.
pub fn refused_at_start(flag: &str, file_name: &str, contents: &str) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(file_name);
    std::fs::write(&path, contents).expect("write");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_stillweb-server"))
        .args([
            "--index",
            "/nonexistent",
            flag,
            path.to_str().expect("path"),
        ])
        .output()
        .expect("run");
    assert!(!output.status.success(), "started with a bad {flag} file");
    String::from_utf8_lossy(&output.stderr).into_owned()
}
