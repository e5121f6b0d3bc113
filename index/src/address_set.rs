//! A query matching a known set of documents by address, for restricting a scored query to the
//! candidates of stage 1 (their documents, or their chunks).
//!
//! A term-set query over an id field does the same, but first walks the term dictionary with an
//! automaton built from the set: at a million chunks that walk was ~10% of a search's CPU. Here
//! the addresses are known (the reader keeps every document's and chunk's address), so each
//! segment's match list is just the sorted doc ids.

use std::collections::HashMap;
use std::sync::Arc;

use tantivy::query::{ConstScorer, EnableScoring, Explanation, Query, Scorer, Weight};
use tantivy::{
    DocAddress, DocId, DocSet, Score, Searcher, SegmentReader, TERMINATED, TantivyError,
    index::SegmentId,
};

/// Matches exactly the given documents, each with score 1 (wrap it in a zero-score
/// `ConstScoreQuery` to filter without scoring).
#[derive(Debug, Clone)]
pub(crate) struct AddressSetQuery {
    by_segment: Arc<HashMap<SegmentId, Vec<DocId>>>,
}

impl AddressSetQuery {
    /// The documents at `addresses` of `searcher`'s segments.
    pub(crate) fn new(searcher: &Searcher, addresses: impl Iterator<Item = DocAddress>) -> Self {
        let segments = searcher.segment_readers();
        let mut by_segment: HashMap<SegmentId, Vec<DocId>> = HashMap::new();
        for address in addresses {
            if let Some(segment) = segments.get(address.segment_ord as usize) {
                by_segment
                    .entry(segment.segment_id())
                    .or_default()
                    .push(address.doc_id);
            }
        }
        for docs in by_segment.values_mut() {
            docs.sort_unstable();
            docs.dedup();
        }
        AddressSetQuery {
            by_segment: Arc::new(by_segment),
        }
    }
}

impl Query for AddressSetQuery {
    fn weight(&self, _: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        Ok(Box::new(AddressSetWeight {
            by_segment: Arc::clone(&self.by_segment),
        }))
    }
}

struct AddressSetWeight {
    by_segment: Arc<HashMap<SegmentId, Vec<DocId>>>,
}

impl Weight for AddressSetWeight {
    fn scorer(&self, reader: &SegmentReader, boost: Score) -> tantivy::Result<Box<dyn Scorer>> {
        let docs = self
            .by_segment
            .get(&reader.segment_id())
            .cloned()
            .unwrap_or_default();
        Ok(Box::new(ConstScorer::new(
            SortedDocs { docs, cursor: 0 },
            boost,
        )))
    }

    fn explain(&self, reader: &SegmentReader, doc: DocId) -> tantivy::Result<Explanation> {
        let matched = self
            .by_segment
            .get(&reader.segment_id())
            .is_some_and(|docs| docs.binary_search(&doc).is_ok());
        if matched {
            Ok(Explanation::new("in the address set", 1.0))
        } else {
            Err(TantivyError::InvalidArgument(format!(
                "document {doc} is not in the address set"
            )))
        }
    }
}

/// Strictly increasing doc ids as a `DocSet`.
struct SortedDocs {
    docs: Vec<DocId>,
    cursor: usize,
}

impl DocSet for SortedDocs {
    fn advance(&mut self) -> DocId {
        self.cursor = (self.cursor + 1).min(self.docs.len());
        self.doc()
    }

    fn seek(&mut self, target: DocId) -> DocId {
        self.cursor += self.docs[self.cursor..].partition_point(|&d| d < target);
        self.doc()
    }

    fn doc(&self) -> DocId {
        self.docs.get(self.cursor).copied().unwrap_or(TERMINATED)
    }

    fn size_hint(&self) -> u32 {
        u32::try_from(self.docs.len()).unwrap_or(u32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorted_docs_advance_and_seek_forward_only() {
        let mut docs = SortedDocs {
            docs: vec![2, 5, 9],
            cursor: 0,
        };
        assert_eq!(docs.doc(), 2);
        assert_eq!(docs.seek(5), 5);
        assert_eq!(docs.seek(3), 5, "a lower target does not move back");
        assert_eq!(docs.seek(6), 9);
        assert_eq!(docs.advance(), TERMINATED);
        assert_eq!(docs.seek(1), TERMINATED);
        let empty = SortedDocs {
            docs: vec![],
            cursor: 0,
        };
        assert_eq!(empty.doc(), TERMINATED);
    }
}
