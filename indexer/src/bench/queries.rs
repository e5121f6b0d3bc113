//! `stillweb-indexer bench-queries`: query-embedding throughput with many concurrent callers, as
//! a server's searches embed: each caller embedding its own query on a copy lent to it, and the
//! callers' queries gathered and drained in batches by a pool of one thread per copy.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use serde::Serialize;
use stillweb_models::Embedder;
use stillweb_models::worker::{DrainThreads, EmbedWorker};

use crate::models::ModelArgs;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Queries (JSON Lines, as bench-embed reads them).
    #[arg(long)]
    queries: PathBuf,
    /// Concurrent callers.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Model copies (a server has one per search thread); 0 = one per core.
    #[arg(long, default_value_t = 0)]
    copies: usize,
    /// Most queries per batched model call.
    #[arg(long, default_value_t = 32)]
    batch: usize,
    /// Seconds per mode.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    #[command(flatten)]
    model: ModelArgs,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let queries = super::load_texts(&args.queries, None)?;
    let copies = crate::models::threads_or_cores(args.copies);
    let load = || -> anyhow::Result<Vec<Box<dyn Embedder>>> {
        (0..copies).map(|_| args.model.load()).collect()
    };
    for (mode, worker) in [
        ("alone", EmbedWorker::lend_copies(load()?)),
        (
            "gathered",
            EmbedWorker::lend_copies(load()?).gathering(args.batch),
        ),
    ] {
        let report = query_throughput(
            &worker,
            mode,
            copies,
            &queries,
            args.concurrency,
            args.seconds,
        )?;
        println!("{}", serde_json::to_string(&report)?);
    }
    Ok(())
}

#[derive(Debug, Serialize)]
pub struct QueryThroughput {
    pub model: String,
    /// `alone` (each caller embeds its query on a copy lent to it) or `gathered` (the callers'
    /// queries drained in batches by one thread per copy, as on a server's search threads).
    pub mode: String,
    pub copies: usize,
    pub concurrency: usize,
    pub queries: usize,
    pub seconds: f64,
    pub queries_per_second: f64,
}

/// `concurrency` threads embedding queries one at a time through `worker` for `seconds` (after
/// each embedded one), as concurrent searches do. When `worker` gathers queries, `copies`
/// threads drain them, as a server's search threads do.
pub fn query_throughput(
    worker: &EmbedWorker,
    mode: &str,
    copies: usize,
    queries: &[String],
    concurrency: usize,
    seconds: f64,
) -> anyhow::Result<QueryThroughput> {
    anyhow::ensure!(!queries.is_empty(), "no queries");
    let drains = match worker.gathers_queries() {
        true => Some(DrainThreads::spawn(worker, copies)?),
        false => None,
    };
    let embed = |query: &str| match &drains {
        Some(drains) => drains.embed_query(query),
        None => worker.embed_query(query),
    };
    let done = AtomicUsize::new(0);
    let started = Instant::now();
    std::thread::scope(|scope| -> anyhow::Result<()> {
        let handles: Vec<_> = (0..concurrency)
            .map(|t| {
                let (done, embed) = (&done, &embed);
                scope.spawn(move || -> anyhow::Result<()> {
                    let mut i = t;
                    while started.elapsed().as_secs_f64() < seconds {
                        embed(&queries[i % queries.len()])?;
                        done.fetch_add(1, Ordering::Relaxed);
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
