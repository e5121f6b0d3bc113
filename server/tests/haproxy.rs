//! The shipped HAProxy configuration (`deploy/haproxy/haproxy.cfg`, Debian's real `haproxy`) in
//! front of two stillweb servers sharing sessions in a real `redis-server`, all on loopback: under
//! an open-loop agent-episode load through HAProxy, `kill -9` of one server costs no episode.

mod support;

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
    let queries_file = dir.path().join("queries.txt");
    std::fs::write(&queries_file, queries.join("\n")).expect("queries");
    // The second server is killed with SIGKILL 3 s into the load, with requests in flight.
    episodes_surviving(
        &loadtest,
        &format!("http://{listen}"),
        &queries_file,
        &dir.path().join("load"),
        || drop(second.take()),
    );
}
