//! The compatible endpoints driven by the real client libraries (tavily-python, exa-py, the MCP
//! Python SDK) and documented requests, and a schemathesis run of `openapi.yaml`, all against the
//! real binary on a loopback port. The Python side lives in `tests/clients/`; its environment is
//! made by `scripts/client-venv` (which `scripts/test` runs first).

mod support;

use std::process::Command;

use support::{client_python, repo, samples_index, spawn_server};

#[test]
fn real_client_libraries_and_documented_requests() {
    let Some(index) = samples_index() else { return };
    let Some(python) = client_python() else {
        return;
    };
    // The samples twice: as the default collection and as a `scholar` one.
    let (web, scholar) = (
        format!("web={}", index.display()),
        format!("scholar={}", index.display()),
    );
    let server = support::spawn_with(&[
        "--collection",
        &web,
        "--collection",
        &scholar,
        "--listen",
        "127.0.0.1:0",
    ]);
    support::client_checks_pass(&python, "compat_clients.py", &[&server.url, "scholar"]);
}

/// schemathesis generates requests from `openapi.yaml` (valid and invalid) and checks every
/// response: no 5xx, and status codes, content types and bodies as documented.
#[test]
fn schemathesis_finds_no_server_errors_or_schema_violations() {
    let Some(index) = samples_index() else { return };
    let Some(python) = client_python() else {
        return;
    };
    let _server = spawn_server(index, &[]);
    let base = _server.url.clone();
    let schemathesis = python.with_file_name("schemathesis");
    // schemathesis keeps a cache in its working directory: keep it out of the checkout.
    let scratch = tempfile::tempdir().expect("tempdir");
    let output = Command::new(&schemathesis)
        .current_dir(scratch.path())
        .args(["run", repo().join("openapi.yaml").to_str().expect("path")])
        .args(["--url", &base])
        .args([
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
        ])
        .args(["--max-examples", "25", "--seed", "7", "--workers", "2"])
        .args(["--phases", "examples,coverage,fuzzing"])
        .args(["--no-color", "--request-timeout", "30"])
        .output()
        .expect("run schemathesis");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let tail: String = stdout
        .lines()
        .rev()
        .take(60)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("\n");
    eprintln!("{tail}");
    assert!(
        output.status.success(),
        "schemathesis found problems:\n{stdout}\n{stderr}"
    );
}
