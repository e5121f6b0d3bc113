//! A coordinator's view of its shard set: [`discover`] asks every shard's replicas who they are
//! and checks that they are the shards `0..N` of one set. The coordinator then serves the set as
//! a corpus of N remote parts ([`crate::corpus`]): the one search pipeline runs over them, and
//! ranks exactly as the set's single index would.

use std::time::{Duration, Instant};

use anyhow::Context;
use serde::Deserialize;
use stillweb_index::DateReport;
use stillweb_index::dense::DenseManifest;
use stillweb_index::shard::ShardManifest;
use tracing::{info, warn};

use crate::corpus::CorpusInfo;

/// The part of a shard server's `/info` the coordinator reads.
#[derive(Debug, Deserialize)]
struct ShardInfo {
    index: ShardIndexInfo,
}

#[derive(Debug, Deserialize)]
struct ShardIndexInfo {
    build_id: String,
    corpus: String,
    created_unix: u64,
    format_version: u64,
    dense: Option<DenseManifest>,
    shard: Option<ShardManifest>,
    /// The set's dates (a shard's counts; the set's frozen clock, which `finalize` gave each).
    #[serde(default)]
    dates: DateReport,
}

/// Asks every shard's replicas for their `/info` (waiting up to `wait` for each shard to have one
/// that answers) and checks that they are the shards `0..N` of one set, in `--shard` order.
pub fn discover(shards: &[Vec<String>], wait: Duration) -> anyhow::Result<CorpusInfo> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .into();
    let deadline = Instant::now() + wait;
    let count = shards.len() as u32;
    let mut set: Option<(String, CorpusInfo, u64)> = None;
    for (i, replicas) in shards.iter().enumerate() {
        let mut answered = 0;
        loop {
            let mut failures = Vec::new();
            for url in replicas {
                let url = url.trim_end_matches('/');
                let info: ShardInfo = match agent
                    .get(format!("{url}/info"))
                    .call()
                    .map_err(anyhow::Error::from)
                    .and_then(|mut r| Ok(r.body_mut().read_json()?))
                {
                    Ok(info) => info,
                    Err(e) => {
                        failures.push(format!("{url}: {e}"));
                        continue;
                    }
                };
                answered += 1;
                let index = info.index;
                let Some(shard) = index.shard else {
                    anyhow::bail!(
                        "{url} (given as shard {i}) serves an index that is not a shard; serve each shard-I directory of a set built with `stillweb-indexer build --shards N`"
                    );
                };
                anyhow::ensure!(
                    shard.index == i as u32 && shard.count == count,
                    "{url} (given as shard {i} of {count}) serves shard {} of {}; give one --shard per shard, in shard order",
                    shard.index,
                    shard.count
                );
                match &set {
                    None => {
                        let info = CorpusInfo {
                            build_id: index.build_id.clone(),
                            corpus_name: index.corpus,
                            documents: shard.corpus_documents,
                            chunks: shard.corpus_chunks.unwrap_or_default(),
                            created_unix: index.created_unix,
                            format_version: index.format_version,
                            dense: index.dense,
                            shard: None,
                            overlays: Vec::new(),
                            dates: DateReport {
                                as_of: index.dates.as_of,
                                ..DateReport::default()
                            },
                        };
                        set = Some((url.to_string(), info, 0));
                    }
                    Some((first, known, _)) => anyhow::ensure!(
                        known.build_id == index.build_id,
                        "{url} serves shard {i} of build {}, but {first} serves build {}: every shard must come from one set",
                        index.build_id,
                        known.build_id
                    ),
                }
            }
            if answered > 0 {
                break;
            }
            if Instant::now() >= deadline {
                anyhow::bail!(
                    "no replica of shard {i} answered within {} s: {}",
                    wait.as_secs(),
                    failures.join("; ")
                );
            }
            warn!(shard = i, failures = ?failures, "waiting for a replica of the shard");
            std::thread::sleep(Duration::from_millis(500));
        }
    }
    let (_, info, _) = set.context("no shards given")?;
    info!(build_id = %info.build_id, shards = count, documents = info.documents, "shard set discovered");
    Ok(info)
}
