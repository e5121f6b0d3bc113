//! Swapping builds while searches run: a server over the samples index and an overlay behind a
//! symlink, the link flipped between two overlay builds (the same fabricated URLs, regenerated
//! text) and the server reloaded five times under an open-loop episode load (search, then visit
//! the first result): no request fails, every search names one of the two builds, and its
//! fabricated snippets are that build's text (no result of one build is served for another). A
//! reload to a damaged build is refused and the old build keeps answering; SIGHUP reloads too.

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use stillweb_corpus::manifest::CorpusManifest;
use stillweb_index::{BuildOptions, build_index, build_shards};
use support::{agent, copy_dir, repo, samples_index, shared_data, spawn_server, spawn_with};

const PAGES: usize = 12;
const QUERY: &str = "quillwort fabricated record";

/// An overlay of `base` at `dir/NAME`: the fabricated pages, their text naming `version`; with
/// `shards`, `base` is a set and the overlay a set of as many shards.
fn overlay(dir: &Path, base: &Path, name: &str, version: &str) -> PathBuf {
    overlay_of(dir, base, name, version, None)
}

fn overlay_of(dir: &Path, base: &Path, name: &str, version: &str, shards: Option<u32>) -> PathBuf {
    let at = dir.join(name);
    std::fs::create_dir_all(&at).expect("dir");
    let mut lines = String::new();
    for i in 0..PAGES {
        let page = json!({
            "id": format!("fabricated-{i}"),
            "url": format!("https://fabricated.example/page-{i}"),
            "title": format!("Quillwort fabricated record {i}"),
            "text": format!("The quillwort fabricated record {i} belongs to {version}. It grows in cold lakes."),
        });
        lines.push_str(&format!("{page}\n"));
    }
    std::fs::write(at.join("pages.jsonl"), lines).expect("pages");
    std::fs::write(
        at.join("m.toml"),
        "name = \"fabricated\"\n[[source]]\nformat = \"jsonl\"\npath = \"pages.jsonl\"\n",
    )
    .expect("manifest");
    let corpus = CorpusManifest::load(&at.join("m.toml")).expect("manifest");
    let out = at.join("index");
    let options = BuildOptions {
        overlay_of: vec![base.to_path_buf()],
        ..BuildOptions::default()
    };
    match shards {
        None => build_index(&corpus, &out, &options).map(|_| ()),
        Some(n) => build_shards(&corpus, &out, n, None, &options, None).map(|_| ()),
    }
    .expect("overlay build");
    out
}

/// Points `link` at `target` in one rename, as a deploy flips it.
fn flip(link: &Path, target: &Path) {
    let next = link.with_extension("next");
    let _ = std::fs::remove_file(&next);
    std::os::unix::fs::symlink(target, &next).expect("symlink");
    std::fs::rename(&next, link).expect("flip");
}

/// The largest file under `dir` (its checksums list aside), with one byte flipped.
fn damage(dir: &Path) -> PathBuf {
    fn files(dir: &Path, into: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
            if entry.path().is_dir() {
                files(&entry.path(), into);
            } else if entry.file_name() != "checksums.sha256" {
                into.push(entry.path());
            }
        }
    }
    let mut all = Vec::new();
    files(dir, &mut all);
    let largest = all
        .into_iter()
        .max_by_key(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .expect("a file");
    let mut bytes = std::fs::read(&largest).expect("read");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x5a;
    std::fs::write(&largest, bytes).expect("write");
    largest
}

/// One episode's outcome.
#[derive(Debug)]
struct Episode {
    search: u16,
    visit: u16,
    /// The build the search named.
    index: String,
    /// The versions named by its fabricated snippets.
    versions: Vec<String>,
}

fn episode(base: &str, n: usize) -> Episode {
    let agent = agent();
    let session = format!("reload-{n}");
    let mut response = agent
        .post(format!("{base}/v1/search"))
        .send_json(json!({"query": QUERY, "k": 5, "session": session}))
        .expect("search");
    let search = response.status().as_u16();
    let named = response
        .headers()
        .get("x-stillweb-build")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    let body: Value = response.body_mut().read_json().unwrap_or(Value::Null);
    // The header and the body name the same build.
    assert_eq!(body["index"].as_str(), Some(named.as_str()), "{body}");
    let results = body["results"].as_array().cloned().unwrap_or_default();
    let versions = results
        .iter()
        .filter_map(|r| r["snippet"].as_str())
        .filter_map(|s| {
            ["version one", "version two"]
                .into_iter()
                .find(|v| s.contains(v))
        })
        .map(str::to_string)
        .collect();
    let visit = match results.first().and_then(|r| r["url"].as_str()) {
        Some(url) => agent
            .post(format!("{base}/v1/visit"))
            .send_json(json!({"url": url, "session": session}))
            .expect("visit")
            .status()
            .as_u16(),
        None => 0,
    };
    Episode {
        search,
        visit,
        index: body["index"].as_str().unwrap_or_default().to_string(),
        versions,
    }
}

/// Every episode of a load through swaps between builds `first` (its overlay says "version
/// one") and `second` ("version two") answered, named one of them, and showed only its text.
fn check_episodes(episodes: &[Episode], first: &str, second: &str) {
    assert!(episodes.len() >= 100, "{} episodes", episodes.len());
    for e in episodes {
        assert_eq!((e.search, e.visit), (200, 200), "{e:?}");
        let version = if e.index == first {
            "version one"
        } else if e.index == second {
            "version two"
        } else {
            panic!("a search named build {:?}: {e:?}", e.index)
        };
        assert!(!e.versions.is_empty(), "no fabricated page found: {e:?}");
        assert!(
            e.versions.iter().all(|v| v == version),
            "mixed builds: {e:?}"
        );
    }
}

fn post_reload(base: &str) -> (u16, Value) {
    let mut response = agent()
        .post(format!("{base}/admin/reload"))
        .send_empty()
        .expect("reload");
    let status = response.status().as_u16();
    (status, response.body_mut().read_json().expect("json"))
}

fn build_id(base: &str) -> String {
    let info: Value = agent()
        .get(format!("{base}/info"))
        .call()
        .expect("info")
        .body_mut()
        .read_json()
        .expect("json");
    info["index"]["build_id"]
        .as_str()
        .expect("build id")
        .to_string()
}

#[test]
fn reloads_under_load_drop_no_request_and_a_damaged_build_is_refused() {
    let Some(base) = samples_index() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let one = overlay(dir.path(), base, "one", "version one");
    let two = overlay(dir.path(), base, "two", "version two");
    let link = dir.path().join("current");
    flip(&link, &one);
    let server = spawn_server(base, &["--overlay", link.to_str().expect("path")]);
    let url = server.url.clone();
    let first = build_id(&url);
    assert!(first.contains('+'), "base+overlay: {first}");

    let stop = Arc::new(AtomicBool::new(false));
    let (load, outcomes) = open_loop(&url, &stop);

    let mut ids = vec![first.clone()];
    for (i, target) in [&two, &one, &two, &one, &two].into_iter().enumerate() {
        std::thread::sleep(Duration::from_millis(400));
        flip(&link, target);
        let (status, body) = post_reload(&url);
        assert_eq!(status, 200, "reload {i}: {body}");
        assert_eq!(body["previous"], ids[ids.len() - 1].as_str(), "{body}");
        assert_eq!(body["swaps"], i as u64 + 1, "{body}");
        ids.push(body["build_id"].as_str().expect("id").to_string());
    }
    let second = ids[1].clone();
    assert_ne!(first, second);
    assert_eq!(
        ids,
        [&first, &second, &first, &second, &first, &second].map(String::clone)
    );

    // A damaged build is refused, naming the file; the old build keeps answering.
    let damaged = dir.path().join("damaged");
    copy_dir(&two, &damaged);
    let file = damage(&damaged);
    flip(&link, &damaged);
    std::thread::sleep(Duration::from_millis(300));
    let (status, body) = post_reload(&url);
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "reload_refused", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!("still serving build {second}"))
            && message.contains(file.file_name().and_then(|n| n.to_str()).unwrap_or("?")),
        "{message}"
    );
    // A directory that is gone is refused too.
    std::fs::remove_file(&link).expect("unlink");
    let (status, body) = post_reload(&url);
    assert_eq!(status, 409, "{body}");
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    load.join().expect("load");
    let episodes: Vec<Episode> = outcomes.try_iter().collect();

    check_episodes(&episodes, &first, &second);
    let answered_by = |id: &str| episodes.iter().filter(|e| e.index == id).count();
    eprintln!(
        "{} episodes, {} on {first}, {} on {second}",
        episodes.len(),
        answered_by(&first),
        answered_by(&second)
    );
    assert!(answered_by(&first) > 0 && answered_by(&second) > 0);
    assert_eq!(
        build_id(&url),
        second,
        "the refused reloads changed nothing"
    );

    let metrics = support::metrics_text(&url);
    assert!(
        metrics.contains("stillweb_index_swaps_total 5"),
        "{metrics}"
    );
    assert!(
        metrics.contains(&format!(
            "stillweb_index_build_info{{build_id=\"{second}\",collection=\"default\"}} 1"
        )),
        "{metrics}"
    );

    // SIGHUP reloads the same way.
    flip(&link, &one);
    let pid = server.child.id().to_string();
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .expect("kill");
    assert!(hup.success());
    let deadline = Instant::now() + Duration::from_secs(60);
    while build_id(&url) != first {
        assert!(
            Instant::now() < deadline,
            "SIGHUP did not reload within 60 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// An open-loop episode load: an episode every 20 ms against `url`, each on its own thread
/// whatever the others are doing, until `stop`.
fn open_loop(
    url: &str,
    stop: &Arc<AtomicBool>,
) -> (
    std::thread::JoinHandle<()>,
    std::sync::mpsc::Receiver<Episode>,
) {
    let (sender, outcomes) = std::sync::mpsc::channel();
    let (stop, url) = (Arc::clone(stop), url.to_string());
    let load = std::thread::spawn(move || {
        let mut clients = Vec::new();
        let mut n = 0;
        while !stop.load(Ordering::Relaxed) {
            let (sender, url) = (sender.clone(), url.clone());
            clients.push(std::thread::spawn(move || {
                let _ = sender.send(episode(&url, n));
            }));
            n += 1;
            std::thread::sleep(Duration::from_millis(20));
        }
        for client in clients {
            client.join().expect("client");
        }
    });
    (load, outcomes)
}

/// A coordinator over a 2-shard base set whose shard servers each serve an overlay shard behind
/// a symlink: it moves to the shards' new build only once every shard serves it (a reload
/// before that is refused, naming both builds), and the shard servers keep answering its calls
/// for the build before theirs meanwhile, so under load no search fails or mixes builds.
#[test]
fn a_coordinator_moves_to_a_new_build_only_when_every_shard_serves_it() {
    if shared_data().is_none() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let corpus = CorpusManifest::load(&repo().join("corpus-manifests/samples.toml"))
        .expect("samples manifest");
    let base = dir.path().join("base");
    build_shards(&corpus, &base, 2, None, &BuildOptions::default(), None).expect("base set");
    let one = overlay_of(dir.path(), &base, "one", "version one", Some(2));
    let two = overlay_of(dir.path(), &base, "two", "version two", Some(2));
    let links: Vec<PathBuf> = (0..2)
        .map(|i| {
            let link = dir.path().join(format!("current-{i}"));
            flip(&link, &one.join(format!("shard-{i}")));
            link
        })
        .collect();
    let shards: Vec<support::Server> = (0..2)
        .map(|i| {
            spawn_server(
                &base.join(format!("shard-{i}")),
                &["--overlay", links[i].to_str().expect("path")],
            )
        })
        .collect();
    let coordinator = spawn_with(&[
        "--shard",
        &shards[0].url,
        "--shard",
        &shards[1].url,
        "--listen",
        "127.0.0.1:0",
    ]);
    let url = coordinator.url.clone();
    let first = build_id(&url);

    let stop = Arc::new(AtomicBool::new(false));
    let (load, outcomes) = open_loop(&url, &stop);
    let mut second = String::new();
    for (round, target) in [&two, &one, &two].into_iter().enumerate() {
        std::thread::sleep(Duration::from_millis(300));
        flip(&links[0], &target.join("shard-0"));
        let (status, body) = post_reload(&shards[0].url);
        assert_eq!(status, 200, "shard 0: {body}");
        // One shard moved: the coordinator stays where it is.
        std::thread::sleep(Duration::from_millis(300));
        let (status, body) = post_reload(&url);
        assert_eq!(status, 409, "round {round}: {body}");
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains("every shard must come from one set"),
            "{message}"
        );
        flip(&links[1], &target.join("shard-1"));
        let (status, body) = post_reload(&shards[1].url);
        assert_eq!(status, 200, "shard 1: {body}");
        std::thread::sleep(Duration::from_millis(300));
        let (status, body) = post_reload(&url);
        assert_eq!(status, 200, "round {round}: {body}");
        if round == 0 {
            second = body["build_id"].as_str().expect("id").to_string();
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    load.join().expect("load");
    let episodes: Vec<Episode> = outcomes.try_iter().collect();
    assert_ne!(first, second);
    check_episodes(&episodes, &first, &second);
    assert_eq!(build_id(&url), second);
}
