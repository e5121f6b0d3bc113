//! Drift test: `openapi.yaml` (the source of truth) and the server agree on paths, methods and
//! error codes, and each documented operation is actually routed.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_yaml_ng::Value;
use stillweb_server::ROUTES;
use stillweb_server::error::ErrorCode;

fn spec() -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../openapi.yaml");
    let text = std::fs::read_to_string(&path).expect("read openapi.yaml");
    serde_yaml_ng::from_str(&text).expect("openapi.yaml parses")
}

#[test]
fn documented_operations_are_exactly_the_routes() {
    let spec = spec();
    let mut documented = BTreeSet::new();
    for (path, item) in spec["paths"].as_mapping().expect("paths") {
        for (key, _) in item.as_mapping().expect("path item") {
            let key = key.as_str().expect("key");
            // A path item also holds `parameters`, `summary`...: only methods are operations.
            if ["get", "post", "put", "patch", "delete", "head", "options"].contains(&key) {
                documented.insert((key.to_uppercase(), path.as_str().expect("path").to_string()));
            }
        }
    }
    let served: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    assert_eq!(documented, served);
}

#[test]
fn documented_error_codes_are_exactly_the_codes() {
    let spec = spec();
    let documented: Vec<String> = spec["components"]["schemas"]["ErrorCode"]["enum"]
        .as_sequence()
        .expect("enum")
        .iter()
        .map(|v| v.as_str().expect("code").to_string())
        .collect();
    let coded: Vec<String> = ErrorCode::ALL
        .iter()
        .map(|c| {
            serde_json::to_value(c)
                .expect("code")
                .as_str()
                .expect("string")
                .to_string()
        })
        .collect();
    assert_eq!(documented, coded);
}

#[tokio::test]
async fn every_route_is_served() {
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;
    // Routing is independent of the index, so any state will do: an index is needed to build one,
    // hence the tiny corpus.
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("d.jsonl"),
        "{\"id\": \"1\", \"url\": \"https://a.example/\", \"text\": \"Hello.\"}\n",
    )
    .expect("write");
    std::fs::write(
        dir.path().join("m.toml"),
        "name = \"t\"\n[[source]]\nformat = \"jsonl\"\npath = \"d.jsonl\"\n",
    )
    .expect("write");
    let corpus = stillweb_corpus::manifest::CorpusManifest::load(&dir.path().join("m.toml"))
        .expect("manifest");
    let index = dir.path().join("index");
    stillweb_index::build_index(&corpus, &index, &stillweb_index::BuildOptions::default())
        .expect("build");
    let args = <stillweb_server::Args as clap::Parser>::parse_from([
        "s",
        "--index",
        index.to_str().expect("path"),
    ]);
    let state = stillweb_server::prepare(args.validate().expect("config")).expect("state");
    for (method, path) in ROUTES {
        let request = Request::builder()
            .method(*method)
            .uri(*path)
            .header("content-type", "application/json")
            .body(Body::from("{}"))
            .expect("request");
        let response = stillweb_server::app(state.clone())
            .oneshot(request)
            .await
            .expect("response");
        let status = response.status().as_u16();
        // Every error, in any dialect, names its code in this header.
        let code = response
            .headers()
            .get("x-stillweb-error")
            .map(|v| v.to_str().unwrap_or_default().to_string())
            .unwrap_or_default();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
            .await
            .expect("body");
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            status != 405 && code != "route_not_found" && code != "method_not_allowed",
            "{method} {path} is not routed: {status} {code} {text}"
        );
    }
}
