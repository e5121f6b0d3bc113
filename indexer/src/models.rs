//! The model flags the subcommands that embed or rerank share, and loading those models.

use std::path::{Path, PathBuf};

use anyhow::Context;
use stillweb_index::search::Preset;
use stillweb_models::{Embedder, Engine, ExecutionProvider, Reranker, load_reranker};

/// Which embedder to load, and where it runs.
#[derive(clap::Args, Debug)]
pub struct ModelArgs {
    /// A named configuration: `fast` (MiniLM-L6, no reranker) or `quality` (MiniLM-L6, then the
    /// MiniLM-L12 cross-encoder): its embedder (and, where the command reranks, its reranker,
    /// mode, pool and weight) unless given by their own flags. Recorded in a built index's
    /// manifest, where the server finds it.
    #[arg(long, env = "STILLWEB_PRESET")]
    pub preset: Option<Preset>,
    /// Embedder directory (with model.toml); default: the preset's, else the MiniLM that
    /// `models/fetch` installs.
    #[arg(long, env = "STILLWEB_EMBEDDER")]
    embedder: Option<PathBuf>,
    /// Intra-op threads per model; 0 = one per core.
    #[arg(long, default_value_t = 0)]
    model_threads: usize,
    /// Where models run: cpu, cuda or cuda:N (needs the onnxruntime-gpu library).
    #[arg(long, env = "STILLWEB_PROVIDER", default_value = "cpu")]
    pub provider: ExecutionProvider,
    /// What runs the embedder on the CPU: onnx or native-int8 (default: what its model.toml says).
    #[arg(long, env = "STILLWEB_ENGINE")]
    engine: Option<Engine>,
    /// What runs a cross-encoder reranker on the CPU: onnx or native-int8 (default: what its
    /// model.toml says).
    #[arg(long, env = "STILLWEB_RERANKER_ENGINE")]
    reranker_engine: Option<Engine>,
}

impl ModelArgs {
    pub fn threads(&self) -> usize {
        threads_or_cores(self.model_threads)
    }

    pub fn dir(&self) -> PathBuf {
        match (&self.embedder, self.preset) {
            (Some(dir), _) => dir.clone(),
            (None, Some(preset)) => preset.embedder_dir(),
            (None, None) => stillweb_models::config::default_embedder_dir(),
        }
    }

    pub fn load(&self) -> anyhow::Result<Box<dyn Embedder>> {
        let dir = self.dir();
        stillweb_models::load_embedder(&dir, self.engine, self.provider, self.threads())
            .with_context(|| {
                format!(
                    "loading the embedder from {} (or pass --no-dense for a BM25-only index)",
                    dir.display()
                )
            })
    }

    pub fn load_reranker(&self, dir: &Path) -> anyhow::Result<Box<dyn Reranker>> {
        load_reranker(dir, self.reranker_engine, self.provider, self.threads())
            .with_context(|| format!("loading the reranker from {}", dir.display()))
    }
}

/// `n` threads, or one per core for 0.
pub fn threads_or_cores(n: usize) -> usize {
    if n == 0 {
        std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
    } else {
        n
    }
}
