//! Opening a published index for reading: manifest checks, memory-mapped tantivy indexes with a
//! manual reload policy (the index is read-only), and lookups by URL.

pub(crate) mod bm25_at;
mod read_only;
pub(crate) mod vectors;

use std::path::{Path, PathBuf};

use tantivy::collector::TopDocs;
use tantivy::columnar::{Column, StrColumn};
use tantivy::query::TermQuery;
use tantivy::schema::{IndexRecordOption, Value};
use tantivy::tokenizer::TextAnalyzer;
use tantivy::{DocAddress, Index, IndexReader, ReloadPolicy, Searcher, TantivyDocument, Term};

use crate::IndexError;
use crate::analyzer::{ANALYZER, english};
use crate::doc_ids::DocIds;
use crate::manifest::IndexManifest;
use crate::schema::{ChunkFields, DocFields};
use crate::shard::GlobalOrds;
use vectors::DenseIndex;

/// A page as stored for visits.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StoredDoc {
    /// Its ordinal in the whole corpus.
    pub ord: u64,
    pub doc_id: String,
    pub url: String,
    pub title: String,
    pub date: String,
    pub text: String,
    /// Its chunks' byte spans in `text`, in order (filled for a visit, [`SearchIndex::doc_by_url`];
    /// empty elsewhere).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub chunks: Vec<[u32; 2]>,
}

/// A read-only index: cheap to share between threads (`Arc<SearchIndex>`).
pub struct SearchIndex {
    dir: PathBuf,
    manifest: IndexManifest,
    pub(crate) doc_reader: IndexReader,
    pub(crate) doc_fields: DocFields,
    pub(crate) chunk_reader: IndexReader,
    pub(crate) chunk_fields: ChunkFields,
    pub(crate) analyzer: TextAnalyzer,
    /// `chunk_offsets[d]..chunk_offsets[d + 1]` are the chunk ids of document `d`.
    chunk_offsets: Vec<u64>,
    /// Where each document (by ordinal) and each chunk (by id) lives in its tantivy index.
    pub(crate) doc_addresses: Vec<DocAddress>,
    pub(crate) chunk_addresses: Vec<DocAddress>,
    /// Each docs segment's `ord` column, opened once (the reader never reloads): a hit's ordinal.
    ord_columns: Vec<Column<u64>>,
    /// Each chunks segment's `start` and `end` columns: a chunk's bytes in its page's body.
    span_columns: Vec<(Column<u64>, Column<u64>)>,
    /// Every document's id by ordinal (`None` in indexes built before `doc_ids.bin`).
    doc_ids: Option<DocIds>,
    /// Each docs segment's `doc_id` column (`None` in indexes built before it was a fast field):
    /// where `doc_ids.bin` is missing.
    doc_id_columns: Vec<Option<StrColumn>>,
    dense: Option<DenseIndex>,
    /// The whole corpus's BM25 statistics when this index holds part of it (a shard);
    /// `None`: its own.
    bm25_stats: Option<crate::bm25_stats::Bm25Stats>,
    /// Each document's ordinal in the whole corpus (the identity unless a shard): what every
    /// search stage hands out and takes.
    pub(crate) global_ords: GlobalOrds,
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchIndex")
            .field("dir", &self.dir)
            .field("build_id", &self.manifest.build_id)
            .finish()
    }
}

fn open_part(dir: &Path, part: &str) -> Result<(Index, IndexReader), IndexError> {
    let path = dir.join(part);
    let damaged = |e: tantivy::TantivyError| IndexError::Damaged {
        path: dir.to_path_buf(),
        reason: format!("cannot open {}: {e}", path.display()),
    };
    let directory = read_only::ReadOnlyDirectory::open(&path).map_err(damaged)?;
    let index = Index::open(directory).map_err(damaged)?;
    index.tokenizers().register(ANALYZER, english());
    let reader = index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .try_into()?;
    Ok((index, reader))
}

impl SearchIndex {
    /// Opens the index at `dir`, refusing one whose manifest is missing, of another format
    /// version, or whose counts disagree with what is on disk, and a shard whose set was not
    /// finalized (it would score BM25 with its own statistics). A shard scores with the
    /// corpus's statistics and hands out global ordinals.
    pub fn open(dir: &Path) -> Result<SearchIndex, IndexError> {
        let mut index = SearchIndex::open_unfinalized(dir)?;
        if let Some(shard) = index.manifest.shard.clone() {
            if !shard.finalized {
                return Err(IndexError::Shards {
                    path: dir.to_path_buf(),
                    reason: format!(
                        "shard {} of {} is not finalized (no corpus-wide BM25 statistics yet); run `stillweb-indexer finalize --out {}` once every shard is built",
                        shard.index,
                        shard.count,
                        dir.parent().unwrap_or(dir).display()
                    ),
                });
            }
            index.bm25_stats = Some(crate::shard::read_stats(dir)?);
        }
        Ok(index)
    }

    /// [`SearchIndex::open`] without the shard's corpus statistics (to compute them).
    pub(crate) fn open_unfinalized(dir: &Path) -> Result<SearchIndex, IndexError> {
        if !dir.is_dir() {
            return Err(IndexError::Missing {
                path: dir.to_path_buf(),
                reason: "not a directory".into(),
            });
        }
        let manifest = IndexManifest::read(dir)?;
        let (docs, doc_reader) = open_part(dir, "docs")?;
        let (chunks, chunk_reader) = open_part(dir, "chunks")?;
        let doc_fields = DocFields::from_schema(&docs.schema())?;
        let chunk_fields = ChunkFields::from_schema(&chunks.schema())?;
        let (doc_count, chunk_count) = (
            doc_reader.searcher().num_docs(),
            chunk_reader.searcher().num_docs(),
        );
        if doc_count != manifest.documents || chunk_count != manifest.chunks {
            return Err(IndexError::Damaged {
                path: dir.to_path_buf(),
                reason: format!(
                    "manifest promises {} documents and {} chunks, found {doc_count} and {chunk_count}",
                    manifest.documents, manifest.chunks
                ),
            });
        }
        let chunk_counts =
            read_chunk_counts(&doc_reader, manifest.documents).map_err(|reason| {
                IndexError::Damaged {
                    path: dir.to_path_buf(),
                    reason,
                }
            })?;
        let mut chunk_offsets = Vec::with_capacity(chunk_counts.len() + 1);
        chunk_offsets.push(0u64);
        for count in &chunk_counts {
            let last = chunk_offsets.last().copied().unwrap_or(0);
            chunk_offsets.push(last + u64::from(*count));
        }
        let damaged = |reason| IndexError::Damaged {
            path: dir.to_path_buf(),
            reason,
        };
        let doc_addresses =
            read_addresses(&doc_reader, "ord", manifest.documents).map_err(damaged)?;
        let chunk_addresses =
            read_addresses(&chunk_reader, "chunk_id", manifest.chunks).map_err(damaged)?;
        let doc_ids = DocIds::open(dir, manifest.documents)?;
        let segments = doc_reader.searcher().segment_readers().to_vec();
        let ord_columns = segments
            .iter()
            .map(|s| s.fast_fields().u64("ord"))
            .collect::<Result<_, _>>()
            .map_err(|e| damaged(format!("docs index: {e}")))?;
        let doc_id_columns = segments
            .iter()
            .map(|s| s.fast_fields().str("doc_id").ok().flatten())
            .collect();
        let span_columns = chunk_reader
            .searcher()
            .segment_readers()
            .iter()
            .map(|s| Ok((s.fast_fields().u64("start")?, s.fast_fields().u64("end")?)))
            .collect::<tantivy::Result<_>>()
            .map_err(|e| damaged(format!("chunks index: {e}")))?;
        let dense = match &manifest.dense {
            Some(dense) => Some(DenseIndex::open(dir, dense.clone(), &chunk_counts)?),
            None => None,
        };
        let global_ords = match (&manifest.shard, &manifest.overlay) {
            (Some(_), _) => GlobalOrds::read(dir, manifest.documents)?,
            (None, Some(overlay)) => GlobalOrds::Offset(overlay.first_ordinal),
            (None, None) => GlobalOrds::Identity,
        };
        Ok(SearchIndex {
            dir: dir.to_path_buf(),
            manifest,
            doc_reader,
            doc_fields,
            chunk_reader,
            chunk_fields,
            analyzer: english(),
            chunk_offsets,
            doc_addresses,
            chunk_addresses,
            doc_ids,
            ord_columns,
            span_columns,
            doc_id_columns,
            dense,
            bm25_stats: None,
            global_ords,
        })
    }

    /// This index scoring BM25 with `stats` (the whole corpus's, when it holds part of it)
    /// instead of its own.
    pub fn with_bm25_stats(mut self, stats: crate::bm25_stats::Bm25Stats) -> SearchIndex {
        self.bm25_stats = Some(stats);
        self
    }

    /// The BM25 statistics the docs index scores with: the corpus's if given, else its own.
    pub(crate) fn doc_statistics<'a>(
        &'a self,
        searcher: &'a Searcher,
    ) -> &'a dyn tantivy::query::Bm25StatisticsProvider {
        match &self.bm25_stats {
            Some(stats) => &stats.docs,
            None => searcher,
        }
    }

    /// The BM25 statistics the chunks index scores with.
    pub(crate) fn chunk_statistics<'a>(
        &'a self,
        searcher: &'a Searcher,
    ) -> &'a dyn tantivy::query::Bm25StatisticsProvider {
        match &self.bm25_stats {
            Some(stats) => &stats.chunks,
            None => searcher,
        }
    }

    /// The dense part, if the index was built with an embedder.
    pub fn dense(&self) -> Option<&DenseIndex> {
        self.dense.as_ref()
    }

    /// Refuses an embedder other than the one the index was built with, and warns when the
    /// same model runs on another engine than the build's.
    pub fn check_embedder(
        &self,
        model_id: &str,
        dimension: usize,
        engine: &str,
    ) -> Result<(), IndexError> {
        match &self.manifest.dense {
            Some(d) => d.check_embedder(model_id, dimension, engine, &self.dir.display()),
            None => Ok(()),
        }
    }

    /// Whether this index holds the document with corpus ordinal `ord`.
    pub fn holds_doc(&self, ord: u64) -> bool {
        self.global_ords
            .local(ord)
            .is_some_and(|local| local < self.manifest.documents)
    }

    /// Chunk ids of document `ord`.
    pub fn chunk_range(&self, ord: u64) -> std::ops::Range<u64> {
        let i = usize::try_from(ord).unwrap_or(usize::MAX);
        match (
            self.chunk_offsets.get(i),
            self.chunk_offsets.get(i.saturating_add(1)),
        ) {
            (Some(&a), Some(&b)) => a..b,
            _ => 0..0,
        }
    }

    pub fn manifest(&self) -> &IndexManifest {
        &self.manifest
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The analysed terms of `text`, as the index sees them.
    pub fn analyze(&self, text: &str) -> Vec<String> {
        crate::analyzer::terms(&mut self.analyzer.clone(), text)
    }

    /// The document whose normalised URL is `url_key`, if the corpus has it, with its chunks'
    /// spans.
    pub fn doc_by_url(&self, url_key: &str) -> Result<Option<StoredDoc>, IndexError> {
        let Some((mut doc, ids)) = self.doc_and_chunks_by_url(url_key)? else {
            return Ok(None);
        };
        doc.chunks = self.chunk_spans(ids);
        Ok(Some(doc))
    }

    /// The document whose normalised URL is `url_key` and its chunk ids, if the index holds it.
    pub(crate) fn doc_and_chunks_by_url(
        &self,
        url_key: &str,
    ) -> Result<Option<(StoredDoc, std::ops::Range<u64>)>, IndexError> {
        let searcher = self.doc_reader.searcher();
        let query = TermQuery::new(
            Term::from_field_text(self.doc_fields.url_key, url_key),
            IndexRecordOption::Basic,
        );
        let top = searcher.search(&query, &TopDocs::with_limit(1).order_by_score())?;
        let Some((_, address)) = top.first() else {
            return Ok(None);
        };
        let ids = self
            .ord_at(*address)
            .map_or(0..0, |local| self.chunk_range(local));
        Ok(Some((self.stored_doc(&searcher, *address)?, ids)))
    }

    /// The byte spans in their page's body of chunks `ids`, in order.
    fn chunk_spans(&self, ids: std::ops::Range<u64>) -> Vec<[u32; 2]> {
        ids.filter_map(|id| self.chunk_span(id))
            .map(|(_, span)| {
                [
                    u32::try_from(span.start).unwrap_or(u32::MAX),
                    u32::try_from(span.end).unwrap_or(u32::MAX),
                ]
            })
            .collect()
    }

    /// Chunk `id`'s page (local ordinal) and its byte span in that page's body.
    pub(crate) fn chunk_span(&self, id: u64) -> Option<(u64, std::ops::Range<usize>)> {
        let address = self.chunk_addresses.get(id as usize)?;
        let (start, end) = self.span_columns.get(address.segment_ord as usize)?;
        let span = start.first(address.doc_id)? as usize..end.first(address.doc_id)? as usize;
        // The document whose chunk range holds `id`: the last offset at or below it.
        let doc = self
            .chunk_offsets
            .partition_point(|&o| o <= id)
            .checked_sub(1)?;
        Some((doc as u64, span))
    }

    /// Chunks per document, by ordinal.
    pub fn chunk_counts(&self) -> Vec<u32> {
        self.chunk_offsets
            .windows(2)
            .map(|w| u32::try_from(w[1] - w[0]).unwrap_or(u32::MAX))
            .collect()
    }

    /// The ordinal of the document at `address` in the docs index.
    pub(crate) fn ord_at(&self, address: DocAddress) -> Option<u64> {
        self.ord_columns
            .get(address.segment_ord as usize)?
            .first(address.doc_id)
    }

    /// The source id of the document at `address`: from `doc_ids.bin`, else (indexes built
    /// before it) from the fast field, else (before that) from the stored page.
    pub(crate) fn doc_id_at(
        &self,
        searcher: &Searcher,
        address: DocAddress,
    ) -> Result<String, IndexError> {
        if let Some(ids) = &self.doc_ids
            && let Some(id) = self.ord_at(address).and_then(|ord| ids.get(ord))
        {
            return Ok(id.to_string());
        }
        if let Some(Some(ids)) = self.doc_id_columns.get(address.segment_ord as usize)
            && let Some(ord) = ids.term_ords(address.doc_id).next()
        {
            let mut id = String::new();
            if let Ok(true) = ids.ord_to_str(ord, &mut id) {
                return Ok(id);
            }
        }
        Ok(self.stored_doc(searcher, address)?.doc_id)
    }

    pub(crate) fn stored_doc(
        &self,
        searcher: &Searcher,
        address: DocAddress,
    ) -> Result<StoredDoc, IndexError> {
        let doc: TantivyDocument = searcher.doc(address)?;
        let f = self.doc_fields;
        let text = |field| {
            doc.get_first(field)
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_string()
        };
        Ok(StoredDoc {
            ord: self.global_ords.global(
                doc.get_first(f.ord)
                    .and_then(|v| v.as_u64())
                    .unwrap_or_default(),
            ),
            doc_id: text(f.doc_id),
            url: text(f.url),
            title: text(f.title),
            date: text(f.date),
            text: text(f.body),
            chunks: Vec::new(),
        })
    }
}

/// Chunk counts by document ordinal, from the `ord` and `chunk_count` fast fields.
/// The address of every record by its `key` fast field (0..count, each present once).
fn read_addresses(reader: &IndexReader, key: &str, count: u64) -> Result<Vec<DocAddress>, String> {
    let searcher = reader.searcher();
    let unset = DocAddress::new(u32::MAX, u32::MAX);
    let mut addresses = vec![unset; usize::try_from(count).map_err(|e| e.to_string())?];
    for (segment_ord, segment) in searcher.segment_readers().iter().enumerate() {
        let keys = segment.fast_fields().u64(key).map_err(|e| e.to_string())?;
        for doc in segment.doc_ids_alive() {
            if let Some(k) = keys.first(doc) {
                let slot = addresses
                    .get_mut(usize::try_from(k).unwrap_or(usize::MAX))
                    .ok_or_else(|| format!("{key} {k} out of range"))?;
                *slot = DocAddress::new(segment_ord as u32, doc);
            }
        }
    }
    match addresses.iter().position(|a| *a == unset) {
        Some(missing) => Err(format!("no record has {key} {missing}")),
        None => Ok(addresses),
    }
}

fn read_chunk_counts(reader: &IndexReader, documents: u64) -> Result<Vec<u32>, String> {
    let searcher = reader.searcher();
    let mut counts = vec![0u32; usize::try_from(documents).map_err(|e| e.to_string())?];
    for segment in searcher.segment_readers() {
        let fast = segment.fast_fields();
        let ords = fast.u64("ord").map_err(|e| e.to_string())?;
        let chunk_counts = fast.u64("chunk_count").map_err(|e| e.to_string())?;
        for doc in 0..segment.max_doc() {
            if let (Some(ord), Some(count)) = (ords.first(doc), chunk_counts.first(doc)) {
                let slot = counts
                    .get_mut(usize::try_from(ord).unwrap_or(usize::MAX))
                    .ok_or_else(|| format!("document ordinal {ord} out of range"))?;
                *slot = u32::try_from(count).unwrap_or(u32::MAX);
            }
        }
    }
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use stillweb_corpus::manifest::CorpusManifest;

    fn build_pages(dir: &Path, pages: usize) -> PathBuf {
        let docs: String = (0..pages)
            .map(|d| {
                let text = format!("A river crossing number {d}. The harbor lantern {}.", d % 7);
                format!(
                    "{}\n",
                    serde_json::json!({"id": format!("page-{d}"), "url": format!("https://example.org/{d}"), "title": format!("Page {d}"), "text": text})
                )
            })
            .collect();
        std::fs::write(dir.join("docs.jsonl"), docs).expect("write corpus");
        let manifest_path = dir.join("m.toml");
        std::fs::write(
            &manifest_path,
            "name = \"ids\"\n[[source]]\nformat = \"jsonl\"\npath = \"docs.jsonl\"\n",
        )
        .expect("write manifest");
        let corpus = CorpusManifest::load(&manifest_path).expect("manifest");
        let out = dir.join("index");
        crate::build_index_with(&corpus, &out, &crate::BuildOptions::default(), None)
            .expect("build");
        out
    }

    /// An index whose manifest promises more pages than its docs index holds (a half-copied or
    /// mixed-up directory) is refused at open, with both counts.
    #[test]
    fn a_manifest_promising_missing_pages_is_refused_at_open() {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = build_pages(dir.path(), 12);
        let path = out.join("manifest.json");
        let mut manifest: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
        manifest["documents"] = serde_json::json!(13);
        std::fs::write(&path, manifest.to_string()).expect("write");
        let err = SearchIndex::open(&out).expect_err("damaged").to_string();
        assert!(
            err.contains("manifest promises 13 documents")
                && err.contains("found 12")
                && err.contains("rebuild"),
            "{err}"
        );
    }

    /// Hits' ids come from `doc_ids.bin`; indexes built before it read the `doc_id` column, and
    /// those built before that the stored page: all three must give the same ids.
    #[test]
    fn hit_ids_read_alike_from_the_id_table_the_fast_field_and_the_stored_page() {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = build_pages(dir.path(), 40);
        let mut index = SearchIndex::open(&out).expect("open");
        let query = crate::parse("harbor lantern 3");
        let from_table = index.bm25_documents(&query, 10).expect("search");
        assert!(index.doc_ids.is_some());
        let segments = index.doc_reader.searcher().segment_readers().len();
        assert_eq!(index.ord_columns.len(), segments);
        assert_eq!(from_table.len(), 10);
        assert!(from_table.iter().all(|(id, _)| id.starts_with("page-")));

        index.doc_ids = None;
        assert!(index.doc_id_columns.iter().all(Option::is_some));
        let from_column = index.bm25_documents(&query, 10).expect("search");
        assert_eq!(from_column, from_table);

        index.doc_id_columns.iter_mut().for_each(|c| *c = None);
        let from_stored = index.bm25_documents(&query, 10).expect("search");
        assert_eq!(from_stored, from_table);
    }

    /// An id table that does not match the index is refused at open, naming the file.
    #[test]
    fn a_damaged_id_table_is_refused_at_open() {
        let dir = tempfile::tempdir().expect("tempdir");
        let out = build_pages(dir.path(), 12);
        let table = out.join(crate::doc_ids::DOC_IDS);
        let mut bytes = std::fs::read(&table).expect("read");
        bytes.truncate(bytes.len() - 3);
        std::fs::write(&table, bytes).expect("write");
        let err = SearchIndex::open(&out).expect_err("damaged").to_string();
        assert!(
            err.contains("doc_ids.bin") && err.contains("do not match its offsets"),
            "{err}"
        );
    }
}
