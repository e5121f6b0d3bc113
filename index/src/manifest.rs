//! `manifest.json`: what an index was built from and how, checked by every reader at open.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use stillweb_corpus::SourceFormat;
use stillweb_corpus::chunk::ChunkerConfig;

use crate::IndexError;

/// Bumped whenever the on-disk layout or its meaning changes.
pub const FORMAT_VERSION: u32 = 5;

pub const MANIFEST_FILE: &str = "manifest.json";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct IndexManifest {
    pub format_version: u32,
    /// Deterministic id of this build: same sources, parameters and format → same id.
    pub build_id: String,
    pub stillweb_version: String,
    /// Seconds since the Unix epoch when the build finished.
    pub created_unix: u64,
    pub corpus_name: String,
    pub sources: Vec<SourceReport>,
    pub chunker: ChunkerConfig,
    pub analyzer: String,
    pub documents: u64,
    pub chunks: u64,
    pub duplicates: u64,
    pub bad_records: u64,
    /// Its documents' dates: how many could be read, their span, and the frozen clock.
    pub dates: DateReport,
    /// Present when the index has dense vectors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dense: Option<crate::dense::DenseManifest>,
    /// Present when the index is one shard of a set (see `crate::shard`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<crate::shard::ShardManifest>,
    /// Present when the index is an overlay of other layers (see `crate::overlay`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlay: Option<crate::overlay::OverlayManifest>,
    /// The preset the index was built for (`build --preset`: its embedder made the vectors);
    /// a server started without `--preset` serves it. Not part of the build id: it names a
    /// configuration, and the vectors' model is recorded in `dense`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preset: Option<String>,
}

/// The documents' dates (see `stillweb_corpus::date`), as the build report prints them.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DateReport {
    /// Documents whose date was read (they match date filters).
    pub dated: u64,
    /// Documents without one, or with one that could not be read: no bounded date range
    /// matches them.
    pub undated: u64,
    /// The oldest and newest dated documents' instants (seconds since the Unix epoch, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oldest: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub newest: Option<i64>,
    /// The collection's frozen clock (the corpus manifest's `as_of`, else the newest
    /// document's date; for a shard or an overlay, its whole corpus's): relative date filters
    /// ("past week") count back from it, never from the wall clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<i64>,
}

impl DateReport {
    /// Counts a document dated `date` (`None`: undated).
    pub fn count(&mut self, date: Option<i64>) {
        let Some(t) = date else {
            self.undated += 1;
            return;
        };
        self.dated += 1;
        self.oldest = Some(self.oldest.map_or(t, |o| o.min(t)));
        self.newest = Some(self.newest.map_or(t, |n| n.max(t)));
    }
}

/// Per-source counts, as the build report prints them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct SourceReport {
    pub name: String,
    pub format: SourceFormat,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub license: Option<String>,
    /// sha256 of the file, or of all files' `sha256sum` lines (see `stillweb_corpus::manifest`).
    pub sha256: String,
    pub files: Vec<FileReport>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct FileReport {
    pub path: String,
    pub sha256: String,
    pub bytes: u64,
    /// Documents read from the file (before duplicate removal).
    pub documents: u64,
    /// Documents dropped because an earlier one had the same normalised URL.
    pub duplicates: u64,
    pub bad_records: u64,
    /// Records skipped on purpose, by reason (redirects, non-article namespaces).
    pub skipped: BTreeMap<String, u64>,
    /// Set when the file is not data (e.g. a multistream index beside its dump).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignored: Option<String>,
}

impl SourceReport {
    pub fn documents(&self) -> u64 {
        self.files.iter().map(|f| f.documents).sum()
    }

    pub fn bad_records(&self) -> u64 {
        self.files.iter().map(|f| f.bad_records).sum()
    }
}

impl IndexManifest {
    /// The build id: a digest of what determines the index's content.
    pub fn compute_build_id(
        sources: &[SourceReport],
        chunker: &ChunkerConfig,
        analyzer: &str,
        dense: Option<&crate::dense::DenseManifest>,
        shards: Option<u32>,
    ) -> String {
        let mut h = Sha256::new();
        h.update(format!(
            "format {FORMAT_VERSION}\nchunker {}\nanalyzer {analyzer}\n",
            chunker.max_chars
        ));
        if let Some(d) = dense {
            // The engine and a precision other than f32 count only once recorded, so older
            // indexes keep their ids.
            match &d.engine {
                Some(engine) => h.update(format!(
                    "dense {} {:?} {engine}\n",
                    d.model_id, d.doc_vectors
                )),
                None => h.update(format!("dense {} {:?}\n", d.model_id, d.doc_vectors)),
            }
            if d.chunk_precision != crate::chunk_vectors::Precision::F32 {
                h.update(format!("chunk vectors {}\n", d.chunk_precision));
            }
            if let Some(limit) = d.graph_segment_nodes {
                h.update(format!("graph segments of {limit}\n"));
            }
        }
        for s in sources {
            h.update(format!("source {} {} {}\n", s.name, s.format, s.sha256));
        }
        let single = hex::encode(h.finalize())[..16].to_string();
        match shards {
            Some(count) => crate::shard::set_build_id(&single, count),
            None => single,
        }
    }

    pub fn read(dir: &Path) -> Result<IndexManifest, IndexError> {
        let path = dir.join(MANIFEST_FILE);
        let text = std::fs::read_to_string(&path).map_err(|e| IndexError::Missing {
            path: dir.to_path_buf(),
            reason: format!("cannot read {}: {e}", path.display()),
        })?;
        let value: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| IndexError::Damaged {
                path: dir.to_path_buf(),
                reason: format!("{MANIFEST_FILE} is not valid JSON: {e}"),
            })?;
        let found = value
            .get("format_version")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0);
        if found != u64::from(FORMAT_VERSION) {
            return Err(IndexError::FormatVersion {
                path: dir.to_path_buf(),
                found: u32::try_from(found).unwrap_or(u32::MAX),
                expected: FORMAT_VERSION,
            });
        }
        serde_json::from_value(value).map_err(|e| IndexError::Damaged {
            path: dir.to_path_buf(),
            reason: format!("{MANIFEST_FILE}: {e}"),
        })
    }

    pub fn write(&self, dir: &Path) -> Result<(), IndexError> {
        let path = dir.join(MANIFEST_FILE);
        let text = serde_json::to_string_pretty(self).map_err(|e| IndexError::Damaged {
            path: dir.to_path_buf(),
            reason: e.to_string(),
        })?;
        std::fs::write(&path, text + "\n").map_err(|e| IndexError::io(&path, e))
    }
}
