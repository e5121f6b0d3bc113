//! What a server searches: a corpus as a list of parts with the models that search it. A part is
//! an index directory this server opened (searched on the search pool) or one shard of a set
//! (searched through its replicas over the shard protocol); a single index is one local part, a
//! coordinator's shard set is N remote parts. Every search runs the one
//! [`pipeline::search`](stillweb_index::search::pipeline::search) over [`Corpus::parts`]
//! ([`crate::service::search`]); nothing else here knows the stage sequence.

use std::sync::Arc;

use stillweb_index::DateReport;
use stillweb_index::dense::DenseManifest;
use stillweb_index::overlay::layered_build_id;
use stillweb_index::search::fetch::Pages;
use stillweb_index::search::pipeline;
use stillweb_index::search::rank::Ranked;
use stillweb_index::search::{
    Candidates, ChunkScore, FilterCounts, FilterPlan, Mode, PreparedQuery,
};
use stillweb_index::shard::{ShardManifest, shard_of};
use stillweb_index::{Hit, IndexError, ParsedQuery, SearchIndex, StoredDoc};
use stillweb_models::worker::{EmbedWorker, RerankWorker};

use crate::config::DEFAULT_COLLECTION;
use crate::error::ApiError;
use crate::pool::SearchPool;
use crate::sharding::protocol::{
    CANDIDATES, CHUNKS, CandidatesRequest, ChunksRequest, FILTER_COUNTS, FilterCountsRequest, HITS,
    HitsRequest, PAGE, PASSAGES, PageRequest, PassagesRequest,
};
use crate::sharding::replicas::ReplicaSet;

/// Some of the corpus's documents.
#[derive(Debug, Clone)]
pub enum Part {
    /// An index directory this server opened.
    Local(Arc<SearchIndex>),
    /// One shard of a set, through its replicas.
    Remote(ReplicaSet),
}

/// What `/info` and the logs say about the corpus, the same for every kind of part.
#[derive(Debug, Clone)]
pub struct CorpusInfo {
    pub build_id: String,
    pub corpus_name: String,
    pub documents: u64,
    pub chunks: u64,
    pub created_unix: u64,
    pub format_version: u64,
    pub dense: Option<DenseManifest>,
    /// Where a served index sits in its shard set (a shard server's one part).
    pub shard: Option<ShardManifest>,
    /// The overlays served over the base, in order (`build_id` names them all).
    pub overlays: Vec<LayerInfo>,
    /// Its documents' dates, and the frozen clock relative date filters count back from
    /// (`as_of`; for a shard set or layers, the whole corpus's).
    pub dates: DateReport,
}

/// One overlay of a served corpus.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LayerInfo {
    pub build_id: String,
    pub documents: u64,
    pub chunks: u64,
}

impl CorpusInfo {
    /// The corpus of an opened index and its overlays (`layers`, base first; never empty).
    pub fn of_layers(layers: &[Arc<SearchIndex>]) -> CorpusInfo {
        let m = layers[0].manifest();
        let all: Vec<&SearchIndex> = layers.iter().map(|l| &**l).collect();
        CorpusInfo {
            build_id: layered_build_id(&all),
            corpus_name: m.corpus_name.clone(),
            documents: all.iter().map(|l| l.manifest().documents).sum(),
            chunks: all.iter().map(|l| l.manifest().chunks).sum(),
            created_unix: all
                .iter()
                .map(|l| l.manifest().created_unix)
                .max()
                .unwrap_or(0),
            format_version: u64::from(m.format_version),
            dense: m.dense.clone(),
            // A shard of layered sets: its place, with the corpus of all of them.
            shard: m.shard.clone().map(|shard| ShardManifest {
                corpus_documents: all
                    .iter()
                    .filter_map(|l| l.manifest().shard.as_ref())
                    .map(|s| s.corpus_documents)
                    .sum(),
                corpus_chunks: all
                    .iter()
                    .map(|l| l.manifest().shard.as_ref().and_then(|s| s.corpus_chunks))
                    .sum(),
                ..shard
            }),
            overlays: all[1..]
                .iter()
                .map(|l| LayerInfo {
                    build_id: l.manifest().build_id.clone(),
                    documents: l.manifest().documents,
                    chunks: l.manifest().chunks,
                })
                .collect(),
            dates: layered_dates(&all),
        }
    }
}

/// The dates of layers served as one corpus: their counts summed, their spans joined, the
/// newest clock (an overlay adds newer pages).
fn layered_dates(layers: &[&SearchIndex]) -> DateReport {
    let mut dates = DateReport::default();
    for layer in layers {
        let d = &layer.manifest().dates;
        dates.dated += d.dated;
        dates.undated += d.undated;
        dates.oldest = [dates.oldest, d.oldest].into_iter().flatten().min();
        dates.newest = [dates.newest, d.newest].into_iter().flatten().max();
        dates.as_of = [dates.as_of, d.as_of].into_iter().flatten().max();
    }
    dates
}

/// What a session remembers a URL shown from `collection` (its normalised `url_key`) by: the
/// key itself for the unnamed corpus, the collection's name and the key for a named one, so that
/// a page is visitable only from the collection that showed it.
pub fn seen_key(collection: Option<&str>, url_key: &str) -> String {
    match collection {
        None => url_key.to_string(),
        Some(name) => format!("{name} {url_key}"),
    }
}

/// A corpus's parts, what it is, and the models that search it.
#[derive(Debug)]
pub struct Corpus {
    pub parts: Vec<Part>,
    pub info: CorpusInfo,
    /// The collection's name; `None` for the one unnamed corpus of `--index` or `--shard`.
    collection: Option<Arc<str>>,
    /// How its searches retrieve unless a request says otherwise.
    pub mode: Mode,
    embedder: Option<EmbedWorker>,
    reranker: Option<RerankWorker>,
}

/// How a collection is searched, whatever build serves it: its name, its mode, and the models
/// (shared by every collection that uses them). A reload keeps it.
#[derive(Debug, Clone)]
pub struct SearchSetup {
    /// `None` for the one unnamed corpus of `--index` or `--shard`.
    pub collection: Option<Arc<str>>,
    pub mode: Mode,
    pub embedder: Option<EmbedWorker>,
    pub reranker: Option<RerankWorker>,
}

impl Corpus {
    /// The corpus of `parts`, searched as `setup` says; refuses a query embedder other than the
    /// model the corpus's vectors came from.
    pub fn new(
        parts: Vec<Part>,
        info: CorpusInfo,
        setup: SearchSetup,
    ) -> Result<Corpus, IndexError> {
        let SearchSetup {
            collection,
            mode,
            embedder,
            reranker,
        } = setup;
        if let (Some(e), Some(d)) = (&embedder, &info.dense) {
            d.check_embedder(e.model_id(), e.dimension(), e.engine(), &info.build_id)?;
        }
        Ok(Corpus {
            parts,
            info,
            collection,
            mode,
            embedder,
            reranker,
        })
    }

    /// How this corpus is searched (what a reload opens the new build with).
    pub fn setup(&self) -> SearchSetup {
        SearchSetup {
            collection: self.collection.clone(),
            mode: self.mode,
            embedder: self.embedder.clone(),
            reranker: self.reranker.clone(),
        }
    }

    pub fn build_id(&self) -> &str {
        &self.info.build_id
    }

    /// The collection's name as requests give it (`default` for the unnamed one).
    pub fn collection(&self) -> &str {
        self.collection.as_deref().unwrap_or(DEFAULT_COLLECTION)
    }

    /// The collection's name when it is a named one (`--collection`), not the one corpus of
    /// `--index` or `--shard`.
    pub fn named(&self) -> Option<&Arc<str>> {
        self.collection.as_ref()
    }

    /// Whether this is a named collection.
    pub fn is_named(&self) -> bool {
        self.collection.is_some()
    }

    /// The query embedder, if this server embeds queries.
    pub fn embedder(&self) -> Option<&EmbedWorker> {
        self.embedder.as_ref()
    }

    /// The reranker of this server's searches, if it has one.
    pub fn reranker(&self) -> Option<&RerankWorker> {
        self.reranker.as_ref()
    }

    pub fn embedder_id(&self) -> Option<&str> {
        self.embedder.as_ref().map(EmbedWorker::model_id)
    }

    pub fn reranker_id(&self) -> Option<&str> {
        self.reranker.as_ref().map(|r| r.model_id())
    }

    /// The layers a shard server answers its coordinator's stage calls from: its local parts
    /// (a shard of a set, and that shard of each overlay set), when it serves a shard.
    pub fn shard_layers(&self) -> Option<Vec<Arc<SearchIndex>>> {
        let layers: Vec<Arc<SearchIndex>> = self
            .parts
            .iter()
            .filter_map(|p| match p {
                Part::Local(index) => Some(Arc::clone(index)),
                Part::Remote(_) => None,
            })
            .collect();
        let is_shard = layers.first()?.manifest().shard.is_some();
        (is_shard && layers.len() == self.parts.len()).then_some(layers)
    }

    /// The remote shards, in shard order (none for local parts).
    pub fn shards(&self) -> impl Iterator<Item = &ReplicaSet> {
        self.parts.iter().filter_map(|p| match p {
            Part::Remote(shard) => Some(shard),
            Part::Local(_) => None,
        })
    }

    /// The parts as the pipeline calls them, local ones on `pool`, remote ones asked for this
    /// corpus's build.
    pub fn stages<'a>(&'a self, pool: &'a SearchPool) -> Vec<OnPool<'a>> {
        let build = self.build_id();
        self.parts
            .iter()
            .map(|part| OnPool { part, pool, build })
            .collect()
    }

    /// The page at normalised URL `url_key`, from the first part that holds it (a shard set's
    /// URL lives in the one shard it hashes to).
    pub async fn page(
        &self,
        pool: &SearchPool,
        url_key: &str,
    ) -> Result<Option<StoredDoc>, ApiError> {
        let shards = self.shards().count() as u32;
        for part in &self.parts {
            let found = match part {
                Part::Local(index) => {
                    let (index, key) = (Arc::clone(index), url_key.to_string());
                    pool.run(move || index.doc_by_url(&key).map_err(ApiError::from))
                        .await?
                }
                Part::Remote(shard) if shard_of(url_key, shards) as usize == shard.shard => {
                    let key = url_key.to_string();
                    let request = PageRequest { url_key: key };
                    shard.call(PAGE, &request, self.build_id()).await?
                }
                Part::Remote(_) => None,
            };
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
    }
}

/// One part as [`pipeline::search`] calls it during one search: a local part's stages run on
/// the search pool, a remote part's are one call each to its replicas.
#[derive(Debug)]
pub struct OnPool<'a> {
    part: &'a Part,
    pool: &'a SearchPool,
    /// The corpus's build, which a remote part's answers must come from.
    build: &'a str,
}

impl OnPool<'_> {
    /// `work` on the local index, on the search pool.
    async fn local<T: Send + 'static>(
        &self,
        index: &Arc<SearchIndex>,
        work: impl FnOnce(&SearchIndex) -> Result<T, IndexError> + Send + 'static,
    ) -> Result<T, ApiError> {
        let index = Arc::clone(index);
        self.pool
            .run(move || work(&index).map_err(ApiError::from))
            .await
    }
}

impl pipeline::Part for OnPool<'_> {
    type Error = ApiError;

    async fn filter_counts(&self, query: &ParsedQuery) -> Result<FilterCounts, ApiError> {
        let query = query.clone();
        match self.part {
            Part::Local(index) => self.local(index, move |i| i.filter_counts(&query)).await,
            Part::Remote(shard) => {
                shard
                    .call(FILTER_COUNTS, &FilterCountsRequest { query }, self.build)
                    .await
            }
        }
    }

    async fn candidates(
        &self,
        query: &PreparedQuery,
        limit: usize,
        plan: Option<FilterPlan>,
    ) -> Result<Candidates, ApiError> {
        let query = query.clone();
        match self.part {
            Part::Local(index) => {
                self.local(index, move |i| i.candidates_planned(&query, limit, plan))
                    .await
            }
            Part::Remote(shard) => {
                let request = CandidatesRequest { query, limit, plan };
                shard.call(CANDIDATES, &request, self.build).await
            }
        }
    }

    async fn chunk_scores(
        &self,
        query: &PreparedQuery,
        docs: Vec<u64>,
    ) -> Result<Vec<ChunkScore>, ApiError> {
        let query = query.clone();
        match self.part {
            Part::Local(index) => {
                self.local(index, move |i| i.chunk_scores(&query, &docs))
                    .await
            }
            Part::Remote(shard) => {
                let request = ChunksRequest { query, docs };
                shard.call(CHUNKS, &request, self.build).await
            }
        }
    }

    async fn passages(
        &self,
        chunks: Vec<(u64, u64)>,
        pages: &mut Pages,
    ) -> Result<Vec<Option<String>>, ApiError> {
        match self.part {
            Part::Local(index) => {
                let mut read = std::mem::take(pages);
                let (passages, read) = self
                    .local(index, move |i| {
                        Ok((i.passages_into(&chunks, &mut read)?, read))
                    })
                    .await?;
                *pages = read;
                Ok(passages)
            }
            Part::Remote(shard) => {
                let request = PassagesRequest { chunks };
                shard.call(PASSAGES, &request, self.build).await
            }
        }
    }

    async fn hits(&self, ranked: Vec<Ranked>, pages: &mut Pages) -> Result<Vec<Hit>, ApiError> {
        match self.part {
            Part::Local(index) => {
                // The pages the rerank step read are moved in and not needed afterwards.
                let mut read = std::mem::take(pages);
                self.local(index, move |i| i.hits_into(&ranked, &mut read))
                    .await
            }
            Part::Remote(shard) => {
                let request = HitsRequest { ranked };
                shard.call(HITS, &request, self.build).await
            }
        }
    }
}
