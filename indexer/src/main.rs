//! `stillweb-indexer`: builds, checks and evaluates stillweb indexes, and measures the models on
//! this machine; one module per subcommand.

mod bench;
mod build;
mod eval;
mod export;
mod finalize;
mod models;
mod remote;
mod revector;
mod verify;

use clap::{Parser, Subcommand};

#[derive(Parser, Debug)]
#[command(
    name = "stillweb-indexer",
    version,
    about = "Build and evaluate stillweb indexes"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Build an index from a corpus manifest; prints the build report (JSON) on stdout.
    Build(build::Args),
    /// Finalize a shard set built with `build --shards N --shard I` jobs: check that the shards
    /// belong together and give each the corpus-wide BM25 statistics; prints JSON.
    Finalize(finalize::Args),
    /// Check every file of an index against the checksums its build wrote (what the server does
    /// before it reports ready); prints files, bytes, seconds and GB/s (JSON), or fails naming
    /// the first file that changed.
    Verify(verify::Args),
    /// Copy an index with its dense part changed, from its stored chunk vectors (no
    /// re-embedding): another document representation (a new graph) and/or a lower chunk vector
    /// precision; prints the new manifest (JSON).
    #[command(alias = "doc-vectors")]
    Revector(revector::Args),
    /// Write a copy of an index of the previous format (4) in this one without building it
    /// again: the same graph, its vectors stored once; prints the new manifest (JSON).
    Upgrade(revector::UpgradeArgs),
    /// Evaluate retrieval quality; prints JSON.
    Eval(eval::Args),
    /// Write a corpus's documents or chunks as JSON Lines, as the build reads and splits them
    /// (inputs for peer engines); prints the count.
    Export(export::Args),
    /// Measure embedding throughput on a file of texts (JSON Lines: strings or {"text": …});
    /// prints JSON.
    BenchEmbed(bench::embed::Args),
    /// Measure a reranker's pairs/s on real queries and passages (JSON Lines, as bench-embed
    /// reads them; passages cut to a chunk's 500 characters), one request's pool per model call
    /// and several (what dynamic batching hands the model); prints one JSON object per setting.
    BenchRerank(bench::rerank::Args),
    /// Measure query-embedding throughput with many concurrent callers, as a server's searches
    /// embed: each caller's query alone, and the callers' queries gathered into batches
    /// (--embed-batch-queries); prints one JSON object per mode.
    BenchQueries(bench::queries::Args),
    /// Measure one query's embedding cost alone and in batches (1, 8, 32, 128 by default) on one
    /// copy of the model, beside the native int8 product ceiling; prints JSON.
    BenchQueryBatches(bench::query_batches::Args),
    /// Measure the native engine's int8 products at MiniLM's weight shapes (on the kernel the
    /// CPU runs: AMX, AVX-512 VNNI, AVX2 or the plain loop); prints JSON in GOP/s.
    BenchGemm(bench::gemm::Args),
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,tantivy=warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::Build(args) => build::run(args),
        Command::Finalize(args) => finalize::run(args),
        Command::Verify(args) => verify::run(args),
        Command::Revector(args) => revector::run(args),
        Command::Upgrade(args) => revector::upgrade(args),
        Command::Eval(args) => eval::run(args),
        Command::Export(args) => export::run(args),
        Command::BenchEmbed(args) => bench::embed::run(args),
        Command::BenchRerank(args) => bench::rerank::run(args),
        Command::BenchQueries(args) => bench::queries::run(args),
        Command::BenchQueryBatches(args) => bench::query_batches::run(args),
        Command::BenchGemm(args) => bench::gemm::run(args),
    }
}
