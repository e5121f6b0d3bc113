//! The console (`/ui/`) in a real browser: Debian's headless Chromium driven by playwright-core
//! (`scripts/browser-env` installs both) against the real binary with `--gold`, on the samples
//! index. The browser side is `tests/browser/console.mjs`; its screenshots are written to
//! `target/console-screenshots/` (or `$STILLWEB_ARTIFACTS`).

mod support;

use std::path::PathBuf;
use std::process::Command;

use serde_json::{Value, json};
use support::{post, repo, samples_index, shared_data, skip, spawn_server};

/// The folder holding playwright-core (`scripts/browser-env` prints it), or `None` after a skip
/// (a failure under CI) when the browser or node is missing.
fn browser_env() -> Option<PathBuf> {
    let output = Command::new(repo().join("scripts/browser-env")).output();
    match output {
        Ok(o) if o.status.success() => {
            Some(PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()))
        }
        Ok(o) => {
            skip(&format!(
                "scripts/browser-env failed: {}",
                String::from_utf8_lossy(&o.stderr)
            ));
            None
        }
        Err(e) => {
            skip(&format!("scripts/browser-env: {e}"));
            None
        }
    }
}

#[test]
fn the_console_works_in_a_real_browser() {
    let Some(index) = samples_index() else { return };
    let Some(data) = shared_data() else { return };
    let Some(playwright) = browser_env() else {
        return;
    };
    let items = data.join("fabricated/items.jsonl");
    let server = spawn_server(index, &["--gold", items.to_str().expect("path")]);

    // An item whose question brings up its gold page at its first search.
    let (question, gold) = std::fs::read_to_string(&items)
        .expect("items")
        .lines()
        .take(40)
        .map(|l| serde_json::from_str::<Value>(l).expect("item"))
        .find_map(|item| {
            let question = item["question"].as_str()?.to_string();
            let (_, body) = post(&server.url, "/v1/search", json!({"query": question}));
            let found = body["results"]
                .as_array()?
                .iter()
                .any(|r| r["url"] == item["gold_url"]);
            found.then(|| (question, item["gold_url"].as_str().map(str::to_string)))
        })
        .expect("some item's question finds its gold page");
    let gold = gold.expect("gold url");

    let out = std::env::var_os("STILLWEB_ARTIFACTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("target/console-screenshots"));
    std::fs::create_dir_all(&out).expect("screenshot folder");
    let output = Command::new("node")
        .arg(repo().join("server/tests/browser/console.mjs"))
        .arg(&server.url)
        .arg(&out)
        .arg(&playwright)
        .arg(&question)
        .arg(&gold)
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    eprintln!("{stdout}{stderr}");
    assert!(
        output.status.success(),
        "the console's browser checks failed:\n{stdout}\n{stderr}"
    );
    let measured: Value = serde_json::from_str(stdout.trim().lines().last().unwrap_or("{}"))
        .expect("the script's JSON line");
    assert_eq!(measured["ok"], true);
    for shot in ["search", "explain", "page", "sessions", "index", "narrow"] {
        let path = out.join(format!("{shot}.png"));
        assert!(
            std::fs::metadata(&path).is_ok_and(|m| m.len() > 1000),
            "{} was not written",
            path.display()
        );
    }
}
