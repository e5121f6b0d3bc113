//! Dense vectors of an index: every chunk's embedding (stored row by row in chunk-id order, so
//! stage 2 can score the chunks of its candidates exactly) and an HNSW graph (usearch) over
//! document vectors for stage 1.
//!
//! How a document is represented is a build parameter ([`DocVectors`]); `BENCHMARKS.md` has the
//! measurement behind the default.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
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
    /// Vectors are unit length; similarity is their dot product.
    pub metric: String,
    pub quantization: String,
    pub doc_vectors: DocVectors,
    pub chunk_vectors: u64,
    pub hnsw_connectivity: usize,
    pub hnsw_expansion_add: usize,
    pub hnsw_expansion_search: usize,
}

fn graph_options(dimension: usize) -> IndexOptions {
    IndexOptions {
        dimensions: dimension,
        metric: MetricKind::IP,
        quantization: ScalarKind::F32,
        connectivity: 16,
        expansion_add: 128,
        expansion_search: 128,
        multi: false,
    }
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
        build_doc_graph(&dir, self.dimension, chunk_counts, doc_vectors)?;
        Ok(self.written)
    }
}

/// (Re)builds `DIR/docs.usearch` from `DIR/chunks.f32`: one node per chunk keyed by chunk id
/// (best chunk), or one per document keyed by ordinal (its first chunk, or the normalised mean of
/// its chunks).
pub fn build_doc_graph(
    dir: &Path,
    dimension: usize,
    chunk_counts: &[u32],
    doc_vectors: DocVectors,
) -> Result<(), IndexError> {
    let vectors_path = dir.join(CHUNK_VECTORS);
    let graph_path = dir.join(DOC_GRAPH);
    let graph =
        usearch::Index::new(&graph_options(dimension)).map_err(|e| graph_error(&graph_path, e))?;
    let chunks: u64 = chunk_counts.iter().map(|&c| u64::from(c)).sum();
    let capacity = match doc_vectors {
        DocVectors::BestChunk => chunks,
        DocVectors::Mean | DocVectors::Lead => chunk_counts.len() as u64,
    };
    graph
        .reserve(usize::try_from(capacity).unwrap_or(usize::MAX))
        .map_err(|e| graph_error(&graph_path, e))?;
    let file = File::open(&vectors_path).map_err(|e| IndexError::io(&vectors_path, e))?;
    let mut reader = BufReader::with_capacity(1 << 20, file);
    let mut row = vec![0f32; dimension];
    let mut bytes = vec![0u8; dimension * 4];
    let mut chunk_id = 0u64;
    for (doc, &count) in chunk_counts.iter().enumerate() {
        let mut sum = vec![0f32; dimension];
        for i in 0..count {
            reader
                .read_exact(&mut bytes)
                .map_err(|e| IndexError::io(&vectors_path, e))?;
            for (x, b) in row.iter_mut().zip(bytes.chunks_exact(4)) {
                *x = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            }
            match doc_vectors {
                DocVectors::BestChunk => graph
                    .add(chunk_id, &row)
                    .map_err(|e| graph_error(&graph_path, e))?,
                DocVectors::Lead if i == 0 => graph
                    .add(doc as u64, &row)
                    .map_err(|e| graph_error(&graph_path, e))?,
                DocVectors::Lead => {}
                DocVectors::Mean => sum.iter_mut().zip(&row).for_each(|(s, x)| *s += x),
            }
            chunk_id += 1;
        }
        if doc_vectors == DocVectors::Mean && count > 0 {
            stillweb_models::normalize(&mut sum);
            graph
                .add(doc as u64, &sum)
                .map_err(|e| graph_error(&graph_path, e))?;
        }
    }
    graph
        .save(&graph_path.to_string_lossy())
        .map_err(|e| graph_error(&graph_path, e))
}

/// The dense part of an open index.
pub struct DenseIndex {
    manifest: DenseManifest,
    dimension: usize,
    /// All chunk vectors, row-major.
    vectors: Vec<f32>,
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
        let path = dir.join(CHUNK_VECTORS);
        let bytes = std::fs::read(&path).map_err(|e| IndexError::io(&path, e))?;
        let dimension = manifest.dimension;
        let expected = manifest.chunk_vectors as usize * dimension * 4;
        if bytes.len() != expected {
            return Err(graph_error(
                &path,
                format!("{} bytes, expected {expected}", bytes.len()),
            ));
        }
        let vectors: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let graph_path = dir.join(DOC_GRAPH);
        let graph = usearch::Index::new(&graph_options(dimension))
            .map_err(|e| graph_error(&graph_path, e))?;
        graph
            .load(&graph_path.to_string_lossy())
            .map_err(|e| graph_error(&graph_path, e))?;
        graph.change_expansion_search(manifest.hnsw_expansion_search);
        let mut doc_of_chunk = Vec::with_capacity(manifest.chunk_vectors as usize);
        for (doc, &count) in chunk_counts.iter().enumerate() {
            doc_of_chunk.extend(std::iter::repeat_n(doc as u64, count as usize));
        }
        if doc_of_chunk.len() as u64 != manifest.chunk_vectors {
            return Err(graph_error(
                &path,
                "chunk counts disagree with the stored vectors",
            ));
        }
        Ok(DenseIndex {
            manifest,
            dimension,
            vectors,
            graph,
            doc_of_chunk,
        })
    }

    pub fn manifest(&self) -> &DenseManifest {
        &self.manifest
    }

    /// The stored vector of chunk `id`.
    pub fn chunk_vector(&self, id: u64) -> &[f32] {
        let start = id as usize * self.dimension;
        &self.vectors[start..start + self.dimension]
    }

    /// The `limit` documents nearest to `query` (cosine similarity), best first.
    pub fn search_docs(&self, query: &[f32], limit: usize) -> Result<Vec<(u64, f32)>, IndexError> {
        let oversample = match self.manifest.doc_vectors {
            DocVectors::BestChunk => limit * 4,
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
