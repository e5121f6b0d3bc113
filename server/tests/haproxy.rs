//! The shipped HAProxy configuration (`deploy/haproxy/haproxy.cfg`, Debian's real `haproxy`) in
//! front of two stillweb servers sharing sessions in a real `redis-server`, all on loopback: under
//! an open-loop agent-episode load through HAProxy, `kill -9` of one server costs no episode. And
//! `scripts/cluster` (Redis, two replicas of each shard, two coordinators, HAProxy) from a sharded
//! build: `kill -9` of a coordinator under the same load costs no episode, and SIGINT (Ctrl-C)
//! stops every process it started.

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use stillweb_test_support::Redis;
use support::{
    episodes_surviving, loadtest_binary, post, repo, samples_index, shared_data, skip, spawn_server,
};

/// HAProxy on `listen` with the shipped configuration over `fronts`; killed when dropped.
struct Haproxy(Child);

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

fn address(url: &str) -> &str {
    url.trim_start_matches("http://")
}

/// Starts HAProxy, or `None` after a skip when it is not installed.
fn haproxy(listen: &str, fronts: [&str; 2]) -> Option<Haproxy> {
    if Command::new("haproxy").arg("-v").output().is_err() {
        skip("haproxy is not installed; run scripts/system-packages");
        return None;
    }
    let child = Command::new("haproxy")
        .args(["-db", "-f"])
        .arg(repo().join("deploy/haproxy/haproxy.cfg"))
        .env("STILLWEB_LISTEN", listen)
        .env("STILLWEB_FRONT1", fronts[0])
        .env("STILLWEB_FRONT2", fronts[1])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start haproxy");
    let proxy = Haproxy(child);
    // Ready once it answers a search through a front.
    let base = format!("http://{listen}");
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if std::net::TcpStream::connect(listen).is_ok()
            && post(&base, "/v1/search", json!({"query": "warm up"})).0 == 200
        {
            return Some(proxy);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("haproxy on {listen} did not start answering");
}

/// 25 questions of the fabricated items, one per line, in `dir`.
fn questions(data: &Path, dir: &Path) -> PathBuf {
    let queries: Vec<String> = std::fs::read_to_string(data.join("fabricated/items.jsonl"))
        .expect("items")
        .lines()
        .take(25)
        .map(|l| {
            let item: Value = serde_json::from_str(l).expect("item");
            item["question"]
                .as_str()
                .expect("question")
                .replace('"', "")
        })
        .collect();
    let file = dir.join("queries.txt");
    std::fs::write(&file, queries.join("\n")).expect("queries");
    file
}

#[test]
fn a_killed_front_server_behind_haproxy_costs_no_episode() {
    let Some(data) = shared_data() else { return };
    let Some(index) = samples_index() else { return };
    let Some(loadtest) = loadtest_binary() else {
        return;
    };
    let Some(redis) = Redis::start() else { return };
    let url = redis.url();
    let flags = ["--sessions", url.as_str()];
    let first = spawn_server(index, &flags);
    let mut second = Some(spawn_server(index, &flags));
    let listen = format!("127.0.0.1:{}", free_port());
    let second_address = address(&second.as_ref().expect("second").url).to_string();
    let Some(_proxy) = haproxy(&listen, [address(&first.url), &second_address]) else {
        return;
    };

    let dir = tempfile::tempdir().expect("tempdir");
    let queries_file = questions(&data, dir.path());
    // The second server is killed with SIGKILL 3 s into the load, with requests in flight.
    episodes_surviving(
        &loadtest,
        &format!("http://{listen}"),
        &queries_file,
        &dir.path().join("load"),
        || drop(second.take()),
    );
}

/// `scripts/cluster` on the samples corpus (2 shards, BM25), with this build's binaries, started
/// with SIGINT ignored, as a background job of a non-interactive shell (a CI runner, say) starts
/// it: Ctrl-C must stop it all the same. Its servers' drain deadline is longer than any test
/// waits, so a server that waited on its idle connections would fail a test, not race it.
struct Cluster {
    script: Child,
    url: String,
    run: tempfile::TempDir,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-TERM", &self.script.id().to_string()])
            .stderr(Stdio::null())
            .status();
        let _ = self.script.wait();
    }
}

impl Cluster {
    fn start() -> Cluster {
        let bin = PathBuf::from(env!("CARGO_BIN_EXE_stillweb-server"));
        let run = tempfile::tempdir().expect("tempdir");
        let mut script = Command::new("bash")
            .args(["-c", "trap '' INT; exec \"$0\""])
            .arg(repo().join("scripts/cluster"))
            .env("STILLWEB_SHUTDOWN_DRAIN_SECS", "300")
            .env("STILLWEB_BIN", bin.parent().expect("bin dir"))
            .env(
                "STILLWEB_CLUSTER_MANIFEST",
                repo().join("corpus-manifests/samples.toml"),
            )
            .env("STILLWEB_CLUSTER_DENSE", "0")
            .env("STILLWEB_PORT", free_port().to_string())
            .env("STILLWEB_CLUSTER_RUN", run.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start scripts/cluster");
        let stdout = script.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(stdout)
            .read_line(&mut line)
            .expect("read the cluster's line");
        let url = line
            .trim()
            .strip_prefix("stillweb cluster on ")
            .unwrap_or_else(|| panic!("scripts/cluster said: {line}"))
            .to_string();
        Cluster { script, url, run }
    }

    /// (name, pid) of every process it started.
    fn processes(&self) -> Vec<(String, u32)> {
        std::fs::read_to_string(self.run.path().join("processes"))
            .expect("processes")
            .lines()
            .map(|l| {
                let mut fields = l.split_whitespace();
                let name = fields.next().expect("name").to_string();
                (name, fields.next().expect("pid").parse().expect("pid"))
            })
            .collect()
    }
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.split_whitespace().nth(2) == Some("Z"))
}

#[test]
fn scripts_cluster_survives_a_killed_coordinator_and_stops_on_ctrl_c() {
    let Some(data) = shared_data() else { return };
    let Some(loadtest) = loadtest_binary() else {
        return;
    };
    for tool in ["redis-server", "haproxy"] {
        if Command::new(tool).arg("-v").output().is_err() {
            skip(&format!(
                "{tool} is not installed; run scripts/system-packages"
            ));
            return;
        }
    }
    let mut cluster = Cluster::start();
    let processes = cluster.processes();
    let names: Vec<&str> = processes.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "redis",
            "shard-0-replica-0",
            "shard-0-replica-1",
            "shard-1-replica-0",
            "shard-1-replica-1",
            "coordinator-1",
            "coordinator-2",
            "haproxy"
        ]
    );
    let (status, info) = support::get(&cluster.url, "/info");
    assert_eq!(status, 200);
    assert_eq!(info["index"]["shards"].as_array().map(Vec::len), Some(2));
    assert_eq!(info["sessions"]["store"], "redis");

    let dir = tempfile::tempdir().expect("tempdir");
    let queries = questions(&data, dir.path());
    let coordinator = processes
        .iter()
        .find(|(n, _)| n == "coordinator-2")
        .map(|(_, pid)| *pid)
        .expect("coordinator-2");
    // Coordinator 2 is killed with SIGKILL 3 s into the load.
    episodes_surviving(
        &loadtest,
        &cluster.url,
        &queries,
        &dir.path().join("load"),
        || {
            Command::new("kill")
                .args(["-KILL", &coordinator.to_string()])
                .status()
                .expect("kill");
        },
    );

    // Ctrl-C stops everything it started, without waiting for a drain (300 s): with nothing in
    // flight, at once. The wait has a wide margin over the seconds that takes.
    Command::new("kill")
        .args(["-INT", &cluster.script.id().to_string()])
        .status()
        .expect("kill");
    let sent = Instant::now();
    while cluster.script.try_wait().expect("wait").is_none() {
        assert!(
            sent.elapsed() < Duration::from_secs(60),
            "scripts/cluster did not stop within 60 s of SIGINT"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    eprintln!("scripts/cluster stopped {:?} after SIGINT", sent.elapsed());
    for (name, pid) in processes {
        assert!(!alive(pid), "{name} ({pid}) still runs after Ctrl-C");
    }
}
