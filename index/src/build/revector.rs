//! Changing how documents are represented in the dense document index without embedding again:
//! the chunk vectors are stored, so a new document graph is a pass over them. The result is a new
//! index (its files hard-linked from the source where the filesystem allows), published like a
//! build, so a server reading the source is never disturbed.

use std::path::Path;

use crate::build::{publish, staging_dir};
use crate::dense::{CHUNK_VECTORS, DENSE_DIR, DocVectors, build_doc_graph};
use crate::doc_ids::DOC_IDS;
use crate::manifest::IndexManifest;
use crate::{IndexError, SearchIndex};

/// Writes to `out` a copy of the index at `source` whose document graph uses `doc_vectors`,
/// inserted from `graph_threads` threads (0: one per core; 1: reproducible byte for byte).
pub fn rebuild_doc_vectors(
    source: &Path,
    out: &Path,
    doc_vectors: DocVectors,
    graph_threads: usize,
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
    dense.doc_vectors = doc_vectors;
    dense.quantization = crate::dense::GRAPH_QUANTIZATION.into();
    let dimension = dense.dimension;
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
        let dense_dir = tmp.join(DENSE_DIR);
        std::fs::create_dir_all(&dense_dir).map_err(|e| IndexError::io(&dense_dir, e))?;
        link_file(
            &source.join(DENSE_DIR).join(CHUNK_VECTORS),
            &dense_dir.join(CHUNK_VECTORS),
        )?;
        build_doc_graph(
            &dense_dir,
            dimension,
            &index.chunk_counts(),
            doc_vectors,
            graph_threads,
        )?;
        manifest.write(&tmp)
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
