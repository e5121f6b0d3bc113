use std::path::PathBuf;

/// Errors that stop reading a whole source file or manifest. A single bad record is not one of
/// these: readers report it as [`crate::ingest::BadRecord`] and go on.
#[derive(Debug, thiserror::Error)]
pub enum CorpusError {
    #[error("cannot read {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("corpus manifest {path} is invalid: {message}")]
    Manifest { path: PathBuf, message: String },
    #[error(
        "source #{source_index} ({pattern}) matches no file; check the path (it is relative to the manifest's directory)"
    )]
    NoFiles {
        source_index: usize,
        pattern: String,
    },
    #[error(
        "checksum mismatch for {what}: manifest says sha256 {expected}, found {actual}; the data changed or the manifest is stale"
    )]
    Checksum {
        what: String,
        expected: String,
        actual: String,
    },
    #[error("{path} is not a {format} file: {message}")]
    Format {
        path: PathBuf,
        format: &'static str,
        message: String,
    },
}

impl CorpusError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        CorpusError::Io {
            path: path.into(),
            source,
        }
    }
}
