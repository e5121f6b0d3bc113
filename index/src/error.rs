use std::path::PathBuf;

/// Errors from building, opening or searching an index.
#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error(transparent)]
    Corpus(#[from] stillweb_corpus::CorpusError),
    #[error("index engine error: {0}")]
    Tantivy(#[from] tantivy::TantivyError),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "no index at {path}: {reason}; build one with `stillweb-indexer build --manifest FILE --out {path}`"
    )]
    Missing { path: PathBuf, reason: String },
    #[error(
        "index at {path} has format version {found}, this build reads version {expected}; rebuild it with `stillweb-indexer build` (a version-4 index converts in seconds: `stillweb-indexer upgrade --index {path} --out NEW`)"
    )]
    FormatVersion {
        path: PathBuf,
        found: u32,
        expected: u32,
    },
    #[error("index at {path} is incomplete or damaged: {reason}; rebuild it")]
    Damaged { path: PathBuf, reason: String },
    #[error(
        "source `{source_name}`: {bad} of {total} records were bad ({share:.2}% > the allowed {max:.2}%); see the logged positions, fix the data or raise --max-bad-fraction"
    )]
    TooManyBad {
        source_name: String,
        bad: u64,
        total: u64,
        share: f64,
        max: f64,
    },
    #[error(
        "source `{source_name}` yielded {actual} documents but the manifest expects {expected}; the data changed or the manifest is stale"
    )]
    ExpectedCount {
        source_name: String,
        expected: u64,
        actual: u64,
    },
    #[error("{path} already exists; pass --force to replace it")]
    Exists { path: PathBuf },
    #[error("shard set at {path}: {reason}")]
    Shards { path: PathBuf, reason: String },
    #[error("overlay: {path}: {reason}")]
    Overlay { path: PathBuf, reason: String },
    #[error("cannot reuse the vectors of {path}: {reason}")]
    Reuse { path: PathBuf, reason: String },
    #[error("model: {0}")]
    Model(String),
    /// The reranker is served elsewhere and none of its servers answered.
    #[error("the reranker {0}")]
    RerankUnavailable(String),
    #[error(
        "the index was built with {index_model} ({index_dimension}-d) but the loaded embedder is {model} ({dimension}-d); load the same model or rebuild the index"
    )]
    ModelMismatch {
        index_model: String,
        index_dimension: usize,
        model: String,
        dimension: usize,
    },
    #[error("evaluation input {path}: {message}")]
    EvalInput { path: PathBuf, message: String },
}

impl IndexError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        IndexError::Io {
            path: path.into(),
            source,
        }
    }
}
