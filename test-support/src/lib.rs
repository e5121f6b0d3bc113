//! What every test suite shares, so that a test that needs the real data or the real models
//! cannot pass silently:
//!
//! - [`shared_data`] and [`fetched`]: where a test's inputs are. When they are missing, a CI run
//!   (`CI` set, as `.ci/run` is run) **fails** with a message naming what is missing and how to
//!   get it; elsewhere the test prints one `SKIPPED` line, also appended to the file named by
//!   `STILLWEB_SKIP_LOG` (`scripts/test` prints their count at the end);
//! - [`samples_index`]: the index of `corpus-manifests/samples.toml`, built once per test binary;
//! - [`cached_build`]: an expensive test index built once for every test and test binary that
//!   needs it, and kept between runs;
//! - [`spawn_server`]: a server binary on `127.0.0.1:0`, killed when dropped;
//! - [`agent`]: an HTTP agent that returns error statuses instead of failing on them.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;

/// The repository root.
pub fn repo() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    root.canonicalize().unwrap_or(root)
}

/// Whether this is a CI run, where nothing may be skipped.
pub fn in_ci() -> bool {
    std::env::var_os("CI").is_some_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// Marks the running test as skipped for `reason`: fails it under CI, else prints one
/// `SKIPPED` line (and logs it for the suite's count).
///
/// # Panics
/// Under CI, always: a CI run must have every input.
pub fn skip(reason: &str) {
    let test = std::thread::current()
        .name()
        .unwrap_or("a test")
        .to_string();
    assert!(
        !in_ci(),
        "{test}: {reason} (CI is set, so a missing input fails the run instead of skipping)"
    );
    eprintln!("SKIPPED {test}: {reason}");
    if let Some(log) = std::env::var_os("STILLWEB_SKIP_LOG")
        && let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
    {
        // One write per line: tests run in parallel, and short appends do not interleave.
        let _ = file.write_all(format!("SKIPPED {test}: {reason}\n").as_bytes());
    }
}

/// The shared data folder (`STILLWEB_SHARED_DATA`, else `../shared/data` beside the checkout),
/// or `None` after [`skip`] when it is missing.
pub fn shared_data() -> Option<PathBuf> {
    let dir = std::env::var_os("STILLWEB_SHARED_DATA")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let repo = repo();
            repo.parent().unwrap_or(&repo).join("shared/data")
        });
    if dir.is_dir() {
        return Some(dir);
    }
    skip(&format!(
        "the shared data folder {} is missing; put ../shared beside the checkout or set STILLWEB_SHARED_DATA",
        dir.display()
    ));
    None
}

/// Whether `path` (a fetched model's file or directory) exists; if not, [`skip`] with `fix`
/// (the command that makes it).
pub fn fetched(path: &Path, fix: &str) -> bool {
    if path.exists() {
        return true;
    }
    skip(&format!("{} is missing; run {fix}", path.display()));
    false
}

/// The samples index (`corpus-manifests/samples.toml`, BM25 only), built once per test binary;
/// `None` after [`skip`] without the shared data.
pub fn samples_index() -> Option<&'static Path> {
    static INDEX: OnceLock<Option<(tempfile::TempDir, PathBuf)>> = OnceLock::new();
    INDEX
        .get_or_init(|| {
            shared_data()?;
            let dir = tempfile::tempdir().expect("tempdir");
            let out = dir.path().join("samples");
            let corpus = stillweb_corpus::manifest::CorpusManifest::load(
                &repo().join("corpus-manifests/samples.toml"),
            )
            .expect("samples manifest");
            stillweb_index::build_index(&corpus, &out, &stillweb_index::BuildOptions::default())
                .expect("build the samples index");
            Some((dir, out))
        })
        .as_ref()
        .map(|(_, p)| p.as_path())
}

/// Builds `out` with `build` unless a finished copy is there (`done`: the file its build
/// completes last), holding a lock beside it meanwhile: tests that need the same index at once,
/// in one test binary or several, build it once, the others waiting for it. `out` is named by a
/// content hash of everything that shapes it, so a finished copy is current. Logs the build's
/// seconds to the file named by `STILLWEB_TIMING_LOG` (`scripts/test` prints them).
pub fn cached_build(out: &Path, done: &Path, build: impl FnOnce()) {
    let parent = out.parent().expect("a cached index has a parent directory");
    std::fs::create_dir_all(parent).expect("create the test index cache");
    let name = out
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let lock = std::fs::File::create(parent.join(format!(".{name}.lock"))).expect("lock file");
    lock.lock().expect("lock the cached index");
    if done.is_file() {
        eprintln!("reusing cached index {}", out.display());
        return;
    }
    let started = std::time::Instant::now();
    build();
    assert!(
        done.is_file(),
        "building {} did not write {}",
        out.display(),
        done.display()
    );
    let seconds = started.elapsed().as_secs_f64();
    eprintln!("built cached index {} in {seconds:.0} s", out.display());
    if let Some(log) = std::env::var_os("STILLWEB_TIMING_LOG")
        && let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
    {
        let _ = file.write_all(format!("{name}\t{seconds:.1}\n").as_bytes());
    }
}

/// A server process on a loopback port, killed when dropped (so a failing test does not leave
/// it running, holding the harness's output pipe open).
#[derive(Debug)]
pub struct Server {
    pub child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `binary` (a `stillweb-server`) on `index` at `127.0.0.1:0` with `extra` flags and
/// waits for the line that says where it listens.
pub fn spawn_server(binary: &str, index: &Path, extra: &[&str]) -> Server {
    let mut args = vec![
        "--index",
        index.to_str().expect("path"),
        "--listen",
        "127.0.0.1:0",
    ];
    args.extend_from_slice(extra);
    spawn_with(binary, &args)
}

/// Starts `binary` (a `stillweb-server`) with exactly `args` (which must include `--listen`) and
/// waits for the line that says where it listens.
pub fn spawn_with(binary: &str, args: &[&str]) -> Server {
    let mut command = Command::new(binary);
    command.args(args).env("RUST_LOG", "warn");
    spawn_command(command)
}

/// Starts `command` (a `stillweb-server` listening on `127.0.0.1:0`, its environment set) and
/// waits for the line that says where it listens.
pub fn spawn_command(mut command: Command) -> Server {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn server");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("read the listening line");
    let url = line
        .trim()
        .rsplit(' ')
        .next()
        .unwrap_or_default()
        .to_string();
    assert!(url.starts_with("http://127.0.0.1:"), "server said: {line}");
    Server { child, url }
}

/// An HTTP agent that hands back 4xx and 5xx responses instead of turning them into errors.
pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .into()
}

/// The Prometheus exposition text of the server at `base` (`GET /metrics`, no key).
pub fn metrics_text(base: &str) -> String {
    let mut response = agent()
        .get(format!("{base}/metrics"))
        .call()
        .expect("metrics");
    assert_eq!(response.status().as_u16(), 200, "GET {base}/metrics");
    response.body_mut().read_to_string().expect("text")
}

/// A real `redis-server` on a free loopback port, its data (append-only file on, fsync on every
/// write) in a folder of its own; killed when dropped.
#[derive(Debug)]
pub struct Redis {
    child: Option<Child>,
    pub port: u16,
    dir: tempfile::TempDir,
}

impl Redis {
    /// Starts one, or `None` after [`skip`] when `redis-server` is not installed
    /// (`scripts/system-packages` installs it).
    pub fn start() -> Option<Redis> {
        if Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_err()
        {
            skip("redis-server is not installed; run scripts/system-packages");
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut redis = Redis {
            child: None,
            port,
            dir: tempfile::tempdir().expect("tempdir"),
        };
        redis.restart();
        Some(redis)
    }

    /// `redis://127.0.0.1:PORT/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Shuts it down as an operator would (SIGTERM: it writes its data and exits).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let _ = child.wait();
        }
    }

    /// Starts it (again) on the same port and folder, so it reloads its append-only file, and
    /// waits until it answers `PING`.
    pub fn restart(&mut self) {
        self.stop();
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--dir", self.dir.path().to_str().expect("path")])
            .args([
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--save",
                "",
            ])
            .stdout(Stdio::null())
            .spawn()
            .expect("spawn redis-server");
        self.child = Some(child);
        for _ in 0..200 {
            if self.ping() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        panic!("redis-server on port {} did not answer PING", self.port);
    }

    fn ping(&self) -> bool {
        use std::io::Read;
        let Ok(mut stream) = std::net::TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let mut reply = [0u8; 7];
        stream.write_all(b"PING\r\n").is_ok()
            && stream.read_exact(&mut reply).is_ok()
            && &reply == b"+PONG\r\n"
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
