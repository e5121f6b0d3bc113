//! The model boundary. Everything that runs a neural model sits behind two small synchronous
//! traits, [`Embedder`] and [`Reranker`]; a [`worker::ModelWorker`] owns one implementation on its
//! own thread behind a bounded channel, so callers never share an ONNX session.
//!
//! - [`config`]: model config files (`model.toml`) and where fetched models live;
//! - [`runtime`]: loading ONNX Runtime and choosing the execution provider, in one place;
//! - [`batch`]: padding token rows into model inputs (either side, positions from the mask);
//! - [`embed`]: the ONNX Runtime embedder (BERT-style mean pooling, Qwen3-style last-token pooling);
//! - [`rerank`]: the BERT cross-encoder and Qwen3-Reranker;
//! - [`fake`]: a hashing embedder for fast unit tests.

pub mod batch;
pub mod config;
pub mod embed;
pub mod fake;
pub mod rerank;
pub mod runtime;
pub mod worker;

pub use config::{ModelConfig, ModelKind, PaddingSide, Pooling, models_dir};
pub use embed::OnnxEmbedder;
pub use rerank::{Reranker, load_reranker};
pub use runtime::ExecutionProvider;

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
    #[error("the model worker has stopped")]
    WorkerGone,
}

impl<R> From<ort::Error<R>> for ModelError {
    fn from(e: ort::Error<R>) -> Self {
        ModelError::Onnx(e.to_string())
    }
}

/// Turns texts into unit vectors of a fixed dimension. Synchronous: implementations own their
/// session and are driven by one thread.
pub trait Embedder: Send {
    /// Identifier recorded in index manifests (e.g. `sentence-transformers/all-MiniLM-L6-v2`).
    fn model_id(&self) -> &str;
    fn dimension(&self) -> usize;
    /// Embeds search queries (with the model's query instruction, if it has one).
    fn embed_queries(&mut self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError>;
    /// Embeds passages to index.
    fn embed_documents(&mut self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError>;
}

/// L2-normalises `v` in place (a zero vector stays zero).
pub fn normalize(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

/// Dot product; for unit vectors, the cosine similarity.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}
