//! Changing the dense part of a built index without embedding again: the chunk vectors are
//! stored, so another document representation is a new graph from them, and another chunk vector
//! precision is a pass over them. The result is a new index (its other files hard-linked from the
//! source where the filesystem allows), checksummed and published like a build, so a server
//! reading the source is never disturbed.

use std::path::Path;

use crate::build::{publish, staging_dir};
use crate::chunk_vectors::{ChunkVectors, Precision};
use crate::dense::{DENSE_DIR, DOC_GRAPH, DocVectors};
use crate::doc_ids::DOC_IDS;
use crate::manifest::IndexManifest;
use crate::{IndexError, SearchIndex};

/// What to change; `None` keeps the source's.
#[derive(Debug, Clone, Copy, Default)]
pub struct Revector {
    /// A new document representation: the graph is rebuilt from the source's chunk vectors as
    /// stored (a build uses them before rounding, so from f16 or i8 ones the graph's vectors can
    /// differ from a direct build's by that rounding).
    pub doc_vectors: Option<DocVectors>,
    /// A new chunk vector precision, no higher than the source's (rounding cannot be undone).
    pub chunk_precision: Option<Precision>,
    /// Threads inserting a rebuilt graph (0: one per core; 1: reproducible byte for byte).
    pub graph_threads: usize,
}

/// Writes to `out` a copy of the index at `source` with the dense part changed as `change` says.
pub fn revector(
    source: &Path,
    out: &Path,
    change: Revector,
    force: bool,
) -> Result<IndexManifest, IndexError> {
    let index = SearchIndex::open(source)?;
    let mut manifest = index.manifest().clone();
    let Some(dense) = manifest.dense.as_mut() else {
        return Err(IndexError::Damaged {
            path: source.to_path_buf(),
            reason: "the index has no vectors (built with --no-dense); build it with an embedder"
                .into(),
        });
    };
    let stored = dense.chunk_precision;
    let precision = change.chunk_precision.unwrap_or(stored);
    if precision > stored {
        return Err(IndexError::Damaged {
            path: source.to_path_buf(),
            reason: format!(
                "its chunk vectors are stored as {stored}; {precision} cannot be recovered from them \
                 (build the index again with --chunk-vectors {precision})"
            ),
        });
    }
    let rebuild_graph = change.doc_vectors.is_some();
    if let Some(doc_vectors) = change.doc_vectors {
        dense.doc_vectors = doc_vectors;
        dense.quantization = crate::dense::GRAPH_QUANTIZATION.into();
    }
    dense.chunk_precision = precision;
    let dense = dense.clone();
    manifest.build_id = IndexManifest::compute_build_id(
        &manifest.sources,
        &manifest.chunker,
        &manifest.analyzer,
        Some(&dense),
        manifest.shard.as_ref().map(|s| s.count),
    );
    manifest.created_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());

    let tmp = staging_dir(out, force)?;
    let result = (|| {
        for part in ["docs", "chunks"] {
            link_dir(&source.join(part), &tmp.join(part))?;
        }
        // Indexes built before the id table have none; they read ids from the docs index.
        if source.join(DOC_IDS).is_file() {
            link_file(&source.join(DOC_IDS), &tmp.join(DOC_IDS))?;
        }
        // A shard's ordinal map and corpus statistics.
        for file in [
            crate::shard::GLOBAL_ORDS_FILE,
            crate::shard::BM25_STATS_FILE,
        ] {
            if source.join(file).is_file() {
                link_file(&source.join(file), &tmp.join(file))?;
            }
        }
        let source_dense = source.join(DENSE_DIR);
        let dense_dir = tmp.join(DENSE_DIR);
        std::fs::create_dir_all(&dense_dir).map_err(|e| IndexError::io(&dense_dir, e))?;
        let vectors =
            ChunkVectors::open(&source_dense, stored, dense.dimension, dense.chunk_vectors)?;
        if rebuild_graph {
            crate::build::vectors::build_doc_graph(
                &vectors,
                &dense_dir,
                &index.chunk_counts(),
                dense.doc_vectors,
                change.graph_threads,
            )?;
        } else {
            link_file(&source_dense.join(DOC_GRAPH), &dense_dir.join(DOC_GRAPH))?;
        }
        if precision == stored {
            link_file(
                &source_dense.join(stored.file_name()),
                &dense_dir.join(stored.file_name()),
            )?;
        } else {
            vectors.write_as(&dense_dir, precision)?;
        }
        manifest.write(&tmp)?;
        crate::checksums::write(&tmp)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    publish(&tmp, out)?;
    SearchIndex::open(out)?;
    Ok(manifest)
}

fn link_dir(from: &Path, to: &Path) -> Result<(), IndexError> {
    std::fs::create_dir_all(to).map_err(|e| IndexError::io(to, e))?;
    for entry in std::fs::read_dir(from).map_err(|e| IndexError::io(from, e))? {
        let entry = entry.map_err(|e| IndexError::io(from, e))?;
        link_file(&entry.path(), &to.join(entry.file_name()))?;
    }
    Ok(())
}

/// Index files are never modified once written, so a hard link is as good as a copy.
fn link_file(from: &Path, to: &Path) -> Result<(), IndexError> {
    if std::fs::hard_link(from, to).is_ok() {
        return Ok(());
    }
    std::fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| IndexError::io(from, e))
}
