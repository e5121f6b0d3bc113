//! stillweb's own int8 BERT engine for CPUs, an embedder and a cross-encoder: the published
//! weights (or weights recovered from an int8 ONNX graph), with every weight product in int8
//! (AMX tiles, AVX-512 VNNI or AVX2, whichever the CPU has) and activations quantised per token,
//! so a text's vector (or a pair's score) never depends on what shares its batch.
//!
//! - [`kernels`]: what depends on the CPU — on x86-64 the AMX, VNNI and AVX2 product kernels and
//!   AVX-512 dispatch (the only `unsafe` in stillweb), elsewhere the portable bodies;
//! - [`int8`]: per-row quantisation and the portable product every kernel must equal;
//! - [`gemm`]: int8 linear layers over whichever kernel this CPU runs;
//! - [`math`]: layer norm, GELU and exp in f32;
//! - [`attention`]: self-attention in f32, sixteen queries to a vector;
//! - [`bert`]: the encoder, read from the published safetensors weights;
//! - `run`: the encoder over many sequences, longest first, on several threads;
//! - `rerank`: the cross-encoder (encoder + pooler and classifier head);
//! - [`memory`]: freed heap memory handed back to the kernel (glibc's `malloc_trim`), for the
//!   index build's phases.

mod attention;
pub mod bert;
pub mod gemm;
mod int8;
mod kernels;
mod math;
pub mod memory;
mod rerank;
mod run;

use std::path::Path;
use std::sync::Arc;

use tokenizers::Tokenizer;

use bert::{Bert, Workspace};
pub use gemm::Kernel;
/// A query's dot product with an int8 row, built for the widest vectors this CPU has (the
/// index's stage 2 and graph walk score stored rows with it).
pub use kernels::dot_f32_i8;
/// A cache hint for bytes about to be read (a no-op off x86-64).
pub use kernels::prefetch;
pub use rerank::NativeCrossEncoder;
use run::run_sequences;
use stillweb_model_core::tokens::{encode_all, load_tokenizer, pool};
use stillweb_model_core::{Embedder, ModelConfig, ModelError, ModelKind, Pooling, normalize};

/// The fastest kernel this CPU runs, logged when it is not one of the int8 units the engine is
/// built for.
fn detect_kernel(dir: &Path) -> Kernel {
    let kernel = Kernel::detect();
    match kernel {
        Kernel::Amx | Kernel::Vnni => {}
        Kernel::Avx2 => tracing::info!(
            "no AMX or AVX-512 VNNI: the native engine runs its AVX2 kernel (on a 2-core \
             AMD EPYC Zen 1, ~1.2x ONNX Runtime's int8 speed)"
        ),
        Kernel::Portable if Kernel::forced_portable() => {
            tracing::info!("the native engine runs its portable kernel (STILLWEB_NATIVE_KERNEL)")
        }
        Kernel::Portable => tracing::warn!(
            model = %dir.display(),
            "this CPU has no AMX, AVX-512 VNNI or AVX2: the native engine runs plain loops, \
             far slower than ONNX Runtime; pass `--engine onnx` for speed (its results differ \
             slightly from the native ones, cosine ~0.997, so keep one engine per index where \
             results must be identical)"
        ),
    }
    kernel
}

/// What every native model loads from its directory: the config (checked to be of its kind),
/// the tokenizer truncating to `max_tokens`, the safetensors weights and their encoder.
struct Loaded {
    config: ModelConfig,
    tokenizer: Tokenizer,
    tensors: bert::Tensors,
    bert: Bert,
}

impl Loaded {
    fn open(dir: &Path, kind: ModelKind, kernel: Kernel) -> Result<Loaded, ModelError> {
        let config = ModelConfig::load(dir)?;
        config.expect_kind(&[kind])?;
        let weights = config.weights_path().ok_or_else(|| ModelError::Config {
            path: dir.join("model.toml"),
            message: "the native-int8 engine needs `weights` (a safetensors file)".into(),
        })?;
        let (tokenizer, _) = load_tokenizer(&config.tokenizer_path(), config.max_tokens)?;
        let tensors = bert::Tensors::read(&weights)?;
        let bert = Bert::from_tensors(&dir.join("config.json"), &tensors, kernel)?;
        if config.max_tokens > bert.positions() {
            return Err(ModelError::Config {
                path: dir.join("model.toml"),
                message: format!(
                    "max_tokens = {} but the weights have positions for {} tokens",
                    config.max_tokens,
                    bert.positions()
                ),
            });
        }
        Ok(Loaded {
            config,
            tokenizer,
            tensors,
            bert,
        })
    }
}

fn workspaces(threads: usize) -> Vec<Workspace> {
    (0..threads.max(1)).map(|_| Workspace::default()).collect()
}

/// The native embedder; see the module docs.
pub struct NativeEmbedder {
    config: ModelConfig,
    tokenizer: Tokenizer,
    /// Read-only once loaded, so copies for other threads share it ([`Embedder::share`]).
    bert: Arc<Bert>,
    kernel: Kernel,
    workspaces: Vec<Workspace>,
}

impl std::fmt::Debug for NativeEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeEmbedder")
            .field("model", &self.config.id)
            .field("kernel", &self.kernel)
            .finish()
    }
}

impl NativeEmbedder {
    /// Loads the model described by `DIR/model.toml` (its `weights` and `config.json`), running
    /// on `threads` threads.
    pub fn load(dir: &Path, threads: usize) -> Result<NativeEmbedder, ModelError> {
        Self::load_with(dir, threads, detect_kernel(dir))
    }

    /// [`NativeEmbedder::load`] with a chosen kernel (tests compare the two).
    pub fn load_with(
        dir: &Path,
        threads: usize,
        kernel: Kernel,
    ) -> Result<NativeEmbedder, ModelError> {
        let Loaded {
            config,
            tokenizer,
            bert,
            ..
        } = Loaded::open(dir, ModelKind::Embedder, kernel)?;
        if bert.hidden() != config.dimension {
            return Err(ModelError::Config {
                path: dir.join("model.toml"),
                message: format!(
                    "the weights give {}-d vectors but the config says {}",
                    bert.hidden(),
                    config.dimension
                ),
            });
        }
        Ok(NativeEmbedder {
            config,
            tokenizer,
            bert: Arc::new(bert),
            kernel,
            workspaces: workspaces(threads),
        })
    }

    fn embed(&mut self, texts: &[&str], prefix: &str) -> Result<Vec<Vec<f32>>, ModelError> {
        let inputs: Vec<String> = texts.iter().map(|t| format!("{prefix}{t}")).collect();
        let encodings = encode_all(&self.tokenizer, inputs)?;
        let sequences: Vec<(&[u32], &[u32])> = encodings
            .iter()
            .map(|e| (e.get_ids(), e.get_type_ids()))
            .collect();
        let (hidden, normalized) = (self.bert.hidden(), self.config.normalize);
        let pooling = self.config.pooling.unwrap_or(Pooling::Mean);
        run_sequences(&self.bert, &mut self.workspaces, &sequences, |states| {
            let mut v = pool(states.chunks(hidden), hidden, pooling);
            if normalized {
                normalize(&mut v);
            }
            v
        })
    }
}

impl Embedder for NativeEmbedder {
    fn model_id(&self) -> &str {
        &self.config.id
    }

    fn dimension(&self) -> usize {
        self.config.dimension
    }

    fn engine(&self) -> &str {
        "native-int8"
    }

    fn share(&self) -> Option<Box<dyn Embedder>> {
        Some(Box::new(NativeEmbedder {
            config: self.config.clone(),
            tokenizer: self.tokenizer.clone(),
            bert: Arc::clone(&self.bert),
            kernel: self.kernel,
            workspaces: workspaces(self.workspaces.len()),
        }))
    }

    fn embed_queries(&mut self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        let prefix = self.config.query_prefix.clone();
        self.embed(texts, &prefix)
    }

    fn embed_documents(&mut self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        let prefix = self.config.document_prefix.clone();
        self.embed(texts, &prefix)
    }
}
