//! Corpus-wide BM25 statistics: document counts, token totals and every term's document
//! frequency, for the docs index (`content`) and the chunks index (`context`).
//!
//! BM25 scores a term by statistics of the whole collection (its idf, the average field length).
//! An index that holds part of a corpus (a shard) scores like the whole corpus's single index
//! only when it scores with the whole corpus's statistics: [`Bm25Stats::of`] sums them over the
//! parts, and [`SearchIndex::with_bm25_stats`] makes every BM25 score of an index use them
//! (stage 1's document BM25, stage 2's chunk BM25, the dense-only candidates' document BM25).
//! Elasticsearch, OpenSearch, Vespa and Solr score each shard with its own statistics unless
//! asked not to, so their results depend on how a corpus was split.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use tantivy::query::Bm25StatisticsProvider;
use tantivy::schema::Field;
use tantivy::{Searcher, Term};

use crate::{IndexError, SearchIndex};

/// The statistics of one scored field over a collection.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FieldStats {
    /// Records (documents or chunks).
    pub records: u64,
    /// Tokens in the field over all records.
    pub tokens: u64,
    /// Records containing each term.
    pub doc_freq: HashMap<String, u64>,
}

/// The statistics both of an index's scored fields need.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Bm25Stats {
    /// The docs index's `content` (title + body).
    pub docs: FieldStats,
    /// The chunks index's `context` (title + chunk text).
    pub chunks: FieldStats,
}

impl Bm25Stats {
    /// The statistics of the collection made of `parts` (each document in exactly one part).
    pub fn of(parts: &[&SearchIndex]) -> Result<Bm25Stats, IndexError> {
        let mut stats = Bm25Stats::default();
        for part in parts {
            add(
                &mut stats.docs,
                &part.doc_reader.searcher(),
                part.doc_fields.content,
            )?;
            add(
                &mut stats.chunks,
                &part.chunk_reader.searcher(),
                part.chunk_fields.context,
            )?;
        }
        Ok(stats)
    }

    /// The statistics of a collection made of parts with statistics `parts`.
    pub fn sum(parts: &[Bm25Stats]) -> Bm25Stats {
        let mut total = Bm25Stats::default();
        for part in parts {
            total.docs.add(&part.docs);
            total.chunks.add(&part.chunks);
        }
        total
    }

    /// These totals, with the document frequencies of only the terms `part` holds: all a part
    /// needs, since a term it lacks matches nothing there.
    pub fn restricted_to(&self, part: &Bm25Stats) -> Bm25Stats {
        Bm25Stats {
            docs: self.docs.restricted_to(&part.docs),
            chunks: self.chunks.restricted_to(&part.chunks),
        }
    }
}

impl FieldStats {
    fn add(&mut self, other: &FieldStats) {
        self.records += other.records;
        self.tokens += other.tokens;
        for (term, n) in &other.doc_freq {
            *self.doc_freq.entry(term.clone()).or_default() += n;
        }
    }

    fn restricted_to(&self, part: &FieldStats) -> FieldStats {
        FieldStats {
            records: self.records,
            tokens: self.tokens,
            doc_freq: part
                .doc_freq
                .keys()
                .filter_map(|t| Some((t.clone(), *self.doc_freq.get(t)?)))
                .collect(),
        }
    }
}

/// Adds `searcher`'s statistics of `field` to `into`.
fn add(into: &mut FieldStats, searcher: &Searcher, field: Field) -> Result<(), IndexError> {
    into.records += searcher.total_num_docs()?;
    into.tokens += searcher.total_num_tokens(field)?;
    for segment in searcher.segment_readers() {
        let inverted = segment.inverted_index(field)?;
        let mut terms = inverted
            .terms()
            .stream()
            .map_err(|e| IndexError::Tantivy(e.into()))?;
        while terms.advance() {
            let text = String::from_utf8_lossy(terms.key()).into_owned();
            *into.doc_freq.entry(text).or_default() += u64::from(terms.value().doc_freq);
        }
    }
    Ok(())
}

/// One scored field's statistics, as tantivy asks for them (each index part has one).
impl Bm25StatisticsProvider for FieldStats {
    fn total_num_tokens(&self, _field: Field) -> tantivy::Result<u64> {
        Ok(self.tokens)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(self.records)
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        Ok(term
            .value()
            .as_str()
            .and_then(|text| self.doc_freq.get(text))
            .copied()
            .unwrap_or(0))
    }
}
