//! `stillweb-bench`: the scale-corpus generator and the measuring harnesses that BENCHMARKS.md
//! runs (see benchmarks/).

mod ann;
mod bm25;
mod composed;
mod filtered;
mod rng;
mod synth;

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use stillweb_corpus::manifest::CorpusManifest;
use stillweb_index::SearchIndex;

#[derive(Parser, Debug)]
#[command(
    name = "stillweb-bench",
    version,
    about = "stillweb's measuring instruments"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Generate a scale corpus (docs.jsonl, corpus.toml) and matching agent-style queries
    /// (queries.tsv, queries.txt) from a real corpus's statistics; prints a summary (JSON).
    Synth {
        /// The real corpus whose sentences, lengths and vocabulary are used.
        #[arg(long)]
        profile: PathBuf,
        #[arg(long)]
        documents: u64,
        #[arg(long, default_value_t = 10_000)]
        queries: u64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Fixed substitution variants per source sentence (0: fresh substitutions every time).
        #[arg(long, default_value_t = 0)]
        variants: usize,
        #[arg(long)]
        out: PathBuf,
    },
    /// Build an index whose chunk vectors are composed from sentence vectors, each distinct
    /// sentence embedded once (for speed and memory at scale, never quality: see composed.rs);
    /// prints the build summary (JSON).
    BuildScale {
        #[arg(long)]
        manifest: PathBuf,
        #[arg(long)]
        out: PathBuf,
        /// Embedder directory; default: the one `models/fetch` installs.
        #[arg(long)]
        embedder: Option<PathBuf>,
        /// Intra-op threads for the model.
        #[arg(long, default_value_t = 2)]
        model_threads: usize,
        /// How a document is represented in the dense document index: best-chunk (one graph
        /// node per chunk, the default), mean or lead (one node per document).
        #[arg(long, default_value = "best-chunk")]
        doc_vectors: stillweb_index::dense::DocVectors,
        /// How chunk vectors are stored: f32, f16 or i8.
        #[arg(long, default_value_t = stillweb_index::BuildOptions::default().chunk_precision)]
        chunk_vectors: stillweb_index::chunk_vectors::Precision,
        /// Nodes per document graph segment at most (the graph's share of the build's peak).
        #[arg(long, default_value_t = stillweb_index::BuildOptions::default().graph_segment_nodes,
            value_parser = clap::value_parser!(u64).range(stillweb_index::dense::MIN_GRAPH_SEGMENT_NODES..))]
        graph_segment_nodes: u64,
        /// tantivy's indexing buffer per index, in MiB (the text indexes' share of the peak).
        #[arg(long, default_value_t = stillweb_index::WRITER_MEMORY_MIB)]
        writer_memory_mib: usize,
        #[arg(long)]
        force: bool,
        /// Build a set of N shards (`--out/shard-I`, finalized) instead of one index.
        #[arg(long)]
        shards: Option<u32>,
        /// With --shards: build only shard I, as one independent job would (then run
        /// `stillweb-indexer finalize --out DIR`).
        #[arg(long, requires = "shards")]
        shard: Option<u32>,
    },
    /// Write a query file (TSV: id, query) in bag-of-words form, the form every peer engine gets.
    Bag {
        #[arg(long)]
        queries: PathBuf,
        #[arg(long)]
        out: PathBuf,
    },
    /// Time document-level BM25 on one thread over a query file (TSV: id, query); prints JSON
    /// and writes the top k as a TREC run.
    Bm25 {
        #[arg(long)]
        index: PathBuf,
        #[arg(long)]
        queries: PathBuf,
        #[arg(long, value_enum, default_value = "bag")]
        form: bm25::QueryForm,
        #[arg(long, default_value_t = 10)]
        k: usize,
        #[arg(long)]
        run: PathBuf,
    },
    /// Write the ANN comparison's data: the first ROWS chunk vectors of an index, query texts
    /// (TSV: id, query) embedded as the server embeds them, and their exact top 10.
    AnnData {
        #[arg(long)]
        index: PathBuf,
        #[arg(long)]
        rows: usize,
        #[arg(long)]
        queries: PathBuf,
        /// How many of the queries to use.
        #[arg(long, default_value_t = 1_000)]
        count: usize,
        /// Embedder directory; default: the one `models/fetch` installs.
        #[arg(long)]
        embedder: Option<PathBuf>,
        #[arg(long)]
        out: PathBuf,
    },
    /// Build usearch over ann-data's vectors with stillweb's graph settings and time single-thread
    /// searches at each ef; prints JSON (one result per quantization).
    Ann {
        #[arg(long)]
        data: PathBuf,
        /// Threads that insert nodes.
        #[arg(long, default_value_t = 2)]
        threads: usize,
        #[arg(long, value_delimiter = ',', default_value = "32,64,128")]
        ef: Vec<usize>,
        /// Vector storage in the graph: f32 (what stillweb builds), i8, f16.
        #[arg(long, value_delimiter = ',', default_value = "f32,i8")]
        quantization: Vec<String>,
    },
    /// Date-filtered dense retrieval against the exact filtered top k: recall and time per
    /// query, for each date range, over a query file (TSV: id, query); prints JSON.
    FilteredRecall {
        #[arg(long)]
        index: PathBuf,
        #[arg(long)]
        queries: PathBuf,
        /// How many of the queries to use.
        #[arg(long, default_value_t = 200)]
        count: usize,
        /// Ranges FROM..UNTIL (days, UNTIL excluded).
        #[arg(long, value_delimiter = ',', required = true)]
        ranges: Vec<String>,
        #[arg(long, default_value_t = 10)]
        k: usize,
        /// Pages each search asks for, of which the first k count (the server's candidate
        /// depth).
        #[arg(long, default_value_t = 100)]
        depth: usize,
        /// Embedder directory; default: the one `models/fetch` installs.
        #[arg(long)]
        embedder: Option<PathBuf>,
    },
}

/// The embedder at `dir` (default: the one `models/fetch` installs) on one CPU thread, as the
/// server embeds queries.
fn query_embedder(dir: Option<PathBuf>) -> anyhow::Result<Box<dyn stillweb_models::Embedder>> {
    let dir = dir.unwrap_or_else(stillweb_models::config::default_embedder_dir);
    stillweb_models::load_embedder(&dir, None, stillweb_models::ExecutionProvider::Cpu, 1)
        .with_context(|| format!("loading the embedder from {}", dir.display()))
}

fn main() -> anyhow::Result<()> {
    // The log (stderr) shows a build's phases, to line up with benchmarks/peak-rss.sh's trace.
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "info,tantivy=warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    match Cli::parse().command {
        Command::Synth {
            profile,
            documents,
            queries,
            seed,
            variants,
            out,
        } => {
            anyhow::ensure!(documents > 0, "--documents must be at least 1");
            anyhow::ensure!(variants <= 1024, "--variants must be at most 1024");
            let manifest = CorpusManifest::load(&profile)?;
            let mut profile = synth::Profile::from_manifest(&manifest)
                .with_context(|| format!("reading the profile corpus {}", profile.display()))?;
            profile.variants = variants;
            let generated = synth::generate(profile, seed, documents, queries, &out)?;
            println!("{}", serde_json::to_string_pretty(&generated)?);
        }
        Command::BuildScale {
            manifest,
            out,
            embedder,
            model_threads,
            doc_vectors,
            chunk_vectors,
            graph_segment_nodes,
            writer_memory_mib,
            force,
            shards,
            shard,
        } => {
            let corpus = CorpusManifest::load(&manifest)?;
            let dir = embedder.unwrap_or_else(stillweb_models::config::default_embedder_dir);
            let model = stillweb_models::load_embedder(
                &dir,
                None,
                stillweb_models::ExecutionProvider::Cpu,
                model_threads,
            )
            .with_context(|| format!("loading the embedder from {}", dir.display()))?;
            let mut composed = composed::SentenceComposed::new(model);
            let options = stillweb_index::BuildOptions {
                force,
                doc_vectors,
                chunk_precision: chunk_vectors,
                graph_segment_nodes,
                writer_memory_bytes: writer_memory_mib << 20,
                ..Default::default()
            };
            let reports = match shards {
                None => vec![stillweb_index::build_index_with(
                    &corpus,
                    &out,
                    &options,
                    Some(&mut composed),
                )?],
                Some(n) => stillweb_index::build_shards(
                    &corpus,
                    &out,
                    n,
                    shard,
                    &options,
                    Some(&mut composed),
                )?,
            };
            let count = |f: fn(&stillweb_index::IndexManifest) -> u64| -> u64 {
                reports.iter().map(|r| f(&r.manifest)).sum()
            };
            println!(
                "{}",
                serde_json::json!({
                    "index": out,
                    "shards": shards,
                    "seconds": reports.iter().map(|r| r.elapsed.as_secs_f64()).collect::<Vec<_>>(),
                    "documents": count(|m| m.documents),
                    "chunks": count(|m| m.chunks),
                    "distinct_sentences_embedded": composed.sentences(),
                    "passages_composed": composed.passages,
                    "sentence_cache_mib": composed.cache_bytes() >> 20,
                    "vectors": "chunk = normalised mean of its sentences' MiniLM vectors",
                })
            );
        }
        Command::Bag { queries, out } => {
            let queries = bm25::load_queries(&queries)?;
            let lines: String = queries
                .iter()
                .map(|(id, q)| format!("{id}\t{}\n", bm25::bag_of_words(q)))
                .collect();
            std::fs::write(&out, lines).with_context(|| format!("writing {}", out.display()))?;
        }
        Command::Bm25 {
            index,
            queries,
            form,
            k,
            run,
        } => {
            let index = SearchIndex::open(&index)?;
            let queries = bm25::load_queries(&queries)?;
            let timing = bm25::time_queries(&index, &queries, form, k, &run)?;
            println!("{}", serde_json::to_string_pretty(&timing)?);
        }
        Command::AnnData {
            index,
            rows,
            queries,
            count,
            embedder,
            out,
        } => {
            let texts: Vec<String> = bm25::load_queries(&queries)?
                .into_iter()
                .take(count)
                .map(|(_, q)| q)
                .collect();
            let mut model = query_embedder(embedder)?;
            let meta = ann::prepare(&index, rows, &texts, &mut *model, &out)?;
            println!("{}", serde_json::to_string_pretty(&meta)?);
        }
        Command::Ann {
            data,
            threads,
            ef,
            quantization,
        } => {
            anyhow::ensure!(threads > 0, "--threads must be at least 1");
            let mut results = Vec::new();
            for name in &quantization {
                results.push(ann::run_usearch(&data, name, threads, &ef)?);
            }
            println!("{}", serde_json::to_string_pretty(&results)?);
        }
        Command::FilteredRecall {
            index,
            queries,
            count,
            ranges,
            k,
            depth,
            embedder,
        } => {
            anyhow::ensure!(
                k > 0 && depth >= k,
                "--k must be at least 1 and --depth at least --k"
            );
            let mut model = query_embedder(embedder)?;
            let vectors = bm25::load_queries(&queries)?
                .into_iter()
                .take(count)
                .map(|(_, q)| stillweb_models::embed_query(&mut *model, &q))
                .collect::<Result<Vec<_>, _>>()?;
            let index = SearchIndex::open(&index)?;
            let results = filtered::measure(&index, &vectors, &ranges, k, depth)?;
            println!("{}", serde_json::to_string_pretty(&results)?);
        }
    }
    Ok(())
}
