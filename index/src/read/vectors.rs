//! Searching an index's vectors: the chunk vectors and the document graph's links, both
//! memory-mapped, the graph walked over the stored rows.

use std::path::Path;

use crate::IndexError;
use crate::chunk_vectors::ChunkVectors;
use crate::dense::{DENSE_DIR, DOC_GRAPH, DenseManifest, DocVectors, graph_error, means_file};
use crate::links::Links;

/// The dense part of an open index: the chunk vectors and the document graph, both
/// memory-mapped from the index directory.
pub struct DenseIndex {
    manifest: DenseManifest,
    vectors: ChunkVectors,
    graph: Links,
    /// A mean graph's node vectors, by document ordinal.
    means: Option<ChunkVectors>,
    /// Each document's first chunk id, then the number of chunks: document `d`'s chunks are
    /// `chunk_start[d]..chunk_start[d + 1]`.
    chunk_start: Vec<u64>,
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
        let mut chunk_start = Vec::with_capacity(chunk_counts.len() + 1);
        let mut next = 0u64;
        for &count in chunk_counts {
            chunk_start.push(next);
            next += u64::from(count);
        }
        chunk_start.push(next);
        if next != manifest.chunk_vectors {
            return Err(graph_error(
                &dir.join(manifest.chunk_precision.file_name()),
                "chunk counts disagree with the stored vectors",
            ));
        }
        let graph_path = dir.join(DOC_GRAPH);
        let graph = Links::open(&graph_path)?;
        let (keys, nodes) = match manifest.doc_vectors {
            DocVectors::BestChunk => (next, next),
            DocVectors::Mean | DocVectors::Lead => (
                chunk_counts.len() as u64,
                chunk_counts.iter().filter(|&&c| c > 0).count() as u64,
            ),
        };
        if graph.nodes() != keys || graph.linked() != nodes {
            return Err(graph_error(
                &graph_path,
                format!(
                    "{} nodes, expected {nodes} (of {} keys, expected {keys}); rebuild the index",
                    graph.linked(),
                    graph.nodes()
                ),
            ));
        }
        let segments = manifest.graph_segments(nodes);
        if graph.segments() as u64 != segments {
            return Err(graph_error(
                &graph_path,
                format!(
                    "{} graph segments, the manifest's {nodes} nodes make {segments}; rebuild the index",
                    graph.segments()
                ),
            ));
        }
        let means = match manifest.doc_vectors {
            DocVectors::Mean => Some(ChunkVectors::open_file(
                &dir.join(means_file(manifest.chunk_precision)),
                manifest.chunk_precision,
                manifest.dimension,
                keys,
            )?),
            DocVectors::BestChunk | DocVectors::Lead => None,
        };
        Ok(DenseIndex {
            manifest,
            vectors,
            graph,
            means,
            chunk_start,
        })
    }

    pub fn manifest(&self) -> &DenseManifest {
        &self.manifest
    }

    /// The segments the document graph was built in (each walked by a search).
    pub fn graph_segments(&self) -> usize {
        self.graph.segments()
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

    /// Asks for graph node `key`'s row to be brought into the caches.
    fn prefetch_node(&self, key: u64) {
        match (&self.means, self.manifest.doc_vectors) {
            (Some(means), _) => means.prefetch(key),
            (None, DocVectors::Lead) => self.vectors.prefetch(self.chunk_start[key as usize]),
            (None, _) => self.vectors.prefetch(key),
        }
    }

    /// The similarity of `query` and graph node `key`, from the stored rows.
    fn node_similarity(&self, query: &[f32], key: u64) -> f32 {
        match (&self.means, self.manifest.doc_vectors) {
            (Some(means), _) => means.dot(query, key),
            (None, DocVectors::Lead) => self.vectors.dot(query, self.chunk_start[key as usize]),
            (None, _) => self.vectors.dot(query, key),
        }
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
        let mut scored = Vec::new();
        for (doc, chunks) in docs {
            if chunks.is_empty() {
                continue;
            }
            let similarity = match self.manifest.doc_vectors {
                DocVectors::BestChunk => chunks
                    .map(|chunk| self.vectors.dot(query, chunk))
                    .fold(f32::NEG_INFINITY, f32::max),
                DocVectors::Mean | DocVectors::Lead => self.node_similarity(query, doc),
            };
            scored.push((doc, similarity));
        }
        let mut out = crate::fusion::sorted(scored);
        out.truncate(limit);
        Ok(out)
    }

    /// The `limit` documents nearest to `query` (cosine similarity), best first.
    pub fn search_docs(&self, query: &[f32], limit: usize) -> Result<Vec<(u64, f32)>, IndexError> {
        let nodes = self.walk(query, limit, |_| true);
        Ok(self.best_docs(&nodes, limit))
    }

    /// The `limit` documents of `allowed` (ordinals, ascending) nearest to `query`: the graph
    /// is walked with the filter as its predicate, so the search goes on past the pages the
    /// filter drops instead of returning fewer than `limit`, and the pages it finds are scored
    /// as [`DenseIndex::rank_exactly`] scores them (all their chunks, not only those walked),
    /// so a filter ranks its pages alike whether it has few (an exact scan) or many.
    pub fn search_docs_among(
        &self,
        query: &[f32],
        limit: usize,
        allowed: &[u64],
    ) -> Result<Vec<(u64, f32)>, IndexError> {
        // A bit per graph node (chunk, or document), so the walk's test is one lookup.
        let mut bits = vec![0u64; self.graph.nodes().div_ceil(64) as usize];
        let mut set = |key: u64| bits[key as usize / 64] |= 1 << (key % 64);
        for &doc in allowed {
            match self.manifest.doc_vectors {
                DocVectors::BestChunk => self.chunks_of(doc).for_each(&mut set),
                DocVectors::Mean | DocVectors::Lead => set(doc),
            }
        }
        let holds = |key: u64| {
            bits.get(key as usize / 64)
                .is_some_and(|w| w & (1 << (key % 64)) != 0)
        };
        let mut docs: Vec<u64> = self
            .walk(query, limit, holds)
            .iter()
            .map(|&(k, _)| self.doc_of(k))
            .collect();
        docs.sort_unstable();
        docs.dedup();
        let ranges = docs.into_iter().map(|doc| (doc, self.chunks_of(doc)));
        self.rank_exactly(query, ranges, limit)
    }

    /// The graph nodes nearest to `query` among those `allowed` passes, enough for `limit`
    /// documents.
    fn walk(&self, query: &[f32], limit: usize, allowed: impl Fn(u64) -> bool) -> Vec<(u64, f32)> {
        self.graph.search(
            self.oversample(limit),
            self.manifest.hnsw_expansion_search,
            |key| self.node_similarity(query, key),
            |key| self.prefetch_node(key),
            allowed,
        )
    }

    /// The chunk ids of document `doc` (consecutive, in document order).
    fn chunks_of(&self, doc: u64) -> std::ops::Range<u64> {
        let at = |d: u64| self.chunk_start.get(d as usize).copied().unwrap_or(0);
        at(doc)..at(doc + 1).max(at(doc))
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
            // The last document starting at or before the chunk (those before it without
            // chunks start there too).
            DocVectors::BestChunk => {
                (self.chunk_start.partition_point(|&start| start <= key) as u64).saturating_sub(1)
            }
            DocVectors::Mean | DocVectors::Lead => key,
        }
    }

    /// The best `limit` documents of a walk's nodes, each by its best node.
    fn best_docs(&self, nodes: &[(u64, f32)], limit: usize) -> Vec<(u64, f32)> {
        let mut best: std::collections::HashMap<u64, f32> = std::collections::HashMap::new();
        for &(key, similarity) in nodes {
            let entry = best.entry(self.doc_of(key)).or_insert(f32::NEG_INFINITY);
            *entry = entry.max(similarity);
        }
        let mut out = crate::fusion::sorted(best.into_iter().collect());
        out.truncate(limit);
        out
    }
}
