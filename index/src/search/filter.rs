//! The query's operators (`site:`, phrases, exclusions, the date range) as a tantivy page filter
//! on the docs index, and the BM25 bag-of-words query both retrievers' lexical parts use.

use std::ops::Bound;

use stillweb_corpus::date::DateRange;
use tantivy::Term;
use tantivy::collector::Count;
use tantivy::query::{
    AllQuery, BooleanQuery, ConstScoreQuery, Occur, PhraseQuery, Query, RangeQuery, RegexQuery,
    TermQuery,
};
use tantivy::schema::{Field, IndexRecordOption};

use serde::{Deserialize, Serialize};

use crate::query::{Constraint, ParsedQuery};
use crate::{IndexError, SearchIndex};

/// A filter's counts on one index (or, summed, on a corpus's shards): what the decisions that
/// depend on the whole corpus are made from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilterCounts {
    /// Pages the operators allow as written.
    pub pages: u64,
    /// Chunks of those pages.
    pub chunks: u64,
    /// Chunks of the pages allowed once required phrases are relaxed to words (counted only
    /// for queries that require phrases).
    pub relaxed_chunks: u64,
    /// Chunks of the whole index (absent from shards of before it was sent: 0).
    #[serde(default)]
    pub total_chunks: u64,
}

/// The decisions about a filtered query that must be made on the whole corpus's counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FilterPlan {
    /// A required phrase occurs in no page: search its words instead.
    pub relaxed: bool,
    /// The allowed pages are few enough to rank exactly by their vectors.
    pub exact: bool,
}

impl FilterCounts {
    /// The counts of a corpus made of parts with counts `parts`.
    pub fn sum(parts: impl IntoIterator<Item = FilterCounts>) -> FilterCounts {
        parts
            .into_iter()
            .fold(FilterCounts::default(), |a, b| FilterCounts {
                pages: a.pages + b.pages,
                chunks: a.chunks + b.chunks,
                relaxed_chunks: a.relaxed_chunks + b.relaxed_chunks,
                total_chunks: a.total_chunks + b.total_chunks,
            })
    }

    /// The plan for `query` on a corpus with these counts.
    pub fn plan(&self, query: &ParsedQuery) -> FilterPlan {
        let relaxed = query.requires_phrases() && self.pages == 0;
        let chunks = if relaxed {
            self.relaxed_chunks
        } else {
            self.chunks
        };
        FilterPlan {
            relaxed,
            exact: ranks_exactly(chunks, self.total_chunks),
        }
    }
}

/// Whether the dense retriever ranks the pages a filter allows exactly, given their chunks and
/// the index's. An exact scan reads every allowed chunk's row; a walk of the graph with the
/// filter as its predicate read, at the server's depth, about [`WALK_ROWS`] rows times the
/// inverse square root of the share of chunks allowed (at ~1M chunks: 5.4 ms at a third, 20.7 ms
/// at 4%, against 0.15 µs a row exactly; `benchmarks/dates.sh`). The two cost the same at
/// `allowed = WALK_ROWS^⅔ · total^⅓`, ~89,000 of ~1M chunks; below it the scan is cheaper and
/// exact.
pub fn ranks_exactly(allowed_chunks: u64, total_chunks: u64) -> bool {
    let total = total_chunks.max(allowed_chunks) as f64;
    allowed_chunks as f64 <= (WALK_ROWS as f64).powf(2.0 / 3.0) * total.cbrt()
}

/// Rows an unfiltered walk of the graph reads, in exact-scan rows of cost (measured at ~1M
/// chunks: ~4 ms at 0.15 µs a row).
const WALK_ROWS: u64 = 27_000;

impl SearchIndex {
    /// The (local) ordinals of the pages `query`'s filter allows, ascending (no phrase
    /// relaxed); `None` for a query without operators.
    pub fn allowed_pages(&self, query: &ParsedQuery) -> Result<Option<Vec<u64>>, IndexError> {
        if !query.has_filters() {
            return Ok(None);
        }
        let searcher = self.doc_reader.searcher();
        Ok(Some(self.allowed(&searcher, &*self.filter_query(query)?)?))
    }

    /// This index's counts of `query`'s filter (zeros for a query without operators).
    pub fn filter_counts(&self, query: &ParsedQuery) -> Result<FilterCounts, IndexError> {
        let mut counts = FilterCounts {
            total_chunks: self.manifest().chunks,
            ..FilterCounts::default()
        };
        let Some(allowed) = self.allowed_pages(query)? else {
            return Ok(counts);
        };
        let searcher = self.doc_reader.searcher();
        counts.pages = allowed.len() as u64;
        counts.chunks = self.chunks_of(&allowed);
        if query.requires_phrases() {
            let relaxed = query.relaxed();
            counts.relaxed_chunks = if relaxed.has_filters() {
                self.chunks_of(&self.allowed(&searcher, &*self.filter_query(&relaxed)?)?)
            } else {
                self.manifest().chunks
            };
        }
        Ok(counts)
    }

    /// The (local) ordinals of the pages `filter` allows, ascending.
    pub(crate) fn allowed(
        &self,
        searcher: &tantivy::Searcher,
        filter: &dyn Query,
    ) -> Result<Vec<u64>, IndexError> {
        Ok(searcher.search(filter, &super::candidates::SortedOrds)?)
    }

    /// The chunks of the (local) pages `ords`.
    pub(crate) fn chunks_of(&self, ords: &[u64]) -> u64 {
        ords.iter()
            .map(|&o| {
                let range = self.chunk_range(o);
                range.end - range.start
            })
            .sum()
    }

    /// The filter the query's operators ask for (`None` without operators), and whether required
    /// phrases were relaxed because no page contains them: decided by `plan` when given (on the
    /// whole corpus's counts), else on this index's.
    pub(crate) fn page_filter(
        &self,
        query: &ParsedQuery,
        searcher: &tantivy::Searcher,
        plan: Option<FilterPlan>,
    ) -> Result<(Option<Box<dyn Query>>, bool), IndexError> {
        if !query.has_filters() {
            return Ok((None, false));
        }
        let filter = self.filter_query(query)?;
        let relax = match plan {
            Some(plan) => plan.relaxed,
            None => query.requires_phrases() && searcher.search(&*filter, &Count)? == 0,
        };
        if relax {
            let relaxed = query.relaxed();
            if !relaxed.has_filters() {
                return Ok((None, true));
            }
            return Ok((Some(self.filter_query(&relaxed)?), true));
        }
        Ok((Some(filter), false))
    }

    /// Required groups as `Must` (alternatives as `Should`), exclusions as `MustNot`.
    fn filter_query(&self, query: &ParsedQuery) -> Result<Box<dyn Query>, IndexError> {
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for group in &query.required {
            let mut alternatives = Vec::new();
            for constraint in group {
                if let Some(q) = self.constraint_query(constraint)? {
                    alternatives.push((Occur::Should, q));
                }
            }
            match alternatives.len() {
                0 => {}
                1 => clauses.push((Occur::Must, alternatives.remove(0).1)),
                _ => clauses.push((Occur::Must, Box::new(BooleanQuery::new(alternatives)))),
            }
        }
        if clauses.is_empty() {
            clauses.push((Occur::Must, Box::new(AllQuery)));
        }
        for constraint in &query.excluded {
            if let Some(q) = self.constraint_query(constraint)? {
                clauses.push((Occur::MustNot, q));
            }
        }
        if let Some(range) = self.date_query(&query.published) {
            clauses.push((Occur::Must, range));
        }
        for word in &query.excluded_words {
            for term in self.analyze(word) {
                clauses.push((
                    Occur::MustNot,
                    Box::new(TermQuery::new(
                        Term::from_field_text(self.doc_fields.content, &term),
                        IndexRecordOption::Basic,
                    )),
                ));
            }
        }
        Ok(Box::new(BooleanQuery::new(clauses)))
    }

    /// The pages dated within `range` (a scan of the `published` fast field; an undated page
    /// has no value there, so no bounded range holds it). `None` when unbounded.
    fn date_query(&self, range: &DateRange) -> Option<Box<dyn Query>> {
        let bound = |t: Option<i64>, inclusive: bool| match t {
            None => Bound::Unbounded,
            Some(t) => {
                let term = Term::from_field_i64(self.doc_fields.published, t);
                if inclusive {
                    Bound::Included(term)
                } else {
                    Bound::Excluded(term)
                }
            }
        };
        if range.is_unbounded() {
            return None;
        }
        Some(Box::new(RangeQuery::new(
            bound(range.from, true),
            bound(range.until, false),
        )))
    }

    /// A phrase over the page's title and body (stop words may sit in the gaps), or a host
    /// suffix match. `None` for a phrase of stop words only, which constrains nothing.
    fn constraint_query(
        &self,
        constraint: &Constraint,
    ) -> Result<Option<Box<dyn Query>>, IndexError> {
        Ok(match constraint {
            Constraint::Phrase(text) => {
                let terms = crate::analyzer::terms_with_positions(&mut self.analyzer.clone(), text);
                let first = terms.first().map_or(0, |(p, _)| *p);
                let terms: Vec<(usize, Term)> = terms
                    .into_iter()
                    .map(|(p, t)| {
                        (
                            p - first,
                            Term::from_field_text(self.doc_fields.content, &t),
                        )
                    })
                    .collect();
                match terms.len() {
                    0 => None,
                    1 => Some(Box::new(TermQuery::new(
                        terms[0].1.clone(),
                        IndexRecordOption::Basic,
                    ))),
                    _ => Some(Box::new(PhraseQuery::new_with_offset(terms))),
                }
            }
            Constraint::Site(host) => {
                let pattern = format!("(.*\\.)?{}", host.replace('.', "\\.").replace('-', "\\-"));
                Some(Box::new(RegexQuery::from_pattern(
                    &pattern,
                    self.doc_fields.host,
                )?))
            }
        })
    }
}

/// BM25 over `field`: a disjunction of the query's terms (repeated terms count again, as in
/// Lucene's bag of words).
pub(crate) fn bag_of_words(field: Field, terms: &[String]) -> BooleanQuery {
    BooleanQuery::new(
        terms
            .iter()
            .map(|t| {
                let q: Box<dyn Query> = Box::new(TermQuery::new(
                    Term::from_field_text(field, t),
                    IndexRecordOption::WithFreqs,
                ));
                (Occur::Should, q)
            })
            .collect(),
    )
}

/// `scored`, keeping only the pages that pass `filter` (which adds nothing to the score).
pub(crate) fn filtered(scored: BooleanQuery, filter: Option<&dyn Query>) -> BooleanQuery {
    match filter {
        None => scored,
        Some(filter) => BooleanQuery::new(vec![
            (Occur::Must, Box::new(scored) as Box<dyn Query>),
            (
                Occur::Must,
                Box::new(ConstScoreQuery::new(filter.box_clone(), 0.0)),
            ),
        ]),
    }
}
