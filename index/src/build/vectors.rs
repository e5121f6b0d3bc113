//! Writing an index's vectors: chunk vectors streamed in chunk-id order (as f32) while the index
//! is built, then the HNSW graph over document vectors (each document's best chunk, first chunk,
//! or mean) from those full-precision vectors, kept as its links, then the chunk vectors at the
//! build's precision.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::IndexError;
use crate::chunk_vectors::{ChunkVectors, Precision};
use crate::dense::{DENSE_DIR, DOC_GRAPH, DocVectors, GRAPH_QUANTIZATION, graph_error, new_graph};

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
        let path = dense.join(Precision::F32.file_name());
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

    /// Flushes the vectors, builds the document graph from them and stores them at
    /// `precision`; `chunk_counts[d]` is the number of chunks of document `d` (documents' chunks
    /// are contiguous, in document order).
    pub fn finish(
        mut self,
        chunk_counts: &[u32],
        doc_vectors: DocVectors,
        graph_threads: usize,
        precision: Precision,
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
        let vectors = ChunkVectors::open(&dir, Precision::F32, self.dimension, self.written)?;
        build_doc_graph(
            &vectors,
            &dir,
            chunk_counts,
            doc_vectors,
            graph_threads,
            precision,
        )?;
        if precision != Precision::F32 {
            vectors.write_as(&dir, precision)?;
            drop(vectors);
            std::fs::remove_file(&self.path).map_err(|e| IndexError::io(&self.path, e))?;
        }
        Ok(self.written)
    }
}

/// Nodes each graph-building thread is given at least. Many threads inserting into a graph of a
/// few hundred nodes link it poorly (a 100-node shard built from 8 threads missed up to 3 of its
/// 20 nearest documents), and one thread builds such a graph in milliseconds.
const NODES_PER_GRAPH_THREAD: u64 = 10_000;

/// (Re)builds `DIR/graph.links` from `chunks` (decoded rows): one node per chunk keyed by chunk
/// id (best chunk), or one per document keyed by ordinal (its first chunk, or the normalised mean
/// of its chunks: those are written to `DIR/means.PRECISION`, as the walk scores them).
///
/// Nodes are inserted from `threads` threads (0: one per core; HNSW insertion is most of a large
/// build), at most one per [`NODES_PER_GRAPH_THREAD`] nodes. With more than one the graph's
/// links depend on thread timing: two builds of one corpus find the same neighbours up to HNSW's
/// approximation, not byte-identical graphs. With one thread the graph is reproducible byte for
/// byte. Searching a built graph is deterministic either way.
pub(crate) fn build_doc_graph(
    chunks: &ChunkVectors,
    dir: &Path,
    chunk_counts: &[u32],
    doc_vectors: DocVectors,
    threads: usize,
    precision: Precision,
) -> Result<(), IndexError> {
    let graph_path = dir.join(DOC_GRAPH);
    let dimension = chunks.dimension;
    if chunk_counts.iter().map(|&c| u64::from(c)).sum::<u64>() != chunks.rows {
        return Err(graph_error(
            &graph_path,
            "chunk counts disagree with the stored vectors",
        ));
    }
    let doc_rows: Vec<f32> = match doc_vectors {
        DocVectors::BestChunk => Vec::new(),
        DocVectors::Mean | DocVectors::Lead => document_rows(chunks, chunk_counts, doc_vectors),
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
    }
    .min(usize::try_from(nodes / NODES_PER_GRAPH_THREAD).unwrap_or(usize::MAX) + 1);
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
    let (keys, key_space) = match doc_vectors {
        DocVectors::BestChunk => ((0..nodes).collect::<Vec<u64>>(), nodes),
        DocVectors::Mean | DocVectors::Lead => (doc_keys, chunk_counts.len() as u64),
    };
    crate::links::write(&graph, &keys, key_space, &graph_path)?;
    if doc_vectors == DocVectors::Mean {
        let mut rows = doc_rows.chunks_exact(dimension.max(1));
        let by_ordinal = chunk_counts.iter().map(|&count| {
            (count > 0)
                .then(|| rows.next().map(<[f32]>::to_vec))
                .flatten()
                .unwrap_or_else(|| vec![0f32; dimension])
        });
        crate::chunk_vectors::write_rows(
            &dir.join(crate::dense::means_file(precision)),
            precision,
            by_ordinal,
        )?;
    }
    Ok(())
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
