//! The real binary against a real server on a loopback port (the samples index, BM25): every
//! workload and both loops produce a complete report with no errors.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use clap::Parser;
use serde_json::Value;

/// A server on the samples index, started once per test binary on 127.0.0.1:0; its base URL.
fn server() -> Option<&'static str> {
    static SERVER: OnceLock<Option<String>> = OnceLock::new();
    SERVER
        .get_or_init(|| {
            let index = stillweb_test_support::samples_index()?;
            let config = stillweb_server::Args::parse_from([
                "stillweb-server",
                "--index",
                index.to_str().expect("path"),
            ])
            .validate()
            .expect("config");
            let state = stillweb_server::prepare(config).expect("prepare");
            let url = stillweb_server::serve_in_background(state).expect("serve");
            Some(url)
        })
        .as_deref()
}

/// Agent-style queries about the samples.
fn query_file(dir: &Path) -> PathBuf {
    let path = dir.join("queries.txt");
    std::fs::write(
        &path,
        "# a few agent-style queries\n\
         \"Mona Lisa\" painting Leonardo Louvre portrait\n\
         history of the city of Brno castle Moravia\n\
         \"Nobel Prize\" physics winners list of laureates\n\
         football club founded stadium league site:wikipedia.org\n\
         river flows through the capital city bridges\n",
    )
    .expect("write queries");
    path
}

fn loadtest(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_stillweb-loadtest"))
        .args(args)
        .output()
        .expect("run stillweb-loadtest");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn run_report(extra: &[&str]) -> (Value, String) {
    let url = server().expect("server");
    let dir = tempfile::tempdir().expect("tempdir");
    let queries = query_file(dir.path());
    let out = dir.path().join("out");
    let pid = std::process::id().to_string();
    let mut args = vec![
        "--target",
        url,
        "--queries",
        queries.to_str().expect("path"),
        "--out",
        out.to_str().expect("path"),
        "--server-pid",
        &pid,
    ];
    args.extend_from_slice(extra);
    let (ok, stdout, stderr) = loadtest(&args);
    assert!(ok, "stdout: {stdout}\nstderr: {stderr}");
    assert!(stdout.contains("requests in"), "{stdout}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).expect("json"))
            .expect("parse report");
    let html = std::fs::read_to_string(out.join("report.html")).expect("html");
    (report, html)
}

#[test]
fn episode_workload_open_loop_writes_both_reports() {
    if server().is_none() {
        return;
    }
    let (report, html) = run_report(&["--workload", "episode", "--rate", "10", "--duration", "3"]);
    assert_eq!(report["errors"], 0, "{report:#}");
    assert_eq!(report["arrival"]["mode"], "open");
    let episodes = &report["episodes"];
    assert!(
        episodes["completed"].as_u64().expect("completed") >= 25,
        "{report:#}"
    );
    assert_eq!(episodes["failed"], 0);
    let ops = &report["operations"];
    let searches = ops["search"]["requests"].as_u64().expect("searches");
    assert_eq!(searches, 2 * episodes["completed"].as_u64().expect("n"));
    assert!(
        ops["visit"]["requests"].as_u64().expect("visits") > 0,
        "{report:#}"
    );
    assert_eq!(
        ops["end_session"]["requests"].as_u64(),
        episodes["completed"].as_u64()
    );
    for p in ["p50", "p95", "p99"] {
        assert!(
            report["latency_ms"][p].as_f64().expect(p) > 0.0,
            "{report:#}"
        );
    }
    assert!(
        report["server_stages_ms"]["candidates"]["p50"]
            .as_f64()
            .is_some()
    );
    assert!(
        report["server"]["cpu_seconds_per_search"]
            .as_f64()
            .expect("cpu")
            > 0.0
    );
    assert!(report["server"]["peak_rss_bytes"].as_u64().expect("rss") > 0);
    assert!(report["timeline"].as_array().expect("timeline").len() >= 3);
    for title in [
        "Latency over time",
        "Throughput over time",
        "Latency by percentile",
    ] {
        assert!(html.contains(title), "{title} missing");
    }
    assert!(html.matches("<svg").count() >= 3);
}

#[test]
fn closed_loop_searches_and_batches() {
    if server().is_none() {
        return;
    }
    let (report, _) = run_report(&[
        "--workload",
        "search",
        "--concurrency",
        "4",
        "--duration",
        "2",
    ]);
    assert_eq!(report["errors"], 0, "{report:#}");
    assert_eq!(report["arrival"]["concurrency"], 4);
    assert!(
        report["achieved_rate"].as_f64().expect("rate") > 5.0,
        "{report:#}"
    );
    // Five distinct queries, so most searches are answered from the server's result cache.
    assert!(
        report["cache_hit_ratio"].as_f64().expect("ratio") > 0.5,
        "{report:#}"
    );

    let (report, _) = run_report(&[
        "--workload",
        "batch",
        "--rate",
        "5",
        "--duration",
        "2",
        "--batch-size",
        "4",
    ]);
    assert_eq!(report["errors"], 0, "{report:#}");
    assert!(
        report["operations"]["batch"]["requests"]
            .as_u64()
            .expect("n")
            >= 9
    );
    assert_eq!(report["batch_size"], 4);
}

/// A peer with Search-R1's `/retrieve` and no `/readyz`, which, as Search-R1's server does,
/// fails a call that does not ask for scores; its base URL.
fn search_r1_peer() -> String {
    use axum::Json;
    use axum::http::StatusCode;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}", listener.local_addr().expect("addr"));
    listener.set_nonblocking(true).expect("nonblocking");
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Runtime::new().expect("runtime");
        runtime.block_on(async move {
            let retrieve = |Json(body): Json<Value>| async move {
                if body["return_scores"] != true {
                    return Err(StatusCode::INTERNAL_SERVER_ERROR);
                }
                let hits: Vec<Value> = (0..body["topk"].as_u64().unwrap_or(3))
                    .map(|i| serde_json::json!({"document": {"id": i, "contents": "\"T\"\nx"}, "score": 1.0}))
                    .collect();
                let result = vec![hits; body["queries"].as_array().map_or(0, Vec::len)];
                Ok(Json(serde_json::json!({ "result": result })))
            };
            let app = axum::Router::new().route("/retrieve", axum::routing::post(retrieve));
            let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
            axum::serve(listener, app).await.expect("serve");
        });
    });
    url
}

#[test]
fn the_retrieve_workload_drives_a_peer_without_a_readiness_route() {
    let url = search_r1_peer();
    let dir = tempfile::tempdir().expect("tempdir");
    let queries = query_file(dir.path());
    let out = dir.path().join("out");
    let (ok, stdout, stderr) = loadtest(&[
        "--target",
        &url,
        "--queries",
        queries.to_str().expect("path"),
        "--out",
        out.to_str().expect("path"),
        "--workload",
        "retrieve",
        "--batch-size",
        "4",
        "--concurrency",
        "2",
        "--duration",
        "1",
    ]);
    assert!(ok, "stdout: {stdout}\nstderr: {stderr}");
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).expect("json"))
            .expect("parse report");
    let retrieve = &report["operations"]["retrieve"];
    assert!(
        retrieve["requests"].as_u64().expect("requests") > 0,
        "{report}"
    );
    assert_eq!(retrieve["errors"], 0, "{report}");
}

#[test]
fn refuses_a_target_that_is_not_loopback_or_not_serving() {
    let dir = tempfile::tempdir().expect("tempdir");
    let queries = query_file(dir.path());
    let q = queries.to_str().expect("path");
    let (ok, _, stderr) = loadtest(&[
        "--target",
        "http://192.0.2.1:8080",
        "--queries",
        q,
        "--out",
        "/tmp/x",
        "--rate",
        "1",
    ]);
    assert!(!ok && stderr.contains("not a loopback address"), "{stderr}");
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let target = format!("http://127.0.0.1:{port}");
    let (ok, _, stderr) = loadtest(&[
        "--target",
        &target,
        "--queries",
        q,
        "--out",
        "/tmp/x",
        "--rate",
        "1",
    ]);
    assert!(!ok && stderr.contains("is not ready"), "{stderr}");
    let (ok, _, stderr) = loadtest(&["--target", &target, "--queries", q, "--out", "/tmp/x"]);
    assert!(!ok && stderr.contains("--concurrency"), "{stderr}");
    for bad in [
        ["--duration", "0"],
        ["--duration", "4000"],
        ["--k", "21"],
        ["--batch-size", "65"],
    ] {
        let mut args = vec![
            "--target",
            &target,
            "--queries",
            q,
            "--out",
            "/tmp/x",
            "--rate",
            "1",
        ];
        args.extend_from_slice(&bad);
        let (ok, _, stderr) = loadtest(&args);
        assert!(!ok && stderr.contains(bad[0]), "{bad:?}: {stderr}");
    }
}
