//! What every model engine shares, without any engine in it: the [`Embedder`] and [`Reranker`]
//! traits and their [`ModelError`], the model config (`model.toml`), tokenizer loading and
//! pooling, the worker threads that own a model, vector arithmetic, and a hashing embedder for
//! fast tests. The index depends on this crate only; ONNX Runtime (`stillweb-models`) and the
//! native int8 engine (`stillweb-native`) implement the traits.
//!
//! - [`config`]: model config files (`model.toml`) and where fetched models live;
//! - [`tokens`]: tokenizers with explicit truncation, and pooling token states into one vector;
//! - [`worker`]: threads that own a model behind a bounded channel;
//! - [`batcher`]: dynamic batching of concurrent requests in front of model threads;
//! - [`fake`]: a hashing embedder for fast unit tests.

pub mod batcher;
pub mod config;
pub mod fake;
pub mod gather;
pub mod tokens;
pub mod worker;

pub use config::{Engine, ModelConfig, ModelKind, PaddingSide, Pooling, models_dir};

/// Errors from loading or running a model.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("model file {path} is missing: {hint}")]
    Missing {
        path: std::path::PathBuf,
        hint: String,
    },
    #[error("model config {path} is invalid: {message}")]
    Config {
        path: std::path::PathBuf,
        message: String,
    },
    #[error(
        "cannot load ONNX Runtime from {path}: {message}; run `models/fetch` or set ORT_DYLIB_PATH"
    )]
    Runtime {
        path: std::path::PathBuf,
        message: String,
    },
    #[error("ONNX Runtime: {0}")]
    Onnx(String),
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    #[error("native engine: {0}")]
    Native(String),
    #[error("the model's output: {0}")]
    Output(String),
    #[error("the model worker has stopped")]
    WorkerGone,
    /// The caller stopped waiting before the model reached its request.
    #[error("cancelled: the caller stopped waiting")]
    Cancelled,
    /// A model served elsewhere (a rerank tier) could not be reached.
    #[error("unavailable: {0}")]
    Unavailable(String),
}

/// Turns texts into unit vectors of a fixed dimension. Synchronous: implementations own their
/// session and are driven by one thread.
pub trait Embedder: Send {
    /// Identifier recorded in index manifests (e.g. `sentence-transformers/all-MiniLM-L6-v2`).
    fn model_id(&self) -> &str;
    fn dimension(&self) -> usize;
    /// What computes the vectors (`onnx`, `native-int8`, …): recorded in index manifests,
    /// because two engines give slightly different vectors for the same model.
    fn engine(&self) -> &str;
    /// Embeds search queries (with the model's query instruction, if it has one).
    fn embed_queries(&mut self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError>;
    /// Embeds passages to index.
    fn embed_documents(&mut self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError>;
    /// Another embedder over the same weights in memory, for another thread, where the engine
    /// can share them (the native engine's are read-only once loaded); `None`: load another
    /// copy. A server with one embedder per search thread otherwise held a copy of the weights
    /// per thread (MiniLM-L6's f32 word table alone is 47 MB).
    fn share(&self) -> Option<Box<dyn Embedder>> {
        None
    }
}

/// A boxed embedder is an embedder (what [`load_embedder`] returns plugs in anywhere).
impl<E: Embedder + ?Sized> Embedder for Box<E> {
    fn model_id(&self) -> &str {
        (**self).model_id()
    }
    fn dimension(&self) -> usize {
        (**self).dimension()
    }
    fn engine(&self) -> &str {
        (**self).engine()
    }
    fn embed_queries(&mut self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        (**self).embed_queries(texts)
    }
    fn embed_documents(&mut self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        (**self).embed_documents(texts)
    }
    fn share(&self) -> Option<Box<dyn Embedder>> {
        (**self).share()
    }
}

/// The vector of one search query: the one function that embeds queries, wherever they are
/// searched. One query per model call, so that a query's vector never depends on what else was
/// embedded with it (the ONNX int8 graph quantises activations per call).
pub fn embed_query(embedder: &mut dyn Embedder, text: &str) -> Result<Vec<f32>, ModelError> {
    embedder
        .embed_queries(&[text])?
        .pop()
        .ok_or_else(|| ModelError::Output("no vector for the query".into()))
}

/// Scores passages against a query. Synchronous: implementations own their session and are
/// driven by one thread (see [`worker::RerankWorker`]).
pub trait Reranker: Send {
    /// Identifier for `/info` and evaluation reports.
    fn model_id(&self) -> &str;
    /// One relevance score in [0, 1] per passage (higher is more relevant), in input order.
    fn score(&mut self, query: &str, passages: &[&str]) -> Result<Vec<f32>, ModelError>;
    /// Scores several requests' pools (each its own query) in one go, one score list per pool.
    /// Models override it to sort every pair by length into shared batches; a pair's score
    /// must not depend on what shares its batch. By default, one pool after another.
    /// Tokens the model reads for one pair, when it can say (for throughput reports).
    fn pair_tokens(&self, _query: &str, _passage: &str) -> Option<usize> {
        None
    }
    fn score_pools(&mut self, pools: &[RerankPool]) -> Result<Vec<Vec<f32>>, ModelError> {
        pools
            .iter()
            .map(|pool| {
                let passages: Vec<&str> = pool.passages.iter().map(String::as_str).collect();
                self.score(&pool.query, &passages)
            })
            .collect()
    }
}

/// One request's rerank pool: a query and the passages to score against it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RerankPool {
    pub query: String,
    pub passages: Vec<String>,
}

impl RerankPool {
    /// Roughly the tokens the pool's pairs take (about four bytes of English text per token,
    /// plus a pair's special tokens): the unit of a reranker's batch budget. An estimate, so
    /// that budgeting needs no tokenizer on the caller's side.
    pub fn estimated_tokens(&self) -> usize {
        self.passages
            .iter()
            .map(|p| (self.query.len() + p.len()).div_ceil(4) + 3)
            .sum()
    }
}

/// The probability of the second class of a two-way softmax over `(negative, positive)` logits,
/// computed stably: a cross-encoder's score in (0, 1) (a one-logit head is `(0, logit)`, a
/// sigmoid).
pub fn two_way_softmax(negative: f32, positive: f32) -> f32 {
    let x = f64::from(positive) - f64::from(negative);
    (1.0 / (1.0 + (-x).exp())) as f32
}

/// Every (query, passage) pair of `pools`, pool after pool: what a reranker's
/// [`Reranker::score_pools`] scores in one run.
pub fn pairs_of(pools: &[RerankPool]) -> impl Iterator<Item = (&str, &str)> {
    pools.iter().flat_map(|pool| {
        pool.passages
            .iter()
            .map(move |passage| (pool.query.as_str(), passage.as_str()))
    })
}

/// `scores` of [`pairs_of`]`(pools)` cut back into one list per pool.
pub fn split_by_pool(pools: &[RerankPool], scores: Vec<f32>) -> Vec<Vec<f32>> {
    let mut scores = scores.into_iter();
    pools
        .iter()
        .map(|pool| scores.by_ref().take(pool.passages.len()).collect())
        .collect()
}

/// L2-normalises `v` in place (a zero vector stays zero).
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// Running sums kept apart in [`dot`]: one running sum is a chain of dependent additions the
/// compiler may not reorder, so it cannot use SIMD registers (profiled at ~10% of a search's CPU
/// at 1M chunks before this).
const LANES: usize = 16;

/// Dot product; for unit vectors, the cosine similarity. Deterministic: the same inputs always
/// sum in the same order.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a_lanes, a_tail) = a[..n].as_chunks::<LANES>();
    let (b_lanes, b_tail) = b[..n].as_chunks::<LANES>();
    let mut sums = [0f32; LANES];
    for (x, y) in a_lanes.iter().zip(b_lanes) {
        for i in 0..LANES {
            sums[i] += x[i] * y[i];
        }
    }
    let tail: f32 = a_tail.iter().zip(b_tail).map(|(x, y)| x * y).sum();
    sums.iter().sum::<f32>() + tail
}

/// [`dot`] of `a` with a vector stored as little-endian `f32` bytes (a memory-mapped row),
/// read in place.
pub fn dot_le_bytes(a: &[f32], b: &[u8]) -> f32 {
    let n = a.len().min(b.len() / 4);
    let (a_lanes, a_tail) = a[..n].as_chunks::<LANES>();
    let (b_lanes, b_tail) = b[..4 * n].as_chunks::<{ 4 * LANES }>();
    let f = |b: &[u8], i: usize| {
        f32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
    };
    let mut sums = [0f32; LANES];
    for (x, y) in a_lanes.iter().zip(b_lanes) {
        for i in 0..LANES {
            sums[i] += x[i] * f(y, i);
        }
    }
    let tail: f32 = a_tail
        .iter()
        .enumerate()
        .map(|(i, x)| x * f(b_tail, i))
        .sum();
    sums.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_way_softmax_is_stable() {
        assert!((two_way_softmax(0.0, 0.0) - 0.5).abs() < 1e-7);
        assert!(two_way_softmax(-1000.0, 1000.0) > 0.999_999);
        assert!(two_way_softmax(1000.0, -1000.0) < 1e-6);
        let (no, yes) = (1.3f32, -0.4f32);
        let softmax = yes.exp() / (yes.exp() + no.exp());
        assert!((two_way_softmax(no, yes) - softmax).abs() < 1e-6);
    }

    #[test]
    fn dot_matches_the_plain_sum_with_and_without_a_tail() {
        for n in [0, 1, 15, 16, 17, 384, 390] {
            let a: Vec<f32> = (0..n).map(|i| ((i * 7 % 13) as f32 - 6.0) / 10.0).collect();
            let b: Vec<f32> = (0..n).map(|i| ((i * 5 % 11) as f32 - 5.0) / 10.0).collect();
            let plain: f64 = a.iter().zip(&b).map(|(x, y)| f64::from(x * y)).sum();
            let lanes = dot(&a, &b);
            assert!(
                (f64::from(lanes) - plain).abs() < 1e-4,
                "{n}: {lanes} vs {plain}"
            );
            let bytes: Vec<u8> = b.iter().flat_map(|x| x.to_le_bytes()).collect();
            assert_eq!(dot_le_bytes(&a, &bytes).to_bits(), lanes.to_bits(), "{n}");
        }
    }
}
