//! Single-thread document-level BM25 timing: the harness that sets stillweb's lexical stage beside
//! Lucene (benchmarks/lucene) and bm25s (benchmarks/bm25_peers.py) on the same queries.

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use serde::Serialize;
use stillweb_index::SearchIndex;

/// How queries are given to the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueryForm {
    /// Words only: quotes, `site:`, `-` and `OR` removed; what every peer receives.
    Bag,
    /// As written: quoted phrases required, `site:` filters (stillweb's query syntax).
    Operators,
}

/// The words of an agent query without its operators, as all engines receive it in `bag` form.
pub fn bag_of_words(query: &str) -> String {
    query
        .replace('"', " ")
        .split_whitespace()
        .filter(|w| !w.contains(':') && !w.starts_with('-') && *w != "OR")
        .collect::<Vec<_>>()
        .join(" ")
}

#[derive(Debug, Serialize)]
pub struct Bm25Timing {
    pub engine: &'static str,
    pub form: QueryForm,
    pub queries: usize,
    pub k: usize,
    pub seconds: f64,
    pub qps: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub mean_ms: f64,
}

/// `(id, query)` pairs from a TSV file whose first two columns are id and query.
pub fn load_queries(path: &Path) -> anyhow::Result<Vec<(String, String)>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let queries: Vec<(String, String)> = text
        .lines()
        .filter_map(|l| {
            let mut cols = l.split('\t');
            Some((cols.next()?.to_string(), cols.next()?.to_string()))
        })
        .collect();
    anyhow::ensure!(
        !queries.is_empty(),
        "{} holds no id<TAB>query lines",
        path.display()
    );
    Ok(queries)
}

/// Runs every query once to warm up, then times each on this thread; writes the top `k` of each
/// as a TREC run (`qid Q0 docid rank score stillweb`) to `run`.
pub fn time_queries(
    index: &SearchIndex,
    queries: &[(String, String)],
    form: QueryForm,
    k: usize,
    run: &Path,
) -> anyhow::Result<Bm25Timing> {
    let parsed: Vec<_> = queries
        .iter()
        .map(|(_, q)| match form {
            QueryForm::Bag => stillweb_index::parse(&bag_of_words(q)),
            QueryForm::Operators => stillweb_index::parse(q),
        })
        .collect();
    for query in &parsed {
        index.bm25_documents(query, k)?;
    }
    let mut micros = Vec::with_capacity(parsed.len());
    let mut results = Vec::with_capacity(parsed.len());
    let started = Instant::now();
    for query in &parsed {
        let t = Instant::now();
        results.push(index.bm25_documents(query, k)?);
        micros.push(t.elapsed().as_secs_f64() * 1e6);
    }
    let seconds = started.elapsed().as_secs_f64();
    let mut out = std::io::BufWriter::new(
        std::fs::File::create(run).with_context(|| format!("creating {}", run.display()))?,
    );
    for ((qid, _), hits) in queries.iter().zip(&results) {
        for (rank, (doc, score)) in hits.iter().enumerate() {
            writeln!(out, "{qid} Q0 {doc} {} {score} stillweb", rank + 1)?;
        }
    }
    out.flush()?;
    micros.sort_by(f64::total_cmp);
    let pick = |p: f64| micros[((micros.len() - 1) as f64 * p).round() as usize] / 1000.0;
    Ok(Bm25Timing {
        engine: "stillweb (tantivy)",
        form,
        queries: queries.len(),
        k,
        seconds,
        qps: queries.len() as f64 / seconds,
        p50_ms: pick(0.5),
        p99_ms: pick(0.99),
        mean_ms: micros.iter().sum::<f64>() / micros.len() as f64 / 1000.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_file_without_id_tab_query_lines_is_refused_by_name() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("q.tsv");
        std::fs::write(&path, "no tab here\n").expect("write");
        let err = load_queries(&path).expect_err("empty").to_string();
        assert!(
            err.contains("q.tsv") && err.contains("id<TAB>query"),
            "{err}"
        );
        std::fs::write(&path, "q1\tfirst query\tsynth-3\n").expect("write");
        assert_eq!(
            load_queries(&path).expect("load"),
            [("q1".into(), "first query".into())]
        );
        let missing = load_queries(&dir.path().join("absent.tsv")).expect_err("missing");
        assert!(format!("{missing:#}").contains("absent.tsv"), "{missing:#}");
    }

    #[test]
    fn bag_of_words_drops_operators_and_keeps_words() {
        assert_eq!(
            bag_of_words("\"Mona Lisa\" painter -forgery site:example.org OR Louvre"),
            "Mona Lisa painter Louvre"
        );
    }
}
