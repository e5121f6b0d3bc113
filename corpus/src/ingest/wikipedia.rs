//! MediaWiki pages-articles XML dumps: `.xml` or `.xml.bz2`, single- or multistream (a multistream
//! dump is a concatenation of bzip2 streams, which the decoder reads as one), export schemas 0.9
//! and 0.10.
//!
//! The stream is cut into `<page>` elements by scanning lines (dumps put `<page>` and `</page>` on
//! lines of their own, and `<` inside text is always escaped), and each page is parsed by itself
//! with quick-xml. A malformed page is therefore one bad record and the reader resynchronises at
//! the next `<page>`, instead of one broken tag ending the whole dump.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use quick_xml::Reader;
use quick_xml::events::Event;

use super::wikitext::wikitext_to_text;
use super::{BadRecord, Item, Items, finish, open_text};
use crate::{CorpusError, Document};

/// A page larger than this is reported as bad instead of being buffered.
const MAX_PAGE_BYTES: usize = 64 << 20;

pub(super) fn open(path: &Path) -> Result<Items, CorpusError> {
    let mut reader = open_text(path)?;
    let head = reader.fill_buf().map_err(|e| CorpusError::Format {
        path: path.to_path_buf(),
        format: "wikipedia-xml",
        message: format!("cannot decompress or read the start of the file: {e}"),
    })?;
    let head = String::from_utf8_lossy(&head[..head.len().min(4096)]).to_string();
    if !head.contains("<mediawiki") {
        return Err(CorpusError::Format {
            path: path.to_path_buf(),
            format: "wikipedia-xml",
            message: "no <mediawiki> root element at the start; expected a pages-articles dump"
                .into(),
        });
    }
    Ok(Box::new(Pages {
        path: path.to_path_buf(),
        reader,
        line_no: 0,
        page_no: 0,
        namespaces: HashMap::new(),
        pending: None,
        done: false,
    }))
}

struct Pages {
    path: PathBuf,
    reader: Box<dyn BufRead + Send>,
    line_no: usize,
    page_no: usize,
    /// Namespace prefixes from `<siteinfo>`, for dumps whose pages lack `<ns>`.
    namespaces: HashMap<String, i64>,
    /// A page whose `<page>` line was read while reporting the page before it.
    pending: Option<(String, usize)>,
    done: bool,
}

impl std::fmt::Debug for Pages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pages")
            .field("path", &self.path)
            .field("line_no", &self.line_no)
            .finish()
    }
}

enum Line {
    Eof,
    Text(String),
}

impl Pages {
    fn read_line(&mut self) -> Result<Line, std::io::Error> {
        let mut buf = Vec::new();
        let n = self.reader.read_until(b'\n', &mut buf)?;
        if n == 0 {
            return Ok(Line::Eof);
        }
        self.line_no += 1;
        Ok(Line::Text(String::from_utf8_lossy(&buf).into_owned()))
    }

    fn bad(&self, position: String, reason: impl Into<String>) -> Item {
        Item::Bad(BadRecord {
            position,
            reason: reason.into(),
        })
    }

    fn read_siteinfo(&mut self, first: String) -> Result<(), std::io::Error> {
        let mut xml = first;
        while !xml.contains("</siteinfo>") {
            match self.read_line()? {
                Line::Eof => break,
                Line::Text(line) => xml.push_str(&line),
            }
        }
        self.namespaces = parse_namespaces(&xml);
        Ok(())
    }
}

impl Iterator for Pages {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        let mut page: Option<(String, usize)> = self.pending.take();
        loop {
            if self.done {
                return None;
            }
            let line = match self.read_line() {
                Ok(Line::Text(line)) => line,
                Ok(Line::Eof) => {
                    self.done = true;
                    return page.map(|(_, start)| {
                        self.bad(
                            format!("page {} (line {start})", self.page_no),
                            "truncated: the file ends inside this page",
                        )
                    });
                }
                Err(e) => {
                    self.done = true;
                    return Some(self.bad(
                        format!("after line {}", self.line_no),
                        format!("unreadable data, rest of file skipped: {e}"),
                    ));
                }
            };
            let trimmed = line.trim_start();
            if trimmed.starts_with("<siteinfo") && page.is_none() {
                if let Err(e) = self.read_siteinfo(line) {
                    self.done = true;
                    return Some(self.bad(
                        format!("line {}", self.line_no),
                        format!("unreadable siteinfo: {e}"),
                    ));
                }
                continue;
            }
            if trimmed.starts_with("<page>") || trimmed.starts_with("<page ") {
                self.page_no += 1;
                let new_page = (line, self.line_no);
                if let Some((_, start)) = page {
                    // The previous page never closed: it is bad; the new one is read next time.
                    self.pending = Some(new_page);
                    return Some(self.bad(
                        format!("page {} (line {start})", self.page_no - 1),
                        "no </page> before the next <page>",
                    ));
                }
                page = Some(new_page);
                continue;
            }
            let Some((xml, start)) = page.as_mut() else {
                continue;
            };
            xml.push_str(&line);
            if xml.len() > MAX_PAGE_BYTES {
                // Dropping the buffer skips the rest of this page: lines outside a page are ignored.
                return Some(self.bad(
                    format!("page {} (line {start})", self.page_no),
                    format!("page larger than {} MiB, skipped", MAX_PAGE_BYTES >> 20),
                ));
            }
            if trimmed.starts_with("</page>") {
                let (xml, start) = page.take()?;
                let position = format!("page {} (line {start})", self.page_no);
                return Some(match parse_page(&xml, &self.namespaces) {
                    Ok(Some(doc)) => finish(doc, || position),
                    Ok(None) => Item::Skipped(skip_reason(&xml, &self.namespaces)),
                    Err(reason) => Item::Bad(BadRecord { position, reason }),
                });
            }
        }
    }
}

/// Which skip a page that parsed to `None` was.
fn skip_reason(xml: &str, namespaces: &HashMap<String, i64>) -> &'static str {
    match parse_fields(xml) {
        Ok(fields) if fields.redirect => "redirect",
        Ok(fields) if namespace(&fields, namespaces) != 0 => "non-article namespace",
        _ => "skipped",
    }
}

#[derive(Default)]
struct PageFields {
    title: String,
    ns: Option<i64>,
    id: String,
    redirect: bool,
    timestamp: String,
    text: String,
}

fn namespace(fields: &PageFields, namespaces: &HashMap<String, i64>) -> i64 {
    fields.ns.unwrap_or_else(|| {
        fields
            .title
            .split_once(':')
            .and_then(|(prefix, _)| namespaces.get(prefix).copied())
            .unwrap_or(0)
    })
}

/// Parses one `<page>` element: `Ok(None)` for redirects and non-article pages.
fn parse_page(xml: &str, namespaces: &HashMap<String, i64>) -> Result<Option<Document>, String> {
    let fields = parse_fields(xml)?;
    if fields.redirect || namespace(&fields, namespaces) != 0 {
        return Ok(None);
    }
    if fields.title.trim().is_empty() {
        return Err("page has no <title>".into());
    }
    if fields
        .text
        .trim_start()
        .to_ascii_lowercase()
        .starts_with("#redirect")
    {
        return Ok(None);
    }
    let title = fields.title.trim().to_string();
    Ok(Some(Document {
        id: fields.id,
        url: wikipedia_url(&title),
        text: wikitext_to_text(&fields.text),
        date: fields.timestamp,
        title,
    }))
}

fn parse_fields(xml: &str) -> Result<PageFields, String> {
    let mut reader = Reader::from_str(xml);
    reader.config_mut().check_end_names = true;
    let mut fields = PageFields::default();
    let mut path: Vec<String> = Vec::new();
    let mut revision_seen = 0usize;
    loop {
        let event = reader
            .read_event()
            .map_err(|e| format!("malformed XML at byte {}: {e}", reader.error_position()))?;
        match event {
            Event::Start(e) => {
                let name = e.name().as_ref().to_string();
                if name == "revision" {
                    revision_seen += 1;
                    // Full-history dumps carry several revisions; the last one is current.
                    fields.text.clear();
                    fields.timestamp.clear();
                }
                if name == "redirect" && path.last().is_some_and(|p| p == "page") {
                    fields.redirect = true;
                }
                path.push(name);
            }
            Event::Empty(e) if e.name().as_ref() == "redirect" => {
                fields.redirect = true;
            }
            Event::End(_) => {
                path.pop();
            }
            Event::Text(t) => append_field(&mut fields, &path, &t.xml10_content()),
            Event::CData(c) => append_field(&mut fields, &path, &c),
            Event::GeneralRef(r) => {
                let c = match r.resolve_char_ref() {
                    Ok(Some(c)) => c,
                    Ok(None) => match &*r {
                        "amp" => '&',
                        "lt" => '<',
                        "gt" => '>',
                        "quot" => '"',
                        "apos" => '\'',
                        other => return Err(format!("unknown XML entity &{other};")),
                    },
                    Err(e) => return Err(format!("bad character reference: {e}")),
                };
                append_field(&mut fields, &path, c.encode_utf8(&mut [0; 4]));
            }
            Event::Eof => break,
            _ => {}
        }
    }
    if !path.is_empty() {
        return Err(format!("unclosed <{}>", path.join("><")));
    }
    if revision_seen == 0 {
        return Err("page has no <revision>".into());
    }
    Ok(fields)
}

fn append_field(fields: &mut PageFields, path: &[String], text: &str) {
    let names: Vec<&str> = path.iter().map(String::as_str).collect();
    match names.as_slice() {
        ["page", "title"] => fields.title.push_str(text),
        ["page", "ns"] => fields.ns = text.trim().parse().ok(),
        ["page", "id"] => fields.id.push_str(text.trim()),
        ["page", "revision", "timestamp"] => fields.timestamp.push_str(text.trim()),
        ["page", "revision", "text"] => fields.text.push_str(text),
        _ => {}
    }
}

fn parse_namespaces(siteinfo: &str) -> HashMap<String, i64> {
    let mut map = HashMap::new();
    let mut reader = Reader::from_str(siteinfo);
    let mut key: Option<i64> = None;
    while let Ok(event) = reader.read_event() {
        match event {
            Event::Start(e) if e.name().as_ref() == "namespace" => {
                key = e
                    .try_get_attribute("key")
                    .ok()
                    .flatten()
                    .and_then(|a| a.value.parse().ok());
            }
            Event::Text(t) => {
                if let Some(k) = key.take() {
                    let name = t.xml10_content().trim().to_string();
                    if !name.is_empty() {
                        map.insert(name, k);
                    }
                }
            }
            Event::End(_) => key = None,
            Event::Eof => break,
            _ => {}
        }
    }
    map
}

/// `https://en.wikipedia.org/wiki/Title_With_Underscores`, percent-encoded as Wikipedia does.
pub fn wikipedia_url(title: &str) -> String {
    // Wikipedia leaves the characters a path segment allows unescaped, as does our normalisation.
    use percent_encoding::utf8_percent_encode;
    let underscored = title.trim().replace(' ', "_");
    format!(
        "https://en.wikipedia.org/wiki/{}",
        utf8_percent_encode(&underscored, crate::url_norm::PATH)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn items_of(xml: &str) -> Vec<Item> {
        let mut file = tempfile::NamedTempFile::new().expect("temp file");
        file.write_all(xml.as_bytes()).expect("write");
        open(file.path()).expect("open").collect()
    }

    const HEAD: &str = "<mediawiki xmlns=\"http://www.mediawiki.org/xml/export-0.10/\">\n";

    fn page(title: &str, ns: i64, body: &str) -> String {
        format!(
            "  <page>\n    <title>{title}</title>\n    <ns>{ns}</ns>\n    <id>1</id>\n    <revision>\n      <timestamp>2020-01-02T03:04:05Z</timestamp>\n      <text xml:space=\"preserve\">{body}</text>\n    </revision>\n  </page>\n"
        )
    }

    #[test]
    fn reads_articles_and_skips_redirects_and_other_namespaces() {
        let xml = format!(
            "{HEAD}{}{}  <page>\n    <title>Old</title>\n    <ns>0</ns>\n    <id>3</id>\n    <redirect title=\"New\" />\n    <revision><timestamp>x</timestamp><text>#REDIRECT [[New]]</text></revision>\n  </page>\n</mediawiki>\n",
            page(
                "Rock &amp; roll",
                0,
                "'''Rock''' &lt;ref&gt;x&lt;/ref&gt;is music."
            ),
            page("Talk:Rock", 1, "chat"),
        );
        let items = items_of(&xml);
        assert_eq!(items.len(), 3);
        match &items[0] {
            Item::Document(d) => {
                assert_eq!(d.title, "Rock & roll");
                assert_eq!(d.url, "https://en.wikipedia.org/wiki/Rock_&_roll");
                assert_eq!(d.text, "Rock is music.");
                assert_eq!(d.date, "2020-01-02T03:04:05Z");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(items[1], Item::Skipped("non-article namespace")));
        assert!(matches!(items[2], Item::Skipped("redirect")));
    }

    #[test]
    fn a_broken_page_is_one_bad_record_and_reading_goes_on() {
        let broken = "  <page>\n    <title>Broken</title>\n    <revision><text>unclosed\n    </revision>\n  </page>\n";
        let unterminated = "  <page>\n    <title>Cut</title>\n";
        let xml = format!(
            "{HEAD}{}{broken}{unterminated}{}</mediawiki>\n",
            page("A", 0, "a."),
            page("B", 0, "b.")
        );
        let items = items_of(&xml);
        let kinds: Vec<&str> = items
            .iter()
            .map(|i| match i {
                Item::Document(_) => "doc",
                Item::Bad(_) => "bad",
                Item::Skipped(_) => "skip",
            })
            .collect();
        assert_eq!(kinds, ["doc", "bad", "bad", "doc"]);
        if let Item::Bad(bad) = &items[1] {
            assert!(bad.position.contains("page 2"), "{bad:?}");
            assert!(bad.reason.contains("malformed XML"), "{bad:?}");
        }
        if let Item::Bad(bad) = &items[2] {
            assert!(bad.reason.contains("no </page>"), "{bad:?}");
        }
    }

    #[test]
    fn truncated_file_reports_the_last_page() {
        let xml = format!(
            "{HEAD}{}  <page>\n    <title>Cut</title>\n",
            page("A", 0, "a.")
        );
        let items = items_of(&xml);
        assert!(matches!(&items[1], Item::Bad(b) if b.reason.contains("truncated")));
    }

    #[test]
    fn not_a_dump_is_a_clear_error() {
        let mut file = tempfile::NamedTempFile::new().expect("temp");
        file.write_all(b"{\"json\": true}\n").expect("write");
        let err = open(file.path()).err().expect("error");
        assert!(err.to_string().contains("no <mediawiki> root"), "{err}");
    }

    #[test]
    fn titles_become_wikipedia_urls() {
        assert_eq!(
            wikipedia_url("Abraham Lincoln"),
            "https://en.wikipedia.org/wiki/Abraham_Lincoln"
        );
        assert_eq!(
            wikipedia_url("Café au lait"),
            "https://en.wikipedia.org/wiki/Caf%C3%A9_au_lait"
        );
        assert_eq!(wikipedia_url("C++"), "https://en.wikipedia.org/wiki/C++");
        assert_eq!(
            wikipedia_url("What?"),
            "https://en.wikipedia.org/wiki/What%3F"
        );
    }
}
