//! Swapping the build a server serves without dropping a request (`POST /admin/reload`, and
//! `SIGHUP`).
//!
//! A reload opens the index and overlay paths the server was started with, resolved afresh (a
//! symlink flipped to a new build directory is how a new build is deployed), checks every file
//! against its checksums, checks that the server's models fit it, and runs one search on it;
//! only then does the new corpus replace the old one, in one atomic swap. A request takes the
//! corpus once when it starts ([`AppState::corpus`]) and finishes on it, so requests in flight
//! finish on the build they started on and new ones see the new build; each response names its
//! build, and the result cache is keyed by build. A reload that fails at any step leaves the old
//! build serving and answers `reload_refused` with the reason. Reloads run one at a time.
//!
//! A coordinator's reload asks its shards again and swaps to their build only when every
//! replica of every shard reports the same one. Its stage calls name the build they expect
//! ([`crate::sharding::protocol::BUILD_HEADER`]); a shard server answers calls naming the build
//! before its last reload from that build, so the deploy order — reload every shard server,
//! then the coordinators — fails no search and mixes no builds.

use std::time::Instant;

use serde::Serialize;
use tracing::{info, warn};

use crate::config::{CollectionSource, Config, Source};
use crate::corpus::Corpus;
use crate::error::{ApiError, ErrorCode};
use crate::state::AppState;

/// How long a coordinator's reload waits for every shard to have a replica that answers.
const SHARD_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// What a reload did.
#[derive(Debug, Clone, Serialize)]
pub struct Reloaded {
    /// The build the default collection serves now.
    pub build_id: String,
    /// The build it served before.
    pub previous: String,
    /// Every collection's builds, default first.
    pub collections: Vec<Swapped>,
    /// Swaps since the server started.
    pub swaps: u64,
    pub elapsed_ms: u64,
}

/// One collection's swap.
#[derive(Debug, Clone, Serialize)]
pub struct Swapped {
    pub collection: String,
    pub build_id: String,
    pub previous: String,
}

/// Re-opens what the server serves (every collection) and swaps it in, or explains why not:
/// all collections swap, or none does.
pub async fn reload(state: &AppState) -> Result<Reloaded, ApiError> {
    let _one_at_a_time = state.reloading.lock().await;
    let started = Instant::now();
    let current = state.corpora();
    let previous: Vec<String> = current.iter().map(|c| c.build_id().to_string()).collect();
    let still = previous.join(", ");
    let refused = |why: String| {
        warn!(still_serving = %still, "reload refused: {why}");
        ApiError::new(
            ErrorCode::ReloadRefused,
            format!("reload refused, still serving build {still}: {why}"),
        )
    };
    let config = state.config.clone();
    let reopened = current.clone();
    let opened = tokio::task::spawn_blocking(move || -> anyhow::Result<Vec<Corpus>> {
        let mut corpora = Vec::new();
        for (source, corpus) in config.collections.iter().zip(&reopened) {
            corpora.push(reopen(&config, source, corpus).map_err(|e| {
                if corpus.is_named() {
                    e.context(format!("collection {}", corpus.collection()))
                } else {
                    e
                }
            })?);
        }
        Ok(corpora)
    })
    .await
    .map_err(ApiError::internal)?;
    let corpora = opened.map_err(|e| refused(format!("{e:#}")))?;
    let mut collections = Vec::new();
    for (at, (corpus, previous)) in corpora.into_iter().zip(previous).enumerate() {
        collections.push(Swapped {
            collection: corpus.collection().to_string(),
            build_id: corpus.build_id().to_string(),
            previous,
        });
        state.swap(at, corpus);
    }
    state.metrics.swapped();
    let (swaps, elapsed_ms) = (state.metrics.swaps(), started.elapsed().as_millis() as u64);
    let default = collections[0].clone();
    info!(build_id = %default.build_id, previous = %default.previous, swaps, elapsed_ms, "reloaded");
    Ok(Reloaded {
        build_id: default.build_id,
        previous: default.previous,
        collections,
        swaps,
        elapsed_ms,
    })
}

/// `current`'s collection opened afresh from `source`, searched as before.
fn reopen(config: &Config, source: &CollectionSource, current: &Corpus) -> anyhow::Result<Corpus> {
    Ok(match &source.source {
        Source::Index { dir, overlays } => {
            crate::open_local_corpus(config, dir, overlays, current.setup())?
        }
        // A coordinator follows its shards: it swaps only when every replica of every shard
        // reports one build (each shard server keeps answering the build before its last
        // reload meanwhile, so no search mixes two).
        Source::Shards { shards, .. } => {
            let set = crate::sharding::coordinator::discover(shards, SHARD_WAIT)?;
            Corpus::new(current.parts.clone(), set, current.setup())?
        }
    })
}

/// Reloads on every `SIGHUP`, logging the outcome.
pub fn on_sighup(state: AppState) {
    #[cfg(unix)]
    tokio::spawn(async move {
        let mut hangups =
            match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
                Ok(s) => s,
                Err(e) => {
                    warn!(error = %e, "cannot listen for SIGHUP; reload with POST /admin/reload");
                    return;
                }
            };
        while hangups.recv().await.is_some() {
            info!("SIGHUP: reloading");
            // Refusals are logged by `reload`.
            let _ = reload(&state).await;
        }
    });
    #[cfg(not(unix))]
    let _ = state;
}
