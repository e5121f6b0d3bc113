//! `stillweb-indexer eval`: retrieval quality (BEIR nDCG@10 and Recall@100, fabricated gold@k)
//! of an index directory, or of a running server through its HTTP API (`remote.rs`).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use stillweb_corpus::ingest::generated_id;
use stillweb_index::eval::{
    BEIR_DEPTH, ITEMS_DEPTH, evaluate_beir, evaluate_items, load_beir, load_items, score_beir,
    score_items,
};
use stillweb_index::fusion::Fusion;
use stillweb_index::search::{DEFAULT_RERANK_POOL, Mode, Preset, Weights};
use stillweb_index::{Retriever, SearchIndex, SearchParams};
use stillweb_models::worker::{EmbedWorker, RerankWorker};
use stillweb_models::{ModelError, Reranker};

use crate::models::ModelArgs;
use crate::remote;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Index directory.
    #[arg(long, env = "STILLWEB_INDEX", required_unless_present = "target")]
    index: Option<PathBuf>,
    /// A running server (or coordinator) to evaluate through its HTTP API instead of an index
    /// directory, e.g. http://127.0.0.1:8080; the ranking flags are then the server's own.
    /// BEIR scores need it started with --max-k 100.
    #[arg(long, conflicts_with = "index")]
    target: Option<String>,
    /// The collection of --target to evaluate (default: its default collection).
    #[arg(long, requires = "target")]
    collection: Option<String>,
    /// A BEIR dataset directory (queries.jsonl, qrels/test.tsv): prints ndcg@10 and recall@100.
    #[arg(long, conflicts_with = "items", required_unless_present = "items")]
    beir: Option<PathBuf>,
    /// Fabricated items (JSON Lines with question, gold_url, negatives): prints gold@1, gold@10.
    #[arg(long)]
    items: Option<PathBuf>,
    #[command(flatten)]
    ranking: RankingArgs,
    #[command(flatten)]
    model: ModelArgs,
    /// Reranker directory (model.toml of kind cross-encoder or qwen3-reranker), for
    /// --mode rerank.
    #[arg(long, env = "STILLWEB_RERANKER")]
    reranker: Option<PathBuf>,
    /// Chunks the reranker scores per query (default: the preset's, else 30).
    #[arg(long)]
    rerank_pool: Option<usize>,
    /// The reranker's share of a reranked document's score: 1 orders them by the reranker
    /// alone; below 1, its score is interpolated with the fused retrieval score. Several
    /// (comma-separated) print one result each, in an array: each pair is scored once.
    /// Default: the preset's, else 1.
    #[arg(long, value_delimiter = ',')]
    rerank_weight: Vec<f32>,
    /// The BEIR judgements to score against: test (qrels/test.tsv) or train (qrels/train.tsv,
    /// to choose parameters without looking at the test queries).
    #[arg(long, default_value = "test", value_parser = ["test", "train"])]
    qrels: String,
}

/// Ranking parameters shared with the server.
#[derive(clap::Args, Debug)]
struct RankingArgs {
    /// Candidate documents from stage 1.
    #[arg(long, default_value_t = 100)]
    candidates: usize,
    /// Use reciprocal-rank fusion with this k instead of normalised weighted fusion.
    #[arg(long)]
    rrf_k: Option<f32>,
    /// Retrievers: bm25, dense, hybrid, or rerank (hybrid, then --reranker over the chunk pool).
    /// Default: hybrid when the index has vectors, else bm25.
    #[arg(long)]
    mode: Option<Mode>,
    /// Override the mode's weight of the document BM25 score.
    #[arg(long)]
    bm25_doc_weight: Option<f32>,
    /// Override the mode's weight of the chunk BM25 score.
    #[arg(long)]
    bm25_chunk_weight: Option<f32>,
    /// Override the mode's weight of the chunk cosine similarity.
    #[arg(long)]
    dense_chunk_weight: Option<f32>,
}

impl RankingArgs {
    fn params(&self, mode: Mode) -> SearchParams {
        let defaults = mode.weights();
        SearchParams {
            candidates: self.candidates,
            weights: Weights {
                bm25_doc: self.bm25_doc_weight.unwrap_or(defaults.bm25_doc),
                bm25_chunk: self.bm25_chunk_weight.unwrap_or(defaults.bm25_chunk),
                dense_chunk: self.dense_chunk_weight.unwrap_or(defaults.dense_chunk),
            },
            fusion: self.rrf_k.map_or(Fusion::Weighted, |k| Fusion::Rrf { k }),
            ..SearchParams::default()
        }
    }
}

/// Prints the scores with what produced them (JSON).
pub fn run(args: Args) -> anyhow::Result<()> {
    let output = match &args.target {
        Some(target) => through_server(target, &args)?,
        None => on_index(&args)?,
    };
    println!("{}", serde_json::to_string_pretty(&output)?);
    Ok(())
}

/// The scores of the server at `target`, with its build, mode and reranker.
fn through_server(target: &str, args: &Args) -> anyhow::Result<serde_json::Value> {
    let started = std::time::Instant::now();
    let server = remote::Target::connect(target, args.collection.as_deref())?;
    let (mut output, refused) = if let Some(dir) = &args.beir {
        let set = load_beir(dir, &args.qrels)?;
        let texts: Vec<&str> = set.queries.iter().map(|(_, t)| t.as_str()).collect();
        let ranked = server.rank(&texts, BEIR_DEPTH)?;
        // Results carry URLs; BEIR documents' URLs carry their ids.
        let ids: Vec<Vec<String>> = ranked
            .urls
            .iter()
            .map(|urls| {
                urls.iter()
                    .map(|u| generated_id(u).unwrap_or_else(|| u.clone()))
                    .collect()
            })
            .collect();
        (
            serde_json::to_value(score_beir(&set, &ids))?,
            ranked.refused,
        )
    } else if let Some(path) = &args.items {
        let items = load_items(path)?;
        let texts: Vec<&str> = items.iter().map(|i| i.question.as_str()).collect();
        let ranked = server.rank(&texts, ITEMS_DEPTH)?;
        (
            serde_json::to_value(score_items(&items, &ranked.urls))?,
            ranked.refused,
        )
    } else {
        anyhow::bail!("pass --beir DIR or --items FILE");
    };
    output["seconds"] = started.elapsed().as_secs_f64().into();
    output["target"] = target.into();
    output["refused"] = refused.into();
    output["collection"] = server.collection["name"].clone();
    output["index"] = server.collection["build_id"].clone();
    output["mode"] = server.collection["mode"].clone();
    output["reranker"] = server.info["models"]["reranker"].clone();
    Ok(output)
}

/// The scores of the index directory, with its build, the mode and parameters, and the reranker.
fn on_index(args: &Args) -> anyhow::Result<serde_json::Value> {
    let Some(index) = &args.index else {
        anyhow::bail!("pass --index DIR or --target URL");
    };
    let index = SearchIndex::open(index)?;
    let preset = args.model.preset;
    let mode = Mode::resolve(
        args.ranking.mode.or(preset.and_then(Preset::mode)),
        index.manifest().dense.is_some(),
    )
    .map_err(anyhow::Error::msg)?;
    let reranker_dir = args
        .reranker
        .clone()
        .or_else(|| preset.and_then(Preset::reranker_dir));
    let reranker = match (mode, &reranker_dir) {
        (Mode::Rerank, Some(dir)) => Some(RerankWorker::spawn(
            Box::new(Memo::new(args.model.load_reranker(dir)?)),
            "stillweb-rerank",
            1,
        )?),
        (Mode::Rerank, None) => anyhow::bail!(
            "--mode rerank needs --reranker DIR (a model.toml of kind cross-encoder or \
             qwen3-reranker; `models/make-fixtures` builds random-weight test ones)"
        ),
        _ => None,
    };
    let weights = match args.rerank_weight.is_empty() {
        true => vec![preset.map_or(1.0, Preset::rerank_weight)],
        false => args.rerank_weight.clone(),
    };
    let pool = args
        .rerank_pool
        .or(preset.map(Preset::rerank_pool).filter(|&p| p > 0))
        .unwrap_or(DEFAULT_RERANK_POOL);
    if let Some(bad) = weights.iter().find(|w| !(0.0..=1.0).contains(*w)) {
        anyhow::bail!("--rerank-weight is the reranker's share of a score, from 0 to 1; got {bad}");
    }
    let embedder = if mode.uses_dense() {
        Some(EmbedWorker::lend_copies(vec![args.model.load()?]))
    } else {
        None
    };
    let reranks = reranker.is_some();
    let retriever = Retriever::new(Arc::new(index), embedder, reranker)?;
    let mut outputs = Vec::new();
    for &rerank_weight in &weights {
        let params = SearchParams {
            rerank_pool: if reranks { pool } else { 0 },
            rerank_weight,
            ..args.ranking.params(mode)
        };
        // The evaluation's time, without loading the models.
        let started = std::time::Instant::now();
        let mut output = if let Some(dir) = &args.beir {
            let set = load_beir(dir, &args.qrels)?;
            serde_json::to_value(evaluate_beir(&retriever, &set, &params)?)?
        } else if let Some(path) = &args.items {
            let items = load_items(path)?;
            serde_json::to_value(evaluate_items(&retriever, &items, &params)?)?
        } else {
            anyhow::bail!("pass --beir DIR or --items FILE");
        };
        output["seconds"] = started.elapsed().as_secs_f64().into();
        output["reranker"] = retriever.reranker_id().into();
        output["index"] = retriever.index().manifest().build_id.clone().into();
        output["params"] = serde_json::to_value(&params)?;
        output["mode"] = serde_json::to_value(mode)?;
        output["preset"] = preset.map(Preset::name).into();
        outputs.push(output);
    }
    let output = match outputs.len() {
        1 => outputs.remove(0),
        _ => serde_json::Value::Array(outputs),
    };
    Ok(output)
}

/// A reranker that scores each (query, passage) pair once: an evaluation of several rerank
/// weights reranks the same pools again, and a pair's score never depends on its batch.
struct Memo {
    inner: Box<dyn Reranker>,
    scores: HashMap<(String, String), f32>,
}

impl Memo {
    fn new(inner: Box<dyn Reranker>) -> Memo {
        Memo {
            inner,
            scores: HashMap::new(),
        }
    }
}

impl Reranker for Memo {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn score(&mut self, query: &str, passages: &[&str]) -> Result<Vec<f32>, ModelError> {
        let key = |p: &str| (query.to_string(), p.to_string());
        let missing: Vec<&str> = passages
            .iter()
            .copied()
            .filter(|p| !self.scores.contains_key(&key(p)))
            .collect();
        if !missing.is_empty() {
            let scores = self.inner.score(query, &missing)?;
            for (p, s) in missing.iter().zip(scores) {
                self.scores.insert(key(p), s);
            }
        }
        passages
            .iter()
            .map(|p| {
                self.scores
                    .get(&key(p))
                    .copied()
                    .ok_or_else(|| ModelError::Output("a pair went unscored".into()))
            })
            .collect()
    }
}
