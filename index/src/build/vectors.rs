//! Writing an index's vectors: chunk vectors streamed in chunk-id order (as f32) while the index
//! is built, then the HNSW graph over document vectors (each document's best chunk, first chunk,
//! or mean) from those full-precision vectors, kept as its links, then the chunk vectors at the
//! build's precision.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::IndexError;
use crate::chunk_vectors::{Precision, RowFile};
use crate::dense::{DENSE_DIR, DOC_GRAPH, DocVectors, GRAPH_QUANTIZATION, graph_error, new_graph};
use crate::links::LinksWriter;

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

    /// Flushes the vectors, builds the document graph from them (in segments of at most
    /// `segment_nodes` nodes) and stores them at `precision`; `chunk_counts[d]` is the number of chunks of document `d` (documents' chunks
    /// are contiguous, in document order).
    pub fn finish(
        mut self,
        chunk_counts: &[u32],
        doc_vectors: DocVectors,
        graph_threads: usize,
        segment_nodes: u64,
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
        let vectors = RowFile::open(&dir, Precision::F32, self.dimension, self.written)?;
        build_doc_graph(
            &vectors,
            &dir,
            chunk_counts,
            doc_vectors,
            graph_threads,
            segment_nodes,
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

/// (Re)builds `DIR/graph.links` from `chunks`: one node per chunk keyed by chunk id (best
/// chunk), or one per document keyed by ordinal (its first chunk, or the normalised mean of its
/// chunks: those are written to `DIR/means.PRECISION`, as the walk scores them).
///
/// The graph is built in segments of at most `segment_nodes` nodes over consecutive keys, one
/// after another ([`crate::links`]): usearch holds a segment in memory while it is built (about
/// 0.55 KiB a node), so that is the graph's share of a build's peak, whatever the corpus size.
///
/// Nodes are inserted from `threads` threads (0: one per core; HNSW insertion is most of a large
/// build), at most one per [`NODES_PER_GRAPH_THREAD`] nodes. With more than one the graph's
/// links depend on thread timing: two builds of one corpus find the same neighbours up to HNSW's
/// approximation, not byte-identical graphs. With one thread the graph is reproducible byte for
/// byte. Searching a built graph is deterministic either way.
pub(crate) fn build_doc_graph(
    chunks: &RowFile,
    dir: &Path,
    chunk_counts: &[u32],
    doc_vectors: DocVectors,
    threads: usize,
    segment_nodes: u64,
    precision: Precision,
) -> Result<(), IndexError> {
    let graph_path = dir.join(DOC_GRAPH);
    let nodes = NodeVectors::new(chunks, chunk_counts, doc_vectors, &graph_path)?;
    let segments = nodes.segments(segment_nodes.max(1));
    let threads = match threads {
        0 => std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
        n => n,
    };
    let mut links = LinksWriter::create(&graph_path, nodes.key_space(), segments.len() as u64)?;
    for (i, keys) in segments.iter().enumerate() {
        let local: Vec<u64> = nodes
            .keys_in(keys.clone())
            .map(|k| k - keys.start)
            .collect();
        let graph = build_segment(&nodes, keys.start, &local, threads, &graph_path)?;
        tracing::info!(
            segment = i + 1,
            of = segments.len(),
            nodes = local.len(),
            "document graph segment built"
        );
        links.append(&graph, &local, keys.clone())?;
        drop(graph);
        // The segment's memory goes back to the kernel before the next is built.
        stillweb_native::memory::release_free_memory();
    }
    links.finish()?;
    if doc_vectors == DocVectors::Mean {
        let mut row = vec![0f32; chunks.dimension];
        let mut bytes = Vec::new();
        let by_ordinal = (0..chunk_counts.len() as u64).map(|doc| {
            row.fill(0.0);
            if chunk_counts[doc as usize] > 0 {
                nodes.vector(doc, &mut bytes, &mut row)?;
            }
            Ok(row.clone())
        });
        crate::chunk_vectors::write_rows(
            &dir.join(crate::dense::means_file(precision)),
            precision,
            by_ordinal,
        )?;
    }
    Ok(())
}

/// The graph of one segment: the nodes `base + k` for each local key `k` of `keys`, inserted
/// from up to `threads` threads (thread `t` takes keys `t`, `t + threads`, …).
fn build_segment(
    nodes: &NodeVectors,
    base: u64,
    keys: &[u64],
    threads: usize,
    graph_path: &Path,
) -> Result<usearch::Index, IndexError> {
    let count = keys.len() as u64;
    let threads =
        threads.min(usize::try_from(count / NODES_PER_GRAPH_THREAD).unwrap_or(usize::MAX) + 1);
    let graph = new_graph(graph_path, nodes.chunks.dimension, GRAPH_QUANTIZATION)?;
    graph
        .reserve_capacity_and_threads(keys.len(), threads)
        .map_err(|e| graph_error(graph_path, e))?;
    let started = std::time::Instant::now();
    let insert_share = |first: usize| -> Result<(), IndexError> {
        let mut row = vec![0f32; nodes.chunks.dimension];
        let mut bytes = Vec::new();
        let report_every = (count / threads as u64 / 10).max(1);
        for (i, &key) in keys.iter().skip(first).step_by(threads).enumerate() {
            nodes.vector(base + key, &mut bytes, &mut row)?;
            graph
                .add(key, &row)
                .map_err(|e| graph_error(graph_path, e))?;
            if first == 0 && (i as u64 + 1).is_multiple_of(report_every) {
                tracing::info!(
                    inserted = (i as u64 + 1) * threads as u64,
                    nodes = count,
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
            w.join()
                .unwrap_or_else(|_| Err(graph_error(graph_path, "a graph builder thread panicked")))
        })
    })?;
    tracing::info!(
        nodes = count,
        threads,
        seconds = started.elapsed().as_secs_f64(),
        "document graph built"
    );
    Ok(graph)
}

/// What a graph's nodes are: their keys and the vector of each, read from the stored rows.
struct NodeVectors<'a> {
    chunks: &'a RowFile,
    doc_vectors: DocVectors,
    /// Document `d`'s chunks are `chunk_start[d]..chunk_start[d + 1]`.
    chunk_start: Vec<u64>,
}

impl<'a> NodeVectors<'a> {
    fn new(
        chunks: &'a RowFile,
        chunk_counts: &[u32],
        doc_vectors: DocVectors,
        graph_path: &Path,
    ) -> Result<Self, IndexError> {
        let mut chunk_start = Vec::with_capacity(chunk_counts.len() + 1);
        let mut next = 0u64;
        chunk_start.push(0);
        for &count in chunk_counts {
            next += u64::from(count);
            chunk_start.push(next);
        }
        if next != chunks.rows {
            return Err(graph_error(
                graph_path,
                "chunk counts disagree with the stored vectors",
            ));
        }
        Ok(NodeVectors {
            chunks,
            doc_vectors,
            chunk_start,
        })
    }

    /// Keys a node may have: chunk ids (best chunk) or document ordinals.
    fn key_space(&self) -> u64 {
        match self.doc_vectors {
            DocVectors::BestChunk => self.chunks.rows,
            DocVectors::Mean | DocVectors::Lead => self.chunk_start.len() as u64 - 1,
        }
    }

    /// The keys of `range` that are nodes: all chunks; documents with chunks (the others have
    /// no vector).
    fn keys_in(&self, range: std::ops::Range<u64>) -> impl Iterator<Item = u64> + '_ {
        range.filter(move |&k| {
            self.doc_vectors == DocVectors::BestChunk
                || self.chunk_start[k as usize + 1] > self.chunk_start[k as usize]
        })
    }

    /// Consecutive key ranges covering the key space, each with at most `limit` nodes (one
    /// empty range for an empty graph).
    fn segments(&self, limit: u64) -> Vec<std::ops::Range<u64>> {
        let mut segments = Vec::new();
        let (mut start, mut held) = (0, 0);
        for key in self.keys_in(0..self.key_space()) {
            if held == limit {
                segments.push(start..key);
                (start, held) = (key, 0);
            }
            held += 1;
        }
        segments.push(start..self.key_space());
        segments
    }

    /// Node `key`'s vector into `out` (`bytes` is scratch space).
    fn vector(&self, key: u64, bytes: &mut Vec<u8>, out: &mut [f32]) -> Result<(), IndexError> {
        match self.doc_vectors {
            DocVectors::BestChunk => self.chunks.read_row(key, bytes, out),
            DocVectors::Lead => self
                .chunks
                .read_row(self.chunk_start[key as usize], bytes, out),
            DocVectors::Mean => {
                let mut row = vec![0f32; out.len()];
                out.fill(0.0);
                for chunk in self.chunk_start[key as usize]..self.chunk_start[key as usize + 1] {
                    self.chunks.read_row(chunk, bytes, &mut row)?;
                    out.iter_mut().zip(&row).for_each(|(s, x)| *s += x);
                }
                stillweb_model_core::normalize(out);
                Ok(())
            }
        }
    }
}
