//! Date-filtered dense retrieval against the exact answer: for each date range, each query's
//! top k pages among those dated in it as the server finds them (the document graph searched
//! with the range as its predicate, then rescored exactly; or, when the range's chunks are few,
//! every allowed page ranked exactly), the same by post-filtering an unfiltered graph search (what
//! a filter applied after top-k would give), and the exact filtered top k by brute force over
//! every allowed page's chunk vectors.

use std::time::Instant;

use anyhow::Context;
use serde::Serialize;
use stillweb_corpus::date::{DateRange, parse_day};
use stillweb_index::search::filter::ranks_exactly;
use stillweb_index::{ParsedQuery, SearchIndex};

/// One range's measurements.
#[derive(Debug, Serialize)]
pub struct RangeResult {
    pub range: String,
    pub pages: usize,
    pub chunks: u64,
    /// The path the server takes for this range: `graph` (predicate search) or `exact`.
    pub server_path: &'static str,
    /// Recall@k of the predicate graph search against the exact filtered top k.
    pub graph_recall: f64,
    /// Recall@k of an unfiltered graph search of 4 × depth, filtered afterwards.
    pub post_filter_recall: f64,
    /// Median milliseconds per query: predicate graph search, exact scan, unfiltered search.
    pub graph_ms: f64,
    pub exact_ms: f64,
    pub unfiltered_ms: f64,
}

/// `FROM..UNTIL` (days `YYYY-MM-DD`, FROM included, UNTIL not).
fn parse_range(text: &str) -> anyhow::Result<DateRange> {
    let (from, until) = text.split_once("..").with_context(|| {
        format!("`{text}`: a range is FROM..UNTIL, e.g. 2018-01-01..2019-01-01")
    })?;
    let (from, until) = (
        parse_day(from).map_err(anyhow::Error::msg)?,
        parse_day(until).map_err(anyhow::Error::msg)?,
    );
    anyhow::ensure!(from < until, "`{text}`: FROM must be before UNTIL");
    Ok(DateRange::between(from, until))
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values.get(values.len() / 2).copied().unwrap_or(0.0)
}

/// Measures each of `ranges` over `vectors` (embedded queries): recall of the first `k` of the
/// `depth` pages searched for (the server asks for its candidate depth, 100) against the exact
/// filtered top `k`.
pub fn measure(
    index: &SearchIndex,
    vectors: &[Vec<f32>],
    ranges: &[String],
    k: usize,
    depth: usize,
) -> anyhow::Result<Vec<RangeResult>> {
    let dense = index.dense().context("the index has no vectors")?;
    let mut results = Vec::new();
    for text in ranges {
        let query = ParsedQuery {
            published: parse_range(text)?,
            ..ParsedQuery::default()
        };
        let allowed = index.allowed_pages(&query)?.unwrap_or_default();
        let chunks: u64 = allowed
            .iter()
            .map(|&o| {
                let r = index.chunk_range(o);
                r.end - r.start
            })
            .sum();
        let (mut graph_hits, mut post_hits, mut wanted) = (0usize, 0usize, 0usize);
        let (mut graph_ms, mut exact_ms, mut unfiltered_ms) = (Vec::new(), Vec::new(), Vec::new());
        for vector in vectors {
            let started = Instant::now();
            let want = dense.rank_exactly(
                vector,
                allowed.iter().map(|&o| (o, index.chunk_range(o))),
                k,
            )?;
            exact_ms.push(started.elapsed().as_secs_f64() * 1e3);
            let started = Instant::now();
            let mut got = dense.search_docs_among(vector, depth, &allowed)?;
            got.truncate(k);
            graph_ms.push(started.elapsed().as_secs_f64() * 1e3);
            let started = Instant::now();
            let mut post = dense.search_docs(vector, depth * 4)?;
            unfiltered_ms.push(started.elapsed().as_secs_f64() * 1e3);
            post.retain(|(o, _)| allowed.binary_search(o).is_ok());
            post.truncate(k);
            let hit = |found: &[(u64, f32)]| {
                want.iter()
                    .filter(|(o, _)| found.iter().any(|(f, _)| f == o))
                    .count()
            };
            graph_hits += hit(&got);
            post_hits += hit(&post);
            wanted += want.len();
        }
        let recall = |hits: usize| hits as f64 / wanted.max(1) as f64;
        results.push(RangeResult {
            range: text.clone(),
            pages: allowed.len(),
            chunks,
            server_path: if ranks_exactly(chunks, index.manifest().chunks) {
                "exact"
            } else {
                "graph"
            },
            graph_recall: recall(graph_hits),
            post_filter_recall: recall(post_hits),
            graph_ms: median(graph_ms),
            exact_ms: median(exact_ms),
            unfiltered_ms: median(unfiltered_ms),
        });
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_read_strictly() {
        let range = parse_range("2018-01-01..2019-01-01").expect("range");
        assert!(range.keeps(parse_day("2018-06-01").ok()));
        assert!(!range.keeps(parse_day("2019-01-01").ok()));
        for bad in ["2018", "2019-01-01..2018-01-01", "2018-01-01..soon"] {
            assert!(parse_range(bad).is_err(), "{bad}");
        }
    }
}
