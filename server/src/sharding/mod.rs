//! Serving a corpus split into document shards (`stillweb-indexer build --shards N`): the
//! internal protocol ([`protocol`]), its shard side ([`serve`]), and the coordinator that serves
//! the public API over the shards' replicas ([`coordinator`], [`replicas`]).

pub mod coordinator;
pub mod protocol;
pub mod replicas;
pub mod serve;

pub use coordinator::Coordinator;
