//! Retrieval-quality evaluation through the same two-stage search the server runs.
//!
//! - BEIR sets: nDCG@10 (linear gain, as trec_eval/pytrec_eval compute it for BEIR) and
//!   Recall@100 over `qrels/test.tsv`; results map back to BEIR `_id`s through the document id.
//! - Fabricated items: gold@1 and gold@10 (is the gold URL in the top 1 / 10), and which kinds of
//!   hard negative outrank the gold.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::Path;

use serde::{Deserialize, Serialize};
use stillweb_corpus::url_norm::normalize_url;

use crate::query::parse;
use crate::{IndexError, Retriever, SearchParams};

/// Queries and graded judgements of a BEIR dataset's test split.
#[derive(Debug, Clone)]
pub struct BeirSet {
    pub queries: Vec<(String, String)>,
    pub qrels: HashMap<String, HashMap<String, i32>>,
}

#[derive(Debug, Clone, Serialize)]
pub struct BeirScores {
    #[serde(rename = "ndcg@10")]
    pub ndcg_at_10: f64,
    #[serde(rename = "recall@100")]
    pub recall_at_100: f64,
    pub queries: usize,
}

fn input_error(path: &Path, message: impl Into<String>) -> IndexError {
    IndexError::EvalInput {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// Reads `DIR/queries.jsonl` and `DIR/qrels/SPLIT.tsv` (`test`, or `train` to choose
/// parameters on other queries than those scored); keeps the queries that have judgements.
pub fn load_beir(dir: &Path, split: &str) -> Result<BeirSet, IndexError> {
    let qrels_path = dir.join(format!("qrels/{split}.tsv"));
    let text = std::fs::read_to_string(&qrels_path).map_err(|e| IndexError::io(&qrels_path, e))?;
    let mut qrels: HashMap<String, HashMap<String, i32>> = HashMap::new();
    for (i, line) in text.lines().enumerate() {
        let cols: Vec<&str> = line.split('\t').collect();
        if i == 0 && cols.first() == Some(&"query-id") || line.trim().is_empty() {
            continue;
        }
        let [qid, docid, score] = cols[..] else {
            return Err(input_error(
                &qrels_path,
                format!("line {}: expected 3 tab-separated columns", i + 1),
            ));
        };
        let score: i32 = score.trim().parse().map_err(|_| {
            input_error(
                &qrels_path,
                format!("line {}: score `{score}` is not an integer", i + 1),
            )
        })?;
        qrels
            .entry(qid.to_string())
            .or_default()
            .insert(docid.to_string(), score);
    }
    let queries_path = dir.join("queries.jsonl");
    let text =
        std::fs::read_to_string(&queries_path).map_err(|e| IndexError::io(&queries_path, e))?;
    #[derive(Deserialize)]
    struct Query {
        #[serde(rename = "_id")]
        id: String,
        text: String,
    }
    let mut queries = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let q: Query = serde_json::from_str(line)
            .map_err(|e| input_error(&queries_path, format!("line {}: {e}", i + 1)))?;
        if qrels.contains_key(&q.id) {
            queries.push((q.id, q.text));
        }
    }
    if queries.is_empty() {
        return Err(input_error(
            &queries_path,
            "no query has judgements in qrels/test.tsv",
        ));
    }
    Ok(BeirSet { queries, qrels })
}

/// nDCG@k with linear gain over graded judgements (grades ≤ 0 count as not relevant).
pub fn ndcg_at(k: usize, ranked: &[String], judgements: &HashMap<String, i32>) -> f64 {
    let gain = |g: i32| f64::from(g.max(0));
    let dcg: f64 = ranked
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, id)| gain(judgements.get(id).copied().unwrap_or(0)) / (i as f64 + 2.0).log2())
        .sum();
    let mut ideal: Vec<i32> = judgements.values().copied().filter(|g| *g > 0).collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let idcg: f64 = ideal
        .iter()
        .take(k)
        .enumerate()
        .map(|(i, g)| gain(*g) / (i as f64 + 2.0).log2())
        .sum();
    if idcg == 0.0 { 0.0 } else { dcg / idcg }
}

/// Share of the relevant documents found in the top k.
pub fn recall_at(k: usize, ranked: &[String], judgements: &HashMap<String, i32>) -> f64 {
    let relevant: HashSet<&String> = judgements
        .iter()
        .filter(|(_, g)| **g > 0)
        .map(|(id, _)| id)
        .collect();
    if relevant.is_empty() {
        return 0.0;
    }
    let found = ranked
        .iter()
        .take(k)
        .filter(|id| relevant.contains(id))
        .count();
    found as f64 / relevant.len() as f64
}

/// Results each BEIR query is ranked to (Recall@100 needs the top 100).
pub const BEIR_DEPTH: usize = 100;
/// Results each fabricated item is ranked to (gold@10).
pub const ITEMS_DEPTH: usize = 10;

/// Runs every query with `k = 100` through the retriever and scores the rankings.
pub fn evaluate_beir(
    retriever: &Retriever,
    set: &BeirSet,
    params: &SearchParams,
) -> Result<BeirScores, IndexError> {
    let params = SearchParams {
        k: BEIR_DEPTH,
        ..params.clone()
    };
    let rankings = set
        .queries
        .iter()
        .map(|(_, text)| {
            Ok(retriever
                .search(&parse(text), &params)?
                .hits
                .into_iter()
                .map(|h| h.doc_id)
                .collect())
        })
        .collect::<Result<Vec<Vec<String>>, IndexError>>()?;
    Ok(score_beir(set, &rankings))
}

/// nDCG@10 and Recall@100 averaged over the set, from each query's ranked document ids (in the
/// order of `set.queries`), however they were ranked: an index directory or a running server.
pub fn score_beir(set: &BeirSet, rankings: &[Vec<String>]) -> BeirScores {
    let (mut ndcg, mut recall) = (0.0, 0.0);
    for ((qid, _), ranked) in set.queries.iter().zip(rankings) {
        let judgements = &set.qrels[qid];
        ndcg += ndcg_at(10, ranked, judgements);
        recall += recall_at(BEIR_DEPTH, ranked, judgements);
    }
    let n = set.queries.len() as f64;
    BeirScores {
        ndcg_at_10: ndcg / n,
        recall_at_100: recall / n,
        queries: set.queries.len(),
    }
}

/// One fabricated item: a question whose answer only the gold page states.
#[derive(Debug, Clone, Deserialize)]
pub struct FabricatedItem {
    pub id: String,
    pub question: String,
    pub gold_url: String,
    #[serde(default)]
    pub negatives: Vec<Negative>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Negative {
    pub kind: String,
    pub url: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct ItemScores {
    #[serde(rename = "gold@1")]
    pub gold_at_1: f64,
    #[serde(rename = "gold@10")]
    pub gold_at_10: f64,
    pub items: usize,
    /// For each negative kind, how many items had a negative of that kind ranked above the gold.
    pub negatives_above_gold: BTreeMap<String, usize>,
}

pub fn load_items(path: &Path) -> Result<Vec<FabricatedItem>, IndexError> {
    let text = std::fs::read_to_string(path).map_err(|e| IndexError::io(path, e))?;
    let items: Vec<FabricatedItem> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).map_err(|e| input_error(path, format!("line {}: {e}", i + 1)))
        })
        .collect::<Result<_, _>>()?;
    if items.is_empty() {
        return Err(input_error(path, "no items"));
    }
    Ok(items)
}

fn key(url: &str) -> String {
    normalize_url(url).unwrap_or_else(|_| url.to_string())
}

/// Ranks every item's question to 10 through the retriever and scores the rankings.
pub fn evaluate_items(
    retriever: &Retriever,
    items: &[FabricatedItem],
    params: &SearchParams,
) -> Result<ItemScores, IndexError> {
    let params = SearchParams {
        k: ITEMS_DEPTH,
        ..params.clone()
    };
    let rankings = items
        .iter()
        .map(|item| {
            Ok(retriever
                .search(&parse(&item.question), &params)?
                .hits
                .into_iter()
                .map(|h| h.url)
                .collect())
        })
        .collect::<Result<Vec<Vec<String>>, IndexError>>()?;
    Ok(score_items(items, &rankings))
}

/// gold@1, gold@10 and the negatives above the gold, from each item's ranked result URLs (in
/// the order of `items`), however they were ranked.
pub fn score_items(items: &[FabricatedItem], rankings: &[Vec<String>]) -> ItemScores {
    let (mut at1, mut at10) = (0usize, 0usize);
    let mut above: BTreeMap<String, usize> = BTreeMap::new();
    for (item, urls) in items.iter().zip(rankings) {
        let ranked: Vec<String> = urls.iter().map(|u| key(u)).collect();
        let gold = key(&item.gold_url);
        let gold_rank = ranked.iter().position(|u| *u == gold);
        at1 += usize::from(gold_rank == Some(0));
        at10 += usize::from(gold_rank.is_some());
        let cutoff = gold_rank.unwrap_or(ranked.len());
        let mut kinds: Vec<&str> = item
            .negatives
            .iter()
            .filter(|n| ranked[..cutoff].contains(&key(&n.url)))
            .map(|n| n.kind.as_str())
            .collect();
        kinds.dedup();
        for kind in kinds {
            *above.entry(kind.to_string()).or_default() += 1;
        }
    }
    let n = items.len() as f64;
    ItemScores {
        gold_at_1: at1 as f64 / n,
        gold_at_10: at10 as f64 / n,
        items: items.len(),
        negatives_above_gold: above,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn j(pairs: &[(&str, i32)]) -> HashMap<String, i32> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    fn r(ids: &[&str]) -> Vec<String> {
        ids.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn ndcg_matches_hand_computation() {
        let judgements = j(&[("a", 2), ("b", 1)]);
        assert!((ndcg_at(10, &r(&["a", "b"]), &judgements) - 1.0).abs() < 1e-12);
        // b first: dcg = 1 + 2/log2(3); idcg = 2 + 1/log2(3)
        let expected = (1.0 + 2.0 / 3f64.log2()) / (2.0 + 1.0 / 3f64.log2());
        assert!((ndcg_at(10, &r(&["b", "a"]), &judgements) - expected).abs() < 1e-12);
        assert_eq!(ndcg_at(10, &r(&["x"]), &judgements), 0.0);
        assert_eq!(ndcg_at(1, &r(&["x", "a"]), &judgements), 0.0);
    }

    #[test]
    fn recall_counts_relevant_found() {
        let judgements = j(&[("a", 1), ("b", 1), ("c", 0)]);
        assert_eq!(recall_at(100, &r(&["a", "c"]), &judgements), 0.5);
        assert_eq!(recall_at(1, &r(&["c", "a"]), &judgements), 0.0);
    }
}
