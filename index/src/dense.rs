//! Dense vectors of an index: every chunk's embedding (stored row by row in chunk-id order, so
//! stage 2 can score the chunks of its candidates exactly) and an HNSW graph (usearch) over
//! document vectors for stage 1.
//!
//! How a document is represented is a build parameter ([`DocVectors`]); `BENCHMARKS.md` has the
//! measurement behind the default.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use usearch::{IndexOptions, MetricKind, ScalarKind};

use crate::IndexError;

pub const DENSE_DIR: &str = "dense";
pub(crate) const CHUNK_VECTORS: &str = "chunks.f32";
const DOC_GRAPH: &str = "docs.usearch";

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
    pub quantization: String,
    pub doc_vectors: DocVectors,
    pub chunk_vectors: u64,
    pub hnsw_connectivity: usize,
    pub hnsw_expansion_add: usize,
    pub hnsw_expansion_search: usize,
}

impl DenseManifest {
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

/// How new graphs store their vectors. The graph only chooses candidates (stage 2 rescores their
/// chunks exactly from `chunks.f32`), and i8 walks a quarter of the memory: at 1M chunks it
/// searched ~5× faster than f32 for ~0.02 less recall@10 (BENCHMARKS.md, ANN).
pub const GRAPH_QUANTIZATION: &str = "i8";

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
fn new_graph(
    path: &Path,
    dimension: usize,
    quantization: &str,
) -> Result<usearch::Index, IndexError> {
    let options = graph_options(dimension, quantization).map_err(|e| graph_error(path, e))?;
    usearch::Index::new(&options).map_err(|e| graph_error(path, e))
}

fn graph_error(path: &Path, e: impl std::fmt::Display) -> IndexError {
    IndexError::Damaged {
        path: path.to_path_buf(),
        reason: format!("vector index: {e}"),
    }
}

/// Appends chunk vectors in chunk-id order while the index is built.
#[derive(Debug)]
pub struct ChunkVectorWriter {
    path: PathBuf,
    out: BufWriter<File>,
    dimension: usize,
    written: u64,
}

impl ChunkVectorWriter {
    pub fn create(dir: &Path, dimension: usize) -> Result<ChunkVectorWriter, IndexError> {
        let dense = dir.join(DENSE_DIR);
        std::fs::create_dir_all(&dense).map_err(|e| IndexError::io(&dense, e))?;
        let path = dense.join(CHUNK_VECTORS);
        let file = File::create(&path).map_err(|e| IndexError::io(&path, e))?;
        Ok(ChunkVectorWriter {
            path,
            out: BufWriter::with_capacity(1 << 20, file),
            dimension,
            written: 0,
        })
    }

    pub fn write(&mut self, vector: &[f32]) -> Result<(), IndexError> {
        if vector.len() != self.dimension {
            return Err(graph_error(
                &self.path,
                format!(
                    "got a {}-d vector, expected {}",
                    vector.len(),
                    self.dimension
                ),
            ));
        }
        for x in vector {
            self.out
                .write_all(&x.to_le_bytes())
                .map_err(|e| IndexError::io(&self.path, e))?;
        }
        self.written += 1;
        Ok(())
    }

    pub fn written(&self) -> u64 {
        self.written
    }

    /// Flushes the vectors and builds the document graph; `chunk_counts[d]` is the number of
    /// chunks of document `d` (documents' chunks are contiguous, in document order).
    pub fn finish(
        mut self,
        chunk_counts: &[u32],
        doc_vectors: DocVectors,
        graph_threads: usize,
    ) -> Result<u64, IndexError> {
        self.out
            .flush()
            .map_err(|e| IndexError::io(&self.path, e))?;
        drop(self.out);
        let dir = self
            .path
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        build_doc_graph(
            &dir,
            self.dimension,
            chunk_counts,
            doc_vectors,
            graph_threads,
        )?;
        Ok(self.written)
    }
}

/// (Re)builds `DIR/docs.usearch` from `DIR/chunks.f32`: one node per chunk keyed by chunk id
/// (best chunk), or one per document keyed by ordinal (its first chunk, or the normalised mean of
/// its chunks).
///
/// Nodes are inserted from `threads` threads (0: one per core; HNSW insertion is most of a large
/// build). With more than one the graph's links depend on thread timing: two builds of one corpus
/// find the same neighbours up to HNSW's approximation, not byte-identical graphs. With one thread
/// the graph is reproducible byte for byte. Searching a built graph is deterministic either way.
pub fn build_doc_graph(
    dir: &Path,
    dimension: usize,
    chunk_counts: &[u32],
    doc_vectors: DocVectors,
    threads: usize,
) -> Result<(), IndexError> {
    let graph_path = dir.join(DOC_GRAPH);
    let chunks = ChunkVectors::open(
        dir,
        dimension,
        chunk_counts.iter().map(|&c| u64::from(c)).sum(),
    )?;
    let doc_rows: Vec<f32> = match doc_vectors {
        DocVectors::BestChunk => Vec::new(),
        DocVectors::Mean | DocVectors::Lead => document_rows(&chunks, chunk_counts, doc_vectors),
    };
    let nodes = match doc_vectors {
        DocVectors::BestChunk => chunks.rows,
        DocVectors::Mean | DocVectors::Lead => (doc_rows.len() / dimension.max(1)) as u64,
    };
    // Mean and lead skip documents without chunks, so their node keys are looked up.
    let doc_keys: Vec<u64> = match doc_vectors {
        DocVectors::BestChunk => Vec::new(),
        DocVectors::Mean | DocVectors::Lead => (0..chunk_counts.len() as u64)
            .filter(|&d| chunk_counts[d as usize] > 0)
            .collect(),
    };
    let threads = match threads {
        0 => std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
        n => n,
    };
    let graph = new_graph(&graph_path, dimension, GRAPH_QUANTIZATION)?;
    graph
        .reserve_capacity_and_threads(usize::try_from(nodes).unwrap_or(usize::MAX), threads)
        .map_err(|e| graph_error(&graph_path, e))?;
    let started = std::time::Instant::now();
    // Thread `t` inserts nodes t, t + threads, …; the first one reports progress.
    let insert_share = |first: usize| -> Result<(), IndexError> {
        let mut row = vec![0f32; dimension];
        let report_every = (nodes / threads as u64 / 10).max(1);
        for (i, node) in (first as u64..nodes).step_by(threads).enumerate() {
            let (key, vector): (u64, &[f32]) = match doc_vectors {
                DocVectors::BestChunk => {
                    chunks.read_row(node, &mut row);
                    (node, &row[..])
                }
                DocVectors::Mean | DocVectors::Lead => {
                    let start = node as usize * dimension;
                    (doc_keys[node as usize], &doc_rows[start..start + dimension])
                }
            };
            graph
                .add(key, vector)
                .map_err(|e| graph_error(&graph_path, e))?;
            if first == 0 && (i as u64 + 1).is_multiple_of(report_every) {
                tracing::info!(
                    inserted = (i as u64 + 1) * threads as u64,
                    nodes,
                    seconds = started.elapsed().as_secs_f64(),
                    "document graph"
                );
            }
        }
        Ok(())
    };
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|first| {
                let insert_share = &insert_share;
                scope.spawn(move || insert_share(first))
            })
            .collect();
        // Joins every thread (the scope does, too); the first error wins.
        workers.into_iter().try_for_each(|w| {
            w.join().unwrap_or_else(|_| {
                Err(graph_error(&graph_path, "a graph builder thread panicked"))
            })
        })
    })?;
    tracing::info!(
        nodes,
        threads,
        seconds = started.elapsed().as_secs_f64(),
        "document graph built"
    );
    graph
        .save(&graph_path.to_string_lossy())
        .map_err(|e| graph_error(&graph_path, e))
}

/// Document vectors (row-major, documents without chunks skipped): each document's first chunk,
/// or the normalised mean of its chunks.
fn document_rows(chunks: &ChunkVectors, chunk_counts: &[u32], doc_vectors: DocVectors) -> Vec<f32> {
    let dimension = chunks.dimension;
    let mut rows = Vec::new();
    let mut row = vec![0f32; dimension];
    let mut chunk_id = 0u64;
    for &count in chunk_counts {
        if count > 0 {
            let mut sum = vec![0f32; dimension];
            let used = if doc_vectors == DocVectors::Lead {
                1
            } else {
                count
            };
            for i in 0..u64::from(used) {
                chunks.read_row(chunk_id + i, &mut row);
                sum.iter_mut().zip(&row).for_each(|(s, x)| *s += x);
            }
            if doc_vectors == DocVectors::Mean {
                stillweb_model_core::normalize(&mut sum);
            }
            rows.extend_from_slice(&sum);
        }
        chunk_id += u64::from(count);
    }
    rows
}

/// Chunk vectors memory-mapped from `chunks.f32` (little-endian f32 rows in chunk-id order): the
/// page cache holds them, shared and reclaimable, rather than a private copy per process.
struct ChunkVectors {
    bytes: tantivy::directory::OwnedBytes,
    dimension: usize,
    rows: u64,
}

impl ChunkVectors {
    /// Maps `DIR/chunks.f32` and checks it holds exactly `rows` vectors of `dimension`.
    fn open(dir: &Path, dimension: usize, rows: u64) -> Result<ChunkVectors, IndexError> {
        let path = dir.join(CHUNK_VECTORS);
        let mapped = tantivy::directory::MmapDirectory::open(dir)
            .map_err(|e| IndexError::io(&path, std::io::Error::other(e.to_string())))
            .and_then(|d| {
                tantivy::directory::Directory::open_read(&d, Path::new(CHUNK_VECTORS))
                    .map_err(|e| IndexError::io(&path, std::io::Error::other(e.to_string())))
            })?
            .read_bytes()
            .map_err(|e| IndexError::io(&path, e))?;
        let expected = rows as usize * dimension * 4;
        if mapped.len() != expected {
            return Err(graph_error(
                &path,
                format!(
                    "{} bytes, expected {expected} ({rows} vectors of {dimension} dimensions); rebuild the index",
                    mapped.len()
                ),
            ));
        }
        Ok(ChunkVectors {
            bytes: mapped,
            dimension,
            rows,
        })
    }

    fn row_bytes(&self, id: u64) -> &[u8] {
        let width = self.dimension * 4;
        let start = id as usize * width;
        &self.bytes.as_slice()[start..start + width]
    }

    /// Copies row `id` into `out`.
    fn read_row(&self, id: u64, out: &mut [f32]) {
        for (x, b) in out.iter_mut().zip(self.row_bytes(id).chunks_exact(4)) {
            *x = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
    }

    /// The dot product of `query` with row `id`, read straight from the mapped bytes.
    fn dot(&self, query: &[f32], id: u64) -> f32 {
        stillweb_model_core::dot_le_bytes(query, self.row_bytes(id))
    }
}

/// The dense part of an open index: the chunk vectors and the document graph, both
/// memory-mapped from the index directory.
pub struct DenseIndex {
    manifest: DenseManifest,
    vectors: ChunkVectors,
    graph: usearch::Index,
    /// Document of each chunk id (for best-chunk graphs).
    doc_of_chunk: Vec<u64>,
}

impl std::fmt::Debug for DenseIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DenseIndex")
            .field("manifest", &self.manifest)
            .finish()
    }
}

impl DenseIndex {
    /// Opens `INDEX/dense`; `chunk_counts[d]` as for [`ChunkVectorWriter::finish`].
    pub fn open(
        index_dir: &Path,
        manifest: DenseManifest,
        chunk_counts: &[u32],
    ) -> Result<DenseIndex, IndexError> {
        let dir = index_dir.join(DENSE_DIR);
        let vectors = ChunkVectors::open(&dir, manifest.dimension, manifest.chunk_vectors)?;
        let graph_path = dir.join(DOC_GRAPH);
        let graph = new_graph(&graph_path, manifest.dimension, &manifest.quantization)?;
        graph
            .view(&graph_path.to_string_lossy())
            .map_err(|e| graph_error(&graph_path, e))?;
        graph.change_expansion_search(manifest.hnsw_expansion_search);
        let nodes = match manifest.doc_vectors {
            DocVectors::BestChunk => manifest.chunk_vectors as usize,
            DocVectors::Mean | DocVectors::Lead => chunk_counts.iter().filter(|&&c| c > 0).count(),
        };
        if graph.size() != nodes {
            return Err(graph_error(
                &graph_path,
                format!(
                    "{} nodes, expected {nodes}; rebuild the index",
                    graph.size()
                ),
            ));
        }
        let mut doc_of_chunk = Vec::with_capacity(manifest.chunk_vectors as usize);
        for (doc, &count) in chunk_counts.iter().enumerate() {
            doc_of_chunk.extend(std::iter::repeat_n(doc as u64, count as usize));
        }
        if doc_of_chunk.len() as u64 != manifest.chunk_vectors {
            return Err(graph_error(
                &dir.join(CHUNK_VECTORS),
                "chunk counts disagree with the stored vectors",
            ));
        }
        Ok(DenseIndex {
            manifest,
            vectors,
            graph,
            doc_of_chunk,
        })
    }

    pub fn manifest(&self) -> &DenseManifest {
        &self.manifest
    }

    /// The similarity (dot product of unit vectors) of `query` and chunk `id`, read straight
    /// from the mapped `chunks.f32` (a graph lookup copies the vector under a lock: profiled at
    /// four times the cost).
    pub fn chunk_similarity(&self, query: &[f32], id: u64) -> f32 {
        self.vectors.dot(query, id)
    }

    /// The similarity of `query` and graph node `key`, read into `row`.
    fn node_similarity(&self, query: &[f32], key: u64, row: &mut [f32]) -> Result<f32, IndexError> {
        let found = self
            .graph
            .get(key, row)
            .map_err(|e| graph_error(Path::new(DOC_GRAPH), e))?;
        if found == 0 {
            return Err(graph_error(
                Path::new(DOC_GRAPH),
                format!("node {key} is missing from the graph; rebuild the index"),
            ));
        }
        Ok(stillweb_model_core::dot(query, row))
    }

    /// The `limit` documents of `docs` (ordinal and chunk-id range) most similar to `query`,
    /// scored exactly as the graph scores them (best chunk, mean or lead vector), best first.
    ///
    /// For a filtered search whose pages are few, this is both cheaper than searching the
    /// graph far enough for enough of them to survive the filter and exact.
    pub fn rank_exactly(
        &self,
        query: &[f32],
        docs: impl Iterator<Item = (u64, std::ops::Range<u64>)>,
        limit: usize,
    ) -> Result<Vec<(u64, f32)>, IndexError> {
        let mut row = vec![0f32; self.vectors.dimension];
        let mut scored = Vec::new();
        for (doc, chunks) in docs {
            if chunks.is_empty() {
                continue;
            }
            let similarity = match self.manifest.doc_vectors {
                DocVectors::BestChunk => chunks
                    .map(|chunk| self.vectors.dot(query, chunk))
                    .fold(f32::NEG_INFINITY, f32::max),
                DocVectors::Mean | DocVectors::Lead => {
                    self.node_similarity(query, doc, &mut row)?
                }
            };
            scored.push((doc, similarity));
        }
        let mut out = crate::fusion::sorted(scored);
        out.truncate(limit);
        Ok(out)
    }

    /// The `limit` documents nearest to `query` (cosine similarity), best first.
    pub fn search_docs(&self, query: &[f32], limit: usize) -> Result<Vec<(u64, f32)>, IndexError> {
        // A best-chunk graph returns chunks: look at three times as many as documents wanted
        // (with the i8 graph, 2× lost 0.001 SciFact Recall@100 and 4× costs more CPU for none).
        let oversample = match self.manifest.doc_vectors {
            DocVectors::BestChunk => limit * 3,
            DocVectors::Mean | DocVectors::Lead => limit,
        };
        let matches = self
            .graph
            .search(query, oversample.max(1))
            .map_err(|e| graph_error(Path::new(DOC_GRAPH), e))?;
        let mut best: std::collections::HashMap<u64, f32> = std::collections::HashMap::new();
        for (key, distance) in matches.keys.iter().zip(&matches.distances) {
            let doc = match self.manifest.doc_vectors {
                DocVectors::BestChunk => self
                    .doc_of_chunk
                    .get(*key as usize)
                    .copied()
                    .unwrap_or(u64::MAX),
                DocVectors::Mean | DocVectors::Lead => *key,
            };
            // usearch's inner-product distance is 1 - dot: convert back here, once.
            let similarity = 1.0 - distance;
            let entry = best.entry(doc).or_insert(f32::NEG_INFINITY);
            *entry = entry.max(similarity);
        }
        let mut out = crate::fusion::sorted(best.into_iter().collect());
        out.truncate(limit);
        Ok(out)
    }
}
