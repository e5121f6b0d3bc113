//! `stillweb-indexer eval`: retrieval quality (BEIR nDCG@10 and Recall@100, fabricated gold@k)
//! of an index directory, or of a running server through its HTTP API (`remote.rs`).

use std::path::PathBuf;
use std::sync::Arc;

use stillweb_corpus::ingest::generated_id;
use stillweb_index::eval::{
    BEIR_DEPTH, ITEMS_DEPTH, evaluate_beir, evaluate_items, load_beir, load_items, score_beir,
    score_items,
};
use stillweb_index::fusion::Fusion;
use stillweb_index::search::{DEFAULT_RERANK_POOL, Mode, Weights};
use stillweb_index::{Retriever, SearchIndex, SearchParams};
use stillweb_models::worker::{EmbedWorker, RerankWorker};

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
    /// Chunks the reranker scores per query.
    #[arg(long, default_value_t = DEFAULT_RERANK_POOL)]
    rerank_pool: usize,
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
        let set = load_beir(dir)?;
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
    let mode = Mode::resolve(args.ranking.mode, index.manifest().dense.is_some())
        .map_err(anyhow::Error::msg)?;
    let reranker = match (mode, &args.reranker) {
        (Mode::Rerank, Some(dir)) => Some(RerankWorker::spawn(
            args.model.load_reranker(dir)?,
            "stillweb-rerank",
            1,
        )?),
        (Mode::Rerank, None) => anyhow::bail!(
            "--mode rerank needs --reranker DIR (a model.toml of kind cross-encoder or \
             qwen3-reranker; `models/make-fixtures` builds random-weight test ones)"
        ),
        _ => None,
    };
    let params = SearchParams {
        rerank_pool: if reranker.is_some() {
            args.rerank_pool
        } else {
            0
        },
        ..args.ranking.params(mode)
    };
    let embedder = if mode.uses_dense() {
        Some(EmbedWorker::lend_copies(vec![args.model.load()?]))
    } else {
        None
    };
    let retriever = Retriever::new(Arc::new(index), embedder, reranker)?;
    // The evaluation's time, without loading the models.
    let started = std::time::Instant::now();
    let mut output = if let Some(dir) = &args.beir {
        let set = load_beir(dir)?;
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
    Ok(output)
}
