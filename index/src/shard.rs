//! Document-sharded indexes: a corpus too big for one machine split into `N` index directories
//! (`SET/shard-0` … `SET/shard-{N-1}`) that, served together, rank exactly as its single index
//! would.
//!
//! - A document goes to the shard [`shard_of`] its normalised URL (a stable hash: duplicates of
//!   a URL meet in one shard, and a visit knows where to go).
//! - Every shard's build reads the whole manifest stream, so first-wins deduplication and each
//!   document's **global ordinal** (its position in the deduplicated stream, the tie-breaker of
//!   every ranking) are the single build's; a shard keeps its own dense local ordinals and maps
//!   them to global ones ([`GlobalOrds`], `global_ords.bin`). Everything a shard hands out
//!   (candidates, chunk scores, pages) speaks global ordinals.
//! - [`finalize`] runs once all shards exist: it sums their BM25 statistics into the corpus's
//!   and writes each shard the part it needs (`bm25_stats.json`: the totals, and the corpus's
//!   document frequency of every term the shard holds), so a shard's BM25 equals the single
//!   index's. A shard is served only once finalized.
//! - All shards of a set share one build id (the single build's inputs plus the shard count);
//!   a coordinator refuses a shard whose id differs, naming both.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tracing::info;

use crate::bm25_stats::Bm25Stats;
use crate::manifest::IndexManifest;
use crate::{IndexError, SearchIndex};

/// Each local ordinal's global ordinal, u64 little-endian, in local order (ascending).
pub(crate) const GLOBAL_ORDS_FILE: &str = "global_ords.bin";
/// The corpus-wide BM25 statistics a shard scores with, written by [`finalize`].
pub(crate) const BM25_STATS_FILE: &str = "bm25_stats.json";

/// Where one shard sits in its set, as its manifest records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardManifest {
    /// This shard's number, `0..count`.
    pub index: u32,
    /// Shards in the set.
    pub count: u32,
    /// Documents in the whole corpus (after deduplication): the sum of the shards' documents.
    pub corpus_documents: u64,
    /// Chunks in the whole corpus; known once the set is finalized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub corpus_chunks: Option<u64>,
    /// Whether [`finalize`] gave this shard the corpus's BM25 statistics.
    pub finalized: bool,
}

/// One shard of a set, as a build is asked for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardOf {
    pub index: u32,
    pub count: u32,
}

/// Which shard of `count` holds the document with normalised URL `url_key`: the first eight
/// bytes of its SHA-256, modulo `count`. Stable across builds, machines and Rust versions.
pub fn shard_of(url_key: &str, count: u32) -> u32 {
    let digest = Sha256::digest(url_key.as_bytes());
    let mut head = [0u8; 8];
    head.copy_from_slice(&digest[..8]);
    (u64::from_be_bytes(head) % u64::from(count.max(1))) as u32
}

/// The directory of shard `index` in the set at `set`.
pub fn shard_dir(set: &Path, index: u32) -> PathBuf {
    set.join(format!("shard-{index}"))
}

/// The build id of a set of `count` shards built from the inputs whose single build has id
/// `single`.
pub(crate) fn set_build_id(single: &str, count: u32) -> String {
    let digest = Sha256::digest(format!("{single}\nshards {count}\n").as_bytes());
    hex::encode(digest)[..16].to_string()
}

/// An index's local-to-global ordinal map: the identity for a whole corpus's index, an offset
/// for an overlay (its documents follow the base's), a table for a shard.
#[derive(Debug, Clone, Default)]
pub(crate) enum GlobalOrds {
    #[default]
    Identity,
    Offset(u64),
    Table(Vec<u64>),
}

impl GlobalOrds {
    pub(crate) fn write(dir: &Path, ords: &[u64]) -> Result<(), IndexError> {
        let path = dir.join(GLOBAL_ORDS_FILE);
        let bytes: Vec<u8> = ords.iter().flat_map(|o| o.to_le_bytes()).collect();
        std::fs::write(&path, bytes).map_err(|e| IndexError::io(&path, e))
    }

    /// The map of the shard at `dir` holding `documents` documents; refuses a file of another
    /// length or out of order.
    pub(crate) fn read(dir: &Path, documents: u64) -> Result<GlobalOrds, IndexError> {
        let path = dir.join(GLOBAL_ORDS_FILE);
        let bytes = std::fs::read(&path).map_err(|e| IndexError::io(&path, e))?;
        let damaged = |reason: String| IndexError::Damaged {
            path: dir.to_path_buf(),
            reason,
        };
        if bytes.len() as u64 != documents * 8 {
            return Err(damaged(format!(
                "{GLOBAL_ORDS_FILE} holds {} bytes, {documents} documents need {}",
                bytes.len(),
                documents * 8
            )));
        }
        let ords: Vec<u64> = bytes
            .chunks_exact(8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()))
            .collect();
        if ords.windows(2).any(|w| w[0] >= w[1]) {
            return Err(damaged(format!("{GLOBAL_ORDS_FILE} is not ascending")));
        }
        Ok(GlobalOrds::Table(ords))
    }

    /// The global ordinal of local ordinal `local`.
    pub(crate) fn global(&self, local: u64) -> u64 {
        match self {
            GlobalOrds::Identity => local,
            GlobalOrds::Offset(first) => first + local,
            GlobalOrds::Table(ords) => ords.get(local as usize).copied().unwrap_or(u64::MAX),
        }
    }

    /// The local ordinal of global ordinal `global`, if this index holds that document.
    pub(crate) fn local(&self, global: u64) -> Option<u64> {
        match self {
            GlobalOrds::Identity => Some(global),
            GlobalOrds::Offset(first) => global.checked_sub(*first),
            GlobalOrds::Table(ords) => ords.binary_search(&global).ok().map(|i| i as u64),
        }
    }
}

/// What [`finalize`] did.
#[derive(Debug, Clone)]
pub struct FinalizeReport {
    pub build_id: String,
    pub shards: u32,
    pub documents: u64,
    pub chunks: u64,
}

/// Gives every shard of the set at `set` the corpus's BM25 statistics, once all `shard-*`
/// directories exist and belong together (one build id, one shard count, every number present
/// once, documents adding up to the corpus's); rewrites each shard's checksums.
pub fn finalize(set: &Path) -> Result<FinalizeReport, IndexError> {
    finalize_over(set, &[])
}

/// [`finalize`] for a set that is an overlay of the sets at `below` (the base set, then its
/// overlay sets in order; empty for a set of its own): the corpus's statistics are those of all
/// the layers, and each overlay shard also gets them for the layers below it (see
/// [`crate::overlay`]).
pub fn finalize_over(set: &Path, below: &[PathBuf]) -> Result<FinalizeReport, IndexError> {
    let fail = |reason: String| IndexError::Shards {
        path: set.to_path_buf(),
        reason,
    };
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(set)
        .map_err(|e| IndexError::io(set, e))?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.is_dir()
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("shard-"))
        })
        .collect();
    dirs.sort();
    let mut shards: Vec<(IndexManifest, PathBuf)> = Vec::new();
    for dir in dirs {
        let manifest = IndexManifest::read(&dir)?;
        if manifest.shard.is_none() {
            return Err(fail(format!("{} is not a shard", dir.display())));
        }
        shards.push((manifest, dir));
    }
    let Some((first, _)) = shards.first() else {
        return Err(fail(
            "no shard-* directories; build them with `stillweb-indexer build --shards N`".into(),
        ));
    };
    let (build_id, count, corpus_documents) = {
        let s = first
            .shard
            .as_ref()
            .map_or((0, 0), |s| (s.count, s.corpus_documents));
        (first.build_id.clone(), s.0, s.1)
    };
    for (manifest, dir) in &shards {
        check_member(&build_id, count, manifest, dir).map_err(&fail)?;
    }
    shards.sort_by_key(|(m, _)| m.shard.as_ref().map_or(0, |s| s.index));
    let present: Vec<u32> = shards
        .iter()
        .filter_map(|(m, _)| m.shard.as_ref().map(|s| s.index))
        .collect();
    if present != (0..count).collect::<Vec<_>>() {
        return Err(fail(format!(
            "the set has {count} shards but holds {present:?}; build the missing ones with `--shard I`"
        )));
    }
    let documents: u64 = shards.iter().map(|(m, _)| m.documents).sum();
    if documents != corpus_documents {
        return Err(fail(format!(
            "the shards hold {documents} documents, the corpus has {corpus_documents}"
        )));
    }
    let chunks: u64 = shards.iter().map(|(m, _)| m.chunks).sum();
    // One frozen clock for the set: a shard's newest page is not the corpus's.
    let as_of = shards.iter().filter_map(|(m, _)| m.dates.as_of).max();
    let mut own = Vec::new();
    for (_, dir) in &shards {
        let index = SearchIndex::open_unfinalized(dir)?;
        own.push(Bm25Stats::of(&[&index])?);
    }
    if shards[0].0.overlay.is_some() == below.is_empty() {
        return Err(fail(if below.is_empty() {
            "it is an overlay set: finalize it with --overlay-of, naming the sets it was built on"
                .into()
        } else {
            "it is not an overlay set; finalize it without --overlay-of".into()
        }));
    }
    let of = shards[0]
        .0
        .overlay
        .as_ref()
        .map_or_else(Vec::new, |o| o.of.clone());
    let layers = crate::overlay::below_shard_stats(below, &of, count)?;
    let mut all: Vec<Bm25Stats> = layers.iter().flatten().cloned().collect();
    all.extend(own.iter().cloned());
    let corpus = Bm25Stats::sum(&all);
    for (i, ((mut manifest, dir), own)) in shards.into_iter().zip(own).enumerate() {
        let stats = corpus.restricted_to(&own);
        let for_below: Vec<Bm25Stats> = layers
            .iter()
            .map(|layer| corpus.restricted_to(&layer[i]))
            .collect();
        crate::overlay::write_below_stats(&dir, &for_below)?;
        // A new file, renamed over any earlier one: a revectored shard may share the old by a
        // hard link.
        let path = dir.join(BM25_STATS_FILE);
        let staged = dir.join(format!(".{BM25_STATS_FILE}.tmp"));
        let text = serde_json::to_vec(&stats).map_err(|e| fail(e.to_string()))?;
        std::fs::write(&staged, text).map_err(|e| IndexError::io(&staged, e))?;
        std::fs::rename(&staged, &path).map_err(|e| IndexError::io(&path, e))?;
        if let Some(shard) = &mut manifest.shard {
            shard.corpus_chunks = Some(chunks);
            shard.finalized = true;
        }
        manifest.dates.as_of = as_of;
        manifest.write(&dir)?;
        crate::checksums::write(&dir)?;
        info!(shard = %dir.display(), "shard finalized");
    }
    Ok(FinalizeReport {
        build_id,
        shards: count,
        documents,
        chunks,
    })
}

/// Refuses a shard that does not belong to the set with id `build_id` of `count` shards.
pub fn check_member(
    build_id: &str,
    count: u32,
    manifest: &IndexManifest,
    what: &Path,
) -> Result<(), String> {
    let Some(shard) = &manifest.shard else {
        return Err(format!("{} is not a shard", what.display()));
    };
    if manifest.build_id != build_id {
        return Err(format!(
            "{} is shard {} of build {}, not of this set's build {build_id}; rebuild it with the same manifest and options",
            what.display(),
            shard.index,
            manifest.build_id
        ));
    }
    if shard.count != count {
        return Err(format!(
            "{} is one of {} shards, this set has {count}",
            what.display(),
            shard.count
        ));
    }
    Ok(())
}

/// Reads a finalized shard's corpus statistics.
pub(crate) fn read_stats(dir: &Path) -> Result<Bm25Stats, IndexError> {
    let path = dir.join(BM25_STATS_FILE);
    let bytes = std::fs::read(&path).map_err(|e| IndexError::io(&path, e))?;
    serde_json::from_slice(&bytes).map_err(|e| IndexError::Damaged {
        path: dir.to_path_buf(),
        reason: format!("{BM25_STATS_FILE}: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_assignment_is_stable_and_spreads() {
        // Fixed values: a change of hash would move every document of every built set.
        // (Python: int.from_bytes(hashlib.sha256(url.encode()).digest()[:8], "big") % n.)
        assert_eq!(shard_of("https://en.wikipedia.org/wiki/Paris", 4), 1);
        assert_eq!(shard_of("https://en.wikipedia.org/wiki/Paris", 7), 6);
        assert_eq!(shard_of("https://example.org/a", 7), 3);
        let mut counts = [0u32; 3];
        for i in 0..3000 {
            counts[shard_of(&format!("https://example.org/{i}"), 3) as usize] += 1;
        }
        assert!(
            counts.iter().all(|&c| (900..1100).contains(&c)),
            "{counts:?}"
        );
        assert_eq!(shard_of("anything", 1), 0);
    }

    #[test]
    fn global_ordinals_map_both_ways() {
        let ords = GlobalOrds::Table(vec![2, 5, 9]);
        assert_eq!(ords.global(1), 5);
        assert_eq!(ords.local(9), Some(2));
        assert_eq!(ords.local(3), None);
        assert_eq!(GlobalOrds::default().local(3), Some(3));
        let overlay = GlobalOrds::Offset(100);
        assert_eq!(overlay.global(4), 104);
        assert_eq!(overlay.local(104), Some(4));
        assert_eq!(overlay.local(99), None);
    }
}
