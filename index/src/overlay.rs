//! Overlays: documents added to a built index without rebuilding it.
//!
//! Research groups regenerate the fabricated part of a corpus for every dataset version; at
//! full size a rebuild is days of embedding. An overlay is an index of only the new documents,
//! built against the index it extends (`stillweb-indexer build --overlay-of BASE [--overlay-of
//! OVERLAY…]`) and served with it as one corpus (`stillweb-server --index BASE --overlay DIR…`).
//! What keeps the ranking that of one build of everything:
//!
//! - **Ordinals continue.** An overlay's documents take the global ordinals after its layers
//!   below (base, then the overlays before it, in order), the ordinals a single build of the
//!   concatenated manifests would give them, so ties break the same way.
//! - **No URL twice.** A URL a layer below already holds is refused at build time, with the list
//!   of such URLs: a page is in exactly one layer, so a visit finds one page, and no shadowing
//!   rule can make scores depend on layering.
//! - **Corpus-wide BM25.** Served together, every layer scores with the statistics of all of them
//!   ([`open_layers`]), as the parts of a shard set do.
//! - **One model, one chunker.** An overlay is refused over layers embedded by another model or
//!   chunked differently.
//!
//! An overlay's manifest names the build ids of the layers below; a server checks that it is
//! given exactly those, in that order.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::bm25_stats::Bm25Stats;
use crate::{IndexError, SearchIndex};

/// Where an overlay sits, as its manifest records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OverlayManifest {
    /// The build ids of the layers below: the base index, then the overlays before this one.
    pub of: Vec<String>,
    /// The global ordinal of this overlay's first document: the documents of the layers below.
    pub first_ordinal: u64,
}

/// Most conflicting URLs an error lists (the count is always given).
const URLS_LISTED: usize = 20;

fn refuse(path: &Path, reason: String) -> IndexError {
    IndexError::Overlay {
        path: path.to_path_buf(),
        reason,
    }
}

/// The layers an overlay is built on, opened and checked to belong together.
#[derive(Debug)]
pub(crate) struct Below {
    layers: Vec<SearchIndex>,
}

impl Below {
    /// Opens `paths` (the base, then its overlays in order) and checks their chain, and that
    /// they are the shard being built (`shard`), or whole indexes when it is `None`.
    pub(crate) fn open(
        paths: &[PathBuf],
        shard: Option<crate::shard::ShardOf>,
    ) -> Result<Below, IndexError> {
        let layers = paths
            .iter()
            .map(|p| SearchIndex::open(p))
            .collect::<Result<Vec<_>, _>>()?;
        check_chain(&layers)?;
        let base = &layers[0];
        let layout = base.manifest().shard.as_ref().map(|s| (s.index, s.count));
        if layout != shard.map(|s| (s.index, s.count)) {
            return Err(refuse(
                base.dir(),
                format!(
                    "it is {}, and this build makes {}; build a shard set's overlay with the same --shards, over the set's directory",
                    describe(layout),
                    describe(shard.map(|s| (s.index, s.count)))
                ),
            ));
        }
        Ok(Below { layers })
    }

    /// Opens layers given to a server (whole indexes, or one shard of each set) and checks them.
    fn open_served(paths: &[PathBuf]) -> Result<Vec<SearchIndex>, IndexError> {
        let layers = paths
            .iter()
            .map(|p| SearchIndex::open(p))
            .collect::<Result<Vec<_>, _>>()?;
        check_chain(&layers)?;
        Ok(layers)
    }

    /// Refuses to add to the layers with another chunker, or another embedder (`dense`: the
    /// model id and dimension the new documents are embedded with, `None` without vectors).
    pub(crate) fn check_compatible(
        &self,
        chunker: &stillweb_corpus::chunk::ChunkerConfig,
        dense: Option<(&str, usize)>,
    ) -> Result<(), IndexError> {
        let base = &self.layers[0];
        let m = base.manifest();
        if &m.chunker != chunker {
            return Err(refuse(
                base.dir(),
                format!(
                    "it was chunked with {:?}, this build with {chunker:?}; build the overlay with the base's chunker",
                    m.chunker
                ),
            ));
        }
        match (&m.dense, dense) {
            (None, None) => Ok(()),
            (Some(d), Some((model, dimension)))
                if d.model_id == model && d.dimension == dimension =>
            {
                Ok(())
            }
            (Some(d), Some((model, dimension))) => Err(refuse(
                base.dir(),
                format!(
                    "its vectors come from {} ({}-d), this build embeds with {model} ({dimension}-d); load the base's model",
                    d.model_id, d.dimension
                ),
            )),
            (Some(d), None) => Err(refuse(
                base.dir(),
                format!(
                    "it has vectors ({}); an overlay without them (--no-dense) would leave its pages out of dense retrieval",
                    d.model_id
                ),
            )),
            (None, Some(_)) => Err(refuse(
                base.dir(),
                "it was built without vectors (--no-dense); build the overlay with --no-dense too"
                    .into(),
            )),
        }
    }

    /// Whether a layer below holds the page with normalised URL `url_key`.
    pub(crate) fn holds(&self, url_key: &str) -> Result<bool, IndexError> {
        for layer in &self.layers {
            if layer.doc_by_url(url_key)?.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The build id of an overlay built on these layers whose own inputs give id `own`.
    pub(crate) fn build_id(&self, own: &str) -> String {
        use sha2::{Digest, Sha256};
        let below = self.manifest().of.join(" ");
        let digest = Sha256::digest(format!("{own}\noverlay of {below}\n").as_bytes());
        hex::encode(digest)[..16].to_string()
    }

    /// The manifest entry of an overlay built on these layers.
    pub(crate) fn manifest(&self) -> OverlayManifest {
        OverlayManifest {
            of: self
                .layers
                .iter()
                .map(|l| l.manifest().build_id.clone())
                .collect(),
            first_ordinal: self.layers.iter().map(corpus_documents).sum(),
        }
    }

    /// The error for URLs the layers below already hold, listing them.
    pub(crate) fn conflict(&self, urls: &[String]) -> IndexError {
        let listed: Vec<&str> = urls.iter().take(URLS_LISTED).map(String::as_str).collect();
        let more = urls.len().saturating_sub(URLS_LISTED);
        refuse(
            self.layers[0].dir(),
            format!(
                "{} of the new pages have URLs that this index (or an overlay given after it) already holds; an overlay adds pages and never replaces one (remove them from the overlay's sources, or rebuild the base without them): {}{}",
                urls.len(),
                listed.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            ),
        )
    }
}

/// Documents of the corpus a layer belongs to: its own, or its whole set's for a shard.
fn corpus_documents(layer: &SearchIndex) -> u64 {
    let m = layer.manifest();
    m.shard.as_ref().map_or(m.documents, |s| s.corpus_documents)
}

fn describe(layout: Option<(u32, u32)>) -> String {
    match layout {
        Some((index, count)) => format!("shard {index} of {count}"),
        None => "a whole index".into(),
    }
}

/// Checks that each layer after the first is an overlay of exactly the layers before it.
fn check_chain(layers: &[SearchIndex]) -> Result<(), IndexError> {
    let Some(base) = layers.first() else {
        return Err(IndexError::Missing {
            path: PathBuf::new(),
            reason: "no base index given".into(),
        });
    };
    let layout = |l: &SearchIndex| l.manifest().shard.as_ref().map(|s| (s.index, s.count));
    if let Some(o) = &base.manifest().overlay {
        return Err(refuse(
            base.dir(),
            format!(
                "it is itself an overlay (of {}); give the base index first, then its overlays in order",
                o.of.join(", ")
            ),
        ));
    }
    for (i, layer) in layers.iter().enumerate().skip(1) {
        if layout(layer) != layout(base) {
            return Err(refuse(
                layer.dir(),
                format!(
                    "it is {} but the base is {}; a shard set's overlay is a set with the same number of shards, each shard served over the base's shard of the same number",
                    describe(layout(layer)),
                    describe(layout(base))
                ),
            ));
        }
        let below: Vec<String> = layers[..i]
            .iter()
            .map(|l| l.manifest().build_id.clone())
            .collect();
        let Some(overlay) = &layer.manifest().overlay else {
            return Err(refuse(
                layer.dir(),
                "it is not an overlay (built without --overlay-of); only overlays can follow the base"
                    .into(),
            ));
        };
        let first: u64 = layers[..i].iter().map(corpus_documents).sum();
        if overlay.of == below && overlay.first_ordinal != first {
            return Err(refuse(
                layer.dir(),
                format!(
                    "its ordinals start at {}, but the layers below hold {first} documents; the overlay is damaged, rebuild it",
                    overlay.first_ordinal
                ),
            ));
        }
        if overlay.of != below {
            return Err(refuse(
                layer.dir(),
                format!(
                    "it was built as an overlay of [{}] but is given over [{}]; give the layers it was built on, in the order it was built on them",
                    overlay.of.join(", "),
                    below.join(", ")
                ),
            ));
        }
    }
    Ok(())
}

/// Opens the index at `base` and its overlays `overlays` (in order) as the parts of one corpus:
/// checks that each overlay was built on exactly the layers before it, and gives every layer the
/// BM25 statistics of all of them.
pub fn open_layers(base: &Path, overlays: &[PathBuf]) -> Result<Vec<SearchIndex>, IndexError> {
    if overlays.is_empty() {
        let layers = vec![SearchIndex::open(base)?];
        check_chain(&layers)?;
        return Ok(layers);
    }
    let mut paths = vec![base.to_path_buf()];
    paths.extend(overlays.iter().cloned());
    let layers = Below::open_served(&paths)?;
    if layers[0].manifest().shard.is_some() {
        // A shard sees only its part of each layer: the top overlay's finalize wrote the
        // corpus's statistics for every layer below it, and its own.
        let top = layers.len() - 1;
        let below: Vec<Bm25Stats> = (0..top)
            .map(|k| read_below_stats(layers[top].dir(), k))
            .collect::<Result<_, _>>()?;
        return Ok(layers
            .into_iter()
            .enumerate()
            .map(|(k, layer)| match below.get(k) {
                Some(stats) => layer.with_bm25_stats(stats.clone()),
                None => layer,
            })
            .collect());
    }
    let own: Vec<Bm25Stats> = layers
        .iter()
        .map(|l| Bm25Stats::of(&[l]))
        .collect::<Result<_, _>>()?;
    let total = Bm25Stats::sum(&own);
    Ok(layers
        .into_iter()
        .zip(&own)
        .map(|(layer, own)| layer.with_bm25_stats(total.restricted_to(own)))
        .collect())
}

/// The build id of a corpus served as `layers` (base first): the base's id, then each
/// overlay's, joined by `+`.
pub fn layered_build_id(layers: &[&SearchIndex]) -> String {
    layers
        .iter()
        .map(|l| l.manifest().build_id.as_str())
        .collect::<Vec<_>>()
        .join("+")
}

/// The file in a finalized overlay shard with the corpus's statistics for its layer `k` below.
fn below_stats_file(k: usize) -> String {
    format!("bm25_stats.below-{k}.json")
}

fn read_below_stats(dir: &Path, k: usize) -> Result<Bm25Stats, IndexError> {
    let path = dir.join(below_stats_file(k));
    let bytes = std::fs::read(&path).map_err(|e| IndexError::io(&path, e))?;
    serde_json::from_slice(&bytes).map_err(|e| IndexError::Damaged {
        path: dir.to_path_buf(),
        reason: format!("{}: {e}", below_stats_file(k)),
    })
}

/// For the finalize of an overlay set built on `of` (build ids): the statistics of the layers
/// below, shard by shard (`[k][i]`: layer `k`'s shard `i`, each its own), opened from the sets
/// at `sets`, which must be those builds with `count` shards each.
pub(crate) fn below_shard_stats(
    sets: &[PathBuf],
    of: &[String],
    count: u32,
) -> Result<Vec<Vec<Bm25Stats>>, IndexError> {
    if sets.len() != of.len() {
        return Err(refuse(
            sets.first().map_or(Path::new(""), |p| p.as_path()),
            format!(
                "the overlay set was built on {} layers ({}), {} are given",
                of.len(),
                of.join(", "),
                sets.len()
            ),
        ));
    }
    sets.iter()
        .zip(of)
        .map(|(set, id)| {
            (0..count)
                .map(|i| {
                    let dir = crate::shard::shard_dir(set, i);
                    let index = SearchIndex::open_unfinalized(&dir)?;
                    let m = index.manifest();
                    let layout = m.shard.as_ref().map(|s| (s.index, s.count));
                    if &m.build_id != id || layout != Some((i, count)) {
                        return Err(refuse(
                            &dir,
                            format!(
                                "it is {} of build {}; the overlay set was built on shard {i} of {count} of build {id}",
                                describe(layout),
                                m.build_id
                            ),
                        ));
                    }
                    Bm25Stats::of(&[&index])
                })
                .collect()
        })
        .collect()
}

/// Writes into overlay shard `dir` the corpus's statistics for each layer below it.
pub(crate) fn write_below_stats(dir: &Path, below: &[Bm25Stats]) -> Result<(), IndexError> {
    for (k, stats) in below.iter().enumerate() {
        let path = dir.join(below_stats_file(k));
        let text = serde_json::to_vec(stats).map_err(|e| IndexError::Damaged {
            path: dir.to_path_buf(),
            reason: e.to_string(),
        })?;
        std::fs::write(&path, text).map_err(|e| IndexError::io(&path, e))?;
    }
    Ok(())
}
