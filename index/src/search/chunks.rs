//! Stage 2: the raw scores of every chunk of a set of candidate documents. A coordinator asks
//! each shard for the chunks of the candidates it owns; the scores are raw (BM25 of title +
//! chunk text, cosine with the query), so normalising them over the whole pool stays one pure
//! step ([`super::rank`]).

use serde::{Deserialize, Serialize};
use tantivy::DocAddress;

use super::PreparedQuery;
use crate::read::bm25_at::bm25_at;
use crate::{IndexError, SearchIndex};

/// One chunk of the pool with its raw signals (`None` where the query does not use a signal, or
/// the chunk shares no term with the query).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ChunkScore {
    /// The document's ordinal.
    pub doc: u64,
    /// The chunk's id (a document's chunks have consecutive ids).
    pub chunk: u64,
    pub bm25: Option<f32>,
    pub cosine: Option<f32>,
}

impl SearchIndex {
    /// Stage 2: every chunk of `docs` (ascending corpus ordinals; those of other shards are
    /// skipped) that has a signal, in chunk-id order. Chunk ids are this index's own.
    pub fn chunk_scores(
        &self,
        query: &PreparedQuery,
        docs: &[u64],
    ) -> Result<Vec<ChunkScore>, IndexError> {
        let (chunks, addresses): (Vec<(u64, u64)>, Vec<DocAddress>) = docs
            .iter()
            .filter_map(|&doc| Some((doc, self.global_ords.local(doc)?)))
            .flat_map(|(doc, local)| self.chunk_range(local).map(move |chunk| (doc, chunk)))
            .filter_map(|(doc, chunk)| {
                Some(((doc, chunk), *self.chunk_addresses.get(chunk as usize)?))
            })
            .unzip();
        let bm25 = if query.is_lexical() {
            let searcher = self.chunk_reader.searcher();
            bm25_at(
                &searcher,
                self.chunk_statistics(&searcher),
                self.chunk_fields.context,
                &query.terms,
                &addresses,
            )?
        } else {
            vec![None; chunks.len()]
        };
        let dense = self.dense().zip(query.vector.as_deref());
        Ok(chunks
            .into_iter()
            .zip(bm25)
            .filter_map(|((doc, chunk), bm25)| {
                let cosine = dense.map(|(index, q)| index.chunk_similarity(q, chunk));
                (bm25.is_some() || cosine.is_some()).then_some(ChunkScore {
                    doc,
                    chunk,
                    bm25,
                    cosine,
                })
            })
            .collect())
    }
}
