//! Searching an index's vectors: the chunk vectors and the document graph, memory-mapped.

use std::path::Path;

use crate::IndexError;
use crate::chunk_vectors::ChunkVectors;
use crate::dense::{DENSE_DIR, DOC_GRAPH, DenseManifest, DocVectors, graph_error, new_graph};

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
        let vectors = ChunkVectors::open(
            &dir,
            manifest.chunk_precision,
            manifest.dimension,
            manifest.chunk_vectors,
        )?;
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
                &dir.join(manifest.chunk_precision.file_name()),
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
    /// from the mapped chunk vectors (a graph lookup copies the vector under a lock: profiled at
    /// four times the cost).
    pub fn chunk_similarity(&self, query: &[f32], id: u64) -> f32 {
        self.vectors.dot(query, id)
    }

    /// Chunk `id`'s vector as stored (decoded).
    pub(crate) fn chunk_vector(&self, id: u64) -> Vec<f32> {
        let mut row = vec![0f32; self.vectors.dimension];
        self.vectors.read_row(id, &mut row);
        row
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
        let matches = self
            .graph
            .search(query, self.oversample(limit))
            .map_err(|e| graph_error(Path::new(DOC_GRAPH), e))?;
        Ok(self.best_docs(&matches, limit))
    }

    /// The `limit` documents of `allowed` (ordinals, ascending) nearest to `query`: the graph
    /// is searched with the filter as its predicate, so the search goes on past the pages the
    /// filter drops instead of returning fewer than `limit`, and the pages it finds are scored
    /// as [`DenseIndex::rank_exactly`] scores them (the graph's own copy of a vector is coarser),
    /// so a filter ranks its pages alike whether it has few (an exact scan) or many.
    pub fn search_docs_among(
        &self,
        query: &[f32],
        limit: usize,
        allowed: &[u64],
    ) -> Result<Vec<(u64, f32)>, IndexError> {
        let words = allowed.last().map_or(0, |&last| last as usize / 64 + 1);
        let mut bits = vec![0u64; words];
        for &doc in allowed {
            bits[doc as usize / 64] |= 1 << (doc % 64);
        }
        let holds = |key: u64| {
            let doc = self.doc_of(key) as usize;
            bits.get(doc / 64)
                .is_some_and(|w| w & (1 << (doc % 64)) != 0)
        };
        let matches = self
            .graph
            .filtered_search(query, self.oversample(limit), holds)
            .map_err(|e| graph_error(Path::new(DOC_GRAPH), e))?;
        let mut docs: Vec<u64> = matches.keys.iter().map(|&k| self.doc_of(k)).collect();
        docs.sort_unstable();
        docs.dedup();
        let ranges = docs.into_iter().map(|doc| (doc, self.chunks_of(doc)));
        self.rank_exactly(query, ranges, limit)
    }

    /// The chunk ids of document `doc` (consecutive, in document order).
    fn chunks_of(&self, doc: u64) -> std::ops::Range<u64> {
        let start = self.doc_of_chunk.partition_point(|&d| d < doc);
        let end = self.doc_of_chunk.partition_point(|&d| d <= doc);
        start as u64..end as u64
    }

    /// Graph nodes to ask for `limit` documents: a best-chunk graph returns chunks, so three
    /// times as many (with the i8 graph, 2× lost 0.001 SciFact Recall@100 and 4× costs more CPU
    /// for none).
    fn oversample(&self, limit: usize) -> usize {
        match self.manifest.doc_vectors {
            DocVectors::BestChunk => limit * 3,
            DocVectors::Mean | DocVectors::Lead => limit,
        }
        .max(1)
    }

    /// The document graph node `key` stands for.
    fn doc_of(&self, key: u64) -> u64 {
        match self.manifest.doc_vectors {
            DocVectors::BestChunk => self
                .doc_of_chunk
                .get(key as usize)
                .copied()
                .unwrap_or(u64::MAX),
            DocVectors::Mean | DocVectors::Lead => key,
        }
    }

    /// The best `limit` documents of a graph search's matches, each by its best node.
    fn best_docs(&self, matches: &usearch::ffi::Matches, limit: usize) -> Vec<(u64, f32)> {
        let mut best: std::collections::HashMap<u64, f32> = std::collections::HashMap::new();
        for (key, distance) in matches.keys.iter().zip(&matches.distances) {
            let doc = self.doc_of(*key);
            // usearch's inner-product distance is 1 - dot: convert back here, once.
            let similarity = 1.0 - distance;
            let entry = best.entry(doc).or_insert(f32::NEG_INFINITY);
            *entry = entry.max(similarity);
        }
        let mut out = crate::fusion::sorted(best.into_iter().collect());
        out.truncate(limit);
        out
    }
}
