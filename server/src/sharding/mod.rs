//! Serving a corpus split into document shards (`stillweb-indexer build --shards N`): the
//! internal protocol ([`protocol`]), its shard side ([`serve`]), and what a coordinator needs to
//! serve the public API over the shards' replicas: the set's discovery ([`coordinator`]) and
//! each shard's replicas ([`replicas`]), which [`crate::corpus`] makes the corpus's parts.

pub mod coordinator;
pub mod protocol;
pub mod replicas;
pub mod serve;
