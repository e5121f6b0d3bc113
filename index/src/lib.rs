//! The on-disk index and everything that reads it: building an index from a corpus manifest,
//! opening it memory-mapped, two-stage retrieval, and retrieval-quality evaluation.
//!
//! An index directory holds two tantivy indexes and a manifest:
//!
//! ```text
//! INDEX/
//!   manifest.json   format version, build id, corpus sources with checksums and counts
//!   doc_ids.bin     every document's source id by ordinal, memory-mapped (see `doc_ids`)
//!   docs/           one tantivy document per page: title, body (stored), url, host, date
//!   chunks/         one tantivy document per chunk: title + chunk text, document ordinal
//!   dense/          (indexes built with an embedder) chunk vectors and the HNSW graph's links
//!   global_ords.bin (a shard) each document's ordinal in the whole corpus
//!   bm25_stats.json (a shard) the whole corpus's BM25 statistics for the shard's terms
//! ```
//!
//! Retrieval ([`search`]) runs in two stages: BM25 and the dense document index select candidates;
//! then every chunk of those candidates is scored by BM25 and exact cosine, each document takes its
//! best chunk (MaxP), fused with its document BM25 score ([`fusion`]); an optional cross-encoder
//! reorders the leading documents' best chunks. [`revector`] changes the document-level dense
//! representation of a built index without embedding again.

// The on-disk format both directions share.
mod analyzer;
pub mod bm25_stats;
pub mod checksums;
pub mod chunk_vectors;
pub mod dense;
mod doc_ids;
mod error;
mod links;
mod manifest;
pub mod overlay;
mod schema;
pub mod shard;

// Building (writers, vectors, the graph) and reading (opening, lookups, vector search).
mod build;
mod read;

// Query time: syntax, the search stages, fusion, evaluation.
pub mod eval;
pub mod fusion;
pub mod query;
pub mod search;

pub use build::revector;

pub use build::{
    BuildOptions, BuildReport, WRITER_MEMORY_MIB, build_index, build_index_with, build_shards,
};
pub use error::IndexError;
pub use manifest::{DateReport, FORMAT_VERSION, FileReport, IndexManifest, SourceReport};
pub use query::{ParsedQuery, parse};
pub use read::{SearchIndex, StoredDoc};
pub use search::{Hit, Retriever, SearchParams, SearchResults};
