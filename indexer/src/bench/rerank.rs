//! `stillweb-indexer bench-rerank`: a reranker's pairs/s on real queries and passages, a pool
//! per call or several requests' pools per call (what the server's dynamic batcher hands it).

use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;

use crate::models::ModelArgs;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[arg(long)]
    reranker: PathBuf,
    #[arg(long)]
    queries: PathBuf,
    #[arg(long)]
    passages: PathBuf,
    /// Passages per request (comma-separated for several).
    #[arg(long, value_delimiter = ',', default_value = "30")]
    pool: Vec<usize>,
    /// Requests' pools per model call (comma-separated for several).
    #[arg(long, value_delimiter = ',', default_value = "1,8")]
    pools_per_call: Vec<usize>,
    /// Seconds each setting runs for (after one warm-up call).
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    #[command(flatten)]
    model: ModelArgs,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let queries = super::load_texts(&args.queries, None)?;
    let passages: Vec<String> = super::load_texts(&args.passages, Some(20_000))?
        .into_iter()
        .map(|p| p.chars().take(500).collect())
        .collect();
    let mut reranker = args.model.load_reranker(&args.reranker)?;
    for &pool in &args.pool {
        for &per_call in &args.pools_per_call {
            let report = rerank_throughput(
                &mut *reranker,
                args.model.provider.to_string(),
                &queries,
                &passages,
                pool,
                per_call,
                args.seconds,
            )?;
            println!("{}", serde_json::to_string(&report)?);
        }
    }
    Ok(())
}

#[derive(Debug, Serialize)]
pub struct RerankThroughput {
    pub model: String,
    pub provider: String,
    /// Passages per request.
    pub pool: usize,
    /// Requests' pools per model call (`score_pools`): 1 is no batching across requests.
    pub pools_per_call: usize,
    pub calls: usize,
    pub pairs: usize,
    pub seconds: f64,
    pub pairs_per_second: f64,
    pub requests_per_second: f64,
    /// Mean tokens per pair as the model reads them (unpadded), and the mean of their squares
    /// (attention's cost): what a FLOPs count needs. `null` when the model cannot say.
    pub mean_tokens_per_pair: Option<f64>,
    pub mean_squared_tokens_per_pair: Option<f64>,
}

/// Scores pools of `pool` passages (query `i` with the `pool` passages after `i × pool`, both
/// lists wrapping around), `pools_per_call` pools per call, after one warm-up call, for at least
/// `seconds` and at least one call.
pub fn rerank_throughput(
    reranker: &mut dyn stillweb_models::Reranker,
    provider: String,
    queries: &[String],
    passages: &[String],
    pool: usize,
    pools_per_call: usize,
    seconds: f64,
) -> anyhow::Result<RerankThroughput> {
    anyhow::ensure!(
        !queries.is_empty() && !passages.is_empty(),
        "no queries or no passages"
    );
    let request = |i: usize| stillweb_models::RerankPool {
        query: queries[i % queries.len()].clone(),
        passages: (0..pool)
            .map(|j| passages[(i * pool + j) % passages.len()].clone())
            .collect(),
    };
    let call = |c: usize| -> Vec<stillweb_models::RerankPool> {
        (0..pools_per_call)
            .map(|p| request(c * pools_per_call + p))
            .collect()
    };
    reranker.score_pools(&call(0))?;
    let (mut calls, mut pairs, mut tokens, mut squares, mut counted) = (0, 0, 0.0, 0.0, true);
    // Preparing the pools and counting their tokens is bookkeeping, kept out of the time.
    let mut bookkeeping = std::time::Duration::ZERO;
    let started = Instant::now();
    while calls == 0 || (started.elapsed() - bookkeeping).as_secs_f64() < seconds {
        let prepared = Instant::now();
        let pools = call(calls + 1);
        for p in &pools {
            for passage in &p.passages {
                match reranker.pair_tokens(&p.query, passage) {
                    Some(n) => {
                        tokens += n as f64;
                        squares += (n * n) as f64;
                    }
                    None => counted = false,
                }
            }
        }
        bookkeeping += prepared.elapsed();
        let scores = reranker.score_pools(&pools)?;
        anyhow::ensure!(scores.len() == pools.len(), "scores for every pool");
        pairs += pools.iter().map(|p| p.passages.len()).sum::<usize>();
        calls += 1;
    }
    let seconds = (started.elapsed() - bookkeeping).as_secs_f64();
    Ok(RerankThroughput {
        model: reranker.model_id().to_string(),
        provider,
        pool,
        pools_per_call,
        calls,
        pairs,
        seconds,
        pairs_per_second: pairs as f64 / seconds,
        requests_per_second: (calls * pools_per_call) as f64 / seconds,
        mean_tokens_per_pair: counted.then(|| tokens / pairs as f64),
        mean_squared_tokens_per_pair: counted.then(|| squares / pairs as f64),
    })
}
