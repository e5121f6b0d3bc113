//! BM25 scores of known records: stage 1's candidate documents that only the dense retriever
//! found, and every chunk of the candidates.
//!
//! Restricting the bag-of-words query to a set of addresses (an intersection) drives tantivy's
//! union scorer, which refills a 4,096-record window at every jump between far-apart candidates:
//! at a million chunks that was ~15% of a search's CPU. Here each term's postings are sought
//! straight to each address, in address order, and the terms' scores are summed in query order,
//! as the bag-of-words query sums them (so a record scores the same either way).

use tantivy::query::{EnableScoring, Query, Scorer, TermQuery, Weight};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocAddress, DocSet, Score, Searcher, TERMINATED, Term};

use crate::IndexError;

/// The BM25 score over `field` of the record at each of `addresses` (repeated terms count
/// again), in the same order; `None` where the record contains none of `terms`.
pub(crate) fn bm25_at(
    searcher: &Searcher,
    statistics: &dyn tantivy::query::Bm25StatisticsProvider,
    field: Field,
    terms: &[String],
    addresses: &[DocAddress],
) -> Result<Vec<Option<Score>>, IndexError> {
    let mut order: Vec<usize> = (0..addresses.len()).collect();
    order.sort_unstable_by_key(|&i| addresses[i]);
    let scoring = EnableScoring::enabled_from_statistics_provider(statistics, searcher);
    let weights: Vec<Box<dyn Weight>> = terms
        .iter()
        .map(|t| {
            TermQuery::new(
                Term::from_field_text(field, t),
                IndexRecordOption::WithFreqs,
            )
            .weight(scoring)
        })
        .collect::<tantivy::Result<_>>()?;
    let mut scores = vec![None; addresses.len()];
    for segment in order.chunk_by(|&a, &b| addresses[a].segment_ord == addresses[b].segment_ord) {
        let reader = searcher.segment_reader(addresses[segment[0]].segment_ord);
        let mut scorers: Vec<Box<dyn Scorer>> = weights
            .iter()
            .map(|w| w.scorer(reader, 1.0))
            .collect::<tantivy::Result<_>>()?;
        for &i in segment {
            let target = addresses[i].doc_id;
            let mut score: Option<Score> = None;
            for scorer in &mut scorers {
                let mut doc = scorer.doc();
                if doc < target {
                    doc = scorer.seek(target);
                }
                if doc == target && doc != TERMINATED {
                    *score.get_or_insert(0.0) += scorer.score();
                }
            }
            scores[i] = score;
        }
    }
    Ok(scores)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tantivy::collector::TopDocs;
    use tantivy::schema::{Schema, TEXT};
    use tantivy::{Index, IndexWriter, doc};

    /// Every record scores what the bag-of-words query gives it, in input order; records without
    /// any of the terms get `None`; several segments, unsorted input and repeats are handled.
    #[test]
    fn scores_equal_the_bag_of_words_query() {
        let mut schema = Schema::builder();
        let text = schema.add_text_field("text", TEXT);
        let index = Index::create_in_ram(schema.build());
        let mut writer: IndexWriter = index.writer(15_000_000).expect("writer");
        let words = ["apple", "pear", "plum", "fig", "kiwi", "lime"];
        for batch in 0..3 {
            for i in 0..400usize {
                let body: Vec<&str> = (0..1 + (i * 7 + batch) % 9)
                    .map(|j| words[(i * 31 + j * 17 + batch) % words.len()])
                    .collect();
                writer
                    .add_document(doc!(text => body.join(" ")))
                    .expect("add");
            }
            writer.commit().expect("commit");
        }
        let searcher = index.reader().expect("reader").searcher();
        assert!(searcher.segment_readers().len() > 1);
        let terms: Vec<String> = ["pear", "kiwi", "pear", "absent"].map(String::from).into();
        let query = crate::search::filter::bag_of_words(text, &terms);
        let expected: std::collections::HashMap<DocAddress, Score> = searcher
            .search(&query, &TopDocs::with_limit(10_000).order_by_score())
            .expect("search")
            .into_iter()
            .map(|(s, a)| (a, s))
            .collect();
        let mut addresses: Vec<DocAddress> = Vec::new();
        for (segment_ord, segment) in searcher.segment_readers().iter().enumerate() {
            for doc in (0..segment.max_doc()).rev().step_by(3) {
                addresses.push(DocAddress::new(segment_ord as u32, doc));
            }
        }
        let last = addresses.len() - 1;
        addresses.swap(0, last);
        addresses.push(addresses[5]);
        let scores = bm25_at(&searcher, &searcher, text, &terms, &addresses).expect("scores");
        assert_eq!(scores.len(), addresses.len());
        let mut matched = 0;
        for (address, score) in addresses.iter().zip(&scores) {
            match (expected.get(address), score) {
                (Some(e), Some(s)) => {
                    assert!((e - s).abs() <= 1e-6 * e.abs(), "{address:?}: {e} vs {s}");
                    matched += 1;
                }
                (None, None) => {}
                other => panic!("{address:?}: query vs bm25_at {other:?}"),
            }
        }
        assert!(matched > 100, "{matched}");
        assert_eq!(
            scores[5],
            scores[scores.len() - 1],
            "a repeated address scores alike"
        );
    }
}
