//! The pipeline run in place: one index (or a base with its overlays) with the models that
//! search it, every stage on the calling thread. Evaluation, benchmarks and tests search through it; it runs the same
//! [`pipeline::search`] the server runs over its parts.

use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use stillweb_model_core::ModelError;
use stillweb_model_core::worker::{EmbedWorker, RerankWorker};

use super::fetch::Pages;
use super::pipeline::{self, Models, Part};
use super::rank::Ranked;
use super::{
    Candidates, ChunkScore, FilterCounts, FilterPlan, Hit, PreparedQuery, SearchParams,
    SearchResults,
};
use crate::query::ParsedQuery;
use crate::{IndexError, SearchIndex};

/// An index, or the layers of one corpus (see [`crate::overlay`]), with the models that
/// search it.
#[derive(Debug, Clone)]
pub struct Retriever {
    /// Never empty; the first is the base.
    layers: Vec<Arc<SearchIndex>>,
    embedder: Option<EmbedWorker>,
    reranker: Option<RerankWorker>,
}

impl Retriever {
    /// Refuses an embedder other than the one the index's vectors came from.
    pub fn new(
        index: Arc<SearchIndex>,
        embedder: Option<EmbedWorker>,
        reranker: Option<RerankWorker>,
    ) -> Result<Retriever, IndexError> {
        Retriever::layered(vec![index], embedder, reranker)
    }

    /// [`Retriever::new`] over a base and its overlays, opened by
    /// [`open_layers`](crate::overlay::open_layers).
    pub fn layered(
        layers: Vec<Arc<SearchIndex>>,
        embedder: Option<EmbedWorker>,
        reranker: Option<RerankWorker>,
    ) -> Result<Retriever, IndexError> {
        let Some(base) = layers.first() else {
            return Err(IndexError::Model("a retriever needs an index".into()));
        };
        if let Some(e) = &embedder {
            base.check_embedder(e.model_id(), e.dimension(), e.engine())?;
        }
        Ok(Retriever {
            layers,
            embedder,
            reranker,
        })
    }

    /// The base index.
    pub fn index(&self) -> &Arc<SearchIndex> {
        &self.layers[0]
    }

    /// The reranker's model id, if the retriever has one.
    pub fn reranker_id(&self) -> Option<&str> {
        self.reranker.as_ref().map(|r| r.model_id())
    }

    /// The query's vector: `None` without an embedder or for blank text.
    pub fn embed(&self, text: &str) -> Result<Option<Vec<f32>>, IndexError> {
        match &self.embedder {
            Some(e) if !text.trim().is_empty() => e
                .embed_query(text)
                .map(Some)
                .map_err(|e| IndexError::Model(e.to_string())),
            _ => Ok(None),
        }
    }

    /// Runs [`pipeline::search`] over the index, on this thread.
    pub fn search(
        &self,
        query: &ParsedQuery,
        params: &SearchParams,
    ) -> Result<SearchResults, IndexError> {
        let models = InPlaceModels {
            retriever: self,
            given: None,
        };
        self.run(&models, query, params)
    }

    /// [`Retriever::search`] with the query vector computed earlier (`None`: no vector).
    pub fn search_embedded(
        &self,
        query: &ParsedQuery,
        vector: Option<Vec<f32>>,
        params: &SearchParams,
    ) -> Result<SearchResults, IndexError> {
        let models = InPlaceModels {
            retriever: self,
            given: Some(vector),
        };
        self.run(&models, query, params)
    }

    fn run(
        &self,
        models: &InPlaceModels<'_>,
        query: &ParsedQuery,
        params: &SearchParams,
    ) -> Result<SearchResults, IndexError> {
        let parts: Vec<InPlace<'_>> = self.layers.iter().map(|l| InPlace(l)).collect();
        let dense = self.index().dense().is_some();
        block_on(pipeline::search(&parts, dense, models, query, params))
    }
}

/// The retriever's models called on this thread; `given`: a query vector computed earlier
/// instead of the embedder.
struct InPlaceModels<'a> {
    retriever: &'a Retriever,
    given: Option<Option<Vec<f32>>>,
}

impl Models for InPlaceModels<'_> {
    type Error = IndexError;

    fn embeds(&self) -> bool {
        match &self.given {
            Some(vector) => vector.is_some(),
            None => self.retriever.embedder.is_some(),
        }
    }

    fn reranks(&self) -> bool {
        self.retriever.reranker.is_some()
    }

    fn embed(&self, text: &str) -> impl Future<Output = Result<Vec<f32>, IndexError>> + Send {
        let vector = match &self.given {
            Some(given) => Ok(given.clone()),
            None => self.retriever.embed(text),
        };
        std::future::ready(
            vector.and_then(|v| v.ok_or_else(|| IndexError::Model("no query vector".into()))),
        )
    }

    fn rerank(
        &self,
        query: &str,
        passages: Vec<String>,
    ) -> impl Future<Output = Result<Vec<f32>, IndexError>> + Send {
        std::future::ready(match &self.retriever.reranker {
            Some(r) => r.rerank(query, passages).map_err(rerank_error),
            None => Err(IndexError::Model("no reranker".into())),
        })
    }
}

/// An index as a part searched on the calling thread: every call is done when it returns.
struct InPlace<'a>(&'a SearchIndex);

impl Part for InPlace<'_> {
    type Error = IndexError;

    fn filter_counts(
        &self,
        query: &ParsedQuery,
    ) -> impl Future<Output = Result<FilterCounts, IndexError>> + Send {
        std::future::ready(self.0.filter_counts(query))
    }

    fn candidates(
        &self,
        query: &PreparedQuery,
        limit: usize,
        plan: Option<FilterPlan>,
    ) -> impl Future<Output = Result<Candidates, IndexError>> + Send {
        std::future::ready(self.0.candidates_planned(query, limit, plan))
    }

    fn chunk_scores(
        &self,
        query: &PreparedQuery,
        docs: Vec<u64>,
    ) -> impl Future<Output = Result<Vec<ChunkScore>, IndexError>> + Send {
        std::future::ready(self.0.chunk_scores(query, &docs))
    }

    fn passages(
        &self,
        chunks: Vec<(u64, u64)>,
        pages: &mut Pages,
    ) -> impl Future<Output = Result<Vec<Option<String>>, IndexError>> + Send {
        std::future::ready(self.0.passages_into(&chunks, pages))
    }

    fn hits(
        &self,
        ranked: Vec<Ranked>,
        pages: &mut Pages,
    ) -> impl Future<Output = Result<Vec<Hit>, IndexError>> + Send {
        std::future::ready(self.0.hits_into(&ranked, pages))
    }
}

/// Polls `future` to completion on this thread, parking while it waits.
fn block_on<F: Future>(future: F) -> F::Output {
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut context = Context::from_waker(&waker);
    let mut future = std::pin::pin!(future);
    loop {
        match future.as_mut().poll(&mut context) {
            Poll::Ready(output) => return output,
            Poll::Pending => std::thread::park(),
        }
    }
}

/// A reranker's failure as the search's error: a tier that did not answer is
/// [`IndexError::RerankUnavailable`] (the server's `rerank_unavailable`), anything else a model
/// error.
pub fn rerank_error(e: ModelError) -> IndexError {
    match e {
        ModelError::Unavailable(why) => IndexError::RerankUnavailable(why),
        e => IndexError::Model(e.to_string()),
    }
}
