//! Streaming readers, one module per source format. Each reader yields [`Item`]s one at a time so
//! memory stays bounded whatever the size of the dump; a bad record becomes [`Item::Bad`] with its
//! position and the reader goes on.

mod beir;
mod fineweb;
mod jsonl;
mod title;
mod wikipedia;
pub mod wikitext;

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use crate::{CorpusError, Document, SourceFormat};

pub use title::derive_title;

/// What a reader produces for each record of a source.
#[derive(Debug)]
pub enum Item {
    Document(Document),
    /// A record that is valid but not wanted (a redirect, a talk page); counted by reason.
    Skipped(&'static str),
    /// A record that could not be read; counted, logged, and skipped.
    Bad(BadRecord),
}

/// A record that could not be read, with where it was and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRecord {
    /// Human-readable position in the file, e.g. "line 12" or "page 5 (line 3012)".
    pub position: String,
    pub reason: String,
}

/// What readers need to know about the source besides its path.
#[derive(Debug, Clone)]
pub struct SourceContext {
    /// The source's name in the manifest; used in generated URLs.
    pub name: String,
    /// Date given to documents that have none.
    pub default_date: String,
}

/// A boxed stream of items from one file.
pub type Items = Box<dyn Iterator<Item = Item> + Send>;

/// Opens one file of a source for reading.
pub fn open(
    path: &Path,
    format: SourceFormat,
    context: &SourceContext,
) -> Result<Items, CorpusError> {
    match format {
        SourceFormat::WikipediaXml => wikipedia::open(path),
        SourceFormat::FinewebParquet => fineweb::open(path, context),
        SourceFormat::Jsonl => jsonl::open(path, context),
        SourceFormat::Beir => beir::open(path, context),
    }
}

/// Files that a glob may match beside the data but that are not data themselves, with the reason.
/// Wikimedia publishes a multistream dump's index (`...-multistream-index.txt.bz2`) beside it.
pub fn companion_reason(path: &Path, format: SourceFormat) -> Option<&'static str> {
    let name = path.file_name()?.to_string_lossy();
    (format == SourceFormat::WikipediaXml && name.contains("-index") && name.contains(".txt"))
        .then_some("multistream index (companion of a dump, not a dump)")
}

/// Opens a file for buffered reading, transparently decompressing bzip2 (including the
/// concatenated streams of multistream dumps), recognised by its magic bytes.
pub(crate) fn open_text(path: &Path) -> Result<Box<dyn BufRead + Send>, CorpusError> {
    let mut file = File::open(path).map_err(|e| CorpusError::io(path, e))?;
    let mut magic = [0u8; 3];
    let n = read_prefix(&mut file, &mut magic).map_err(|e| CorpusError::io(path, e))?;
    let file = File::open(path).map_err(|e| CorpusError::io(path, e))?;
    if n == 3 && &magic == b"BZh" {
        let decoder = bzip2::read::MultiBzDecoder::new(BufReader::with_capacity(1 << 20, file));
        Ok(Box::new(BufReader::with_capacity(1 << 20, decoder)))
    } else {
        Ok(Box::new(BufReader::with_capacity(1 << 20, file)))
    }
}

fn read_prefix(file: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}

/// Reads JSON Lines: each non-empty line is deserialised as `T` and handed with its 1-based number
/// to `convert`; a line that is not UTF-8 or not valid JSON for `T` is a bad record.
pub(crate) fn json_lines<T: serde::de::DeserializeOwned>(
    path: &Path,
    mut convert: impl FnMut(usize, T) -> Item + Send + 'static,
) -> Result<Items, CorpusError> {
    let reader = open_text(path)?;
    let mut lines = reader.split(b'\n').enumerate();
    let mut done = false;
    Ok(Box::new(std::iter::from_fn(move || {
        loop {
            if done {
                return None;
            }
            let (index, line) = lines.next()?;
            let line_no = index + 1;
            let bad = |reason: String| {
                Item::Bad(BadRecord {
                    position: format!("line {line_no}"),
                    reason,
                })
            };
            let item = match line {
                Err(e) => {
                    // The rest of the file is unreadable; report once and stop.
                    done = true;
                    bad(format!("read error, rest of file skipped: {e}"))
                }
                Ok(bytes) => match std::str::from_utf8(&bytes) {
                    Err(e) => bad(format!("not UTF-8: {e}")),
                    Ok(s) if s.trim().is_empty() => continue,
                    Ok(s) => match serde_json::from_str::<T>(s.trim_end_matches('\r')) {
                        Ok(record) => convert(line_no, record),
                        Err(e) => bad(format!("invalid JSON: {e}")),
                    },
                },
            };
            return Some(item);
        }
    })))
}

/// A JSON id as text: strings as they are, numbers printed; anything else (or empty) is no id.
pub(crate) fn id_text(value: Option<serde_json::Value>) -> Option<String> {
    match value {
        Some(serde_json::Value::String(s)) if !s.is_empty() => Some(s),
        Some(serde_json::Value::Number(n)) => Some(n.to_string()),
        _ => None,
    }
}

/// `https://stillweb.invalid/{source}/{id}`: the deterministic URL of a document that has none.
pub fn generated_url(source: &str, id: &str) -> String {
    use percent_encoding::{NON_ALPHANUMERIC, utf8_percent_encode};
    format!(
        "https://stillweb.invalid/{}/{}",
        utf8_percent_encode(source, NON_ALPHANUMERIC),
        utf8_percent_encode(id, NON_ALPHANUMERIC)
    )
}

/// The record id inside a URL made by [`generated_url`] (`None` for any other URL): how results
/// that carry only URLs, such as a server's answers, map back to BEIR ids.
pub fn generated_id(url: &str) -> Option<String> {
    let rest = url.strip_prefix("https://stillweb.invalid/")?;
    let (_, id) = rest.split_once('/')?;
    percent_encoding::percent_decode_str(id)
        .decode_utf8()
        .ok()
        .map(|id| id.into_owned())
}

/// The checks every reader applies before it hands out a document. A record with a title and no
/// body is a real document (classic collections such as CACM are half such records): it is
/// indexed and searchable by its title. Only a record with neither is bad, so a reader derives a
/// title (from the text or URL) only for a record that has text.
pub(crate) fn finish(doc: Document, position: impl FnOnce() -> String) -> Item {
    if doc.text.trim().is_empty() && doc.title.trim().is_empty() {
        return Item::Bad(BadRecord {
            position: position(),
            reason: "no title and no text".to_string(),
        });
    }
    if let Err(e) = crate::url_norm::normalize_url(&doc.url) {
        return Item::Bad(BadRecord {
            position: position(),
            reason: e.to_string(),
        });
    }
    Item::Document(doc)
}

#[cfg(test)]
mod tests {
    #[test]
    fn generated_ids_read_back_from_their_urls() {
        for id in ["4983", "doc/with slash", "ünïcode", ""] {
            let url = generated_url("scifact", id);
            assert_eq!(generated_id(&url).as_deref(), Some(id), "{url}");
        }
        assert_eq!(generated_id("https://en.wikipedia.org/wiki/X"), None);
    }

    use super::*;

    fn read(format: SourceFormat, lines: &str) -> Vec<Item> {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("records.jsonl");
        std::fs::write(&path, lines).expect("write");
        let context = SourceContext {
            name: "t".into(),
            default_date: "1970-01-01".into(),
        };
        open(&path, format, &context).expect("open").collect()
    }

    /// A title with no body is a document (searchable by its title); neither is a bad record.
    #[test]
    fn title_only_records_are_documents_and_empty_ones_are_bad() {
        let beir = read(
            SourceFormat::Beir,
            "{\"_id\": \"1\", \"title\": \"Computing Machinery\", \"text\": \"\"}\n\
             {\"_id\": \"2\", \"title\": \"\", \"text\": \"  \"}\n\
             {\"_id\": \"3\", \"title\": \"Both\", \"text\": \"A body.\"}\n",
        );
        assert!(
            matches!(&beir[0], Item::Document(d) if d.title == "Computing Machinery" && d.text.is_empty())
        );
        assert!(matches!(&beir[1], Item::Bad(b) if b.reason == "no title and no text"));
        assert!(matches!(&beir[2], Item::Document(_)));

        // JSON Lines: a derived title (from text or URL) does not make an empty page a document.
        let jsonl = read(
            SourceFormat::Jsonl,
            "{\"id\": \"a\", \"title\": \"Only a title\"}\n\
             {\"id\": \"b\", \"url\": \"https://x.example/some-page\", \"text\": \"\"}\n",
        );
        assert!(matches!(&jsonl[0], Item::Document(d) if d.title == "Only a title"));
        assert!(matches!(&jsonl[1], Item::Bad(b) if b.reason == "no title and no text"));
    }
}
