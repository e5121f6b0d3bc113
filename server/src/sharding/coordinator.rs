//! A coordinator: the whole public API over a set of shard servers, ranking exactly as the
//! set's single index would. Per search it embeds the query once; asks every shard for its
//! stage-1 candidates with raw scores (after the whole corpus's filter counts, for a query with
//! operators); keeps the global best `candidates` per retriever; asks each owning shard for the
//! raw chunk scores of its candidates; normalises, fuses and applies MaxP over the whole pool
//! (the same pure [`rank`] a single index runs); reranks here; and fetches the results from
//! their shards. A visit goes to the shard its URL hashes to.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use anyhow::Context;
use futures_util::future::join_all;
use serde::Deserialize;
use stillweb_index::dense::DenseManifest;
use stillweb_index::search::explain::explain;
use stillweb_index::search::rank::{Ranked, apply_rerank, rank, rerank_pool};
use stillweb_index::search::{Candidates, ChunkScore, FilterCounts, PreparedQuery, lap};
use stillweb_index::shard::{ShardManifest, shard_of};
use stillweb_index::{Hit, ParsedQuery, SearchParams, SearchResults, StoredDoc};
use stillweb_models::worker::{EmbedWorker, RerankWorker};
use tracing::{info, warn};

use super::protocol::{
    CANDIDATES, CHUNKS, CandidatesRequest, ChunksRequest, FILTER_COUNTS, FilterCountsRequest, HITS,
    HitsRequest, PAGE, PASSAGES, PageRequest, PassagesRequest,
};
use super::replicas::ReplicaSet;
use crate::error::ApiError;

/// What the coordinator knows of the set its shards belong to (from their `/info`).
#[derive(Debug, Clone)]
pub struct SetInfo {
    pub build_id: String,
    pub corpus_name: String,
    pub documents: u64,
    pub chunks: u64,
    pub created_unix: u64,
    pub format_version: u64,
    pub dense: Option<DenseManifest>,
}

/// The shards of one set, with the models that run at the coordinator.
#[derive(Debug)]
pub struct Coordinator {
    pub shards: Vec<ReplicaSet>,
    pub set: SetInfo,
    embedder: Option<EmbedWorker>,
    reranker: Option<RerankWorker>,
}

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
}

/// Asks every shard's replicas for their `/info` (waiting up to `wait` for each shard to have one
/// that answers) and checks that they are the shards `0..N` of one set, in `--shard` order.
pub fn discover(shards: &[Vec<String>], wait: Duration) -> anyhow::Result<SetInfo> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(5)))
        .build()
        .into();
    let deadline = Instant::now() + wait;
    let count = shards.len() as u32;
    let mut set: Option<(String, SetInfo, u64)> = None;
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
                        let info = SetInfo {
                            build_id: index.build_id.clone(),
                            corpus_name: index.corpus,
                            documents: shard.corpus_documents,
                            chunks: shard.corpus_chunks.unwrap_or_default(),
                            created_unix: index.created_unix,
                            format_version: index.format_version,
                            dense: index.dense,
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

impl Coordinator {
    pub fn new(
        shards: Vec<ReplicaSet>,
        set: SetInfo,
        embedder: Option<EmbedWorker>,
        reranker: Option<RerankWorker>,
    ) -> anyhow::Result<Coordinator> {
        if let (Some(e), Some(d)) = (&embedder, &set.dense) {
            anyhow::ensure!(
                e.model_id() == d.model_id && e.dimension() == d.dimension,
                "the shards were built with {} ({}-d) but the coordinator's embedder is {} ({}-d); load the same model",
                d.model_id,
                d.dimension,
                e.model_id(),
                e.dimension()
            );
            if let Some(warning) = d.engine_mismatch(e.engine()) {
                warn!("{warning}");
            }
        }
        Ok(Coordinator {
            shards,
            set,
            embedder,
            reranker,
        })
    }

    pub fn embedder_id(&self) -> Option<&str> {
        self.embedder.as_ref().map(EmbedWorker::model_id)
    }

    /// The query embedder the coordinator runs, if any.
    pub fn embedder(&self) -> Option<&EmbedWorker> {
        self.embedder.as_ref()
    }

    /// The reranker the coordinator runs, if any.
    pub fn reranker(&self) -> Option<&RerankWorker> {
        self.reranker.as_ref()
    }

    pub fn reranker_id(&self) -> Option<&str> {
        self.reranker.as_ref().map(|r| r.model_id())
    }

    /// Whether [`Coordinator::embed`] gives `text` a vector.
    pub fn embeds(&self, text: &str) -> bool {
        self.embedder.is_some() && !text.trim().is_empty()
    }

    /// The query's vector (blocking: run it on the search pool).
    pub fn embed(&self, text: &str) -> Result<Option<Vec<f32>>, ApiError> {
        match &self.embedder {
            Some(e) if self.embeds(text) => {
                e.embed_query(text).map(Some).map_err(ApiError::internal)
            }
            _ => Ok(None),
        }
    }

    /// Every stage after embedding, over the shards.
    pub async fn search(
        &self,
        parsed: ParsedQuery,
        vector: Option<Vec<f32>>,
        params: &SearchParams,
    ) -> Result<SearchResults, ApiError> {
        let mut results = SearchResults::default();
        let prepared = PreparedQuery::new(
            parsed.clone(),
            vector,
            &params.weights,
            self.set.dense.is_some(),
        );
        if params.k == 0 || prepared.is_empty() {
            return Ok(results);
        }
        let mut clock = Instant::now();
        let plan = if parsed.has_filters() {
            let request = FilterCountsRequest {
                query: parsed.clone(),
            };
            let counts: Vec<FilterCounts> = self.on_all(FILTER_COUNTS, &request).await?;
            Some(FilterCounts::sum(counts).plan(&parsed))
        } else {
            None
        };
        results.timings.filter = lap(&mut clock);

        let request = CandidatesRequest {
            query: prepared.clone(),
            limit: params.candidates,
            plan,
        };
        let found: Vec<Candidates> = self.on_all(CANDIDATES, &request).await?;
        let (candidates, owners) = merge_candidates(found, params.candidates.max(1));
        results.relaxed = candidates.relaxed;
        results.timings.candidates = lap(&mut clock);
        let docs = candidates.ordinals();
        if docs.is_empty() {
            return Ok(results);
        }

        let by_shard = self.by_shard(docs.iter().copied(), |&d| d, &owners);
        let chunks: Vec<Vec<ChunkScore>> = self
            .on_each(CHUNKS, by_shard, |docs| ChunksRequest {
                query: prepared.clone(),
                docs,
            })
            .await?;
        let chunks: Vec<ChunkScore> = chunks.into_iter().flatten().collect();
        let mut ranking = rank(
            &candidates.doc_bm25(),
            &chunks,
            params.weights,
            params.fusion,
        );
        results.timings.chunks = lap(&mut clock);
        let fused = params.explain.then(|| ranking.clone());
        let (mut pool_used, mut pool_scores) = (Vec::new(), Vec::new());

        if let Some(reranker) = self.reranker.as_ref().filter(|_| params.rerank_pool > 0) {
            let pool_entries = rerank_pool(&ranking, params.rerank_pool);
            let by_shard = self.by_shard(
                pool_entries.iter().map(|e| (e.doc, e.chunk)),
                |c| c.0,
                &owners,
            );
            let texts: Vec<Vec<Option<String>>> = self
                .on_each(PASSAGES, by_shard.clone(), |chunks| PassagesRequest {
                    chunks,
                })
                .await?;
            let mut passage: HashMap<(u64, u64), String> = HashMap::new();
            for (asked, got) in by_shard.iter().zip(texts) {
                for (key, text) in asked.iter().zip(got) {
                    if let Some(text) = text {
                        passage.insert(*key, text);
                    }
                }
            }
            let (entries, passages): (Vec<_>, Vec<String>) = pool_entries
                .into_iter()
                .filter_map(|e| Some((e, passage.remove(&(e.doc, e.chunk))?)))
                .unzip();
            if !entries.is_empty() {
                // Awaited, not run on the pool: pools of concurrent searches meet in batches.
                let scores =
                    crate::service::models::reranked(reranker, parsed.text.clone(), passages)
                        .await?;
                ranking.ranked = apply_rerank(ranking.ranked, &entries, &scores);
                (pool_used, pool_scores) = (entries, scores);
            }
        }
        results.timings.rerank = lap(&mut clock);

        ranking.ranked.truncate(params.k);
        if let Some(fused) = &fused {
            results.explained = Some(explain(
                &ranking.ranked,
                &candidates,
                &chunks,
                fused,
                (&pool_used, &pool_scores),
                params.weights,
                params.fusion,
            ));
        }
        let ranked_by_shard: Vec<Vec<Ranked>> =
            self.by_shard(ranking.ranked.iter().copied(), |r| r.doc, &owners);
        let hits: Vec<Vec<Hit>> = self
            .on_each(HITS, ranked_by_shard, |ranked| HitsRequest { ranked })
            .await?;
        let mut by_doc: HashMap<u64, Hit> =
            hits.into_iter().flatten().map(|h| (h.ord, h)).collect();
        results.hits = ranking
            .ranked
            .iter()
            .filter_map(|r| by_doc.remove(&r.doc))
            .collect();
        results.timings.fetch = lap(&mut clock);
        Ok(results)
    }

    /// The page at normalised URL `url_key`, from the shard that owns it.
    pub async fn page(&self, url_key: &str) -> Result<Option<StoredDoc>, ApiError> {
        let owner = shard_of(url_key, self.shards.len() as u32) as usize;
        self.shards[owner]
            .call(
                PAGE,
                &PageRequest {
                    url_key: url_key.to_string(),
                },
            )
            .await
    }

    /// The same call to every shard, concurrently; the first failure fails them all.
    async fn on_all<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        body: &(impl serde::Serialize + Sync),
    ) -> Result<Vec<T>, ApiError> {
        let calls = self.shards.iter().map(|s| s.call(path, body));
        join_all(calls).await.into_iter().collect()
    }

    /// One call per shard with that shard's `items` (none to a shard without any).
    async fn on_each<I, B, T>(
        &self,
        path: &str,
        items: Vec<Vec<I>>,
        body: impl Fn(Vec<I>) -> B,
    ) -> Result<Vec<Vec<T>>, ApiError>
    where
        B: serde::Serialize + Sync,
        T: serde::de::DeserializeOwned,
    {
        let bodies: Vec<Option<B>> = items
            .into_iter()
            .map(|items| (!items.is_empty()).then(|| body(items)))
            .collect();
        let calls = self
            .shards
            .iter()
            .zip(&bodies)
            .map(|(shard, body)| async move {
                match body {
                    Some(body) => shard.call::<Vec<T>>(path, body).await,
                    None => Ok(Vec::new()),
                }
            });
        join_all(calls).await.into_iter().collect()
    }

    /// `items` split by the shard that owns each one's document (`doc`), in order.
    fn by_shard<T>(
        &self,
        items: impl Iterator<Item = T>,
        doc: impl Fn(&T) -> u64,
        owners: &HashMap<u64, usize>,
    ) -> Vec<Vec<T>> {
        let mut split: Vec<Vec<T>> = (0..self.shards.len()).map(|_| Vec::new()).collect();
        for item in items {
            if let Some(&shard) = owners.get(&doc(&item)) {
                split[shard].push(item);
            }
        }
        split
    }
}

/// The shards' stage-1 answers merged as the single index's would be: each retriever's best
/// `limit` over all shards (score, then ordinal), the document BM25 of the dense candidates
/// that BM25 did not select, and each candidate's shard.
pub fn merge_candidates(parts: Vec<Candidates>, limit: usize) -> (Candidates, HashMap<u64, usize>) {
    let mut owners = HashMap::new();
    let mut merged = Candidates::default();
    let mut bm25_of: HashMap<u64, f32> = HashMap::new();
    let (mut bm25, mut dense) = (Vec::new(), Vec::new());
    for (shard, part) in parts.into_iter().enumerate() {
        merged.relaxed |= part.relaxed;
        for &(doc, score) in part.bm25.iter().chain(&part.dense_bm25) {
            bm25_of.insert(doc, score);
        }
        for &(doc, _) in part.bm25.iter().chain(&part.dense) {
            owners.insert(doc, shard);
        }
        bm25.extend(part.bm25);
        dense.extend(part.dense);
    }
    for list in [&mut bm25, &mut dense] {
        list.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        list.truncate(limit);
    }
    let lexical: HashSet<u64> = bm25.iter().map(|c| c.0).collect();
    let mut dense_bm25: Vec<(u64, f32)> = dense
        .iter()
        .filter(|c| !lexical.contains(&c.0))
        .filter_map(|c| Some((c.0, *bm25_of.get(&c.0)?)))
        .collect();
    dense_bm25.sort_by_key(|c| c.0);
    merged.bm25 = bm25;
    merged.dense = dense;
    merged.dense_bm25 = dense_bm25;
    let nearest: HashSet<u64> = merged.dense.iter().map(|c| c.0).collect();
    owners.retain(|doc, _| lexical.contains(doc) || nearest.contains(doc));
    (merged, owners)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merged_candidates_keep_each_retrievers_global_best_and_their_owners() {
        let a = Candidates {
            bm25: vec![(4, 9.0), (0, 5.0)],
            dense: vec![(7, 0.9), (4, 0.5)],
            dense_bm25: vec![(7, 1.0)],
            ..Candidates::default()
        };
        let b = Candidates {
            bm25: vec![(3, 9.0), (5, 6.0)],
            dense: vec![(5, 0.8), (8, 0.7)],
            dense_bm25: vec![],
            relaxed: true,
            ..Candidates::default()
        };
        let (merged, owners) = merge_candidates(vec![a, b], 3);
        // Ties by ordinal.
        assert_eq!(merged.bm25, vec![(3, 9.0), (4, 9.0), (5, 6.0)]);
        assert_eq!(merged.dense, vec![(7, 0.9), (5, 0.8), (8, 0.7)]);
        // 7's BM25 came with shard a's dense candidates; 8 matches no term; 5 is in bm25.
        assert_eq!(merged.dense_bm25, vec![(7, 1.0)]);
        assert!(merged.relaxed);
        assert_eq!(owners[&4], 0);
        assert_eq!(owners[&8], 1);
        assert!(!owners.contains_key(&0), "0 fell out of the global best");
        assert_eq!(merged.ordinals(), vec![3, 4, 5, 7, 8]);
    }
}
