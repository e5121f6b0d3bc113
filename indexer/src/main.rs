//! `stillweb-indexer`: builds an index from a corpus manifest and evaluates retrieval quality.

mod bench;
mod export;
mod remote;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand};
use stillweb_corpus::ingest::generated_id;
use stillweb_corpus::manifest::CorpusManifest;
use stillweb_index::checksums::Verified;
use stillweb_index::chunk_vectors::Precision;
use stillweb_index::dense::DocVectors;
use stillweb_index::eval::{
    BEIR_DEPTH, ITEMS_DEPTH, evaluate_beir, evaluate_items, load_beir, load_items, score_beir,
    score_items,
};
use stillweb_index::fusion::Fusion;
use stillweb_index::revector::{Revector, revector};
use stillweb_index::search::{DEFAULT_RERANK_POOL, Mode, Weights};
use stillweb_index::{
    BuildOptions, IndexManifest, Retriever, SearchIndex, SearchParams, build_index_with,
    build_shards,
};
use stillweb_models::worker::{EmbedWorker, RerankWorker};
use stillweb_models::{Embedder, Engine, ExecutionProvider, Reranker, load_reranker};

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
    Build {
        /// Corpus manifest (TOML), e.g. corpus-manifests/samples.toml.
        #[arg(long, env = "STILLWEB_MANIFEST")]
        manifest: PathBuf,
        /// Output index directory; built beside it and published by rename.
        #[arg(long, env = "STILLWEB_INDEX")]
        out: PathBuf,
        /// Replace an existing index at --out.
        #[arg(long)]
        force: bool,
        /// Fail a source when more than this share of its records is bad (0..1).
        #[arg(long, default_value_t = 0.01)]
        max_bad_fraction: f64,
        /// Indexing memory budget per index, in MiB.
        #[arg(long, default_value_t = 256)]
        writer_memory_mib: usize,
        /// Build a lexical (BM25) index only, without embedding chunks.
        #[arg(long)]
        no_dense: bool,
        #[command(flatten)]
        model: ModelArgs,
        /// How a document is represented in the dense document index: best-chunk, mean or lead.
        #[arg(long, default_value = "best-chunk")]
        doc_vectors: DocVectors,
        /// How chunk vectors (stage 2's exact similarities) are stored: f32, f16 or i8.
        #[arg(long, default_value_t = BuildOptions::default().chunk_precision)]
        chunk_vectors: Precision,
        /// Threads inserting the document graph; 0 = one per core. 1 builds the same graph byte
        /// for byte every time (slower); more threads give graphs that differ a little per build.
        #[arg(long, default_value_t = 0)]
        graph_threads: usize,
        /// Build a set of N document shards, `--out/shard-0` … `--out/shard-{N-1}` (each an index
        /// directory a shard server opens; documents assigned by a hash of their URL), then
        /// finalize the set (corpus-wide BM25 statistics into every shard).
        #[arg(long)]
        shards: Option<u32>,
        /// With --shards: build only shard I (one job of many, e.g. a Kubernetes indexed Job);
        /// run `stillweb-indexer finalize --out DIR` once every shard is built.
        #[arg(long, requires = "shards")]
        shard: Option<u32>,
        /// An index built earlier with the same embedder, engine and chunker and f32 chunk
        /// vectors (--chunk-vectors f32): documents it indexed unchanged (same URL, title and
        /// text) take their vectors from it instead of being embedded again; the rest are
        /// embedded. The result is the index a full build would write, e.g. the same corpus cut
        /// into --shards without embedding it twice.
        #[arg(long, conflicts_with = "no_dense")]
        reuse_vectors: Option<PathBuf>,
    },
    /// Finalize a shard set built with `build --shards N --shard I` jobs: check that the shards
    /// belong together and give each the corpus-wide BM25 statistics; prints JSON.
    Finalize {
        /// The set's directory (holding shard-0 … shard-{N-1}).
        #[arg(long)]
        out: PathBuf,
    },
    /// Check every file of an index against the checksums its build wrote (what the server does
    /// before it reports ready); prints files, bytes, seconds and GB/s (JSON), or fails naming
    /// the first file that changed.
    Verify {
        #[arg(long, env = "STILLWEB_INDEX")]
        index: PathBuf,
    },
    /// Copy an index with its dense part changed, from its stored chunk vectors (no
    /// re-embedding): another document representation (a new graph) and/or a lower chunk vector
    /// precision; prints the new manifest (JSON).
    #[command(alias = "doc-vectors")]
    Revector {
        /// Index built with an embedder.
        #[arg(long)]
        index: PathBuf,
        /// Output index directory (published by rename, like a build).
        #[arg(long)]
        out: PathBuf,
        /// best-chunk, mean or lead (rebuilds the graph).
        #[arg(long, required_unless_present = "chunk_vectors")]
        doc_vectors: Option<DocVectors>,
        /// f32, f16 or i8, no higher than the index's own.
        #[arg(long)]
        chunk_vectors: Option<Precision>,
        /// Threads inserting the document graph; 0 = one per core, 1 = reproducible byte for byte.
        #[arg(long, default_value_t = 0)]
        graph_threads: usize,
        /// Replace an existing index at --out.
        #[arg(long)]
        force: bool,
    },
    /// Evaluate retrieval quality; prints JSON.
    Eval {
        /// Index directory.
        #[arg(long, env = "STILLWEB_INDEX", required_unless_present = "target")]
        index: Option<PathBuf>,
        /// A running server (or coordinator) to evaluate through its HTTP API instead of an index
        /// directory, e.g. http://127.0.0.1:8080; the ranking flags are then the server's own.
        /// BEIR scores need it started with --max-k 100.
        #[arg(long, conflicts_with = "index")]
        target: Option<String>,
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
    },
    /// Write a corpus's documents or chunks as JSON Lines, as the build reads and splits them
    /// (inputs for peer engines); prints the count.
    Export {
        #[arg(long)]
        manifest: PathBuf,
        #[arg(long, value_enum)]
        unit: export::Unit,
        /// Stop after N lines.
        #[arg(long)]
        limit: Option<usize>,
        #[arg(long)]
        out: PathBuf,
    },
    /// Measure embedding throughput on a file of texts (JSON Lines: strings or {"text": …});
    /// prints JSON.
    BenchEmbed {
        #[arg(long)]
        texts: PathBuf,
        /// Use only the first N texts.
        #[arg(long)]
        limit: Option<usize>,
        #[command(flatten)]
        model: ModelArgs,
    },
    /// Measure a reranker's pairs/s on real queries and passages (JSON Lines, as bench-embed
    /// reads them; passages cut to a chunk's 500 characters), one request's pool per model call
    /// and several (what dynamic batching hands the model); prints one JSON object per setting.
    BenchRerank {
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
    },
    /// Measure query-embedding throughput with many concurrent callers, as a server's searches
    /// embed: copies lent to callers in turn, and the dynamic batcher (--embed-batch-queries);
    /// prints one JSON object per mode.
    BenchQueries {
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
    },
    /// Measure the native engine's int8 products at MiniLM's weight shapes (on the kernel the
    /// CPU runs: AMX, AVX-512 VNNI, AVX2 or the plain loop); prints JSON in GOP/s.
    BenchGemm {
        /// Rows (tokens) per product.
        #[arg(long, default_value_t = 4096)]
        rows: usize,
        /// Threads sharing the rows; 0 = one per core.
        #[arg(long, default_value_t = 0)]
        threads: usize,
        /// Seconds each shape runs for (after one warm-up call).
        #[arg(long, default_value_t = 2.0)]
        seconds: f64,
    },
}

/// Which embedder to load.
#[derive(clap::Args, Debug)]
struct ModelArgs {
    /// Embedder directory (with model.toml); default: the one `models/fetch` installs.
    #[arg(long, env = "STILLWEB_EMBEDDER")]
    embedder: Option<PathBuf>,
    /// Intra-op threads per model; 0 = one per core.
    #[arg(long, default_value_t = 0)]
    model_threads: usize,
    /// Where models run: cpu, cuda or cuda:N (needs the onnxruntime-gpu library).
    #[arg(long, env = "STILLWEB_PROVIDER", default_value = "cpu")]
    provider: ExecutionProvider,
    /// What runs the embedder on the CPU: onnx or native-int8 (default: what its model.toml says).
    #[arg(long, env = "STILLWEB_ENGINE")]
    engine: Option<Engine>,
}

impl ModelArgs {
    fn threads(&self) -> usize {
        if self.model_threads == 0 {
            std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
        } else {
            self.model_threads
        }
    }

    fn load_reranker(&self, dir: &std::path::Path) -> anyhow::Result<Box<dyn Reranker>> {
        load_reranker(dir, self.provider, self.threads())
            .with_context(|| format!("loading the reranker from {}", dir.display()))
    }

    fn dir(&self) -> PathBuf {
        self.embedder
            .clone()
            .unwrap_or_else(stillweb_models::config::default_embedder_dir)
    }

    fn load(&self) -> anyhow::Result<Box<dyn Embedder>> {
        let dir = self.dir();
        stillweb_models::load_embedder(&dir, self.engine, self.provider, self.threads())
            .with_context(|| {
                format!(
                    "loading the embedder from {} (or pass --no-dense for a BM25-only index)",
                    dir.display()
                )
            })
    }
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

/// One line per source file read: documents, duplicates, bad records, skips (on stderr).
fn print_sources(manifest: &IndexManifest) {
    for source in &manifest.sources {
        for file in &source.files {
            eprintln!(
                "{:<24} {:<70} documents {:>7}  duplicates {:>5}  bad {:>4}  skipped {:?}{}",
                source.name,
                file.path,
                file.documents,
                file.duplicates,
                file.bad_records,
                file.skipped,
                file.ignored
                    .as_deref()
                    .map(|r| format!("  (ignored: {r})"))
                    .unwrap_or_default()
            );
        }
    }
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
        Command::Build {
            manifest,
            out,
            force,
            max_bad_fraction,
            writer_memory_mib,
            no_dense,
            model,
            doc_vectors,
            chunk_vectors,
            graph_threads,
            shards,
            shard,
            reuse_vectors,
        } => {
            anyhow::ensure!(
                (0.0..=1.0).contains(&max_bad_fraction),
                "--max-bad-fraction must be between 0 and 1, got {max_bad_fraction}"
            );
            let corpus = CorpusManifest::load(&manifest)?;
            let options = BuildOptions {
                max_bad_fraction,
                writer_memory_bytes: writer_memory_mib.max(16) << 20,
                force,
                doc_vectors,
                chunk_precision: chunk_vectors,
                graph_threads,
                reuse_vectors,
                ..BuildOptions::default()
            };
            let mut embedder = if no_dense { None } else { Some(model.load()?) };
            let embedder = embedder.as_mut().map(|e| e as &mut dyn Embedder);
            let building = || format!("building {} from {}", out.display(), manifest.display());
            match shards {
                None => {
                    let report = build_index_with(&corpus, &out, &options, embedder)
                        .with_context(building)?;
                    print_sources(&report.manifest);
                    println!("{}", serde_json::to_string_pretty(&report.manifest)?);
                }
                Some(count) => {
                    let reports = build_shards(&corpus, &out, count, shard, &options, embedder)
                        .with_context(building)?;
                    if let Some(first) = reports.first() {
                        print_sources(&first.manifest);
                    }
                    let manifests: Vec<_> = reports.iter().map(|r| &r.manifest).collect();
                    println!("{}", serde_json::to_string_pretty(&manifests)?);
                }
            }
        }
        Command::Finalize { out } => {
            let report = stillweb_index::shard::finalize(&out)
                .with_context(|| format!("finalizing the shard set at {}", out.display()))?;
            println!(
                "{}",
                serde_json::json!({
                    "build_id": report.build_id,
                    "shards": report.shards,
                    "documents": report.documents,
                    "chunks": report.chunks,
                })
            );
        }
        Command::Revector {
            index,
            out,
            doc_vectors,
            chunk_vectors,
            graph_threads,
            force,
        } => {
            let change = Revector {
                doc_vectors,
                chunk_precision: chunk_vectors,
                graph_threads,
            };
            let manifest = revector(&index, &out, change, force).with_context(|| {
                format!(
                    "changing the vectors of {} into {}",
                    index.display(),
                    out.display()
                )
            })?;
            println!("{}", serde_json::to_string_pretty(&manifest)?);
        }
        Command::Verify { index } => match stillweb_index::checksums::verify(&index)? {
            Verified::All {
                files,
                bytes,
                elapsed,
            } => println!(
                "{}",
                serde_json::json!({
                    "files": files,
                    "bytes": bytes,
                    "seconds": elapsed.as_secs_f64(),
                    "gb_per_s": bytes as f64 / 1e9 / elapsed.as_secs_f64().max(1e-9),
                })
            ),
            Verified::NoChecksums => anyhow::bail!(
                "{} has no checksums.sha256 (built by an older stillweb): nothing to check; rebuild it to get them",
                index.display()
            ),
        },
        Command::Export {
            manifest,
            unit,
            limit,
            out,
        } => {
            let corpus = CorpusManifest::load(&manifest)?;
            let written = export::export(&corpus, unit, limit, &out)?;
            println!("{written}");
        }
        Command::BenchEmbed {
            texts,
            limit,
            model,
        } => {
            let texts = bench::load_texts(&texts, limit)?;
            let mut embedder = model.load()?;
            let config = stillweb_models::ModelConfig::load(&model.dir())?;
            let (tokenizer, _) = stillweb_models::tokens::load_tokenizer(
                &config.tokenizer_path(),
                config.max_tokens,
            )?;
            let tokens = tokenizer
                .encode_batch(texts.clone(), true)
                .map_err(|e| anyhow::anyhow!("tokenizing: {e}"))?
                .iter()
                .map(|e| e.get_ids().len())
                .sum();
            let report = bench::embed_throughput(&mut embedder, &texts, tokens, model.threads())?;
            println!("{}", serde_json::to_string_pretty(&report)?);
        }
        Command::BenchRerank {
            reranker,
            queries,
            passages,
            pool,
            pools_per_call,
            seconds,
            model,
        } => {
            let queries = bench::load_texts(&queries, None)?;
            let passages: Vec<String> = bench::load_texts(&passages, Some(20_000))?
                .into_iter()
                .map(|p| p.chars().take(500).collect())
                .collect();
            let mut reranker_model = model.load_reranker(&reranker)?;
            for &pool in &pool {
                for &per_call in &pools_per_call {
                    let report = bench::rerank_throughput(
                        &mut *reranker_model,
                        model.provider.to_string(),
                        &queries,
                        &passages,
                        pool,
                        per_call,
                        seconds,
                    )?;
                    println!("{}", serde_json::to_string(&report)?);
                }
            }
        }
        Command::BenchQueries {
            queries,
            concurrency,
            copies,
            batch,
            seconds,
            model,
        } => {
            let queries = bench::load_texts(&queries, None)?;
            let copies = if copies == 0 {
                std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
            } else {
                copies
            };
            let load = || -> anyhow::Result<Vec<Box<dyn Embedder>>> {
                (0..copies).map(|_| model.load()).collect()
            };
            let policy = stillweb_models::batcher::BatchPolicy {
                max_cost: batch,
                max_wait: std::time::Duration::from_millis(1),
                queue: 4096,
            };
            for (mode, worker) in [
                ("lent", EmbedWorker::lend_copies(load()?)),
                (
                    "batched",
                    EmbedWorker::spawn_batching(load()?, "bench-embed", policy)?,
                ),
            ] {
                let report =
                    bench::query_throughput(&worker, mode, copies, &queries, concurrency, seconds)?;
                println!("{}", serde_json::to_string(&report)?);
            }
        }
        Command::BenchGemm {
            rows,
            threads,
            seconds,
        } => {
            let threads = if threads == 0 {
                std::thread::available_parallelism().map_or(2, std::num::NonZeroUsize::get)
            } else {
                threads
            };
            let report = bench::gemm_throughput(rows, threads, seconds);
            println!("{}", serde_json::to_string_pretty(&report)?);
        }
        Command::Eval {
            target: Some(target),
            beir,
            items,
            ..
        } => {
            let started = std::time::Instant::now();
            let server = remote::Target::connect(&target)?;
            let (mut output, refused) = if let Some(dir) = beir {
                let set = load_beir(&dir)?;
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
            } else if let Some(path) = items {
                let items = load_items(&path)?;
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
            output["index"] = server.info["index"]["build_id"].clone();
            output["mode"] = server.info["search"]["mode"].clone();
            output["reranker"] = server.info["models"]["reranker"].clone();
            println!("{}", serde_json::to_string_pretty(&output)?);
        }
        Command::Eval {
            index,
            target: None,
            beir,
            items,
            ranking,
            model,
            reranker,
            rerank_pool,
        } => {
            let Some(index) = index else {
                anyhow::bail!("pass --index DIR or --target URL");
            };
            let index = SearchIndex::open(&index)?;
            let has_dense = index.manifest().dense.is_some();
            let mode = ranking
                .mode
                .unwrap_or(if has_dense { Mode::Hybrid } else { Mode::Bm25 });
            anyhow::ensure!(
                !mode.uses_dense() || has_dense,
                "--mode {mode:?} needs an index built with vectors (this one was built with --no-dense)"
            );
            let reranker = match (mode, &reranker) {
                (Mode::Rerank, Some(dir)) => Some(RerankWorker::spawn(
                    model.load_reranker(dir)?,
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
                rerank_pool: if reranker.is_some() { rerank_pool } else { 0 },
                ..ranking.params(mode)
            };
            let embedder = if mode.uses_dense() {
                Some(EmbedWorker::lend_copies(vec![model.load()?]))
            } else {
                None
            };
            let retriever = Retriever::new(Arc::new(index), embedder, reranker)?;
            let started = std::time::Instant::now();
            let mut output = if let Some(dir) = beir {
                let set = load_beir(&dir)?;
                serde_json::to_value(evaluate_beir(&retriever, &set, &params)?)?
            } else if let Some(path) = items {
                let items = load_items(&path)?;
                serde_json::to_value(evaluate_items(&retriever, &items, &params)?)?
            } else {
                anyhow::bail!("pass --beir DIR or --items FILE");
            };
            let index = retriever.index();
            output["seconds"] = started.elapsed().as_secs_f64().into();
            output["reranker"] = retriever.reranker_id().into();
            output["index"] = index.manifest().build_id.clone().into();
            output["params"] = serde_json::to_value(&params)?;
            output["mode"] = serde_json::to_value(mode)?;
            println!("{}", serde_json::to_string_pretty(&output)?);
        }
    }
    Ok(())
}
