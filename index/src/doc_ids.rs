//! Every document's source id by ordinal, in one memory-mapped file (`doc_ids.bin`), so a hit's id
//! is two offsets and a slice: the `doc_id` fast field it replaces decodes a zstd-compressed
//! dictionary block for every hit (creating a fresh decompression context each time), which was
//! ~16% of a top-10 BM25 search. Indexes built before this file existed still read the fast field.
//!
//! Layout, little-endian: the magic `SWDOCID1`, the document count `n` (u64), `n + 1` byte
//! offsets (u64) into the id bytes that follow, then the ids' UTF-8 bytes back to back.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use tantivy::directory::{Directory, MmapDirectory, OwnedBytes};

use crate::IndexError;

/// The file's name in the index directory.
pub(crate) const DOC_IDS: &str = "doc_ids.bin";
const MAGIC: &[u8; 8] = b"SWDOCID1";
const HEADER: usize = 16;

/// Writes `doc_ids.bin` as documents are added: the ids' bytes stream to a side file and only
/// the offsets (8 bytes a document) stay in memory until [`DocIdWriter::finish`].
pub(crate) struct DocIdWriter {
    dir: PathBuf,
    bytes_path: PathBuf,
    bytes: BufWriter<File>,
    offsets: Vec<u64>,
}

impl DocIdWriter {
    pub(crate) fn create(dir: &Path) -> Result<DocIdWriter, IndexError> {
        let bytes_path = dir.join(format!("{DOC_IDS}.bytes"));
        let file = File::create(&bytes_path).map_err(|e| IndexError::io(&bytes_path, e))?;
        Ok(DocIdWriter {
            dir: dir.to_path_buf(),
            bytes: BufWriter::with_capacity(1 << 20, file),
            bytes_path,
            offsets: vec![0],
        })
    }

    /// Appends the id of the next document (ordinal = the number pushed before it).
    pub(crate) fn push(&mut self, id: &str) -> Result<(), IndexError> {
        self.bytes
            .write_all(id.as_bytes())
            .map_err(|e| IndexError::io(&self.bytes_path, e))?;
        let last = self.offsets.last().copied().unwrap_or(0);
        self.offsets.push(last + id.len() as u64);
        Ok(())
    }

    /// Writes the header and offsets, then the ids' bytes, into `doc_ids.bin`.
    pub(crate) fn finish(self) -> Result<(), IndexError> {
        let DocIdWriter {
            dir,
            bytes_path,
            bytes,
            offsets,
        } = self;
        bytes
            .into_inner()
            .map_err(|e| IndexError::io(&bytes_path, e.into_error()))?;
        let path = dir.join(DOC_IDS);
        let io = |e| IndexError::io(&path, e);
        let mut out = BufWriter::with_capacity(1 << 20, File::create(&path).map_err(io)?);
        out.write_all(MAGIC).map_err(io)?;
        out.write_all(&(offsets.len() as u64 - 1).to_le_bytes())
            .map_err(io)?;
        for offset in &offsets {
            out.write_all(&offset.to_le_bytes()).map_err(io)?;
        }
        let mut ids = File::open(&bytes_path).map_err(|e| IndexError::io(&bytes_path, e))?;
        std::io::copy(&mut ids, &mut out).map_err(io)?;
        out.into_inner()
            .map_err(|e| io(e.into_error()))?
            .sync_all()
            .map_err(io)?;
        std::fs::remove_file(&bytes_path).map_err(|e| IndexError::io(&bytes_path, e))
    }
}

/// `doc_ids.bin`, memory-mapped.
pub(crate) struct DocIds {
    bytes: OwnedBytes,
    count: usize,
    /// Where the ids' bytes begin: after the header and the `count + 1` offsets.
    ids_start: usize,
}

impl DocIds {
    /// Maps `DIR/doc_ids.bin` and checks it holds `documents` ids; `None` where the index was
    /// built before the file existed.
    pub(crate) fn open(dir: &Path, documents: u64) -> Result<Option<DocIds>, IndexError> {
        let path = dir.join(DOC_IDS);
        if !path.is_file() {
            return Ok(None);
        }
        let damaged = |reason: String| IndexError::Damaged {
            path: path.clone(),
            reason,
        };
        let bytes = MmapDirectory::open(dir)
            .map_err(|e| damaged(e.to_string()))?
            .open_read(Path::new(DOC_IDS))
            .map_err(|e| damaged(e.to_string()))?
            .read_bytes()
            .map_err(|e| IndexError::io(&path, e))?;
        let data = bytes.as_slice();
        let word = |at| word_at(data, at);
        if data.get(..8) != Some(MAGIC.as_slice()) {
            return Err(damaged("not a stillweb document id file".into()));
        }
        let count = word(8).unwrap_or(u64::MAX);
        if count != documents {
            return Err(damaged(format!(
                "holds {count} ids, the manifest promises {documents} documents"
            )));
        }
        let count = count as usize;
        let ids_start = HEADER + (count + 1) * 8;
        let total = word(HEADER + count * 8).map(|t| t as usize);
        if word(HEADER) != Some(0)
            || total.and_then(|t| ids_start.checked_add(t)) != Some(data.len())
        {
            return Err(damaged(format!(
                "{} bytes do not match its offsets",
                data.len()
            )));
        }
        Ok(Some(DocIds {
            bytes,
            count,
            ids_start,
        }))
    }

    /// The id of document `ord`; `None` past the end or where its offsets or bytes are damaged.
    pub(crate) fn get(&self, ord: u64) -> Option<&str> {
        let ord = usize::try_from(ord).ok().filter(|&o| o < self.count)?;
        let data = self.bytes.as_slice();
        let offset = |i: usize| word_at(data, HEADER + i * 8).map(|o| o as usize);
        let (start, end) = (offset(ord)?, offset(ord + 1)?);
        std::str::from_utf8(data.get(self.ids_start + start..self.ids_start + end)?).ok()
    }
}

/// The little-endian u64 at byte `at`; `None` past the end.
fn word_at(data: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(data.get(at..at + 8)?.try_into().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(ids: &[&str]) -> tempfile::TempDir {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut writer = DocIdWriter::create(dir.path()).expect("create");
        for id in ids {
            writer.push(id).expect("push");
        }
        writer.finish().expect("finish");
        dir
    }

    #[test]
    fn ids_read_back_by_ordinal() {
        let ids = ["doc-1", "", "https://example.org/ä?q=1", "last"];
        let dir = written(&ids);
        assert!(!dir.path().join(format!("{DOC_IDS}.bytes")).exists());
        let table = DocIds::open(dir.path(), 4).expect("open").expect("present");
        for (ord, id) in ids.iter().enumerate() {
            assert_eq!(table.get(ord as u64), Some(*id));
        }
        assert_eq!(table.get(4), None);
        assert!(
            DocIds::open(tempfile::tempdir().expect("t").path(), 4)
                .expect("absent is fine")
                .is_none()
        );
    }

    #[test]
    fn a_damaged_file_is_refused_with_the_reason() {
        let dir = written(&["a", "bb"]);
        let path = dir.path().join(DOC_IDS);
        let err = |dir: &Path, n| match DocIds::open(dir, n) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("opened"),
        };
        assert!(
            err(dir.path(), 3).contains("holds 2 ids"),
            "{}",
            err(dir.path(), 3)
        );
        let mut bytes = std::fs::read(&path).expect("read");
        bytes.pop();
        std::fs::write(&path, &bytes).expect("truncate");
        assert!(err(dir.path(), 2).contains("do not match its offsets"));
        std::fs::write(&path, b"PK\x03\x04 not ours at all").expect("overwrite");
        assert!(err(dir.path(), 2).contains("not a stillweb document id file"));
    }
}
