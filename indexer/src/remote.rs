//! Evaluation through a running server's HTTP API (`eval --target URL`): the same queries and
//! scores as the index-directory form, so a deployment (one server, or a coordinator in front of
//! shards) can be checked as users reach it. Queries go in batches (`POST /v1/search/batch`) of
//! the server's `--max-batch`; the server must allow the depth the scores need (`--max-k`).

use anyhow::Context;
use serde_json::{Value, json};

/// What the server says about itself (`GET /info`).
pub struct Target {
    base: String,
    agent: ureq::Agent,
    pub info: Value,
    /// The collection searched, as `/info` lists it (`name`, `build_id`, `mode`, ...).
    pub collection: Value,
    max_k: usize,
    max_batch: usize,
}

/// Each query's ranked result URLs, and how many queries the server refused as unsearchable
/// (blank once trimmed, too many operators): those rank nothing, as they find nothing.
pub struct Rankings {
    pub urls: Vec<Vec<String>>,
    pub refused: usize,
}

impl Target {
    /// Reads `/info` at `base` (`http://host:port`, or a `/s/...`-free base URL); searches go
    /// to `collection` (default: the server's default one).
    pub fn connect(base: &str, collection: Option<&str>) -> anyhow::Result<Target> {
        let base = base.trim_end_matches('/').to_string();
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .build()
            .into();
        let mut response = agent.get(&format!("{base}/info")).call().with_context(|| {
            format!("cannot reach {base}/info; is a stillweb server running there?")
        })?;
        anyhow::ensure!(
            response.status() == 200,
            "{base}/info answered {}; is this a stillweb server?",
            response.status()
        );
        let info: Value = response
            .body_mut()
            .read_json()
            .with_context(|| format!("{base}/info is not JSON"))?;
        let limit = |name: &str| {
            info["limits"][name]
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .with_context(|| format!("{base}/info has no limits.{name}"))
        };
        let listed = info["collections"].as_array().cloned().unwrap_or_default();
        let collection = match collection {
            None => listed.first().cloned().unwrap_or(Value::Null),
            Some(name) => listed
                .iter()
                .find(|c| c["name"] == name)
                .cloned()
                .with_context(|| {
                    let names: Vec<&str> =
                        listed.iter().filter_map(|c| c["name"].as_str()).collect();
                    format!(
                        "{base} serves no collection `{name}`; it serves {}",
                        names.join(", ")
                    )
                })?,
        };
        Ok(Target {
            collection,
            max_k: limit("max_k")?,
            max_batch: limit("max_batch")?.max(1),
            base,
            agent,
            info,
        })
    }

    /// Ranks every query to depth `k` through `/v1/search/batch`.
    pub fn rank(&self, queries: &[&str], k: usize) -> anyhow::Result<Rankings> {
        anyhow::ensure!(
            self.max_k >= k,
            "{} answers at most {} results a search; these scores need {k}: restart it with --max-k {k}",
            self.base,
            self.max_k
        );
        let mut rankings = Rankings {
            urls: Vec::with_capacity(queries.len()),
            refused: 0,
        };
        for batch in queries.chunks(self.max_batch) {
            let mut body = json!({
                "queries": batch.iter().map(|q| json!({"query": q, "k": k})).collect::<Vec<_>>(),
            });
            if let Some(name) = self.collection["name"].as_str() {
                body["collection"] = name.into();
            }
            let mut response = self
                .agent
                .post(&format!("{}/v1/search/batch", self.base))
                .send_json(&body)
                .with_context(|| format!("searching {}", self.base))?;
            let status = response.status();
            let answer: Value = response.body_mut().read_json().with_context(|| {
                format!(
                    "{}/v1/search/batch answered {status} without JSON",
                    self.base
                )
            })?;
            anyhow::ensure!(
                status == 200,
                "{}/v1/search/batch answered {status}: {answer}",
                self.base
            );
            let entries = answer["responses"]
                .as_array()
                .context("a batch answer without `responses`")?;
            anyhow::ensure!(
                entries.len() == batch.len(),
                "{} answers for {} queries",
                entries.len(),
                batch.len()
            );
            for (query, entry) in batch.iter().zip(entries) {
                if let Some(results) = entry["results"].as_array() {
                    rankings.urls.push(
                        results
                            .iter()
                            .filter_map(|r| r["url"].as_str().map(str::to_string))
                            .collect(),
                    );
                } else if entry["error"]["code"] == "invalid_request" {
                    rankings.refused += 1;
                    rankings.urls.push(Vec::new());
                } else {
                    anyhow::bail!("the query {query:?} failed: {entry}");
                }
            }
        }
        Ok(rankings)
    }
}
