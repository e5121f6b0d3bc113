//! The indexer's command line on the real samples: per-source counts, failure modes, and the
//! retrieval-quality floor of the BM25-only two-stage pipeline on SciFact.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use stillweb_test_support::{fetched, repo, samples_index, shared_data};

/// Whether `models/fetch` has run; in CI its absence is a failure, not a skip.
fn models_fetched() -> bool {
    let dir = stillweb_models::config::default_embedder_dir();
    fetched(&dir.join("model.toml"), "models/fetch")
}

fn indexer(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_stillweb-indexer"))
        .args(args)
        .env("RUST_LOG", "warn")
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("run stillweb-indexer")
}

fn json(output: &Output) -> serde_json::Value {
    assert!(
        output.status.success(),
        "indexer failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON on stdout")
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[test]
fn samples_manifest_reports_per_source_counts() {
    let Some(_) = shared_data() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("samples");
    // What a build killed earlier would have left (no process has this id).
    let abandoned = dir.path().join(".samples.tmp-4194304999");
    std::fs::create_dir_all(abandoned.join("docs")).expect("mkdir");
    let manifest = repo().join("corpus-manifests/samples.toml");
    let report = json(&indexer(&[
        "build",
        "--no-dense",
        "--manifest",
        path_str(&manifest),
        "--out",
        path_str(&out),
    ]));
    let files: Vec<&serde_json::Value> = report["sources"]
        .as_array()
        .expect("sources")
        .iter()
        .flat_map(|s| s["files"].as_array().expect("files"))
        .collect();
    let documents = |suffix: &str| {
        files
            .iter()
            .find(|f| f["path"].as_str().is_some_and(|p| p.ends_with(suffix)))
            .map(|f| f["documents"].as_u64().expect("count"))
            .unwrap_or_else(|| panic!("no file {suffix}"))
    };
    assert_eq!(
        documents("enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"),
        106
    );
    assert_eq!(documents("enwiki-table-markup.xml.bz2"), 5);
    assert_eq!(
        documents("wikipedia2vec_enwiki-pages-articles-sample.xml.bz2"),
        2
    );
    assert_eq!(documents("fabricated/documents.jsonl"), 2250);
    assert_eq!(documents("cc-main-2019-30_dolma_en.parquet"), 274);
    let redirects = files
        .iter()
        .find(|f| {
            f["path"]
                .as_str()
                .is_some_and(|p| p.ends_with("shortened.bz2"))
        })
        .and_then(|f| f["skipped"]["redirect"].as_u64());
    assert_eq!(redirects, Some(100));
    // The multistream copy repeats the main sample page for page: one of the two is all duplicates.
    let duplicates: u64 = report["duplicates"].as_u64().expect("duplicates");
    assert!(duplicates >= 106, "{duplicates}");
    assert!(out.join("manifest.json").is_file());
    // Nothing temporary is left beside the published index, not even what a killed build left.
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .expect("read_dir")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty());
}

#[test]
fn failures_say_what_and_leave_nothing_half_built() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("docs.jsonl");
    std::fs::write(
        &data,
        "{\"id\": \"1\", \"url\": \"https://a.example/1\", \"title\": \"One\", \"text\": \"First page.\"}\nnot json\n{\"id\": \"3\", \"text\": \"\"}\n",
    )
    .expect("write");
    let manifest = dir.path().join("m.toml");
    std::fs::write(
        &manifest,
        "name = \"t\"\n[[source]]\nformat = \"jsonl\"\npath = \"docs.jsonl\"\n",
    )
    .expect("write");
    let out = dir.path().join("index");

    // 2 of 3 records are bad: past the default 1% threshold.
    let failed = indexer(&[
        "build",
        "--no-dense",
        "--manifest",
        path_str(&manifest),
        "--out",
        path_str(&out),
    ]);
    assert!(!failed.status.success());
    let stderr = String::from_utf8_lossy(&failed.stderr);
    assert!(stderr.contains("2 of 3 records were bad"), "{stderr}");
    assert!(
        stderr.contains("line 2") && stderr.contains("invalid JSON"),
        "{stderr}"
    );
    assert!(!out.exists(), "a failed build publishes nothing");

    // Allowed with a higher threshold.
    let ok = indexer(&[
        "build",
        "--no-dense",
        "--manifest",
        path_str(&manifest),
        "--out",
        path_str(&out),
        "--max-bad-fraction",
        "0.7",
    ]);
    assert_eq!(json(&ok)["documents"], 1);

    // The published index verifies against its checksums; a changed byte is named.
    let verified = indexer(&["verify", "--index", path_str(&out)]);
    assert!(verified.status.success(), "{verified:?}");
    assert!(json(&verified)["files"].as_u64().expect("files") > 3);
    let manifest_json = out.join("manifest.json");
    let mut bytes = std::fs::read(&manifest_json).expect("read");
    bytes[2] ^= 1;
    std::fs::write(&manifest_json, &bytes).expect("write");
    let damaged = indexer(&["verify", "--index", path_str(&out)]);
    assert!(!damaged.status.success());
    let stderr = String::from_utf8_lossy(&damaged.stderr);
    assert!(
        stderr.contains("manifest.json does not match its checksum")
            && stderr.contains("rebuild it"),
        "{stderr}"
    );
    bytes[2] ^= 1;
    std::fs::write(&manifest_json, &bytes).expect("write");

    // An existing index is not replaced without --force.
    let again = indexer(&[
        "build",
        "--no-dense",
        "--manifest",
        path_str(&manifest),
        "--out",
        path_str(&out),
    ]);
    assert!(String::from_utf8_lossy(&again.stderr).contains("pass --force"));

    // Checksums and expected counts are verified.
    std::fs::write(
        &manifest,
        format!("name = \"t\"\n[[source]]\nformat = \"jsonl\"\npath = \"docs.jsonl\"\nsha256 = \"{}\"\n", "0".repeat(64)),
    )
    .expect("write");
    let bad_sum = indexer(&[
        "build",
        "--no-dense",
        "--manifest",
        path_str(&manifest),
        "--out",
        path_str(&out),
        "--force",
    ]);
    assert!(String::from_utf8_lossy(&bad_sum.stderr).contains("checksum mismatch"));
    std::fs::write(
        &manifest,
        "name = \"t\"\n[[source]]\nformat = \"jsonl\"\npath = \"docs.jsonl\"\nexpected_documents = 5\n",
    )
    .expect("write");
    let bad_count = indexer(&[
        "build",
        "--no-dense",
        "--manifest",
        path_str(&manifest),
        "--out",
        path_str(&out),
        "--force",
        "--max-bad-fraction",
        "1",
    ]);
    let stderr = String::from_utf8_lossy(&bad_count.stderr);
    assert!(
        stderr.contains("yielded 1 documents but the manifest expects 5"),
        "{stderr}"
    );
    // The earlier good index is still there and still opens.
    let eval_items = dir.path().join("items.jsonl");
    std::fs::write(
        &eval_items,
        "{\"id\": \"i\", \"question\": \"first page\", \"gold_url\": \"https://a.example/1\"}\n",
    )
    .expect("write");
    let scores = json(&indexer(&[
        "eval",
        "--index",
        path_str(&out),
        "--items",
        path_str(&eval_items),
    ]));
    assert_eq!(scores["gold@1"], 1.0);
}

/// Writes `documents` small pages as JSON Lines and a manifest naming them; returns the manifest.
fn write_pages(dir: &Path, name: &str, documents: usize) -> PathBuf {
    use std::io::Write;
    let data = dir.join(format!("{name}.jsonl"));
    let mut out = std::io::BufWriter::new(std::fs::File::create(&data).expect("create"));
    for i in 0..documents {
        writeln!(
            out,
            "{{\"id\": \"{i}\", \"url\": \"https://{name}.example/{i}\", \"title\": \"Page {i}\", \"text\": \"Page {i} of {name} is about topic {}. It has a second sentence on subject {}. And a third about item {}.\"}}",
            i % 97,
            i % 89,
            i % 83
        )
        .expect("write");
    }
    out.flush().expect("flush");
    let manifest = dir.join(format!("{name}.toml"));
    std::fs::write(
        &manifest,
        format!("name = \"{name}\"\n[[source]]\nformat = \"jsonl\"\npath = \"{name}.jsonl\"\n"),
    )
    .expect("write");
    manifest
}

/// What a build left beside its output: staging directories and indexes moved aside.
fn leftovers(parent: &Path) -> Vec<String> {
    std::fs::read_dir(parent)
        .expect("read dir")
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-") || n.contains(".old-"))
        .collect()
}

#[test]
fn a_build_killed_at_any_point_leaves_the_old_index_whole_and_the_next_build_clean() {
    let dir = tempfile::tempdir().expect("tempdir");
    let small = write_pages(dir.path(), "small", 50);
    let large = write_pages(dir.path(), "large", 60_000);
    let out = dir.path().join("index");
    let build = |manifest: &Path| {
        vec![
            "build".to_string(),
            "--no-dense".into(),
            "--force".into(),
            "--manifest".into(),
            path_str(manifest).into(),
            "--out".into(),
            path_str(&out).into(),
        ]
    };
    let documents = |out: &Path| -> u64 {
        let verified = indexer(&["verify", "--index", path_str(out)]);
        assert!(verified.status.success(), "{verified:?}");
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("manifest.json")).expect("manifest"))
                .expect("manifest JSON");
        manifest["documents"].as_u64().expect("documents")
    };
    let args = build(&small);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    json(&indexer(&args));
    assert_eq!(documents(&out), 50);

    // SIGKILL a rebuild over it at points spread through its run: as soon as it stages, then
    // later and later. Whenever it dies, `out` is a whole index (the old one, or the new one once
    // published), never a mix.
    let mut full_run = None;
    for delay_ms in [0u64, 150, 400, 900, 1_600, 2_500, 4_000] {
        let started = std::time::Instant::now();
        let mut child = Command::new(env!("CARGO_BIN_EXE_stillweb-indexer"))
            .args(build(&large))
            .env("RUST_LOG", "warn")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("spawn stillweb-indexer");
        let staging = dir.path().join(format!(".index.tmp-{}", child.id()));
        while !staging.exists() && child.try_wait().expect("wait").is_none() {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = child.kill();
        let status = child.wait().expect("wait");
        let got = documents(&out);
        assert!(
            got == 50 || got == 60_000,
            "killed after {delay_ms} ms: {got} documents"
        );
        if status.success() {
            full_run = Some(started.elapsed());
            break;
        }
    }
    eprintln!("a full build of 60000 pages took {full_run:?} (None: killed every time)");

    // The next build clears what the killed ones left and publishes in full.
    let args = build(&large);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    json(&indexer(&args));
    assert_eq!(documents(&out), 60_000);
    assert_eq!(leftovers(dir.path()), Vec::<String>::new());

    // Killed between moving the old index aside and renaming the new one in (where the
    // filesystem cannot swap them atomically): the next build puts the old index back first, so
    // it refuses to replace it without --force.
    let aside = dir.path().join(".index.old-4194304999");
    std::fs::rename(&out, &aside).expect("move aside");
    let refused = indexer(&[
        "build",
        "--no-dense",
        "--manifest",
        path_str(&small),
        "--out",
        path_str(&out),
    ]);
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("pass --force"),
        "{refused:?}"
    );
    assert_eq!(documents(&out), 60_000);
    assert_eq!(leftovers(dir.path()), Vec::<String>::new());
}

#[test]
fn a_graph_segment_limit_too_small_to_search_is_refused_before_any_work() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("index");
    let refused = indexer(&[
        "build",
        "--manifest",
        "/nonexistent/corpus.toml",
        "--out",
        path_str(&out),
        "--graph-segment-nodes",
        "0",
    ]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("--graph-segment-nodes") && stderr.contains("256.."),
        "{stderr}"
    );
    assert!(!out.exists());
}

#[test]
fn opening_a_missing_index_says_how_to_build_one() {
    let output = indexer(&[
        "eval",
        "--index",
        "/nonexistent/index",
        "--items",
        "/dev/null",
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no index at /nonexistent/index")
            && stderr.contains("stillweb-indexer build"),
        "{stderr}"
    );
}

#[test]
fn scifact_bm25_two_stage_quality_floor() {
    let Some(data) = shared_data() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("scifact");
    let manifest = repo().join("corpus-manifests/scifact.toml");
    json(&indexer(&[
        "build",
        "--no-dense",
        "--manifest",
        path_str(&manifest),
        "--out",
        path_str(&out),
    ]));
    let scores = json(&indexer(&[
        "eval",
        "--index",
        path_str(&out),
        "--beir",
        path_str(&data.join("beir/scifact")),
    ]));
    let ndcg = scores["ndcg@10"].as_f64().expect("ndcg");
    let recall = scores["recall@100"].as_f64().expect("recall");
    eprintln!("scifact: ndcg@10 {ndcg:.4} recall@100 {recall:.4}");
    assert_eq!(scores["queries"], 300);
    assert!(ndcg >= 0.66, "nDCG@10 {ndcg} below the 0.66 floor");
    assert!(recall >= 0.90, "Recall@100 {recall} below 0.90");
}

#[test]
fn fabricated_items_gold_ranks_first_with_hybrid_search() {
    let Some(data) = shared_data() else { return };
    if !models_fetched() {
        return;
    }
    let manifest = repo().join("corpus-manifests/fabricated.toml");
    let out = cached_dense_index(
        "fabricated",
        &manifest,
        &[data.join("fabricated/documents.jsonl")],
    );
    let scores = json(&indexer(&[
        "eval",
        "--index",
        path_str(&out),
        "--items",
        path_str(&data.join("fabricated/items.jsonl")),
    ]));
    let (at1, at10) = (
        scores["gold@1"].as_f64().expect("g1"),
        scores["gold@10"].as_f64().expect("g10"),
    );
    eprintln!("fabricated (hybrid, MiniLM): gold@1 {at1:.3} gold@10 {at10:.3}: {scores}");
    assert_eq!(scores["mode"], "hybrid");
    assert!(at1 >= 0.85 && at10 >= 0.99, "gold@1 {at1} gold@10 {at10}");
    // Through a running server (items need only the top 10, which every server answers).
    let url = serve(&out, &[]);
    let items_file = data.join("fabricated/items.jsonl");
    let remote = json(&indexer(&[
        "eval",
        "--target",
        &url,
        "--items",
        path_str(&items_file),
    ]));
    assert_eq!(remote["gold@1"], scores["gold@1"], "{remote}");
    assert_eq!(remote["gold@10"], scores["gold@10"], "{remote}");
    assert_eq!(
        remote["negatives_above_gold"],
        scores["negatives_above_gold"]
    );

    // The rerank mode runs the real Qwen3 reranker path (random-weight fixture): a 10-chunk pool
    // reorders at most 10 documents, all inside the top 10, so gold@10 cannot change.
    let fixture = stillweb_models::config::fixtures_dir().join("qwen3-reranker-tiny");
    let items = data.join("fabricated/items.jsonl");
    let refused = indexer(&[
        "eval",
        "--index",
        path_str(&out),
        "--items",
        path_str(&items),
        "--mode",
        "rerank",
    ]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--mode rerank needs --reranker DIR")
    );
    if fixture.join("model.toml").is_file() {
        let reranked = json(&indexer(&[
            "eval",
            "--index",
            path_str(&out),
            "--items",
            path_str(&items),
            "--mode",
            "rerank",
            "--reranker",
            path_str(&fixture),
            "--rerank-pool",
            "10",
        ]));
        assert_eq!(reranked["reranker"], "stillweb/qwen3-reranker-tiny-random");
        assert_eq!(reranked["params"]["rerank_pool"], 10);
        assert_eq!(reranked["gold@10"], scores["gold@10"]);
    } else {
        stillweb_test_support::skip("the Qwen3 fixture is missing; run models/make-fixtures");
    }

    // Another document representation, from the stored chunk vectors.
    let dir = tempfile::tempdir().expect("tempdir");
    let mean = dir.path().join("mean");
    let manifest = json(&indexer(&[
        "revector",
        "--index",
        path_str(&out),
        "--out",
        path_str(&mean),
        "--doc-vectors",
        "mean",
    ]));
    assert_eq!(manifest["dense"]["doc_vectors"], "mean");
    let scores = json(&indexer(&[
        "eval",
        "--index",
        path_str(&mean),
        "--items",
        path_str(&items),
    ]));
    assert!(scores["gold@10"].as_f64().expect("g10") >= 0.99, "{scores}");
    // Rounded vectors cannot be made full precision again.
    let refused = indexer(&[
        "revector",
        "--index",
        path_str(&out),
        "--out",
        path_str(&dir.path().join("f32")),
        "--chunk-vectors",
        "f32",
    ]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("--chunk-vectors f32"), "{stderr}");
}

/// The quality preset end to end: a build with `--preset quality` embeds with its model and
/// records the preset; a server given only that index serves the preset (bge-small, the
/// MiniLM-L12 cross-encoder on the native engine, interpolated), says so in `/info`, and ranks
/// the fabricated items' gold pages first through its API as the evaluation does in place.
/// The document graph searched with a date filter as its predicate finds the filter's true
/// nearest pages: its top 10 against an exact scan of the pages the filter allows, for ranges
/// from one year (a tenth of the pages) to all dated ones, on the fabricated items' questions.
#[test]
fn a_date_filtered_graph_search_finds_the_exact_filtered_top_10() {
    let Some(data) = shared_data() else { return };
    if !models_fetched() {
        return;
    }
    let manifest = repo().join("corpus-manifests/fabricated.toml");
    let documents = data.join("fabricated/documents.jsonl");
    let out = cached_dense_index("fabricated", &manifest, std::slice::from_ref(&documents));
    let index = stillweb_index::SearchIndex::open(&out).expect("open");
    let dense = index.dense().expect("vectors");
    // One source, no duplicates: a page's ordinal is its line.
    let dates: Vec<i64> = std::fs::read_to_string(&documents)
        .expect("documents")
        .lines()
        .map(|l| {
            let doc: serde_json::Value = serde_json::from_str(l).expect("json");
            stillweb_corpus::date::document_instant(doc["date"].as_str().expect("date"))
                .expect("dated")
        })
        .collect();
    let mut embedder = stillweb_models::load_embedder(
        &stillweb_models::config::default_embedder_dir(),
        None,
        stillweb_models::ExecutionProvider::Cpu,
        1,
    )
    .expect("embedder");
    let questions: Vec<String> = std::fs::read_to_string(data.join("fabricated/items.jsonl"))
        .expect("items")
        .lines()
        .take(40)
        .map(|l| {
            let item: serde_json::Value = serde_json::from_str(l).expect("item");
            item["question"].as_str().expect("question").to_string()
        })
        .collect();
    let day = |d: &str| stillweb_corpus::date::parse_day(d).expect("day");
    for (from, until) in [
        ("2018-01-01", "2019-01-01"),
        ("2012-01-01", "2016-01-01"),
        ("2000-01-01", "2030-01-01"),
    ] {
        let range = stillweb_corpus::date::DateRange::between(day(from), day(until));
        let allowed: Vec<u64> = (0..dates.len() as u64)
            .filter(|&o| range.keeps(Some(dates[o as usize])))
            .collect();
        let (mut found, mut wanted) = (0usize, 0usize);
        for question in &questions {
            let vector = stillweb_models::embed_query(&mut *embedder, question).expect("embed");
            let got = dense
                .search_docs_among(&vector, 10, &allowed)
                .expect("filtered search");
            let want = dense
                .rank_exactly(
                    &vector,
                    allowed.iter().map(|&o| (o, index.chunk_range(o))),
                    10,
                )
                .expect("exact");
            assert!(
                got.iter().all(|(o, _)| allowed.binary_search(o).is_ok()),
                "{from}..{until}: a page outside the range"
            );
            assert_eq!(got.len(), want.len().min(10), "{from}..{until}: {question}");
            found += got
                .iter()
                .filter(|g| want.iter().any(|w| w.0 == g.0))
                .count();
            wanted += want.len();
        }
        let recall = found as f64 / wanted as f64;
        eprintln!(
            "{from}..{until}: {} pages, filtered graph recall@10 {recall:.3}",
            allowed.len()
        );
        assert!(recall >= 0.95, "{from}..{until}: recall@10 {recall:.3}");
    }
}

#[test]
fn the_quality_preset_is_recorded_at_build_and_served_with_the_trained_reader() {
    use stillweb_index::search::Preset;
    let Some(data) = shared_data() else { return };
    let reranker = Preset::Quality
        .reranker_dir()
        .expect("the quality preset reranks");
    if !models_fetched() || !fetched(&reranker.join("model.safetensors"), "models/fetch") {
        return;
    }
    let manifest = repo().join("corpus-manifests/fabricated.toml");
    let documents = [data.join("fabricated/documents.jsonl")];
    let out = cached_dense_build(
        "fabricated-quality",
        &manifest,
        &documents,
        None,
        Some(Preset::Quality),
    );
    let built: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).expect("manifest"))
            .expect("manifest json");
    assert_eq!(built["preset"], "quality");
    assert_eq!(
        built["dense"]["model_id"],
        "sentence-transformers/all-MiniLM-L6-v2"
    );

    let items = data.join("fabricated/items.jsonl");
    let in_place = json(&indexer(&[
        "eval",
        "--index",
        path_str(&out),
        "--preset",
        "quality",
        "--items",
        path_str(&items),
    ]));
    // A served eval sends its items as batches that share one request deadline; each item is
    // reranked by the L-12 cross-encoder on CPU, so on a slow or busy 2-core machine a batch can
    // outlast the default 30 s. This test checks the scores, not the deadline.
    let url = serve(&out, &["--request-timeout-secs", "600"]);
    let info: serde_json::Value = ureq::get(format!("{url}/info"))
        .call()
        .expect("/info")
        .body_mut()
        .read_json()
        .expect("json");
    assert_eq!(info["preset"]["name"], "quality", "{info}");
    assert_eq!(
        info["models"]["reranker"],
        "cross-encoder/ms-marco-MiniLM-L-12-v2"
    );
    assert_eq!(info["search"]["mode"], "rerank");
    assert_eq!(
        info["search"]["rerank_weight"].as_f64(),
        Some(f64::from(Preset::Quality.rerank_weight()))
    );
    let served = json(&indexer(&[
        "eval",
        "--target",
        &url,
        "--items",
        path_str(&items),
    ]));
    let at1 = served["gold@1"].as_f64().expect("gold@1");
    eprintln!("fabricated (quality preset, served): {served}");
    assert_eq!(served["gold@1"], in_place["gold@1"], "{in_place}");
    assert!(at1 >= 0.95, "gold@1 {at1}");
}

/// A content hash of everything that shapes a built index: the indexing code, the model files and
/// the corpus. Expensive test indexes (embedding on 2 cores takes minutes) are cached under it,
/// outside the checkout, and rebuilt whenever any of it changes.
fn cache_key(inputs: &[PathBuf]) -> String {
    use sha2::{Digest, Sha256};
    fn walk(path: &Path, out: &mut Vec<PathBuf>) {
        if path.is_dir() {
            let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
                .expect("read_dir")
                .filter_map(Result::ok)
                .map(|e| e.path())
                .collect();
            entries.sort();
            for e in entries {
                walk(&e, out);
            }
        } else {
            out.push(path.to_path_buf());
        }
    }
    // `index/build-inputs.txt` names the code that shapes a built index (scripts/demo reads it
    // too); query-time code is left out, which keeps the cache (a cold SciFact build embeds for
    // ~15 minutes) across search-side changes.
    let list =
        std::fs::read_to_string(repo().join("index/build-inputs.txt")).expect("build inputs");
    let lines: Vec<&str> = list
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    let mut files = Vec::new();
    for dir in lines.iter().filter(|l| !l.starts_with('!')) {
        walk(&repo().join(dir), &mut files);
    }
    files.retain(|f| {
        !lines
            .iter()
            .filter_map(|l| l.strip_prefix('!'))
            .any(|skip| f.starts_with(repo().join(skip)))
    });
    files.extend(inputs.iter().cloned());
    let mut hasher = Sha256::new();
    let root = repo();
    for file in files {
        // Names relative to the checkout, so that clones in other folders share the cache.
        let name = file.strip_prefix(&root).unwrap_or(&file);
        let name = if name.is_absolute() {
            file.file_name().map(PathBuf::from).unwrap_or_default()
        } else {
            name.to_path_buf()
        };
        hasher.update(name.to_string_lossy().as_bytes());
        hasher.update(std::fs::read(&file).expect("read input"));
    }
    hex::encode(hasher.finalize())[..16].to_string()
}

/// A dense index of `manifest` with the default embedder and the default chunk vector precision:
/// a `revector` of [`cached_full_precision_index`] (which a direct build equals; index/tests/dense.rs).
fn cached_dense_index(name: &str, manifest: &Path, data: &[PathBuf]) -> PathBuf {
    let full = cached_full_precision_index(name, manifest, data);
    let key = full
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.rsplit('-').next())
        .expect("cache key")
        .to_string();
    let out = full.with_file_name(format!("{name}-{key}"));
    stillweb_test_support::cached_build(&out, &out.join("manifest.json"), || {
        json(&indexer(&[
            "revector",
            "--index",
            path_str(&full),
            "--out",
            path_str(&out),
            "--chunk-vectors",
            &stillweb_index::BuildOptions::default()
                .chunk_precision
                .to_string(),
            "--force",
        ]));
    });
    out
}

/// Builds (or reuses from the cache) a dense index of `manifest` with f32 chunk vectors.
fn cached_full_precision_index(name: &str, manifest: &Path, data: &[PathBuf]) -> PathBuf {
    cached_dense_build(&format!("{name}-f32"), manifest, data, None, None)
}

/// Builds (or reuses from the cache) a dense index of `manifest` with the default embedder (or
/// `preset`'s, recorded in the manifest), or with `shards`, a set of that many shards
/// (`OUT/shard-I`) cut with the vectors of [`cached_full_precision_index`] (a corpus is embedded
/// once for all its test indexes).
fn cached_dense_build(
    name: &str,
    manifest: &Path,
    data: &[PathBuf],
    shards: Option<u32>,
    preset: Option<stillweb_index::search::Preset>,
) -> PathBuf {
    let model = preset.map_or_else(
        stillweb_models::config::default_embedder_dir,
        stillweb_index::search::Preset::embedder_dir,
    );
    let mut inputs = vec![
        manifest.to_path_buf(),
        model.join("model.onnx"),
        model.join("tokenizer.json"),
        model.join("model.toml"),
        // What the native engine (the default on CPUs) reads instead of model.onnx.
        model.join("model.safetensors"),
        model.join("config.json"),
    ];
    inputs.extend(data.iter().cloned());
    let cache = std::env::var_os("STILLWEB_TEST_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            stillweb_models::models_dir()
                .join("..")
                .join("test-indexes")
        });
    let (out, done) = match shards {
        None => {
            let out = cache.join(format!("{name}-{}", cache_key(&inputs)));
            (out.clone(), out.join("manifest.json"))
        }
        // The set is complete once its last shard is published and the set finalized.
        Some(n) => {
            let out = cache.join(format!("{name}-{n}shards-{}", cache_key(&inputs)));
            (
                out.clone(),
                out.join(format!("shard-{}/bm25_stats.json", n - 1)),
            )
        }
    };
    stillweb_test_support::cached_build(&out, &done, || {
        let reuse = shards.map(|_| cached_full_precision_index(name, manifest, data));
        let shards = shards.map(|n| n.to_string());
        let mut args = vec![
            "build",
            "--manifest",
            path_str(manifest),
            "--out",
            path_str(&out),
            "--force",
        ];
        if let Some(n) = &shards {
            args.extend(["--shards", n.as_str()]);
        }
        if let Some(full) = &reuse {
            args.extend(["--reuse-vectors", path_str(full)]);
        }
        if name.ends_with("-f32") {
            args.extend(["--chunk-vectors", "f32"]);
        }
        if let Some(preset) = preset {
            args.extend(["--preset", preset.name()]);
        }
        json(&indexer(&args));
    });
    out
}

/// The default chunk vector precision must keep quality: within 0.002 nDCG@10 of f32 on SciFact
/// and 0.01 gold@1 on the fabricated items (the bar it was chosen by).
#[test]
fn default_chunk_vector_precision_keeps_quality() {
    let Some(data) = shared_data() else { return };
    if !models_fetched() {
        return;
    }
    let scifact = [data.join("beir/scifact/corpus.jsonl")];
    let fabricated = [data.join("fabricated/documents.jsonl")];
    let beir = data.join("beir/scifact");
    let items = data.join("fabricated/items.jsonl");
    let score = |index: &Path, set: &str, metric: &str| {
        let scores = json(&indexer(&[
            "eval",
            "--index",
            path_str(index),
            set,
            path_str(if set == "--beir" { &beir } else { &items }),
        ]));
        scores[metric].as_f64().expect(metric)
    };
    for (name, data, set, metric, bar) in [
        ("scifact", &scifact, "--beir", "ndcg@10", 0.002),
        ("fabricated", &fabricated, "--items", "gold@1", 0.01),
    ] {
        let manifest = repo().join(format!("corpus-manifests/{name}.toml"));
        let full = score(
            &cached_full_precision_index(name, &manifest, data),
            set,
            metric,
        );
        let default = score(&cached_dense_index(name, &manifest, data), set, metric);
        eprintln!("{name} {metric}: f32 {full:.4}, default precision {default:.4}");
        assert!(
            default >= full - bar,
            "{name}: {metric} {default} is more than {bar} below f32's {full}"
        );
    }
}

/// SciFact's inputs: its manifest, its corpus file in the shared data, and its BEIR folder.
struct SciFact {
    manifest: PathBuf,
    corpus: [PathBuf; 1],
    beir: PathBuf,
}

impl SciFact {
    fn in_data(data: &Path) -> SciFact {
        let beir = data.join("beir/scifact");
        SciFact {
            manifest: repo().join("corpus-manifests/scifact.toml"),
            corpus: [beir.join("corpus.jsonl")],
            beir,
        }
    }

    /// The dense index of all of it (cached).
    fn index(&self) -> PathBuf {
        cached_dense_index("scifact", &self.manifest, &self.corpus)
    }
}

#[test]
fn scifact_dense_and_hybrid_quality_floors() {
    let Some(data) = shared_data() else { return };
    if !models_fetched() {
        return;
    }
    let scifact = SciFact::in_data(&data);
    let (index, beir) = (scifact.index(), scifact.beir);
    let eval = |mode: &str| {
        let scores = json(&indexer(&[
            "eval",
            "--index",
            path_str(&index),
            "--beir",
            path_str(&beir),
            "--mode",
            mode,
        ]));
        let ndcg = scores["ndcg@10"].as_f64().expect("ndcg");
        let recall = scores["recall@100"].as_f64().expect("recall");
        eprintln!("scifact {mode}: ndcg@10 {ndcg:.4} recall@100 {recall:.4}");
        (ndcg, recall)
    };
    let (dense_ndcg, _) = eval("dense");
    assert!(dense_ndcg >= 0.66, "dense nDCG@10 {dense_ndcg} below 0.66");
    let (hybrid_ndcg, hybrid_recall) = eval("hybrid");
    assert!(
        hybrid_ndcg >= 0.72,
        "hybrid nDCG@10 {hybrid_ndcg} below 0.72"
    );
    assert!(
        hybrid_recall >= 0.95,
        "hybrid Recall@100 {hybrid_recall} below 0.95"
    );

    // The same evaluation through a running server's HTTP API gives the same scores: the
    // server (hybrid by default) runs the same pipeline.
    let url = serve(&index, &["--max-k", "100"]);
    let remote = json(&indexer(&[
        "eval",
        "--target",
        &url,
        "--beir",
        path_str(&beir),
    ]));
    assert_eq!(remote["ndcg@10"].as_f64(), Some(hybrid_ndcg), "{remote}");
    assert_eq!(
        remote["recall@100"].as_f64(),
        Some(hybrid_recall),
        "{remote}"
    );
    assert_eq!(remote["mode"], "hybrid");
    // A server that answers 20 results at most cannot give Recall@100, and says how to fix it.
    let narrow = serve(&index, &[]);
    let refused = indexer(&["eval", "--target", &narrow, "--beir", path_str(&beir)]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("--max-k 100"), "{stderr}");
}

/// A server on `index` with `flags`, in this process on 127.0.0.1:0 (the real accept loop); its
/// base URL. It runs until the test binary exits.
fn serve(index: &Path, flags: &[&str]) -> String {
    let mut args = vec!["--index", path_str(index)];
    args.extend_from_slice(flags);
    serve_args(&args)
}

/// A coordinator over `shards` (one replica each) with `flags`, like [`serve`].
fn serve_coordinator(shards: &[String], flags: &[&str]) -> String {
    let mut args = Vec::new();
    for url in shards {
        args.extend(["--shard", url.as_str()]);
    }
    args.extend_from_slice(flags);
    serve_args(&args)
}

fn serve_args(flags: &[&str]) -> String {
    use clap::Parser;
    let mut args = vec!["stillweb-server"];
    args.extend_from_slice(flags);
    let config = stillweb_server::Args::parse_from(args)
        .validate()
        .expect("config");
    let state = stillweb_server::prepare(config).expect("server state");
    stillweb_server::serve_in_background(state).expect("serve")
}

/// The top `k` results for `query` (`POST /v1/search`'s `results`).
fn results(base: &str, query: &str, k: usize) -> Vec<serde_json::Value> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let body: serde_json::Value = agent
        .post(format!("{base}/v1/search"))
        .send_json(serde_json::json!({"query": query, "k": k}))
        .expect("search")
        .body_mut()
        .read_json()
        .expect("json");
    body["results"]
        .as_array()
        .unwrap_or_else(|| panic!("{query}: {body}"))
        .clone()
}

/// Asserts that `got` answers every one of `queries` with `want`'s top 10 (URLs and order).
fn same_top_10(got: &str, want: &str, queries: &[String], what: &str) {
    for query in queries {
        assert_eq!(
            top_urls(got, query, 10),
            top_urls(want, query, 10),
            "{what}: top 10 for {query:?}"
        );
    }
}

/// The URLs of the top `k` results for `query`.
fn top_urls(base: &str, query: &str, k: usize) -> Vec<String> {
    results(base, query, k)
        .iter()
        .map(|r| r["url"].as_str().expect("url").to_string())
        .collect()
}

/// SciFact built as one index and as a set of 3 shards behind a coordinator: with BM25 the
/// coordinator's top 10 is the single server's for every test query; in hybrid mode (an HNSW
/// graph per shard, approximate) the top 10s overlap by at least 0.97 on average and nDCG@10
/// through `eval --target` is within 0.003.
#[test]
fn scifact_as_three_shards_ranks_as_one_index() {
    let Some(data) = shared_data() else { return };
    if !models_fetched() {
        return;
    }
    let scifact = SciFact::in_data(&data);
    let single = scifact.index();
    let set = cached_dense_build("scifact", &scifact.manifest, &scifact.corpus, Some(3), None);
    let beir = scifact.beir;
    let queries = scifact_test_queries(&beir);
    assert!(queries.len() >= 300, "{} test queries", queries.len());
    // Shard servers embed nothing (the coordinator sends the query's vector): BM25 mode spares
    // them the embedder, and their stage calls still use the vectors.
    let shards: Vec<String> = (0..3)
        .map(|i| serve(&set.join(format!("shard-{i}")), &["--mode", "bm25"]))
        .collect();

    let single_bm25 = serve(&single, &["--mode", "bm25"]);
    let coordinator_bm25 = serve_coordinator(&shards, &["--mode", "bm25"]);
    same_top_10(&coordinator_bm25, &single_bm25, &queries, "3 shards");

    let single_hybrid = serve(&single, &["--max-k", "100"]);
    let coordinator_hybrid = serve_coordinator(&shards, &["--max-k", "100"]);
    let mut overlap = 0.0;
    for query in &queries {
        let want = top_urls(&single_hybrid, query, 10);
        let got = top_urls(&coordinator_hybrid, query, 10);
        let shared = got.iter().filter(|u| want.contains(u)).count();
        overlap += shared as f64 / want.len().max(1) as f64;
    }
    let overlap = overlap / queries.len() as f64;
    let eval = |url: &str| served_ndcg(url, &beir);
    let (single_ndcg, sharded_ndcg) = (eval(&single_hybrid), eval(&coordinator_hybrid));
    eprintln!(
        "scifact hybrid, 3 shards vs one index: top-10 overlap {overlap:.4}, nDCG@10 {sharded_ndcg:.4} vs {single_ndcg:.4}"
    );
    assert!(overlap >= 0.97, "mean top-10 overlap {overlap:.4}");
    assert!(
        (sharded_ndcg - single_ndcg).abs() <= 0.003,
        "nDCG@10 {sharded_ndcg:.4} vs {single_ndcg:.4}"
    );
}

/// nDCG@10 of the server at `url` on the BEIR collection at `beir` (`eval --target`).
fn served_ndcg(url: &str, beir: &Path) -> f64 {
    json(&indexer(&[
        "eval",
        "--target",
        url,
        "--beir",
        path_str(beir),
    ]))["ndcg@10"]
        .as_f64()
        .expect("ndcg")
}

/// SciFact's test queries (those with judgements), as text.
fn scifact_test_queries(beir: &Path) -> Vec<String> {
    let qrels = std::fs::read_to_string(beir.join("qrels/test.tsv")).expect("qrels");
    let tested: std::collections::HashSet<&str> = qrels
        .lines()
        .skip(1)
        .filter_map(|l| l.split('\t').next())
        .collect();
    std::fs::read_to_string(beir.join("queries.jsonl"))
        .expect("queries")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|q| tested.contains(q["_id"].as_str().unwrap_or_default()))
        .map(|q| q["text"].as_str().expect("text").to_string())
        .collect()
}

/// SciFact split by its manifest into a base (the first 4,683 documents) and an overlay (the
/// last 500, built with `--overlay-of` the base), served as `--index BASE --overlay OVERLAY`,
/// and the same as a 3-shard base set with a 3-shard overlay set behind a coordinator: with
/// BM25 the top 10 of every test query is the single build's (URLs and order); hybrid nDCG@10
/// through `eval --target` is within 0.003 of the single build's; every overlay page a session
/// was shown is visitable there, and `/info` names both builds.
#[test]
fn scifact_as_a_base_and_an_overlay_ranks_as_one_index() {
    let Some(data) = shared_data() else { return };
    if !models_fetched() {
        return;
    }
    let scifact = SciFact::in_data(&data);
    let single = scifact.index();
    // Its full-precision vectors spare the two builds the embedding.
    let vectors = cached_full_precision_index("scifact", &scifact.manifest, &scifact.corpus);
    let (corpus, beir) = (scifact.corpus, scifact.beir);
    let dir = tempfile::tempdir().expect("tempdir");
    let text = std::fs::read_to_string(&corpus[0]).expect("corpus");
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 5183);
    let split = |name: &str, part: &[&str]| {
        let at = dir.path().join(name);
        std::fs::create_dir_all(&at).expect("dir");
        std::fs::write(at.join("corpus.jsonl"), part.join("\n") + "\n").expect("part");
        // The source keeps SciFact's name: the URLs are made from it.
        let manifest = format!(
            "name = \"scifact\"\n[[source]]\nname = \"scifact\"\nformat = \"beir\"\npath = \"corpus.jsonl\"\nexpected_documents = {}\n",
            part.len()
        );
        std::fs::write(at.join("m.toml"), manifest).expect("manifest");
        at
    };
    let (base_dir, overlay_dir) = (
        split("base", &lines[..4683]),
        split("overlay", &lines[4683..]),
    );
    let build = |at: &Path, extra: &[&str]| -> serde_json::Value {
        let (m, out) = (at.join("m.toml"), at.join("index"));
        let mut args = vec![
            "build",
            "--manifest",
            path_str(&m),
            "--out",
            path_str(&out),
            "--reuse-vectors",
            path_str(&vectors),
        ];
        args.extend_from_slice(extra);
        json(&indexer(&args))
    };
    let base_manifest = build(&base_dir, &[]);
    let base = base_dir.join("index");
    let overlay_manifest = build(&overlay_dir, &["--overlay-of", path_str(&base)]);
    assert_eq!(overlay_manifest["documents"], 500);
    assert_eq!(overlay_manifest["overlay"]["first_ordinal"], 4683);
    let overlay = overlay_dir.join("index");

    let queries = scifact_test_queries(&beir);
    assert!(queries.len() >= 300, "{} test queries", queries.len());
    let overlay_flag = ["--overlay", path_str(&overlay)];
    let single_bm25 = serve(&single, &["--mode", "bm25"]);
    let layered_bm25 = serve(&base, &[&overlay_flag[..], &["--mode", "bm25"]].concat());
    same_top_10(&layered_bm25, &single_bm25, &queries, "base + overlay");

    let single_hybrid = serve(&single, &["--max-k", "100"]);
    let layered = serve(&base, &[&overlay_flag[..], &["--max-k", "100"]].concat());
    let eval = |url: &str| served_ndcg(url, &beir);
    let (single_ndcg, layered_ndcg) = (eval(&single_hybrid), eval(&layered));
    eprintln!(
        "scifact hybrid, base + overlay vs one index: nDCG@10 {layered_ndcg:.4} vs {single_ndcg:.4}"
    );
    assert!(
        (layered_ndcg - single_ndcg).abs() <= 0.003,
        "nDCG@10 {layered_ndcg:.4} vs {single_ndcg:.4}"
    );

    // Every overlay page a session is shown can be visited in it.
    let overlay_ids: std::collections::HashSet<String> = lines[4683..]
        .iter()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).expect("doc")["_id"]
                .as_str()
                .expect("id")
                .to_string()
        })
        .collect();
    let visited = visit_shown(&layered, &queries[..100], &overlay_ids);
    assert!(visited >= 10, "{visited} overlay pages shown and visited");
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let info: serde_json::Value = agent
        .get(format!("{layered}/info"))
        .call()
        .expect("info")
        .body_mut()
        .read_json()
        .expect("json");
    let index = &info["index"];
    assert_eq!(index["documents"], 5183, "{info}");
    let build_id = index["build_id"].as_str().expect("build id");
    assert_eq!(
        build_id,
        format!(
            "{}+{}",
            base_manifest["build_id"].as_str().expect("base id"),
            overlay_manifest["build_id"].as_str().expect("overlay id")
        ),
        "{info}"
    );
    assert_eq!(index["overlays"][0]["documents"], 500, "{info}");

    // The same split as a 3-shard base set and a 3-shard overlay set: each shard server takes
    // its base shard and its overlay shard; the coordinator needs nothing new.
    let build_set = |at: &Path, extra: &[&str]| {
        let (m, out) = (at.join("m.toml"), at.join("set"));
        let mut args = vec![
            "build",
            "--manifest",
            path_str(&m),
            "--out",
            path_str(&out),
            "--shards",
            "3",
            "--reuse-vectors",
            path_str(&vectors),
        ];
        args.extend_from_slice(extra);
        json(&indexer(&args));
        out
    };
    let base_set = build_set(&base_dir, &[]);
    let overlay_set = build_set(&overlay_dir, &["--overlay-of", path_str(&base_set)]);
    let shards: Vec<String> = (0..3)
        .map(|i| {
            let overlay = overlay_set.join(format!("shard-{i}"));
            serve(
                &base_set.join(format!("shard-{i}")),
                &["--overlay", path_str(&overlay), "--mode", "bm25"],
            )
        })
        .collect();
    let coordinator_bm25 = serve_coordinator(&shards, &["--mode", "bm25"]);
    same_top_10(
        &coordinator_bm25,
        &single_bm25,
        &queries,
        "3-shard base + overlay",
    );
    let coordinator = serve_coordinator(&shards, &["--max-k", "100"]);
    let sharded_ndcg = eval(&coordinator);
    eprintln!(
        "scifact hybrid, 3-shard base + 3-shard overlay vs one index: nDCG@10 {sharded_ndcg:.4} vs {single_ndcg:.4}"
    );
    assert!(
        (sharded_ndcg - single_ndcg).abs() <= 0.003,
        "nDCG@10 {sharded_ndcg:.4} vs {single_ndcg:.4}"
    );
    let visited = visit_shown(&coordinator, &queries[..100], &overlay_ids);
    assert!(visited >= 10, "{visited} overlay pages shown and visited");
}

/// One server with three collections: `web` (the samples, BM25 only, the default), `scholar`
/// (SciFact, hybrid) and `mirror` (the samples again). Scholar searches through the body's
/// `"collection"`, the `/c/scholar/` prefix and Serper Scholar rank every SciFact test query as a
/// server of SciFact alone does (so nDCG@10 through each is the same; `eval --target
/// --collection` says so too); a page is visitable in the session that was shown it only from
/// the collection that showed it; `/info`, the build header, transcripts and metrics name the
/// collections.
#[test]
fn web_and_scholar_collections_in_one_server() {
    let Some(data) = shared_data() else { return };
    if !models_fetched() {
        return;
    }
    let Some(samples) = samples_index() else {
        return;
    };
    let inputs = SciFact::in_data(&data);
    let (scifact, beir) = (inputs.index(), inputs.beir);
    let (web, scholar, mirror) = (
        format!("web={}", path_str(samples)),
        format!("scholar={}", path_str(&scifact)),
        format!("mirror={}", path_str(samples)),
    );
    let base = serve_args(&[
        "--collection",
        &web,
        "--collection",
        &scholar,
        "--collection",
        &mirror,
        "--max-k",
        "100",
    ]);
    let alone = serve(&scifact, &["--max-k", "100"]);
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let get = |url: String| -> serde_json::Value {
        agent
            .get(url)
            .call()
            .expect("get")
            .body_mut()
            .read_json()
            .expect("json")
    };
    let post = |url: String, body: serde_json::Value| -> (u16, serde_json::Value) {
        let mut response = agent.post(url).send_json(body).expect("post");
        let status = response.status().as_u16();
        (status, response.body_mut().read_json().expect("json"))
    };

    let info = get(format!("{base}/info"));
    let listed: Vec<(&str, &str)> = info["collections"]
        .as_array()
        .expect("collections")
        .iter()
        .map(|c| {
            (
                c["name"].as_str().expect("name"),
                c["mode"].as_str().expect("mode"),
            )
        })
        .collect();
    assert_eq!(
        listed,
        [("web", "bm25"), ("scholar", "hybrid"), ("mirror", "bm25")],
        "{info}"
    );
    assert_eq!(info["collections"][1]["documents"], 5183, "{info}");
    assert_eq!(info["scholar_collection"], "scholar", "{info}");
    let scholar_build = info["collections"][1]["build_id"].as_str().expect("id");

    // Scholar, three ways, against SciFact served alone: the same top 10 for every query.
    let queries = scifact_test_queries(&beir);
    assert!(queries.len() >= 300, "{} test queries", queries.len());
    let prefixed = format!("{base}/c/scholar");
    for query in &queries {
        let want = top_urls(&alone, query, 10);
        assert_eq!(top_urls(&prefixed, query, 10), want, "/c/scholar: {query}");
        let (status, body) = post(
            format!("{base}/v1/search"),
            serde_json::json!({"query": query, "k": 10, "collection": "scholar"}),
        );
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["collection"], "scholar");
        let urls: Vec<&str> = body["results"]
            .as_array()
            .expect("results")
            .iter()
            .map(|r| r["url"].as_str().expect("url"))
            .collect();
        assert_eq!(urls, want, "\"collection\": {query}");
        let (status, body) = post(
            format!("{base}/serper/scholar"),
            serde_json::json!({"q": query, "num": 10}),
        );
        assert_eq!(status, 200, "{body}");
        let organic = body["organic"].as_array().expect("organic");
        let links: Vec<&str> = organic
            .iter()
            .map(|o| o["link"].as_str().expect("link"))
            .collect();
        assert_eq!(links, want, "/serper/scholar: {query}");
        for (i, o) in organic.iter().enumerate() {
            for field in ["title", "publicationInfo", "snippet", "year", "citedBy"] {
                assert!(o.get(field).is_some(), "{field} missing: {o}");
            }
            // SciFact's abstracts carry no date: no year, the host alone.
            assert!(o["year"].is_null(), "{o}");
            assert_eq!(o["publicationInfo"], "stillweb.invalid", "{o}");
            assert_eq!(o["position"], i + 1);
        }
    }
    let eval = |target: &str, collection: Option<&str>| {
        let mut args = vec!["eval", "--target", target, "--beir", path_str(&beir)];
        if let Some(name) = collection {
            args.extend(["--collection", name]);
        }
        json(&indexer(&args))
    };
    let (through, single) = (eval(&base, Some("scholar")), eval(&alone, None));
    eprintln!(
        "scifact as collection `scholar`: nDCG@10 {} (alone {})",
        through["ndcg@10"], single["ndcg@10"]
    );
    assert_eq!(through["ndcg@10"], single["ndcg@10"], "{through}");
    let refused = indexer(&[
        "eval",
        "--target",
        &base,
        "--beir",
        path_str(&beir),
        "--collection",
        "nope",
    ]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("serves no collection `nope`; it serves web, scholar, mirror"),
        "{stderr}"
    );
    assert_eq!(through["collection"], "scholar");
    assert_eq!(through["index"], scholar_build);

    // The default collection is `web`; a response names the build of the collection it searched.
    let mut response = agent
        .post(format!("{base}/v1/search"))
        .send_json(serde_json::json!({"query": "anarchism", "session": "s1"}))
        .expect("search");
    let web_build = info["collections"][0]["build_id"].as_str().expect("id");
    assert_eq!(
        response
            .headers()
            .get("x-stillweb-build")
            .and_then(|v| v.to_str().ok()),
        Some(web_build)
    );
    let body: serde_json::Value = response.body_mut().read_json().expect("json");
    assert_eq!(body["collection"], "web");
    let web_url = body["results"][0]["url"].as_str().expect("url").to_string();
    let response = agent
        .post(format!("{prefixed}/v1/search"))
        .send_json(serde_json::json!({"query": queries[0], "session": "s1"}))
        .expect("search");
    assert_eq!(
        response
            .headers()
            .get("x-stillweb-build")
            .and_then(|v| v.to_str().ok()),
        Some(scholar_build)
    );
    let paper = top_urls(&prefixed, &queries[0], 1).remove(0);

    // Visitable from the collection that showed it, and from no other.
    let visit = |path: &str, url: &str, collection: Option<&str>| {
        let mut body = serde_json::json!({"url": url, "session": "s1"});
        if let Some(name) = collection {
            body["collection"] = name.into();
        }
        post(format!("{base}{path}/v1/visit"), body)
    };
    assert_eq!(visit("", &web_url, None).0, 200);
    let (status, refused) = visit("", &web_url, Some("mirror"));
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (403, Some("url_not_seen")),
        "{refused}"
    );
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("collection `mirror`"),
        "{refused}"
    );
    assert_eq!(visit("", &paper, Some("scholar")).0, 200);
    assert_eq!(visit("/c/scholar", &paper, None).0, 200);
    let (status, refused) = visit("", &paper, None);
    assert_eq!(
        (status, refused["error"]["code"].as_str()),
        (404, Some("url_not_found")),
        "{refused}"
    );
    let (status, refused) = visit("/c/web", &paper, Some("scholar"));
    assert_eq!(status, 422, "{refused}");
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("conflicting collections"),
        "{refused}"
    );

    // The transcript names the collection of each search and visit.
    let transcript = get(format!("{base}/v1/sessions/s1"));
    let collections: Vec<&str> = transcript["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| e["collection"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(
        collections,
        [
            "web", "scholar", "web", "mirror", "scholar", "scholar", "web"
        ],
        "{transcript}"
    );
    let metrics = stillweb_test_support::metrics_text(&base);
    assert!(
        metrics.contains(&format!(
            "stillweb_index_build_info{{build_id=\"{scholar_build}\",collection=\"scholar\"}} 1"
        )),
        "{metrics}"
    );
    assert!(metrics.contains("stillweb_searches_total{collection=\"scholar\"}"));
}

/// Searches `queries` in one session at `server` and visits every result whose document id is
/// in `ids` (each must answer 200 with text); returns how many were visited.
fn visit_shown(server: &str, queries: &[String], ids: &std::collections::HashSet<String>) -> usize {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into();
    let mut visited = 0;
    for query in queries {
        let body: serde_json::Value = agent
            .post(format!("{server}/v1/search"))
            .send_json(serde_json::json!({"query": query, "k": 10, "session": "overlay-visits"}))
            .expect("search")
            .body_mut()
            .read_json()
            .expect("json");
        for hit in body["results"].as_array().expect("results") {
            let url = hit["url"].as_str().expect("url");
            if !ids.iter().any(|id| url.ends_with(&format!("/{id}"))) {
                continue;
            }
            let mut response = agent
                .post(format!("{server}/v1/visit"))
                .send_json(serde_json::json!({"url": url, "session": "overlay-visits"}))
                .expect("visit");
            assert_eq!(response.status(), 200, "{url}");
            let page: serde_json::Value = response.body_mut().read_json().expect("page");
            assert!(
                !page["text"].as_str().unwrap_or_default().is_empty(),
                "{url}"
            );
            visited += 1;
        }
    }
    visited
}

/// `(url, score)` of the top `k` results for `query`.
fn scored(base: &str, query: &str, k: usize) -> Vec<(String, f64)> {
    results(base, query, k)
        .iter()
        .map(|r| {
            (
                r["url"].as_str().expect("url").to_string(),
                r["score"].as_f64().expect("score"),
            )
        })
        .collect()
}

/// Dynamic batching changes no answer: on SciFact (hybrid, the cross-encoder fixture
/// reranking), as one index and as 3 shards behind a coordinator, 8 concurrent clients of a
/// server that batches queries and rerank pools across requests get, for every query, the
/// results and scores (to 1e-5) a server without batching gives one search at a time; and the
/// batching server's metrics show that its model runs really held several requests.
#[test]
fn batched_models_answer_as_unbatched_on_one_index_and_a_shard_set() {
    let Some(data) = shared_data() else { return };
    if !models_fetched() {
        return;
    }
    let reranker = stillweb_models::config::fixtures_dir().join("cross-encoder-tiny");
    if !fetched(
        &reranker.join("model.toml"),
        "models/fetch && models/make-fixtures",
    ) {
        return;
    }
    let reranker = path_str(&reranker);
    let scifact = SciFact::in_data(&data);
    let single = scifact.index();
    let set = cached_dense_build("scifact", &scifact.manifest, &scifact.corpus, Some(3), None);
    let queries: Vec<String> = std::fs::read_to_string(scifact.beir.join("queries.jsonl"))
        .expect("queries")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .map(|q| q["text"].as_str().expect("text").to_string())
        .take(24)
        .collect();
    let unbatched = [
        "--reranker",
        reranker,
        "--rerank-pool",
        "20",
        "--rerank-batch-tokens",
        "0",
        "--embed-batch-queries",
        "0",
        "--result-cache-entries",
        "0",
        "--embedding-cache-entries",
        "0",
    ];
    // A long wait, so that concurrent requests surely meet in the reranker's batcher (queries
    // gather without one, while the search threads are busy).
    let batched = [
        "--reranker",
        reranker,
        "--rerank-pool",
        "20",
        "--rerank-batch-wait-ms",
        "100",
        "--embed-batch-queries",
        "16",
        "--result-cache-entries",
        "0",
        "--embedding-cache-entries",
        "0",
    ];
    let shards: Vec<String> = (0..3)
        .map(|i| serve(&set.join(format!("shard-{i}")), &["--mode", "bm25"]))
        .collect();
    for (what, plain, batching) in [
        (
            "one index",
            serve(&single, &unbatched),
            serve(&single, &batched),
        ),
        (
            "3 shards",
            serve_coordinator(&shards, &unbatched),
            serve_coordinator(&shards, &batched),
        ),
    ] {
        let expected: Vec<Vec<(String, f64)>> =
            queries.iter().map(|q| scored(&plain, q, 10)).collect();
        let before = batch_counters(&batching);
        let got: Vec<Vec<(String, f64)>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..8)
                .map(|client| {
                    let (queries, batching) = (&queries, &batching);
                    scope.spawn(move || {
                        (client..queries.len())
                            .step_by(8)
                            .map(|i| (i, scored(batching, &queries[i], 10)))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            let mut all: Vec<(usize, Vec<(String, f64)>)> = handles
                .into_iter()
                .flat_map(|h| h.join().expect("client"))
                .collect();
            all.sort_by_key(|(i, _)| *i);
            all.into_iter().map(|(_, r)| r).collect()
        });
        for ((query, want), got) in queries.iter().zip(&expected).zip(&got) {
            assert_eq!(got.len(), want.len(), "{what}: {query:?}");
            for (url, score) in want {
                let other = got.iter().find(|(u, _)| u == url).map(|(_, s)| *s);
                assert!(
                    other.is_some_and(|s| (s - score).abs() <= 1e-5),
                    "{what}: {query:?}: {url} scored {score} unbatched, {other:?} batched"
                );
            }
        }
        let after = batch_counters(&batching);
        for model in ["reranker", "query_embedder"] {
            let (runs, requests) = (
                after[&(model, "batches")] - before[&(model, "batches")],
                after[&(model, "batched_requests")] - before[&(model, "batched_requests")],
            );
            eprintln!("{what}: {model}: {requests} requests in {runs} model runs");
            assert_eq!(requests, queries.len() as u64, "{what}: {model}");
            assert!(
                runs < requests,
                "{what}: {model}: {requests} requests in {runs} runs"
            );
        }
    }
}

/// `stillweb_model_{batches,batched_requests}_total` by (model, counter) from `/metrics`.
fn batch_counters(base: &str) -> std::collections::HashMap<(&'static str, &'static str), u64> {
    let metrics = stillweb_test_support::metrics_text(base);
    let mut counters = std::collections::HashMap::new();
    for model in ["reranker", "query_embedder"] {
        for counter in ["batches", "batched_requests"] {
            let line = format!("stillweb_model_{counter}_total{{model=\"{model}\"}} ");
            let value = metrics
                .lines()
                .find_map(|l| l.strip_prefix(line.as_str()))
                .unwrap_or_else(|| panic!("no {line} in {metrics}"))
                .parse()
                .expect("number");
            counters.insert((model, counter), value);
        }
    }
    counters
}

#[test]
fn bench_gemm_reports_every_minilm_shape() {
    let report = json(&indexer(&[
        "bench-gemm",
        "--rows",
        "100",
        "--threads",
        "2",
        "--seconds",
        "0.05",
    ]));
    // The kernel this CPU runs, as the engine itself detects it (so a new kernel needs no edit
    // here).
    assert_eq!(
        report["kernel"].as_str().expect("kernel"),
        format!("{:?}", stillweb_native::Kernel::detect())
    );
    // 100 rows over 2 threads: each thread's share rounded up to whole 32-row blocks.
    assert_eq!(report["rows"], 128);
    let rates = report["int8"].as_object().expect("int8 rates");
    assert_eq!(rates.len(), 3, "{rates:?}");
    assert!(rates.values().all(|r| r.as_f64().expect("rate") > 0.0));
    assert_eq!(
        report["int8_ceiling_gops"],
        rates
            .values()
            .map(|r| r.as_f64().expect("rate"))
            .fold(0.0, f64::max)
    );
}

#[test]
fn bench_query_batches_reports_each_batch_size_and_refuses_an_empty_one() {
    if !models_fetched() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let queries = dir.path().join("queries.jsonl");
    // 3, 4 and 5 tokens with [CLS] and [SEP].
    std::fs::write(
        &queries,
        "\"river\"\n{\"text\": \"river light\"}\n\"river light stone\"\n",
    )
    .expect("write");
    let args = |batches: &'static str| {
        indexer(&[
            "bench-query-batches",
            "--queries",
            path_str(&queries),
            "--batches",
            batches,
            "--seconds",
            "0.05",
            "--model-threads",
            "1",
        ])
    };
    let report = json(&args("1,2"));
    assert_eq!(report["queries"], 3);
    assert_eq!(report["tokens_per_query"], 4.0);
    assert_eq!(report["engine"], "native-int8");
    let batches = report["batches"].as_array().expect("batches");
    assert_eq!(
        batches
            .iter()
            .map(|b| b["batch"].clone())
            .collect::<Vec<_>>(),
        [1, 2]
    );
    for b in batches {
        assert!(b["ms_per_query"].as_f64().expect("ms") > 0.0, "{b}");
        assert!(b["model_gops"].as_f64().expect("gops") > 0.0, "{b}");
    }
    assert!(
        report["native_int8_ceiling_gops"]
            .as_f64()
            .expect("ceiling")
            > 0.0
    );
    let refused = args("8,0");
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("--batches [8, 0]: every batch size must be at least 1"),
        "{stderr}"
    );
}

#[test]
fn engine_flag_picks_the_embedder_and_refuses_unknown_names() {
    if !models_fetched() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let texts = dir.path().join("texts.jsonl");
    std::fs::write(&texts, "\"what causes the northern lights\"\n").expect("write");
    for engine in ["onnx", "native-int8"] {
        let report = json(&indexer(&[
            "bench-embed",
            "--texts",
            path_str(&texts),
            "--engine",
            engine,
        ]));
        assert_eq!(report["texts"], 1, "{engine}: {report}");
    }
    let refused = indexer(&[
        "bench-embed",
        "--texts",
        path_str(&texts),
        "--engine",
        "tensorrt",
    ]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("unknown engine `tensorrt` (onnx, native-int8)"),
        "{stderr}"
    );
}
