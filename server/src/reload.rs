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

use crate::config::Source;
use crate::corpus::Corpus;
use crate::error::{ApiError, ErrorCode};
use crate::state::AppState;

/// How long a coordinator's reload waits for every shard to have a replica that answers.
const SHARD_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// What a reload did.
#[derive(Debug, Clone, Serialize)]
pub struct Reloaded {
    /// The build serving now.
    pub build_id: String,
    /// The build that served before.
    pub previous: String,
    /// Swaps since the server started.
    pub swaps: u64,
    pub elapsed_ms: u64,
}

/// Re-opens what the server serves and swaps it in, or explains why not.
pub async fn reload(state: &AppState) -> Result<Reloaded, ApiError> {
    let _one_at_a_time = state.reloading.lock().await;
    let started = Instant::now();
    let current = state.corpus();
    let previous = current.build_id().to_string();
    let refused = |why: String| {
        warn!(still_serving = %previous, "reload refused: {why}");
        ApiError::new(
            ErrorCode::ReloadRefused,
            format!("reload refused, still serving build {previous}: {why}"),
        )
    };
    let config = (*state.config).clone();
    let (embedder, reranker) = (current.embedder().cloned(), current.reranker().cloned());
    let parts = current.parts.clone();
    let opened = tokio::task::spawn_blocking(move || match &config.source {
        Source::Index { dir, overlays } => {
            crate::open_local_corpus(&config, dir, overlays, embedder, reranker)
        }
        // A coordinator follows its shards: it swaps only when every replica of every shard
        // reports one build (each shard server keeps answering the build before its last
        // reload meanwhile, so no search mixes two).
        Source::Shards { shards, .. } => {
            let set = crate::sharding::coordinator::discover(shards, SHARD_WAIT)?;
            Ok(Corpus::new(parts, set, embedder, reranker)?)
        }
    })
    .await
    .map_err(ApiError::internal)?;
    let corpus = opened.map_err(|e| refused(format!("{e:#}")))?;
    let build_id = corpus.build_id().to_string();
    state.swap(corpus);
    state.metrics.swapped();
    let (swaps, elapsed_ms) = (state.metrics.swaps(), started.elapsed().as_millis() as u64);
    info!(%build_id, %previous, swaps, elapsed_ms, "reloaded");
    Ok(Reloaded {
        build_id,
        previous,
        swaps,
        elapsed_ms,
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
