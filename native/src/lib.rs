//! stillweb's own int8 BERT embedder for CPUs: the same MiniLM weights as the ONNX model, with
//! every weight product in int8 (AMX tiles, AVX-512 VNNI or AVX2, whichever the CPU has) and
//! activations quantised per token, so a text's vector never depends on what shares its batch.
//!
//! - [`kernels`]: what depends on the CPU — on x86-64 the AMX, VNNI and AVX2 product kernels and
//!   AVX-512 dispatch (the only `unsafe` in stillweb), elsewhere the portable bodies;
//! - [`int8`]: per-row quantisation and the portable product every kernel must equal;
//! - [`gemm`]: int8 linear layers over whichever kernel this CPU runs;
//! - [`math`]: layer norm, GELU and exp in f32;
//! - [`attention`]: self-attention in f32, sixteen queries to a vector;
//! - [`bert`]: the encoder, read from the published safetensors weights.

mod attention;
pub mod bert;
pub mod gemm;
mod int8;
mod kernels;
mod math;

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokenizers::Tokenizer;

use bert::{Bert, Workspace};
pub use gemm::Kernel;
use stillweb_model_core::tokens::{encode_all, load_tokenizer, pool};
use stillweb_model_core::{Embedder, ModelConfig, ModelError, ModelKind, Pooling, normalize};

/// Tokens per forward call: what measured fastest (256, 1,024 and 2,048 were slower); the
/// linear layers then work through a call's rows in passes that fit in L2.
const TOKENS_PER_CALL: usize = 512;

/// The native embedder; see the module docs.
pub struct NativeEmbedder {
    config: ModelConfig,
    tokenizer: Tokenizer,
    bert: Bert,
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
        let kernel = Kernel::detect();
        match kernel {
            Kernel::Amx | Kernel::Vnni => {}
            Kernel::Avx2 => tracing::info!(
                "no AMX or AVX-512 VNNI: the native engine runs its AVX2 kernel (on a 2-core \
                 AMD EPYC Zen 1, ~1.2x ONNX Runtime's int8 speed)"
            ),
            Kernel::Portable if Kernel::forced_portable() => {
                tracing::info!(
                    "the native engine runs its portable kernel (STILLWEB_NATIVE_KERNEL)"
                )
            }
            Kernel::Portable => tracing::warn!(
                model = %dir.display(),
                "this CPU has no AMX, AVX-512 VNNI or AVX2: the native engine runs plain loops, \
                 far slower than ONNX Runtime; pass `--engine onnx` for speed (its vectors differ \
                 slightly from the native ones, cosine ~0.997, so keep one engine per index where \
                 results must be identical)"
            ),
        }
        Self::load_with(dir, threads, kernel)
    }

    /// [`NativeEmbedder::load`] with a chosen kernel (tests compare the two).
    pub fn load_with(
        dir: &Path,
        threads: usize,
        kernel: Kernel,
    ) -> Result<NativeEmbedder, ModelError> {
        let config = ModelConfig::load(dir)?;
        config.expect_kind(&[ModelKind::Embedder])?;
        let weights = config.weights_path().ok_or_else(|| ModelError::Config {
            path: dir.join("model.toml"),
            message: "the native-int8 engine needs `weights` (a safetensors file)".into(),
        })?;
        let (tokenizer, _) = load_tokenizer(&config.tokenizer_path(), config.max_tokens)?;
        let bert = Bert::load(&dir.join("config.json"), &weights, kernel)?;
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
            bert,
            kernel,
            workspaces: (0..threads.max(1)).map(|_| Workspace::default()).collect(),
        })
    }

    fn embed(&mut self, texts: &[&str], prefix: &str) -> Result<Vec<Vec<f32>>, ModelError> {
        let inputs: Vec<String> = texts.iter().map(|t| format!("{prefix}{t}")).collect();
        let encodings = encode_all(&self.tokenizer, inputs)?;
        // Longest first, in calls of about TOKENS_PER_CALL tokens, handed to threads in turn.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(encodings[i].get_ids().len()));
        let mut calls: Vec<&[usize]> = Vec::new();
        let mut rest = &order[..];
        while !rest.is_empty() {
            let mut tokens = 0;
            let n = rest
                .iter()
                .take_while(|&&i| {
                    let fits =
                        tokens == 0 || tokens + encodings[i].get_ids().len() <= TOKENS_PER_CALL;
                    tokens += encodings[i].get_ids().len();
                    fits
                })
                .count();
            calls.push(&rest[..n]);
            rest = &rest[n..];
        }
        let next = AtomicUsize::new(0);
        let pooling = self.config.pooling.unwrap_or(Pooling::Mean);
        let (bert, encodings, calls) = (&self.bert, &encodings, &calls);
        // Each worker takes the next call until none is left.
        let work = |workspace: &mut Workspace| -> Result<Pooled, ModelError> {
            let mut done = Vec::new();
            while let Some(call) = calls.get(next.fetch_add(1, Ordering::Relaxed)) {
                let sequences: Vec<(&[u32], &[u32])> = call
                    .iter()
                    .map(|&i| (encodings[i].get_ids(), encodings[i].get_type_ids()))
                    .collect();
                let states = bert.forward(&sequences, workspace)?;
                let mut rows = states.chunks(bert.hidden());
                for (&i, (ids, _)) in call.iter().zip(&sequences) {
                    done.push((
                        i,
                        pool(rows.by_ref().take(ids.len()), bert.hidden(), pooling),
                    ));
                }
            }
            Ok(done)
        };
        let workers = self.workspaces.len().min(calls.len());
        let results: Vec<Result<Pooled, ModelError>> = if workers <= 1 {
            self.workspaces.iter_mut().take(1).map(work).collect()
        } else {
            std::thread::scope(|scope| {
                let work = &work;
                let handles: Vec<_> = self
                    .workspaces
                    .iter_mut()
                    .take(workers)
                    .map(|workspace| scope.spawn(move || work(workspace)))
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().unwrap_or(Err(ModelError::WorkerGone)))
                    .collect()
            })
        };
        let mut out = vec![Vec::new(); texts.len()];
        for result in results {
            for (i, mut v) in result? {
                if self.config.normalize {
                    normalize(&mut v);
                }
                out[i] = v;
            }
        }
        Ok(out)
    }
}

/// Texts' vectors by their index in the caller's list.
type Pooled = Vec<(usize, Vec<f32>)>;

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

    fn embed_queries(&mut self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        let prefix = self.config.query_prefix.clone();
        self.embed(texts, &prefix)
    }

    fn embed_documents(&mut self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        let prefix = self.config.document_prefix.clone();
        self.embed(texts, &prefix)
    }
}
