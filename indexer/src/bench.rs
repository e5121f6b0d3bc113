//! `stillweb-indexer bench-embed`: embedding throughput on a fixed set of texts, the same way the
//! index build embeds (one call per 1,024 texts), so it can be set beside Python onnxruntime on
//! identical inputs (`benchmarks/embed_onnxruntime.py`); and `bench-gemm`: the native engine's
//! int8 product rate, measured as `benchmarks/gemm.py` measures ONNX Runtime's; and
//! `bench-rerank`: a reranker's pairs/s on real queries and passages, a pool per call or several
//! requests' pools per call (what the server's dynamic batcher hands it).

use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use serde::Serialize;
use stillweb_models::Embedder;

#[derive(Debug, Serialize)]
pub struct EmbedThroughput {
    pub model: String,
    pub threads: usize,
    pub texts: usize,
    /// Real (unpadded) tokens, with the model's special tokens and truncation.
    pub tokens: usize,
    pub seconds: f64,
    pub texts_per_second: f64,
    pub tokens_per_second: f64,
}

/// Texts from JSON Lines: each line a JSON string or an object with a `text` field.
pub fn load_texts(path: &Path, limit: Option<usize>) -> anyhow::Result<Vec<String>> {
    let data =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut texts = Vec::new();
    for (n, line) in data
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let value: serde_json::Value = serde_json::from_str(line)
            .with_context(|| format!("{}:{}: not JSON", path.display(), n + 1))?;
        let text = match &value {
            serde_json::Value::String(s) => s.clone(),
            v => v["text"]
                .as_str()
                .with_context(|| {
                    format!(
                        "{}:{}: expected a string or {{\"text\": …}}",
                        path.display(),
                        n + 1
                    )
                })?
                .to_string(),
        };
        texts.push(text);
        if limit.is_some_and(|l| texts.len() >= l) {
            break;
        }
    }
    anyhow::ensure!(!texts.is_empty(), "{} holds no texts", path.display());
    Ok(texts)
}

/// Embeds `texts` once to warm up (first calls allocate), then times a second pass.
pub fn embed_throughput(
    embedder: &mut dyn Embedder,
    texts: &[String],
    tokens: usize,
    threads: usize,
) -> anyhow::Result<EmbedThroughput> {
    const CALL: usize = 1024;
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    embedder.embed_documents(&refs[..refs.len().min(64)])?;
    let started = Instant::now();
    for call in refs.chunks(CALL) {
        embedder.embed_documents(call)?;
    }
    let seconds = started.elapsed().as_secs_f64();
    Ok(EmbedThroughput {
        model: embedder.model_id().to_string(),
        threads,
        texts: texts.len(),
        tokens,
        seconds,
        texts_per_second: texts.len() as f64 / seconds,
        tokens_per_second: tokens as f64 / seconds,
    })
}

/// MiniLM's weight shapes (inputs, outputs), as in `benchmarks/gemm.py`.
const GEMM_SHAPES: [(usize, usize); 3] = [(384, 1536), (1536, 384), (384, 384)];

#[derive(Debug, Serialize)]
pub struct GemmThroughput {
    pub kernel: String,
    pub threads: usize,
    pub rows: usize,
    /// GOP/s (2 per multiply-add) by shape `ROWSxINPUTSxOUTPUTS`.
    pub int8: std::collections::BTreeMap<String, f64>,
    pub int8_ceiling_gops: f64,
}

/// The native int8 products on `rows` rows at each MiniLM shape, the rows split over `threads`
/// threads; each rate is sustained over `seconds` after one warm-up call.
pub fn gemm_throughput(rows: usize, threads: usize, seconds: f64) -> GemmThroughput {
    use stillweb_native::gemm::{Kernel, QuantLinear, ROW_BLOCK};
    let kernel = Kernel::detect();
    let threads = threads.max(1);
    let per_thread = rows.div_ceil(threads).div_ceil(ROW_BLOCK) * ROW_BLOCK;
    let mut int8 = std::collections::BTreeMap::new();
    for (inputs, outputs) in GEMM_SHAPES {
        // Any values do: the products' cost does not depend on them.
        let weight: Vec<f32> = (0..inputs * outputs)
            .map(|i| (i * 7919 % 255) as f32 / 127.0 - 1.0)
            .collect();
        let layer = QuantLinear::new(&weight, &vec![0.0; outputs], inputs, kernel);
        let a: Vec<i8> = (0..per_thread * inputs).map(|i| (i % 255) as i8).collect();
        let mut sums = vec![vec![0i32; per_thread * outputs]; threads];
        let run = |sums: &mut [Vec<i32>]| {
            std::thread::scope(|scope| {
                for s in sums.iter_mut() {
                    let (layer, a) = (&layer, &a);
                    scope.spawn(move || layer.products(a, per_thread, s));
                }
            });
        };
        run(&mut sums);
        let (mut calls, started) = (0u32, Instant::now());
        while started.elapsed().as_secs_f64() < seconds {
            run(&mut sums);
            calls += 1;
        }
        let ops = 2.0 * (per_thread * threads * inputs * outputs) as f64 * f64::from(calls);
        let gops = ops / started.elapsed().as_secs_f64() / 1e9;
        int8.insert(
            format!("{}x{inputs}x{outputs}", per_thread * threads),
            (gops * 10.0).round() / 10.0,
        );
    }
    GemmThroughput {
        kernel: format!("{kernel:?}"),
        threads,
        rows: per_thread * threads,
        int8_ceiling_gops: int8.values().copied().fold(0.0, f64::max),
        int8,
    }
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

#[derive(Debug, Serialize)]
pub struct QueryThroughput {
    pub model: String,
    /// `lent` (a copy lent to each caller in turn) or `batched` (the dynamic batcher).
    pub mode: String,
    pub copies: usize,
    pub concurrency: usize,
    pub queries: usize,
    pub seconds: f64,
    pub queries_per_second: f64,
}

/// `concurrency` threads embedding queries one at a time through `worker` for `seconds` (after
/// each embedded one), as concurrent searches do.
pub fn query_throughput(
    worker: &stillweb_models::worker::EmbedWorker,
    mode: &str,
    copies: usize,
    queries: &[String],
    concurrency: usize,
    seconds: f64,
) -> anyhow::Result<QueryThroughput> {
    anyhow::ensure!(!queries.is_empty(), "no queries");
    let done = std::sync::atomic::AtomicUsize::new(0);
    let started = Instant::now();
    std::thread::scope(|scope| -> anyhow::Result<()> {
        let handles: Vec<_> = (0..concurrency)
            .map(|t| {
                let done = &done;
                scope.spawn(move || -> anyhow::Result<()> {
                    let mut i = t;
                    while started.elapsed().as_secs_f64() < seconds {
                        worker.embed_query(&queries[i % queries.len()])?;
                        done.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        i += concurrency;
                    }
                    Ok(())
                })
            })
            .collect();
        for handle in handles {
            handle
                .join()
                .map_err(|_| anyhow::anyhow!("a caller panicked"))??;
        }
        Ok(())
    })?;
    let seconds = started.elapsed().as_secs_f64();
    let queries_done = done.into_inner();
    Ok(QueryThroughput {
        model: worker.model_id().to_string(),
        mode: mode.to_string(),
        copies,
        concurrency,
        queries: queries_done,
        seconds,
        queries_per_second: queries_done as f64 / seconds,
    })
}
