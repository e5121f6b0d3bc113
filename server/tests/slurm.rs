//! `deploy/slurm/` on a real single-node Slurm: Debian's munge, slurmctld and slurmd started by
//! the test on free loopback ports (root only, as slurmd needs). The samples corpus is built as
//! a 3-task job array with a finalize job after it, then served by Slurm jobs (Redis, a job
//! array of shard servers, a coordinator) that find one another through a rendezvous
//! directory; a search and a visit through the coordinator answer, and `scancel` stops every
//! process the jobs started.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use support::{in_ci, post, repo, shared_data, skip};

/// Daemons of a private Slurm cluster, stopped when dropped.
struct Cluster {
    daemons: Vec<Child>,
    conf: PathBuf,
    _dir: tempfile::TempDir,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // slurmd first: its jobs' processes go with it.
        for daemon in self.daemons.iter_mut().rev() {
            let _ = daemon.kill();
            let _ = daemon.wait();
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// Whether the Slurm and munge daemons are installed and this test may run them (as root); a
/// failure under CI (where `scripts/system-packages` installs them), a skip elsewhere.
fn slurm_available() -> bool {
    let missing: Vec<&str> = [
        "munged",
        "slurmctld",
        "slurmd",
        "sbatch",
        "squeue",
        "scancel",
    ]
    .into_iter()
    .filter(|tool| {
        !Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .stdout(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
    .collect();
    let root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"));
    if missing.is_empty() && root {
        return true;
    }
    let why = if root {
        format!(
            "{} missing; run scripts/system-packages slurm-wlm:slurmctld munge:munged",
            missing.join(", ")
        )
    } else {
        "slurmd must run as root".to_string()
    };
    assert!(!in_ci(), "the Slurm test cannot run under CI: {why}");
    skip(&why);
    false
}

/// Starts munged, slurmctld and slurmd (one node of 16 CPUs, jobs sharing it) on free ports.
fn start_cluster() -> Cluster {
    let dir = tempfile::tempdir().expect("tempdir");
    let at = |name: &str| dir.path().join(name);
    for sub in ["munge", "state", "spool", "log"] {
        std::fs::create_dir_all(at(sub)).expect("dir");
    }
    let key: Vec<u8> = (0..1024).map(|i| (i * 7 + 13) as u8).collect();
    std::fs::write(at("munge/munge.key"), key).expect("key");
    std::fs::set_permissions(
        at("munge/munge.key"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .expect("key permissions");
    let socket = at("munge/munge.sock");
    let mut daemons = Vec::new();
    let path = |p: PathBuf| p.to_str().expect("path").to_string();
    daemons.push(
        Command::new("munged")
            .args(["-F", "-f", "--num-threads=2"])
            .arg(format!("--socket={}", path(socket.clone())))
            .arg(format!("--key-file={}", path(at("munge/munge.key"))))
            .arg(format!("--log-file={}", path(at("log/munged.log"))))
            .arg(format!("--pid-file={}", path(at("munge/munged.pid"))))
            .arg(format!("--seed-file={}", path(at("munge/seed"))))
            .spawn()
            .expect("start munged"),
    );
    let host = String::from_utf8(
        Command::new("hostname")
            .arg("-s")
            .output()
            .expect("hostname")
            .stdout,
    )
    .expect("utf-8")
    .trim()
    .to_string();
    let conf = at("slurm.conf");
    std::fs::write(
        &conf,
        format!(
            "ClusterName=stillweb-test\nSlurmctldHost={host}(127.0.0.1)\nSlurmctldPort={}\nSlurmdPort={}\n\
             SlurmUser=root\nSlurmdUser=root\nAuthType=auth/munge\nAuthInfo=socket={}\nCredType=cred/munge\n\
             StateSaveLocation={}\nSlurmdSpoolDir={}\nSlurmctldPidFile={}\nSlurmdPidFile={}\n\
             SlurmctldLogFile={}\nSlurmdLogFile={}\nProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\n\
             SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\nSlurmdParameters=config_overrides\n\
             MpiDefault=none\nReturnToService=2\nSchedulerType=sched/builtin\nJobCompType=jobcomp/none\n\
             AccountingStorageType=accounting_storage/none\nPlugStackConfig=/dev/null\n\
             NodeName=node0 NodeHostname={host} NodeAddr=127.0.0.1 CPUs=16 RealMemory=4000 State=UNKNOWN\n\
             PartitionName=test Nodes=node0 Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4\n",
            free_port(),
            free_port(),
            path(socket),
            path(at("state")),
            path(at("spool")),
            path(at("slurmctld.pid")),
            path(at("slurmd.pid")),
            path(at("log/slurmctld.log")),
            path(at("log/slurmd.log")),
        ),
    )
    .expect("slurm.conf");
    // munged answers once its socket exists.
    wait_until(Duration::from_secs(30), "munged's socket", || {
        at("munge/munge.sock").exists()
    });
    for (daemon, args) in [
        ("slurmctld", &["-D", "-i"][..]),
        ("slurmd", &["-D", "-N", "node0"][..]),
    ] {
        daemons.push(
            Command::new(daemon)
                .args(args)
                .env("SLURM_CONF", &conf)
                .spawn()
                .unwrap_or_else(|e| panic!("start {daemon}: {e}")),
        );
    }
    let cluster = Cluster {
        daemons,
        conf,
        _dir: dir,
    };
    wait_until(Duration::from_secs(60), "the node to be idle", || {
        slurm(&cluster, "sinfo", &["-h", "-o", "%T"]).trim() == "idle"
    });
    cluster
}

/// Runs a Slurm command against `cluster`; its stdout.
fn slurm(cluster: &Cluster, command: &str, args: &[&str]) -> String {
    let output = Command::new(command)
        .args(args)
        .env("SLURM_CONF", &cluster.conf)
        .output()
        .unwrap_or_else(|e| panic!("run {command}: {e}"));
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Polls `done` every 200 ms until it holds, failing after `limit` (a bound far above the
/// expected seconds, so that a slow machine waits rather than fails).
fn wait_until(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "waited {limit:?} for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `deploy/slurm/submit WHAT ARGS...` on `cluster`; the job ids it printed, by name.
fn submit(cluster: &Cluster, args: &[&str]) -> Vec<(String, String)> {
    let output = Command::new(repo().join("deploy/slurm/submit"))
        .args(args)
        .env("SLURM_CONF", &cluster.conf)
        .output()
        .expect("run deploy/slurm/submit");
    assert!(
        output.status.success(),
        "submit {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(name, id)| (name.to_string(), id.trim().to_string()))
        .collect()
}

/// Job `id`'s state as `scontrol` reports it (COMPLETED, FAILED, RUNNING...).
fn job_state(cluster: &Cluster, id: &str) -> String {
    let shown = slurm(cluster, "scontrol", &["show", "job", id]);
    shown
        .split_whitespace()
        .filter_map(|field| field.strip_prefix("JobState="))
        .collect::<Vec<_>>()
        .join(",")
}

fn alive(pid: &str) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

#[test]
fn a_sharded_build_and_a_serving_cluster_run_as_slurm_jobs() {
    let Some(_) = shared_data() else { return };
    if !slurm_available() {
        return;
    }
    // The indexer is built beside this crate's server by `cargo test --workspace`.
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_stillweb-server"))
        .parent()
        .expect("bin dir")
        .to_path_buf();
    if !bin.join("stillweb-indexer").exists() {
        assert!(
            !in_ci(),
            "stillweb-indexer is not built beside stillweb-server"
        );
        skip("stillweb-indexer is not built: run cargo test --workspace");
        return;
    }
    // Usage errors say what is missing before anything is submitted.
    let usage = Command::new(repo().join("deploy/slurm/submit"))
        .args(["serve", "--set", "/tmp/set", "--shards", "3"])
        .output()
        .expect("submit");
    assert_eq!(usage.status.code(), Some(2));
    let said = String::from_utf8_lossy(&usage.stderr);
    assert!(
        said.contains("--rendezvous DIR (shared by the nodes) is required"),
        "{said}"
    );
    let cluster = start_cluster();
    let work = tempfile::tempdir().expect("tempdir");
    let set = work.path().join("set");
    let (bin, set_str) = (bin.to_str().expect("path"), set.to_str().expect("path"));
    let manifest = repo().join("corpus-manifests/samples.toml");

    let build = submit(
        &cluster,
        &[
            "build",
            "--manifest",
            manifest.to_str().expect("path"),
            "--set",
            set_str,
            "--shards",
            "3",
            "--bin",
            bin,
            "--",
            "--no-dense",
        ],
    );
    let names: Vec<&str> = build.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["build", "finalize"]);
    let finalize = build[1].1.clone();
    wait_until(Duration::from_secs(600), "the finalize job", || {
        let state = job_state(&cluster, &finalize);
        assert!(
            !state.contains("FAILED") && !state.contains("CANCELLED"),
            "finalize {state}: see {}.logs",
            set.display()
        );
        state == "COMPLETED"
    });
    for i in 0..3 {
        assert!(set.join(format!("shard-{i}/manifest.json")).is_file());
    }

    let rendezvous = work.path().join("rendezvous");
    let serving = submit(
        &cluster,
        &[
            "serve",
            "--set",
            set_str,
            "--shards",
            "3",
            "--rendezvous",
            rendezvous.to_str().expect("path"),
            "--bin",
            bin,
            "--port",
            "0",
            "--listen-host",
            "127.0.0.1",
            "--advertise",
            "127.0.0.1",
        ],
    );
    let names: Vec<&str> = serving.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["redis", "shards", "coordinator"]);
    let published = rendezvous.join("coordinator.url");
    wait_until(Duration::from_secs(300), "the coordinator's URL", || {
        published.is_file()
    });
    let base = std::fs::read_to_string(&published)
        .expect("url")
        .trim()
        .to_string();
    let (status, found) = post(
        &base,
        "/v1/search",
        json!({"query": "Anarchism", "k": 3, "session": "slurm-1"}),
    );
    assert_eq!(status, 200, "{found}");
    let url = found["results"][0]["url"].as_str().expect("url");
    assert_eq!(url, "https://en.wikipedia.org/wiki/Anarchism", "{found}");
    let (status, page) = post(
        &base,
        "/v1/visit",
        json!({"url": url, "session": "slurm-1"}),
    );
    assert_eq!(status, 200, "{page}");

    // scancel stops the jobs and every process they started.
    let pids: Vec<String> = ["redis", "shard-0", "shard-1", "shard-2", "coordinator"]
        .iter()
        .map(|name| {
            std::fs::read_to_string(rendezvous.join(format!("{name}.pid")))
                .expect("pid file")
                .trim()
                .to_string()
        })
        .collect();
    assert!(pids.iter().all(|p| alive(p)), "every server runs: {pids:?}");
    let ids: Vec<&str> = serving.iter().map(|(_, id)| id.as_str()).collect();
    slurm(&cluster, "scancel", &ids);
    wait_until(Duration::from_secs(120), "the jobs to end", || {
        slurm(&cluster, "squeue", &["-h"]).trim().is_empty()
    });
    wait_until(Duration::from_secs(60), "every process to exit", || {
        pids.iter().all(|p| !alive(p))
    });
}
