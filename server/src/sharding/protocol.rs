//! The internal protocol between a coordinator and its shard servers: JSON over HTTP/1.1 with
//! keep-alive, one `POST` per search stage, every body plain data from the index's stages
//! (ordinals are the corpus's; chunk ids are the shard's own). Documented in
//! `shard-protocol.md` beside `openapi.yaml`.

use serde::{Deserialize, Serialize};
use stillweb_index::ParsedQuery;
use stillweb_index::search::rank::Ranked;
use stillweb_index::search::{FilterPlan, PreparedQuery};

/// The build: on every response, the build that answered (the server's corpus when the request
/// started); on a coordinator's stage call, the build its answer must come from (the set's
/// build id; a shard server that swapped builds answers calls naming the build before from that
/// build and refuses any other, so that one search never mixes two builds).
pub const BUILD_HEADER: &str = "x-stillweb-build";

/// `FilterCounts` of the query's operators on the shard (only for queries with operators).
pub const FILTER_COUNTS: &str = "/shard/v1/filter-counts";
/// Stage 1: `Candidates`.
pub const CANDIDATES: &str = "/shard/v1/candidates";
/// Stage 2: the `ChunkScore`s of the given candidates the shard owns.
pub const CHUNKS: &str = "/shard/v1/chunks";
/// The reranker's passages of given chunks.
pub const PASSAGES: &str = "/shard/v1/passages";
/// The results (`Hit`s) for ranked documents the shard owns.
pub const HITS: &str = "/shard/v1/hits";
/// A page by normalised URL, for a visit (the coordinator applies the session rules).
pub const PAGE: &str = "/shard/v1/page";

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FilterCountsRequest {
    pub query: ParsedQuery,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CandidatesRequest {
    pub query: PreparedQuery,
    pub limit: usize,
    /// Decisions made on the whole corpus's filter counts.
    pub plan: Option<FilterPlan>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChunksRequest {
    pub query: PreparedQuery,
    /// Corpus ordinals, ascending.
    pub docs: Vec<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PassagesRequest {
    /// `(document ordinal, chunk id)` pairs.
    pub chunks: Vec<(u64, u64)>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HitsRequest {
    pub ranked: Vec<Ranked>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PageRequest {
    /// The normalised URL.
    pub url_key: String,
}
