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
    /// Opens `paths` (the base, then its overlays in order) and checks their chain.
    pub(crate) fn open(paths: &[PathBuf]) -> Result<Below, IndexError> {
        let layers = paths
            .iter()
            .map(|p| SearchIndex::open(p))
            .collect::<Result<Vec<_>, _>>()?;
        check_chain(&layers)?;
        Ok(Below { layers })
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
            first_ordinal: self.layers.iter().map(|l| l.manifest().documents).sum(),
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

/// Checks that each layer after the first is an overlay of exactly the layers before it.
fn check_chain(layers: &[SearchIndex]) -> Result<(), IndexError> {
    let Some(base) = layers.first() else {
        return Err(IndexError::Missing {
            path: PathBuf::new(),
            reason: "no base index given".into(),
        });
    };
    if base.manifest().shard.is_some() {
        return Err(refuse(
            base.dir(),
            "it is one shard of a set; overlays of a shard set are not supported yet (overlay the single index, or rebuild the set)".into(),
        ));
    }
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
        let first: u64 = layers[..i].iter().map(|l| l.manifest().documents).sum();
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
        return Ok(vec![SearchIndex::open(base)?]);
    }
    let mut paths = vec![base.to_path_buf()];
    paths.extend(overlays.iter().cloned());
    let layers = Below::open(&paths)?.layers;
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
