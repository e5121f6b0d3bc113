//! The query's operators (`site:`, phrases, exclusions) as a tantivy page filter on the docs
//! index, and the BM25 bag-of-words query both retrievers' lexical parts use.

use tantivy::Term;
use tantivy::collector::Count;
use tantivy::query::{
    AllQuery, BooleanQuery, ConstScoreQuery, Occur, PhraseQuery, Query, RegexQuery, TermQuery,
};
use tantivy::schema::{Field, IndexRecordOption};

use crate::query::{Constraint, ParsedQuery};
use crate::{IndexError, SearchIndex};

impl SearchIndex {
    /// The filter the query's operators ask for (`None` without operators), and whether required
    /// phrases had to be relaxed because no page contains them.
    pub(crate) fn page_filter(
        &self,
        query: &ParsedQuery,
        searcher: &tantivy::Searcher,
    ) -> Result<(Option<Box<dyn Query>>, bool), IndexError> {
        if !query.has_filters() {
            return Ok((None, false));
        }
        let filter = self.filter_query(query)?;
        if query.requires_phrases() && searcher.search(&*filter, &Count)? == 0 {
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
