use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use stillweb_loadtest::client::Client;
use stillweb_loadtest::drive::{self, Arrival, Plan, Workload};
use stillweb_loadtest::process::ServerProcess;
use stillweb_loadtest::queries::QuerySet;
use stillweb_loadtest::record::Recorder;
use stillweb_loadtest::report::{self, RunFacts};

/// Offers a stillweb server on this machine a measured load; writes DIR/report.json and
/// DIR/report.html.
#[derive(Parser, Debug)]
#[command(name = "stillweb-loadtest", version)]
struct Args {
    /// Server base URL; must be a loopback address (http://127.0.0.1:8080).
    #[arg(long)]
    target: String,
    #[arg(long, value_enum, default_value = "search")]
    workload: Workload,
    /// Open loop: work units (searches, episodes or batches) started per second, on schedule.
    #[arg(long, conflicts_with = "concurrency")]
    rate: Option<f64>,
    /// Closed loop: clients each running one unit after another.
    #[arg(long)]
    concurrency: Option<usize>,
    /// Seconds of measured load (at most 3600).
    #[arg(long, default_value_t = 30.0)]
    duration: f64,
    /// Seconds of unmeasured load first (warms caches and connections).
    #[arg(long, default_value_t = 0.0)]
    warmup: f64,
    /// Query file, one agent-style query per line.
    #[arg(long)]
    queries: PathBuf,
    /// Output directory for report.json and report.html.
    #[arg(long)]
    out: PathBuf,
    /// Results asked per search.
    #[arg(long, default_value_t = 10)]
    k: u32,
    /// Queries per batch (at most 64) or `/retrieve` request (at most 4,096).
    #[arg(long, default_value_t = 8)]
    batch_size: usize,
    /// Ask for reranking on (true) or off (false); the server's default when not given.
    #[arg(long)]
    rerank: Option<bool>,
    /// Chunks to rerank per search, when reranking.
    #[arg(long)]
    rerank_pool: Option<u32>,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Per-request timeout in milliseconds.
    #[arg(long, default_value_t = 10_000)]
    timeout_ms: u64,
    /// Open loop: units in flight before new ones are counted as errors instead of sent.
    #[arg(long, default_value_t = 1024)]
    max_outstanding: usize,
    /// The server's process id, to report its CPU-seconds per search and resident memory.
    #[arg(long)]
    server_pid: Option<u32>,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    // One thread: the client shares this machine with the server it measures.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the client runtime")?;
    runtime.block_on(run(args))
}

async fn run(args: Args) -> anyhow::Result<()> {
    let arrival = match (args.rate, args.concurrency) {
        (Some(rate), None) if rate > 0.0 && rate <= 100_000.0 => Arrival::Open { rate },
        (None, Some(n)) if (1..=4096).contains(&n) => Arrival::Closed { concurrency: n },
        (None, None) => bail!("give --rate R (open loop) or --concurrency N (closed loop)"),
        _ => bail!("--rate must be in (0, 100000] and --concurrency in 1..=4096"),
    };
    if !(args.duration > 0.0 && args.duration <= 3600.0 && (0.0..=600.0).contains(&args.warmup)) {
        bail!("--duration must be in (0, 3600] seconds and --warmup in [0, 600]");
    }
    let max_batch = if args.workload == Workload::Retrieve {
        4096
    } else {
        64
    };
    if !(1..=20).contains(&args.k) || !(1..=max_batch).contains(&args.batch_size) {
        bail!(
            "--k must be in 1..=20 and --batch-size in 1..={max_batch} (the server's default limits for this workload)"
        );
    }
    let connections = match arrival {
        Arrival::Open { .. } => args.max_outstanding,
        Arrival::Closed { concurrency } => concurrency,
    };
    let client = Client::new(
        &args.target,
        Duration::from_millis(args.timeout_ms),
        connections,
    )?;
    // A 404 is a server without the readiness route (a peer, such as Search-R1's): it answers.
    let ready = client.get("/readyz").await;
    if !matches!(&ready, Ok(r) if r.status == 200 || r.status == 404) {
        bail!(
            "{} is not ready (GET /readyz: {:?}); start the server first",
            args.target,
            ready.map(|r| r.status)
        );
    }
    let queries = Arc::new(QuerySet::load(&args.queries)?);
    let server = args.server_pid.map(ServerProcess::new).transpose()?;
    let mut search_fields = serde_json::Map::new();
    if let Some(rerank) = args.rerank {
        search_fields.insert("rerank".into(), rerank.into());
    }
    if let Some(pool) = args.rerank_pool {
        search_fields.insert("rerank_pool".into(), pool.into());
    }
    let plan = Plan {
        workload: args.workload,
        arrival,
        duration: Duration::from_secs_f64(args.duration),
        k: args.k,
        batch_size: args.batch_size,
        max_outstanding: args.max_outstanding,
        seed: args.seed,
        search_fields,
    };
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating --out {}", args.out.display()))?;

    if args.warmup > 0.0 {
        let warmup = Plan {
            duration: Duration::from_secs_f64(args.warmup),
            seed: args.seed.wrapping_add(0x5EED),
            ..plan.clone()
        };
        let discard = Arc::new(Mutex::new(Recorder::new(Instant::now())));
        drive::run(client.clone(), queries.clone(), warmup, discard).await;
    }

    let cpu_before = server.as_ref().and_then(|s| s.cpu());
    let recorder = Arc::new(Mutex::new(Recorder::new(Instant::now())));
    let sampler = server.clone().map(|s| {
        let recorder = recorder.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                if let Some(memory) = s.memory()
                    && let Ok(mut r) = recorder.lock()
                {
                    r.record_server_rss(Instant::now(), memory.rss);
                }
            }
        })
    });
    drive::run(client, queries.clone(), plan.clone(), recorder.clone()).await;
    if let Some(sampler) = sampler {
        sampler.abort();
    }
    let server_usage = match (&server, cpu_before) {
        (Some(s), Some(before)) => match (s.cpu(), s.memory()) {
            (Some(after), Some(memory)) => Some((after.cpu_seconds - before.cpu_seconds, memory)),
            _ => None,
        },
        _ => None,
    };
    let recorder = recorder.lock().unwrap_or_else(|e| e.into_inner());
    let report = report::build(
        &recorder,
        &RunFacts {
            target: client_target(&args.target),
            plan: &plan,
            distinct_queries: queries.len(),
            server: server_usage,
        },
    );
    let json_path = args.out.join("report.json");
    std::fs::write(&json_path, serde_json::to_string_pretty(&report)? + "\n")
        .with_context(|| format!("writing {}", json_path.display()))?;
    let html_path = args.out.join("report.html");
    std::fs::write(&html_path, stillweb_loadtest::html::render(&report))
        .with_context(|| format!("writing {}", html_path.display()))?;
    println!(
        "{} requests in {:.1} s ({:.1}/s), {} errors; latency ms p50 {:.2} p95 {:.2} p99 {:.2}; wrote {} and {}",
        report.requests,
        report.elapsed_s,
        report.achieved_rate,
        report.errors,
        report.latency_ms.p50,
        report.latency_ms.p95,
        report.latency_ms.p99,
        json_path.display(),
        html_path.display()
    );
    Ok(())
}

fn client_target(target: &str) -> &str {
    target.trim_end_matches('/')
}
