//! The dense part of the on-disk format, shared by building and reading: every chunk's embedding
//! (row by row in chunk-id order, at the build's precision: [`crate::chunk_vectors`]) and the
//! links of an HNSW graph over document vectors for stage 1 ([`crate::links`]: usearch builds
//! the graph; its nodes are scored from the stored rows, so each vector is stored once). Writing
//! them is `build/vectors.rs`; searching them, `read/vectors.rs`.
//!
//! How a document is represented is a build parameter ([`DocVectors`]);
//! `benchmarks/HISTORY.md` has the measurement behind the default.

use std::path::Path;

use serde::{Deserialize, Serialize};
use usearch::{IndexOptions, MetricKind, ScalarKind};

use crate::IndexError;
use crate::chunk_vectors::Precision;

pub const DENSE_DIR: &str = "dense";
pub(crate) const DOC_GRAPH: &str = "graph.links";

/// A mean graph's node vectors (each document's normalised mean chunk vector, by ordinal) at the
/// chunk precision, in `dense/`; the other representations' nodes are chunk rows.
pub(crate) fn means_file(precision: crate::chunk_vectors::Precision) -> String {
    format!("means.{precision}")
}

/// How a document is represented in the document-level dense index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DocVectors {
    /// The normalised mean of its chunk vectors.
    Mean,
    /// Its first chunk's vector.
    Lead,
    /// All its chunk vectors; a document scores as its best chunk.
    BestChunk,
}

impl std::str::FromStr for DocVectors {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "mean" => Ok(DocVectors::Mean),
            "lead" => Ok(DocVectors::Lead),
            "best-chunk" | "best_chunk" => Ok(DocVectors::BestChunk),
            other => Err(format!(
                "unknown document representation `{other}` (mean, lead, best-chunk)"
            )),
        }
    }
}

/// What the manifest records about the dense part; the server refuses a model that differs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct DenseManifest {
    pub model_id: String,
    pub dimension: usize,
    /// What computed the chunk vectors (`onnx`, `native-int8`); absent in indexes built before
    /// it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// Vectors are unit length; similarity is their dot product.
    pub metric: String,
    /// The vectors usearch built the graph from (the graph's walk scores the stored rows).
    pub quantization: String,
    pub doc_vectors: DocVectors,
    pub chunk_vectors: u64,
    /// How the chunk vectors are stored (absent in indexes from before the choice: f32).
    #[serde(default)]
    pub chunk_precision: Precision,
    pub hnsw_connectivity: usize,
    pub hnsw_expansion_add: usize,
    pub hnsw_expansion_search: usize,
    /// The most nodes a graph segment holds, when the graph has more than one (absent: one
    /// graph, as in every index built before segments).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub graph_segment_nodes: Option<u64>,
}

impl DenseManifest {
    /// The segments a graph of `nodes` nodes is built in under this manifest.
    pub fn graph_segments(&self, nodes: u64) -> u64 {
        self.graph_segment_nodes
            .map_or(1, |limit| nodes.div_ceil(limit.max(1)))
            .max(1)
    }

    /// Refuses a query embedder other than the model these vectors came from, and warns (naming
    /// `whose` vectors) when the same model runs on another engine than the build's.
    pub fn check_embedder(
        &self,
        model_id: &str,
        dimension: usize,
        engine: &str,
        whose: &dyn std::fmt::Display,
    ) -> Result<(), crate::IndexError> {
        if let Some(warning) = self.engine_mismatch(engine) {
            tracing::warn!(index = %whose, "{warning}");
        }
        if self.model_id != model_id || self.dimension != dimension {
            return Err(crate::IndexError::ModelMismatch {
                index_model: self.model_id.clone(),
                index_dimension: self.dimension,
                model: model_id.to_string(),
                dimension,
            });
        }
        Ok(())
    }

    /// Why querying these vectors with `engine` is not what the build did, if it is not: the
    /// same model on another engine gives slightly different vectors (int8 rounding), so
    /// rankings shift a little against the measured ones.
    pub fn engine_mismatch(&self, engine: &str) -> Option<String> {
        let built = self.engine.as_deref()?;
        (built != engine).then(|| {
            format!(
                "the index's vectors were computed by the `{built}` engine but queries are embedded by `{engine}`: \
                 the same model, slightly different vectors; rankings may differ from the measured ones \
                 (start with --engine {built} or rebuild the index)"
            )
        })
    }
}

/// The vectors usearch builds new graphs from: i8 inserts faster than f32, and the links it
/// chooses are walked over the stored rows (benchmarks/HISTORY.md, ANN).
pub const GRAPH_QUANTIZATION: &str = "i8";

/// Nodes a document graph segment holds at most, by default: usearch builds a segment in memory
/// at about 0.55 KiB a node, so about 140 MiB of a build's peak whatever the corpus; a search
/// descends into every segment, and many cost time and recall (at ~1M nodes 4 segments keep
/// recall@100 and cost 10-20% of the throughput, 15 lose 0.06 of recall: BENCHMARKS.md, memory
/// on one machine), so shards of tens of millions of chunks want larger ones.
pub const GRAPH_SEGMENT_NODES: u64 = 1 << 18;

/// The smallest segment limit the command lines accept: below it a graph is mostly segment
/// entries, searched one by one.
pub const MIN_GRAPH_SEGMENT_NODES: u64 = 256;

/// What a manifest records of a graph of `nodes` nodes built in segments of at most `limit`:
/// the limit, if it split the graph.
pub(crate) fn recorded_segment_limit(nodes: u64, limit: u64) -> Option<u64> {
    (nodes > limit).then_some(limit)
}

/// The nodes of a document graph over documents with `chunk_counts` chunks: every chunk (best
/// chunk), or every document with a chunk.
pub(crate) fn graph_nodes(doc_vectors: DocVectors, chunk_counts: &[u32]) -> u64 {
    match doc_vectors {
        DocVectors::BestChunk => chunk_counts.iter().map(|&c| u64::from(c)).sum(),
        DocVectors::Mean | DocVectors::Lead => {
            chunk_counts.iter().filter(|&&c| c > 0).count() as u64
        }
    }
}

/// The HNSW settings of every document graph, storing vectors as `quantization` (`f32`, `f16`
/// or `i8`, as an index manifest records it).
pub fn graph_options(dimension: usize, quantization: &str) -> Result<IndexOptions, String> {
    let quantization = match quantization {
        "f32" => ScalarKind::F32,
        "f16" => ScalarKind::F16,
        "i8" => ScalarKind::I8,
        other => {
            return Err(format!(
                "unknown graph quantization `{other}` (f32, f16, i8)"
            ));
        }
    };
    Ok(IndexOptions {
        dimensions: dimension,
        metric: MetricKind::IP,
        quantization,
        connectivity: 16,
        expansion_add: 128,
        expansion_search: 128,
        multi: false,
    })
}

/// An empty graph with [`graph_options`]; `path` names the graph file in errors.
pub(crate) fn new_graph(
    path: &Path,
    dimension: usize,
    quantization: &str,
) -> Result<usearch::Index, IndexError> {
    let options = graph_options(dimension, quantization).map_err(|e| graph_error(path, e))?;
    usearch::Index::new(&options).map_err(|e| graph_error(path, e))
}

/// `path` memory-mapped: the page cache holds it, shared and reclaimable, and only the pages a
/// query touches become resident.
pub(crate) fn map_file(path: &Path) -> Result<tantivy::directory::OwnedBytes, IndexError> {
    let (dir, name) = (
        path.parent().unwrap_or(Path::new(".")),
        path.file_name().map(Path::new).unwrap_or(path),
    );
    let fail = |e: String| IndexError::io(path, std::io::Error::other(e));
    let directory =
        tantivy::directory::MmapDirectory::open(dir).map_err(|e| fail(e.to_string()))?;
    tantivy::directory::Directory::open_read(&directory, name)
        .map_err(|e| fail(e.to_string()))?
        .read_bytes()
        .map_err(|e| IndexError::io(path, e))
}

pub(crate) fn graph_error(path: &Path, e: impl std::fmt::Display) -> IndexError {
    IndexError::Damaged {
        path: path.to_path_buf(),
        reason: format!("vector index: {e}"),
    }
}

pub use crate::build::vectors::ChunkVectorWriter;
pub use crate::read::vectors::DenseIndex;
