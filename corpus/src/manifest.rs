//! Corpus manifests (`corpus-manifests/*.toml`): which files make up a corpus, in which format,
//! with optional checksums and expected counts so that a build is reproducible and verifiable.
//!
//! ```toml
//! name = "samples"
//! as_of = "2025-12-31"                   # optional: the collection's frozen clock, which relative
//!                                        # date filters ("past week") count back from; default:
//!                                        # its newest document's date
//! [[source]]
//! format = "wikipedia-xml"               # or fineweb-parquet, jsonl, beir
//! path = "../shared/data/enwiki/*.bz2"   # a file or a glob, relative to the manifest's directory
//! sha256 = "..."                         # optional: the file's sha256, or for a glob the sha256 of
//!                                        # its "<sha256>  <file name>\n" lines sorted by name
//! expected_documents = 106               # optional: documents the source must yield
//! ```

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{CorpusError, SourceFormat};

/// A parsed, validated corpus manifest.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CorpusManifest {
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// The collection's frozen clock (an ISO 8601 date or date-time): relative date filters
    /// count back from it, never from the wall clock. Default: the newest document's date.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub as_of: Option<String>,
    #[serde(rename = "source")]
    pub sources: Vec<SourceSpec>,
    /// Directory that relative source paths are resolved against.
    #[serde(skip)]
    pub base_dir: PathBuf,
}

/// One `[[source]]` entry.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceSpec {
    /// Name used in reports and generated URLs; defaults to the format and position (for `beir`,
    /// the dataset's directory name).
    pub name: Option<String>,
    pub format: SourceFormat,
    pub path: String,
    pub sha256: Option<String>,
    pub expected_documents: Option<u64>,
    pub license: Option<String>,
    /// Date for documents that carry none (default [`NO_DATE`]).
    pub default_date: Option<String>,
}

/// The date a document that carries none gets unless its source names another
/// (`default_date`): readers that show a year (Serper Scholar) treat it as no date.
pub const NO_DATE: &str = "1970-01-01";

impl CorpusManifest {
    /// Reads and validates a manifest file.
    pub fn load(path: &Path) -> Result<Self, CorpusError> {
        let text = std::fs::read_to_string(path).map_err(|e| CorpusError::io(path, e))?;
        let invalid = |message: String| CorpusError::Manifest {
            path: path.to_path_buf(),
            message,
        };
        let mut manifest: CorpusManifest =
            toml::from_str(&text).map_err(|e| invalid(e.to_string()))?;
        if manifest.name.trim().is_empty() {
            return Err(invalid("`name` is empty".into()));
        }
        if manifest.sources.is_empty() {
            return Err(invalid("no [[source]] entries".into()));
        }
        if let Some(as_of) = &manifest.as_of
            && let Err(e) = crate::date::parse_instant(as_of)
        {
            return Err(invalid(format!("`as_of`: {e}")));
        }
        for (i, source) in manifest.sources.iter().enumerate() {
            if let Some(hash) = &source.sha256
                && (hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()))
            {
                return Err(invalid(format!(
                    "source #{} has a sha256 that is not 64 hex digits",
                    i + 1
                )));
            }
        }
        manifest.base_dir = path
            .parent()
            .map(Path::to_path_buf)
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or_else(|| PathBuf::from("."));
        let names: Vec<String> = (0..manifest.sources.len())
            .map(|i| manifest.source_name(i))
            .collect();
        for (i, name) in names.iter().enumerate() {
            if names[..i].contains(name) {
                return Err(invalid(format!(
                    "two sources are named `{name}`; give them distinct `name`s"
                )));
            }
        }
        Ok(manifest)
    }

    /// The source's name as used in reports and generated URLs.
    pub fn source_name(&self, index: usize) -> String {
        let source = &self.sources[index];
        if let Some(name) = source.name.as_ref().filter(|n| !n.trim().is_empty()) {
            return name.clone();
        }
        if source.format == SourceFormat::Beir
            && let Some(dir) = Path::new(&source.path).parent().and_then(Path::file_name)
        {
            return dir.to_string_lossy().into_owned();
        }
        format!("{}-{}", source.format, index + 1)
    }

    /// The files of a source, sorted by path. A glob that matches nothing is an error.
    pub fn resolve(&self, index: usize) -> Result<Vec<PathBuf>, CorpusError> {
        let source = &self.sources[index];
        let pattern = self.base_dir.join(&source.path);
        let pattern_str = pattern.to_string_lossy().into_owned();
        let no_files = || CorpusError::NoFiles {
            source_index: index + 1,
            pattern: pattern_str.clone(),
        };
        let mut files: Vec<PathBuf> = if source.path.contains(['*', '?', '[']) {
            glob::glob(&pattern_str)
                .map_err(|e| CorpusError::Manifest {
                    path: self.base_dir.clone(),
                    message: format!("source #{} has an invalid glob: {e}", index + 1),
                })?
                .filter_map(Result::ok)
                .filter(|p| p.is_file())
                .collect()
        } else if pattern.is_file() {
            vec![pattern.clone()]
        } else {
            Vec::new()
        };
        files.sort();
        if files.is_empty() {
            return Err(no_files());
        }
        Ok(files)
    }
}

/// Hex sha256 of a file's bytes.
pub fn sha256_file(path: &Path) -> Result<String, CorpusError> {
    let mut file = std::fs::File::open(path).map_err(|e| CorpusError::io(path, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file.read(&mut buf).map_err(|e| CorpusError::io(path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex::encode(hasher.finalize()))
}

/// The checksum of a multi-file source: sha256 of `"<sha256>  <file name>\n"` lines sorted by file
/// name (what `sha256sum` prints, run in the files' directory). A single file's checksum is its own
/// sha256.
pub fn source_digest(files: &[(String, String)]) -> String {
    if let [(_, hash)] = files {
        return hash.clone();
    }
    let mut lines: Vec<String> = files
        .iter()
        .map(|(name, hash)| format!("{hash}  {name}\n"))
        .collect();
    lines.sort_by(|a, b| a[66..].cmp(&b[66..]));
    hex::encode(Sha256::digest(lines.concat().as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).expect("write");
        path
    }

    #[test]
    fn loads_and_resolves_relative_globs() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("data")).expect("mkdir");
        write(&dir.path().join("data"), "b.jsonl", "{}");
        write(&dir.path().join("data"), "a.jsonl", "{}");
        let path = write(
            dir.path(),
            "m.toml",
            "name = \"t\"\n[[source]]\nformat = \"jsonl\"\npath = \"data/*.jsonl\"\n",
        );
        let manifest = CorpusManifest::load(&path).expect("load");
        let files = manifest.resolve(0).expect("resolve");
        let names: Vec<_> = files
            .iter()
            .map(|f| f.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        assert_eq!(
            names,
            [Some("a.jsonl".to_string()), Some("b.jsonl".to_string())]
        );
        assert_eq!(manifest.source_name(0), "jsonl-1");
    }

    #[test]
    fn errors_name_the_problem() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bad_format = write(
            dir.path(),
            "a.toml",
            "name = \"t\"\n[[source]]\nformat = \"pdf\"\npath = \"x\"\n",
        );
        let err = CorpusManifest::load(&bad_format)
            .expect_err("unknown format")
            .to_string();
        assert!(
            err.contains("unknown variant `pdf`") && err.contains("a.toml"),
            "{err}"
        );

        let no_match = write(
            dir.path(),
            "b.toml",
            "name = \"t\"\n[[source]]\nformat = \"jsonl\"\npath = \"nothing/*.jsonl\"\n",
        );
        let err = CorpusManifest::load(&no_match)
            .expect("load")
            .resolve(0)
            .expect_err("no files")
            .to_string();
        assert!(err.contains("matches no file"), "{err}");

        let bad_hash = write(
            dir.path(),
            "c.toml",
            "name = \"t\"\n[[source]]\nformat = \"jsonl\"\npath = \"x\"\nsha256 = \"abc\"\n",
        );
        assert!(
            CorpusManifest::load(&bad_hash)
                .expect_err("hash")
                .to_string()
                .contains("64 hex digits")
        );
    }

    #[test]
    fn digest_of_one_file_is_its_hash_and_of_many_is_order_independent() {
        let a = ("a".to_string(), "1".repeat(64));
        let b = ("b".to_string(), "2".repeat(64));
        assert_eq!(source_digest(std::slice::from_ref(&a)), a.1);
        assert_eq!(
            source_digest(&[a.clone(), b.clone()]),
            source_digest(&[b, a])
        );
    }
}
