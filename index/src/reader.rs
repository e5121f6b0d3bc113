//! Opening a published index for reading: manifest checks, memory-mapped tantivy indexes with a
//! manual reload policy (the index is read-only), and lookups by URL.

use std::path::{Path, PathBuf};

use tantivy::collector::TopDocs;
use tantivy::query::TermQuery;
use tantivy::schema::{IndexRecordOption, Value};
use tantivy::tokenizer::TextAnalyzer;
use tantivy::{DocAddress, Index, IndexReader, ReloadPolicy, Searcher, TantivyDocument, Term};

use crate::IndexError;
use crate::analyzer::{ANALYZER, english};
use crate::manifest::IndexManifest;
use crate::schema::{ChunkFields, DocFields};

/// A page as stored for visits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredDoc {
    pub ord: u64,
    pub doc_id: String,
    pub url: String,
    pub title: String,
    pub date: String,
    pub text: String,
}

/// A read-only index: cheap to share between threads (`Arc<SearchIndex>`).
pub struct SearchIndex {
    dir: PathBuf,
    manifest: IndexManifest,
    pub(crate) doc_reader: IndexReader,
    pub(crate) doc_fields: DocFields,
    pub(crate) chunk_reader: IndexReader,
    pub(crate) chunk_fields: ChunkFields,
    analyzer: TextAnalyzer,
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
    let index = Index::open_in_dir(&path).map_err(|e| IndexError::Damaged {
        path: dir.to_path_buf(),
        reason: format!("cannot open {}: {e}", path.display()),
    })?;
    index.tokenizers().register(ANALYZER, english());
    let reader = index
        .reader_builder()
        .reload_policy(ReloadPolicy::Manual)
        .try_into()?;
    Ok((index, reader))
}

impl SearchIndex {
    /// Opens the index at `dir`, refusing one whose manifest is missing, of another format
    /// version, or whose counts disagree with what is on disk.
    pub fn open(dir: &Path) -> Result<SearchIndex, IndexError> {
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
        Ok(SearchIndex {
            dir: dir.to_path_buf(),
            manifest,
            doc_reader,
            doc_fields,
            chunk_reader,
            chunk_fields,
            analyzer: english(),
        })
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

    /// The document whose normalised URL is `url_key`, if the corpus has it.
    pub fn doc_by_url(&self, url_key: &str) -> Result<Option<StoredDoc>, IndexError> {
        let searcher = self.doc_reader.searcher();
        let query = TermQuery::new(
            Term::from_field_text(self.doc_fields.url_key, url_key),
            IndexRecordOption::Basic,
        );
        let top = searcher.search(&query, &TopDocs::with_limit(1).order_by_score())?;
        match top.first() {
            Some((_, address)) => Ok(Some(self.stored_doc(&searcher, *address)?)),
            None => Ok(None),
        }
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
            ord: doc
                .get_first(f.ord)
                .and_then(|v| v.as_u64())
                .unwrap_or_default(),
            doc_id: text(f.doc_id),
            url: text(f.url),
            title: text(f.title),
            date: text(f.date),
            text: text(f.body),
        })
    }
}
