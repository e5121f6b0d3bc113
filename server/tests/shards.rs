//! A coordinator over a shard set, every part a real `stillweb-server` process on a loopback
//! port: the samples corpus built as 3 shards (BM25), shard 1 with two replicas. The coordinator
//! answers as one server on the single samples index (same results, scores and snippets; the
//! same visit rules), every compatible client library works through it, a killed replica costs
//! no request under load, and a shard with no replica left answers `503 shard_unavailable`
//! until one is back. The same corpus as a base index with its fabricated pages as an overlay
//! (local parts) ranks and explains as the single index too.

mod support;

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use stillweb_index::shard::shard_dir;
use support::{
    Server, client_python, episodes_surviving, get, loadtest_binary, post, put, repo,
    samples_index, shared_data, spawn_server,
};

/// The samples corpus built as a set of 3 shards (BM25 only), once per test binary.
fn shard_set() -> Option<&'static Path> {
    static SET: OnceLock<Option<(tempfile::TempDir, PathBuf)>> = OnceLock::new();
    SET.get_or_init(|| {
        shared_data()?;
        let dir = tempfile::tempdir().expect("tempdir");
        let set = dir.path().join("samples-3");
        let corpus = stillweb_corpus::manifest::CorpusManifest::load(
            &repo().join("corpus-manifests/samples.toml"),
        )
        .expect("samples manifest");
        stillweb_index::build_shards(
            &corpus,
            &set,
            3,
            None,
            &stillweb_index::BuildOptions::default(),
            None,
        )
        .expect("build the shard set");
        Some((dir, set))
    })
    .as_ref()
    .map(|(_, p)| p.as_path())
}

/// A shard server on `127.0.0.1:PORT` (0: any).
fn shard_server(set: &Path, shard: u32, port: u16) -> Server {
    let dir = shard_dir(set, shard);
    let listen = format!("127.0.0.1:{port}");
    support::spawn_with(&["--index", dir.to_str().expect("path"), "--listen", &listen])
}

/// The cluster: shards 0 and 2 with one replica, shard 1 with two, and a coordinator.
struct Cluster {
    shards: Vec<Vec<Server>>,
    coordinator: Server,
}

fn cluster(set: &Path, extra: &[&str]) -> Cluster {
    let shards = vec![
        vec![shard_server(set, 0, 0)],
        vec![shard_server(set, 1, 0), shard_server(set, 1, 0)],
        vec![shard_server(set, 2, 0)],
    ];
    let lists: Vec<String> = shards
        .iter()
        .map(|replicas| {
            replicas
                .iter()
                .map(|s| s.url.as_str())
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    let mut args = vec!["--listen", "127.0.0.1:0"];
    for list in &lists {
        args.extend(["--shard", list.as_str()]);
    }
    args.extend_from_slice(extra);
    let coordinator = support::spawn_with(&args);
    Cluster {
        shards,
        coordinator,
    }
}

/// Agent-style questions from the fabricated items, and queries with every operator (a phrase
/// no page has is relaxed on the whole corpus's count, not one shard's).
fn queries() -> Vec<String> {
    let items = shared_data()
        .map(|d| std::fs::read_to_string(d.join("fabricated/items.jsonl")).expect("items"))
        .unwrap_or_default();
    let mut queries: Vec<String> = items
        .lines()
        .take(25)
        .map(|l| {
            let item: Value = serde_json::from_str(l).expect("item");
            item["question"].as_str().expect("question").to_string()
        })
        .collect();
    queries.extend(
        [
            "Anarchism",
            "\"Mona Lisa\" painting Leonardo",
            "history of the city site:wikipedia.org",
            "Drekev Labs fellowship -Brno",
            "\"no page says this zqxj\" river bridges",
            "site:techbrief.example program update",
            "Drekev OR Seogev labs program",
            "labs program update after:2020 before:2022",
            "Drekev labs fellowship before:2015-06",
        ]
        .map(String::from),
    );
    queries
}

#[test]
fn a_coordinator_ranks_and_visits_as_the_single_index() {
    let (Some(single_index), Some(set)) = (samples_index(), shard_set()) else {
        return;
    };
    let single = spawn_server(single_index, &[]);
    let cluster = cluster(set, &[]);
    let coordinator = &cluster.coordinator.url;

    let (_, info) = get(coordinator, "/info");
    let (_, single_info) = get(&single.url, "/info");
    assert_eq!(
        info["index"]["documents"], single_info["index"]["documents"],
        "{info}"
    );
    assert_eq!(info["index"]["chunks"], single_info["index"]["chunks"]);
    assert_eq!(info["index"]["shards"].as_array().map(Vec::len), Some(3));
    // One frozen clock for the set: the corpus's newest page, not a shard's.
    assert_eq!(
        info["index"]["as_of"], single_info["index"]["as_of"],
        "{info}"
    );
    assert!(info["index"]["as_of"].is_string(), "{info}");
    // A period back from that clock finds what the single index finds.
    let recent = json!({"q": "labs program update", "num": 10, "tbs": "qdr:m6"});
    let (_, got) = post(coordinator, "/serper/search", recent.clone());
    let (_, want) = post(&single.url, "/serper/search", recent);
    assert_eq!(got["organic"], want["organic"]);
    assert!(
        !want["organic"].as_array().expect("organic").is_empty(),
        "{want}"
    );

    let mut relaxed = 0;
    for query in queries() {
        let body = json!({"query": query, "k": 10});
        let (status, got) = post(coordinator, "/v1/search", body.clone());
        let (_, want) = post(&single.url, "/v1/search", body);
        assert_eq!(status, 200, "{query}: {got}");
        assert_eq!(got["results"], want["results"], "{query}");
        assert_eq!(got["relaxed"], want["relaxed"], "{query}");
        relaxed += usize::from(got["relaxed"] == true);
        assert!(
            !got["results"].as_array().expect("results").is_empty() || query.contains("-Brno"),
            "{query}: no results"
        );
        // Explained, the coordinator's numbers are the single index's.
        let body = json!({"query": query, "k": 10, "explain": true});
        let (_, got) = post(coordinator, "/v1/search", body.clone());
        let (_, want) = post(&single.url, "/v1/search", body);
        assert_eq!(got["results"], want["results"], "{query} explained");
        assert_eq!(got["explain"], want["explain"], "{query} explained");
    }
    assert!(relaxed >= 1, "the phrase no page has is relaxed");

    // Visits: the same rules and the same page text as on one server.
    let (_, found) = post(
        &single.url,
        "/v1/search",
        json!({"query": "Anarchism", "k": 3, "session": "single"}),
    );
    let url = found["results"][0]["url"]
        .as_str()
        .expect("url")
        .to_string();
    let (status, refused) = post(
        coordinator,
        "/v1/visit",
        json!({"url": url, "session": "episode-1"}),
    );
    assert_eq!(status, 403, "{refused}");
    assert_eq!(refused["error"]["code"], "url_not_seen");
    let (status, missing) = post(
        coordinator,
        "/v1/visit",
        json!({"url": "https://nowhere.example/page", "session": "episode-1"}),
    );
    assert_eq!(status, 404, "{missing}");
    assert_eq!(missing["error"]["code"], "url_not_found");
    post(
        coordinator,
        "/v1/search",
        json!({"query": "Anarchism", "k": 3, "session": "episode-1"}),
    );
    let (status, page) = post(
        coordinator,
        "/v1/visit",
        json!({"url": url, "session": "episode-1"}),
    );
    assert_eq!(status, 200, "{page}");
    let (_, want) = post(
        &single.url,
        "/v1/visit",
        json!({"url": url, "session": "single"}),
    );
    assert_eq!(page, want);
    // With its chunks: the same spans from the shard that holds the page.
    let (_, chunked) = post(
        coordinator,
        "/v1/visit",
        json!({"url": url, "session": "episode-1", "chunks": true}),
    );
    let (_, want) = post(
        &single.url,
        "/v1/visit",
        json!({"url": url, "session": "single", "chunks": true}),
    );
    assert!(
        chunked["chunks"].as_array().is_some_and(|c| c.len() > 1),
        "{chunked}"
    );
    assert_eq!(chunked["chunks"], want["chunks"]);
    // The transcript is the coordinator's: a session begins with its first search (the
    // refused visits before it were to no session), then the two visits.
    let (status, transcript) = get(coordinator, "/v1/sessions/episode-1");
    assert_eq!(status, 200, "{transcript}");
    let events = transcript["events"].as_array().expect("events");
    assert_eq!(events.len(), 3, "{transcript}");
    assert_eq!(events[1]["outcome"], "ok", "{transcript}");

    // A session pinned to a date at the coordinator: the shards search only older pages, and
    // a newer page it was shown before the pin no longer reads.
    let cutoff = stillweb_corpus::date::parse_day("2015-07-01").expect("day");
    let dated = |r: &Value| stillweb_corpus::date::document_instant(r["date"].as_str()?);
    let query = json!({"query": "labs program update", "k": 20, "session": "as-of"});
    let (_, shown) = post(coordinator, "/v1/search", query.clone());
    let newer = shown["results"]
        .as_array()
        .expect("results")
        .iter()
        .find(|r| dated(r).is_some_and(|d| d >= cutoff))
        .and_then(|r| r["url"].as_str())
        .expect("a newer page before the pin")
        .to_string();
    let (status, pinned) = put(
        coordinator,
        "/v1/sessions/as-of",
        json!({"as_of": "2015-06-30"}),
    );
    assert_eq!(status, 200, "{pinned}");
    let (_, found) = post(coordinator, "/v1/search", query);
    let found = found["results"].as_array().expect("results");
    assert!(!found.is_empty());
    assert!(
        found.iter().all(|r| dated(r).is_some_and(|d| d < cutoff)),
        "{found:?}"
    );
    let (status, refused) = post(
        coordinator,
        "/v1/visit",
        json!({"url": newer, "session": "as-of"}),
    );
    assert_eq!(status, 403, "{refused}");
}

/// The samples corpus without its fabricated pages as a base, and the fabricated pages as an
/// overlay of it: served together they answer as the single samples index, explanations
/// included, and an overlay page is visitable once shown.
#[test]
fn a_base_with_an_overlay_ranks_and_explains_as_the_single_index() {
    let Some(single_index) = samples_index() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let samples = stillweb_corpus::manifest::CorpusManifest::load(
        &repo().join("corpus-manifests/samples.toml"),
    )
    .expect("samples manifest");
    let (mut base_corpus, mut pages) = (samples.clone(), samples);
    let fabricated = base_corpus.sources.pop().expect("the fabricated source");
    assert_eq!(fabricated.name.as_deref(), Some("fabricated"));
    pages.sources = vec![fabricated];
    let (base, overlay) = (dir.path().join("base"), dir.path().join("overlay"));
    let options = stillweb_index::BuildOptions::default();
    stillweb_index::build_index(&base_corpus, &base, &options).expect("base");
    let over = stillweb_index::BuildOptions {
        overlay_of: vec![base.clone()],
        ..options
    };
    stillweb_index::build_index(&pages, &overlay, &over).expect("overlay");
    let single = spawn_server(single_index, &[]);
    let layered = spawn_server(&base, &["--overlay", overlay.to_str().expect("path")]);
    for query in queries() {
        for body in [
            json!({"query": query, "k": 10}),
            json!({"query": query, "k": 10, "explain": true}),
        ] {
            let (status, got) = post(&layered.url, "/v1/search", body.clone());
            let (_, want) = post(&single.url, "/v1/search", body);
            assert_eq!(status, 200, "{query}: {got}");
            assert_eq!(got["results"], want["results"], "{query}");
            assert_eq!(got["relaxed"], want["relaxed"], "{query}");
            assert_eq!(got["explain"], want["explain"], "{query} explained");
        }
    }
    let (_, found) = post(
        &layered.url,
        "/v1/search",
        json!({"query": "Drekev Labs fellowship", "k": 3, "session": "layered"}),
    );
    let url = found["results"][0]["url"]
        .as_str()
        .expect("url")
        .to_string();
    let (status, page) = post(
        &layered.url,
        "/v1/visit",
        json!({"url": url, "session": "layered"}),
    );
    assert_eq!(status, 200, "{page}");
}

#[test]
fn every_compatible_client_library_works_through_a_coordinator() {
    let Some(set) = shard_set() else { return };
    let Some(python) = client_python() else {
        return;
    };
    let cluster = cluster(set, &[]);
    let output = Command::new(&python)
        .arg(repo().join("server/tests/clients/compat_clients.py"))
        .arg(&cluster.coordinator.url)
        .output()
        .expect("run python");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "client checks through the coordinator failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("checks passed"), "{stdout}");
}

/// `stillweb-loadtest`, built beside this binary by `cargo test --workspace`.

#[test]
fn a_killed_replica_costs_no_request_and_a_lost_shard_answers_503_until_it_returns() {
    let Some(set) = shard_set() else { return };
    let Some(loadtest) = loadtest_binary() else {
        return;
    };
    let mut cluster = cluster(
        set,
        &["--shard-timeout-ms", "2000", "--request-timeout-secs", "10"],
    );
    let coordinator = cluster.coordinator.url.clone();
    let dir = tempfile::tempdir().expect("tempdir");
    let queries = dir.path().join("queries.txt");
    std::fs::write(&queries, queries_text()).expect("queries");
    // One replica of shard 1 is killed with SIGKILL 3 s into the load.
    let mut victim_port = 0;
    episodes_surviving(
        &loadtest,
        &coordinator,
        &queries,
        &dir.path().join("load"),
        || {
            let victim = cluster.shards[1].remove(0);
            victim_port = port(&victim.url);
            drop(victim); // SIGKILL, then reaped
        },
    );

    // Shard 1's last replica gone: a specific 503, well within the request timeout (for
    // queries not answered before: the result cache still answers those).
    let survivor = cluster.shards[1].remove(0);
    drop(survivor);
    let started = Instant::now();
    let fresh = json!({"query": "anarchism in the counterculture"});
    let (status, body) = post(&coordinator, "/v1/search", fresh.clone());
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "shard_unavailable", "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("shard 1")),
        "{body}"
    );
    assert!(started.elapsed() < Duration::from_secs(10));
    // Each dialect says so in its own shape.
    let (status, serper) = post(
        &coordinator,
        "/serper/search",
        json!({"q": "anarchist revolts"}),
    );
    assert_eq!(status, 503, "{serper}");

    // A replica back on its address: the coordinator uses it again by itself.
    let back = shard_server(set, 1, victim_port);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, body) = post(&coordinator, "/v1/search", fresh.clone());
        if status == 200 {
            assert!(!body["results"].as_array().expect("results").is_empty());
            break;
        }
        assert!(Instant::now() < deadline, "not recovered: {status} {body}");
        std::thread::sleep(Duration::from_millis(200));
    }
    drop(back);
}

fn port(url: &str) -> u16 {
    url.rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .expect("port")
}

fn queries_text() -> String {
    queries()
        .into_iter()
        .filter(|q| !q.contains('"'))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every metric the Grafana dashboard (`deploy/grafana/stillweb.json`) and the alert rules
/// (`deploy/prometheus/stillweb-alerts.yaml`) query is one a real coordinator exports: a
/// coordinator with gold labels and the reranker fixture serves a session (searches, a repeat, a
/// visit, an unseen visit, a body too large), then its `/metrics` must hold a sample of each name
/// the queries use. Their PromQL syntax is promtool's to check (`scripts/deploy-checks`).
#[test]
fn the_dashboards_and_alerts_query_metrics_a_coordinator_exports() {
    let (Some(set), Some(data)) = (shard_set(), shared_data()) else {
        return;
    };
    let Some(reranker) = support::qwen3_fixture() else {
        return;
    };
    let items = data.join("fabricated/items.jsonl");
    let cluster = cluster(
        set,
        &[
            "--gold",
            items.to_str().expect("path"),
            "--reranker",
            reranker.to_str().expect("path"),
        ],
    );
    let base = &cluster.coordinator.url;
    let search = json!({"query": "Anarchism", "session": "dash-1"});
    for _ in 0..2 {
        let (status, body) = post(base, "/v1/search", search.clone());
        assert_eq!(status, 200, "{body}");
    }
    let (_, found) = post(base, "/v1/search", search);
    let url = found["results"][0]["url"].as_str().expect("url");
    let (status, _) = post(base, "/v1/visit", json!({"url": url, "session": "dash-1"}));
    assert_eq!(status, 200);
    let unseen = json!({"url": url, "session": "dash-2"});
    assert_eq!(post(base, "/v1/visit", unseen).0, 403);
    // A body declared too large is refused before it is read (the rejection counter): sent as
    // headers alone, so the refusal does not race the client's writes.
    let address = base.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).expect("connect");
    write!(
        stream,
        "POST /v1/search HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        2 << 20
    )
    .expect("headers");
    let mut status_line = String::new();
    std::io::BufReader::new(stream)
        .read_line(&mut status_line)
        .expect("status line");
    assert!(status_line.starts_with("HTTP/1.1 413"), "{status_line}");

    let text = support::metrics_text(base);
    let exported: std::collections::BTreeSet<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .collect();
    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(repo().join("deploy/grafana/stillweb.json")).expect("dashboard"),
    )
    .expect("dashboard JSON");
    let mut queries: Vec<String> = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        let targets = panel["targets"].as_array().expect("targets");
        assert!(!targets.is_empty(), "{} has no query", panel["title"]);
        queries.extend(
            targets
                .iter()
                .map(|t| t["expr"].as_str().expect("expr").to_string()),
        );
    }
    let rules: Value = serde_yaml_ng::from_str(
        &std::fs::read_to_string(repo().join("deploy/prometheus/stillweb-alerts.yaml"))
            .expect("alerts"),
    )
    .expect("alert YAML");
    for group in rules["groups"].as_array().expect("groups") {
        for rule in group["rules"].as_array().expect("rules") {
            queries.push(rule["expr"].as_str().expect("expr").to_string());
        }
    }
    let mut named = 0;
    for query in &queries {
        for (at, _) in query.match_indices("stillweb_") {
            let name: String = query[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            assert!(
                exported.contains(name.as_str()),
                "`{name}` (in {query}) is not exported; /metrics has {exported:?}"
            );
            named += 1;
        }
    }
    assert!(named >= 20, "{named} metric names in the queries");
}
