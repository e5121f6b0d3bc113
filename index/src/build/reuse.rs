//! Chunk vectors from an earlier build, so that a build embeds only what is new: a document
//! whose normalised URL, title and text are what that build indexed takes its stored vectors
//! instead of going through the model. Cutting a corpus into shards, or rebuilding it after a few
//! pages changed, then costs a read instead of hours of embedding.
//!
//! The result equals a build that embedded everything only if the vectors are the ones this
//! build's model would compute for the same chunks: so the earlier build must have used the same
//! model on the same engine and the same chunker, and stored its chunk vectors as f32 (rounded
//! ones cannot be made exact again, and the document graph is built from full precision).

use std::path::{Path, PathBuf};

use stillweb_corpus::chunk::ChunkerConfig;

use crate::chunk_vectors::Precision;
use crate::{IndexError, SearchIndex};

/// The vectors of an earlier build, looked up by document.
#[derive(Debug)]
pub(crate) struct ReusedVectors {
    index: SearchIndex,
    /// Chunks that took stored vectors (for the build's log).
    pub(crate) chunks: u64,
}

impl ReusedVectors {
    /// Opens the index at `dir` for a build embedding with `model_id` (`dimension`-d, on
    /// `engine`) and chunking with `chunker`; refuses one whose vectors would not be that
    /// build's, saying why and what to do.
    pub(crate) fn open(
        dir: &Path,
        model_id: &str,
        dimension: usize,
        engine: &str,
        chunker: &ChunkerConfig,
    ) -> Result<ReusedVectors, IndexError> {
        let refuse = |reason: String| IndexError::Reuse {
            path: dir.to_path_buf(),
            reason,
        };
        let index = SearchIndex::open(dir)?;
        let manifest = index.manifest();
        let Some(dense) = &manifest.dense else {
            return Err(refuse(
                "it has no vectors (built with --no-dense)".to_string(),
            ));
        };
        if dense.model_id != model_id || dense.dimension != dimension {
            return Err(refuse(format!(
                "its vectors are {}'s ({}-d), this build embeds with {model_id} ({dimension}-d)",
                dense.model_id, dense.dimension
            )));
        }
        if let Some(built) = dense.engine.as_deref().filter(|&built| built != engine) {
            return Err(refuse(format!(
                "its vectors were computed by the `{built}` engine, this build's by `{engine}` \
                 (pass --engine {built}, or build without --reuse-vectors)"
            )));
        }
        if dense.chunk_precision != Precision::F32 {
            return Err(refuse(format!(
                "it stores its chunk vectors as {}, which cannot be made full precision again \
                 (reuse an index built with --chunk-vectors f32)",
                dense.chunk_precision
            )));
        }
        if &manifest.chunker != chunker {
            return Err(refuse(format!(
                "it was chunked with {:?}, this build chunks with {chunker:?}",
                manifest.chunker
            )));
        }
        Ok(ReusedVectors { index, chunks: 0 })
    }

    /// The stored vectors of the `chunks` chunks of the document at `url_key` with raw `title`
    /// and `text`, in chunk order, if the earlier build indexed exactly that document; `None`
    /// when it must be embedded.
    pub(crate) fn vectors(
        &mut self,
        url_key: &str,
        title: &str,
        text: &str,
        chunks: usize,
    ) -> Result<Option<Vec<Vec<f32>>>, IndexError> {
        let Some((doc, ids)) = self.index.doc_and_chunks_by_url(url_key)? else {
            return Ok(None);
        };
        // The stored title is the displayed one (derived from the text when the page has none),
        // while chunks are embedded with the raw title: only a page with a title of its own can
        // be matched exactly.
        if title.trim().is_empty() || doc.title != title || doc.text != text {
            return Ok(None);
        }
        if ids.end - ids.start != chunks as u64 {
            return Ok(None);
        }
        let Some(dense) = self.index.dense() else {
            return Ok(None);
        };
        let vectors = ids.map(|id| dense.chunk_vector(id)).collect();
        self.chunks += chunks as u64;
        Ok(Some(vectors))
    }

    pub(crate) fn dir(&self) -> PathBuf {
        self.index.dir().to_path_buf()
    }
}
