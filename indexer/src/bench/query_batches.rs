//! `stillweb-indexer bench-query-batches`: what one query's embedding costs when it is embedded
//! alone and in batches of 8, 32, 128…, on one copy of the model, set beside the native int8
//! product ceiling measured in the same run (`benchmarks/query-embed.sh` adds ONNX Runtime's fp32
//! and int8 ceilings): how far each batch size is from the limit of the host it ran on.

use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;

use crate::models::ModelArgs;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Queries (JSON Lines, as bench-embed reads them).
    #[arg(long)]
    queries: PathBuf,
    /// Batch sizes to measure, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,8,32,128")]
    batches: Vec<usize>,
    /// Seconds per batch size (after a warm-up), and per shape of the ceiling's products.
    #[arg(long, default_value_t = 4.0)]
    seconds: f64,
    #[command(flatten)]
    model: ModelArgs,
}

/// MiniLM-L6's weight products per token: 6 layers of q, k, v, o (384×384) and the 384×1536
/// feed-forward pair, 2 operations per multiply-add. Attention's own products are left out, so
/// the model rates below are floors.
const OPS_PER_TOKEN: f64 = 2.0 * (4.0 * 384.0 * 384.0 + 2.0 * 384.0 * 1536.0) * 6.0;

#[derive(Debug, Serialize)]
pub struct QueryBatches {
    pub model: String,
    pub engine: String,
    pub threads: usize,
    pub queries: usize,
    /// Mean real tokens per query (special tokens included, nothing padded).
    pub tokens_per_query: f64,
    pub batches: Vec<BatchCost>,
    /// The native int8 products' best rate on these threads (`bench-gemm`), measured in this run.
    pub native_int8_ceiling_gops: f64,
    pub native_kernel: String,
}

#[derive(Debug, Serialize)]
pub struct BatchCost {
    pub batch: usize,
    pub ms_per_query: f64,
    pub queries_per_second: f64,
    /// The weight products' rate this achieves (`OPS_PER_TOKEN` × tokens/s).
    pub model_gops: f64,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.batches.iter().all(|&b| b > 0),
        "--batches {:?}: every batch size must be at least 1",
        args.batches
    );
    let queries = super::load_texts(&args.queries, None)?;
    let mut embedder = args.model.load()?;
    let tokens = super::count_tokens(&args.model, &queries, super::Prefix::Query)?;
    let tokens_per_query = tokens as f64 / queries.len() as f64;
    let refs: Vec<&str> = queries.iter().map(String::as_str).collect();
    let mut batches = Vec::new();
    for &batch in &args.batches {
        for call in refs.chunks(batch).take(8) {
            embedder.embed_queries(call)?;
        }
        // Whole passes over the queries, in consecutive groups of `batch`, until time is up.
        let (mut done, started) = (0usize, Instant::now());
        'timed: loop {
            for call in refs.chunks(batch) {
                embedder.embed_queries(call)?;
                done += call.len();
                if started.elapsed().as_secs_f64() >= args.seconds {
                    break 'timed;
                }
            }
        }
        let seconds = started.elapsed().as_secs_f64();
        let per_second = done as f64 / seconds;
        batches.push(BatchCost {
            batch,
            ms_per_query: round(1000.0 / per_second, 3),
            queries_per_second: round(per_second, 1),
            model_gops: round(per_second * tokens_per_query * OPS_PER_TOKEN / 1e9, 1),
        });
    }
    let gemm = super::gemm::gemm_throughput(4096, args.model.threads(), args.seconds);
    let report = QueryBatches {
        model: embedder.model_id().to_string(),
        engine: embedder.engine().to_string(),
        threads: args.model.threads(),
        queries: queries.len(),
        tokens_per_query: round(tokens_per_query, 2),
        batches,
        native_int8_ceiling_gops: gemm.int8_ceiling_gops,
        native_kernel: gemm.kernel,
    };
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

fn round(x: f64, digits: i32) -> f64 {
    let scale = 10f64.powi(digits);
    (x * scale).round() / scale
}
