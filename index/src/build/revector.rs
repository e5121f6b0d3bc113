//! Changing the dense part of a built index without embedding again: the chunk vectors are
//! stored, so another document representation is a new graph from them, and another chunk vector
//! precision is a pass over them. The result is a new index (its other files hard-linked from the
//! source where the filesystem allows), checksummed and published like a build, so a server
//! reading the source is never disturbed.

use std::path::Path;

use crate::build::stage_and_publish;
use crate::chunk_vectors::{ChunkVectors, Precision, RowFile, write_rows};
use crate::dense::{DENSE_DIR, DOC_GRAPH, DocVectors, means_file};
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
    /// Nodes per graph segment at most: the graph is rebuilt split this way. `None` rebuilds it
    /// (when `doc_vectors` asks) split as the source's was.
    pub graph_segment_nodes: Option<u64>,
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
    let rebuild_graph = change.doc_vectors.is_some() || change.graph_segment_nodes.is_some();
    // An unsplit source graph stays unsplit unless a limit is asked for.
    let segment_nodes = change
        .graph_segment_nodes
        .or(dense.graph_segment_nodes)
        .unwrap_or(u64::MAX)
        .max(1);
    if rebuild_graph {
        dense.doc_vectors = change.doc_vectors.unwrap_or(dense.doc_vectors);
        dense.quantization = crate::dense::GRAPH_QUANTIZATION.into();
        dense.graph_segment_nodes = crate::dense::recorded_segment_limit(
            crate::dense::graph_nodes(dense.doc_vectors, &index.chunk_counts()),
            segment_nodes,
        );
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

    stage_and_publish(out, force, |tmp| {
        link_lexical_part(source, tmp)?;
        let source_dense = source.join(DENSE_DIR);
        let dense_dir = tmp.join(DENSE_DIR);
        std::fs::create_dir_all(&dense_dir).map_err(|e| IndexError::io(&dense_dir, e))?;
        let vectors = RowFile::open(&source_dense, stored, dense.dimension, dense.chunk_vectors)?;
        if rebuild_graph {
            crate::build::vectors::build_doc_graph(
                &vectors,
                &dense_dir,
                &index.chunk_counts(),
                dense.doc_vectors,
                change.graph_threads,
                segment_nodes,
                precision,
            )?;
        } else {
            link_file(&source_dense.join(DOC_GRAPH), &dense_dir.join(DOC_GRAPH))?;
            if dense.doc_vectors == DocVectors::Mean {
                let (from, to) = (means_file(stored), means_file(precision));
                if precision == stored {
                    link_file(&source_dense.join(&from), &dense_dir.join(&to))?;
                } else {
                    let docs = index.chunk_counts().len() as u64;
                    let means = ChunkVectors::open_file(
                        &source_dense.join(&from),
                        stored,
                        dense.dimension,
                        docs,
                    )?;
                    let mut row = vec![0f32; dense.dimension];
                    let rows = (0..docs).map(|d| {
                        means.read_row(d, &mut row);
                        Ok(row.clone())
                    });
                    write_rows(&dense_dir.join(&to), precision, rows)?;
                }
            }
        }
        if precision == stored {
            link_file(
                &source_dense.join(stored.file_name()),
                &dense_dir.join(stored.file_name()),
            )?;
        } else {
            vectors.write_as(&dense_dir, precision)?;
        }
        manifest.write(tmp)
    })?;
    SearchIndex::open(out)?;
    Ok(manifest)
}

/// Links every file of `source` outside `dense/` into `tmp`.
fn link_lexical_part(source: &Path, tmp: &Path) -> Result<(), IndexError> {
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
    Ok(())
}

/// The format [`upgrade`] reads: its graph file is usearch's own, with a copy of every vector.
const UPGRADABLE_FORMAT: u64 = 4;
const USEARCH_GRAPH: &str = "docs.usearch";

/// Writes to `out` the index at `source` (format 4) in this build's format, without building it
/// again: the lexical part and the chunk vectors are linked, and the graph's links are read out
/// of usearch's file (the same graph, so the same neighbours), which is left behind with its
/// copy of the vectors. Best-chunk graphs only (the default); others are rebuilt.
pub fn upgrade(source: &Path, out: &Path, force: bool) -> Result<IndexManifest, IndexError> {
    let refuse = |reason: String| IndexError::Damaged {
        path: source.to_path_buf(),
        reason,
    };
    let path = source.join(crate::manifest::MANIFEST_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| IndexError::io(&path, e))?;
    let mut value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| refuse(format!("{}: {e}", crate::manifest::MANIFEST_FILE)))?;
    let found = value
        .get("format_version")
        .and_then(serde_json::Value::as_u64);
    if found != Some(UPGRADABLE_FORMAT) {
        return Err(refuse(format!(
            "it has format version {}; upgrade reads version {UPGRADABLE_FORMAT} (a version-{} index needs no upgrade; older ones are rebuilt)",
            found.map_or("(none)".into(), |v| v.to_string()),
            crate::FORMAT_VERSION
        )));
    }
    value["format_version"] = crate::FORMAT_VERSION.into();
    let mut manifest: IndexManifest = serde_json::from_value(value)
        .map_err(|e| refuse(format!("{}: {e}", crate::manifest::MANIFEST_FILE)))?;
    if let Some(dense) = &manifest.dense
        && dense.doc_vectors != DocVectors::BestChunk
    {
        return Err(refuse(format!(
            "its graph is over {:?} document vectors; upgrade converts best-chunk graphs (build it again)",
            dense.doc_vectors
        )));
    }
    manifest.build_id = IndexManifest::compute_build_id(
        &manifest.sources,
        &manifest.chunker,
        &manifest.analyzer,
        manifest.dense.as_ref(),
        manifest.shard.as_ref().map(|s| s.count),
    );
    stage_and_publish(out, force, |tmp| {
        link_lexical_part(source, tmp)?;
        if let Some(dense) = &manifest.dense {
            let (from, to) = (source.join(DENSE_DIR), tmp.join(DENSE_DIR));
            std::fs::create_dir_all(&to).map_err(|e| IndexError::io(&to, e))?;
            let vectors = dense.chunk_precision.file_name();
            link_file(&from.join(vectors), &to.join(vectors))?;
            let graph_path = from.join(USEARCH_GRAPH);
            let graph = crate::dense::new_graph(&graph_path, dense.dimension, &dense.quantization)?;
            graph
                .view(&graph_path.to_string_lossy())
                .map_err(|e| crate::dense::graph_error(&graph_path, e))?;
            if graph.size() as u64 != dense.chunk_vectors {
                return Err(crate::dense::graph_error(
                    &graph_path,
                    format!("{} nodes, expected {}", graph.size(), dense.chunk_vectors),
                ));
            }
            let keys: Vec<u64> = (0..dense.chunk_vectors).collect();
            crate::links::write(&graph, &keys, dense.chunk_vectors, &to.join(DOC_GRAPH))?;
        }
        manifest.write(tmp)
    })?;
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
