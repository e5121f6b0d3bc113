//! The ONNX Runtime engine and model loading: the embedders and rerankers stillweb runs on
//! ONNX Runtime, and the functions that pick an engine for a model directory. The traits, config
//! and workers live in `stillweb-model-core` (re-exported here); the native int8 engine in
//! `stillweb-native`.
//!
//! - [`runtime`]: loading ONNX Runtime and choosing the execution provider, in one place;
//! - [`batch`]: padding token rows into model inputs (either side, positions from the mask);
//! - [`embed`]: the ONNX Runtime embedder (BERT-style mean pooling, Qwen3-style last-token pooling);
//! - [`rerank`]: the BERT cross-encoder and Qwen3-Reranker.

pub mod batch;
pub mod embed;
pub mod rerank;
pub mod runtime;

pub use embed::OnnxEmbedder;
pub use rerank::load_reranker;
pub use runtime::ExecutionProvider;
pub use stillweb_model_core::{
    Embedder, Engine, ModelConfig, ModelError, ModelKind, PaddingSide, Pooling, RerankPool,
    Reranker, batcher, config, dot, dot_le_bytes, embed_query, fake, models_dir, normalize, tokens,
    two_way_softmax, worker,
};
pub use stillweb_native::{NativeCrossEncoder, NativeEmbedder};

/// An ONNX Runtime error as a [`ModelError`].
pub(crate) fn onnx<R>(e: ort::Error<R>) -> ModelError {
    ModelError::Onnx(e.to_string())
}

/// Loads the embedder in `dir` with `engine`, or the one its `model.toml` names. The native
/// int8 engine runs on the CPU only, so a GPU provider always gets ONNX Runtime.
pub fn load_embedder(
    dir: &std::path::Path,
    engine: Option<Engine>,
    provider: ExecutionProvider,
    threads: usize,
) -> Result<Box<dyn Embedder>, ModelError> {
    let engine = match engine {
        Some(engine) => engine,
        None => ModelConfig::load(dir)?.engine,
    };
    Ok(match (engine, provider) {
        (Engine::NativeInt8, ExecutionProvider::Cpu) => {
            Box::new(NativeEmbedder::load(dir, threads)?)
        }
        _ => Box::new(OnnxEmbedder::load(dir, provider, threads)?),
    })
}
