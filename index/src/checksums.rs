//! `checksums.sha256`: the sha256 of every file of a finished index, one `HEX  PATH` line each
//! (the format of `sha256sum`, so `sha256sum -c checksums.sha256` checks an index by hand too).
//! The build writes it just before the index is published; the server checks it before it
//! reports ready, so that an index damaged on disk (a flipped byte inside a term file passes
//! every structural check and then panics inside a search) is refused at start with the file's
//! name, instead of answering.

use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use crate::IndexError;

/// The file's name inside the index directory.
pub const CHECKSUMS_FILE: &str = "checksums.sha256";

/// What [`verify`] checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verified {
    /// Every listed file is present with the recorded digest.
    All {
        files: usize,
        bytes: u64,
        elapsed: Duration,
    },
    /// The index predates checksums: nothing could be checked.
    NoChecksums,
}

/// Files of the index that the checksums cover: every regular file below `dir` but the
/// checksums themselves and lock files (tantivy creates those when a reader opens), as paths
/// relative to `dir` with `/` separators, sorted.
fn covered_files(dir: &Path) -> Result<Vec<String>, IndexError> {
    let mut out = Vec::new();
    let mut pending = vec![PathBuf::new()];
    while let Some(relative) = pending.pop() {
        let full = dir.join(&relative);
        let entries = std::fs::read_dir(&full).map_err(|e| IndexError::io(&full, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| IndexError::io(&full, e))?;
            let path = relative.join(entry.file_name());
            let kind = entry.file_type().map_err(|e| IndexError::io(&full, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if kind.is_dir() {
                pending.push(path);
            } else if kind.is_file() && name != CHECKSUMS_FILE && !name.ends_with(".lock") {
                out.push(path.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// A file's sha256 (hex) and its length.
type FileDigest = (String, u64);

/// The sha256 of one file, and its length.
fn digest(path: &Path) -> Result<FileDigest, IndexError> {
    let mut file = std::fs::File::open(path).map_err(|e| IndexError::io(path, e))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut bytes = 0u64;
    loop {
        let n = file.read(&mut buf).map_err(|e| IndexError::io(path, e))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        bytes += n as u64;
    }
    Ok((hex::encode(hasher.finalize()), bytes))
}

/// Digests of `files` (relative to `dir`), computed on every core, in the order given.
fn digests(dir: &Path, files: &[String]) -> Result<Vec<FileDigest>, IndexError> {
    let threads = std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .min(files.len().max(1));
    let next = AtomicUsize::new(0);
    let mut found: Vec<(usize, Result<FileDigest, IndexError>)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                scope.spawn(|| {
                    let mut done = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(file) = files.get(i) else { break };
                        done.push((i, digest(&dir.join(file))));
                    }
                    done
                })
            })
            .collect();
        workers
            .into_iter()
            .flat_map(|w| w.join().unwrap_or_default())
            .collect()
    });
    if found.len() != files.len() {
        return Err(IndexError::io(
            dir,
            std::io::Error::other("a checksum thread panicked"),
        ));
    }
    found.sort_by_key(|(i, _)| *i);
    found.into_iter().map(|(_, digest)| digest).collect()
}

/// Writes `checksums.sha256` for the index being finished in `dir`.
pub(crate) fn write(dir: &Path) -> Result<(), IndexError> {
    let files = covered_files(dir)?;
    let mut text = String::new();
    for (file, (hex, _)) in files.iter().zip(digests(dir, &files)?) {
        text.push_str(&format!("{hex}  {file}\n"));
    }
    let path = dir.join(CHECKSUMS_FILE);
    std::fs::write(&path, text).map_err(|e| IndexError::io(&path, e))
}

/// Checks every file `checksums.sha256` lists against its recorded digest (and that each is
/// there). A mismatch is [`IndexError::Damaged`] naming the file.
pub fn verify(dir: &Path) -> Result<Verified, IndexError> {
    let started = Instant::now();
    let path = dir.join(CHECKSUMS_FILE);
    let file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Verified::NoChecksums),
        Err(e) => return Err(IndexError::io(&path, e)),
    };
    let damaged = |reason: String| IndexError::Damaged {
        path: dir.to_path_buf(),
        reason,
    };
    let mut expected: Vec<(String, String)> = Vec::new();
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| IndexError::io(&path, e))?;
        let Some((hex, name)) = line.split_once("  ") else {
            return Err(damaged(format!(
                "{CHECKSUMS_FILE} line {} is not `SHA256  PATH`",
                n + 1
            )));
        };
        if name.split('/').any(|part| part == ".." || part.is_empty()) {
            return Err(damaged(format!(
                "{CHECKSUMS_FILE} line {} names a path outside the index",
                n + 1
            )));
        }
        expected.push((hex.to_string(), name.to_string()));
    }
    if expected.is_empty() {
        return Err(damaged(format!("{CHECKSUMS_FILE} lists no files")));
    }
    let names: Vec<String> = expected.iter().map(|(_, name)| name.clone()).collect();
    for name in &names {
        if !dir.join(name).is_file() {
            return Err(damaged(format!("{name} is missing")));
        }
    }
    let mut bytes = 0;
    for ((want, name), (got, size)) in expected.iter().zip(digests(dir, &names)?) {
        if *want != got {
            return Err(damaged(format!(
                "{name} does not match its checksum in {CHECKSUMS_FILE} (the file changed on disk)"
            )));
        }
        bytes += size;
    }
    Ok(Verified::All {
        files: names.len(),
        bytes,
        elapsed: started.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_byte_or_a_missing_file_is_found_and_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("docs")).expect("mkdir");
        std::fs::write(dir.path().join("docs/a.term"), b"terms terms").expect("write");
        std::fs::write(dir.path().join("manifest.json"), b"{}").expect("write");
        std::fs::write(dir.path().join("docs/.tantivy-meta.lock"), b"").expect("write");
        assert_eq!(verify(dir.path()).expect("none"), Verified::NoChecksums);
        write(dir.path()).expect("write");
        let listed = std::fs::read_to_string(dir.path().join(CHECKSUMS_FILE)).expect("read");
        assert_eq!(listed.lines().count(), 2, "{listed}");
        assert!(matches!(
            verify(dir.path()).expect("ok"),
            Verified::All {
                files: 2,
                bytes: 13,
                ..
            }
        ));
        // Same size, one byte changed.
        std::fs::write(dir.path().join("docs/a.term"), b"terms termz").expect("write");
        let e = verify(dir.path()).expect_err("damaged").to_string();
        assert!(e.contains("docs/a.term does not match its checksum"), "{e}");
        std::fs::remove_file(dir.path().join("docs/a.term")).expect("rm");
        let e = verify(dir.path()).expect_err("missing").to_string();
        assert!(e.contains("docs/a.term is missing"), "{e}");
    }
}
