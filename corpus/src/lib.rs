//! Everything about the corpus that does not need an index or a model: the document type, corpus
//! manifests, streaming readers for each source format, URL normalisation and the sentence-pack
//! chunker.
//!
//! The crate is deliberately free of tantivy, ONNX Runtime and axum so that its tests are fast and
//! the data model can be reused by every binary.
//!
//! ```
//! use stillweb_corpus::chunk::{chunk_text, ChunkerConfig};
//! let text = "First sentence. Second sentence.";
//! let chunks = chunk_text(text, &ChunkerConfig::default());
//! assert_eq!(chunks.len(), 1);
//! assert_eq!(chunks[0].slice(text), text);
//! ```

pub mod chunk;
pub mod date;
mod document;
mod error;
pub mod ingest;
pub mod manifest;
pub mod url_norm;

pub use document::{Document, SourceFormat};
pub use error::CorpusError;
