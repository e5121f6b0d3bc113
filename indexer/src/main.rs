//! `stillweb-indexer`: builds an index from a corpus manifest and evaluates retrieval quality.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Parser, Subcommand};
use stillweb_corpus::manifest::CorpusManifest;
use stillweb_index::eval::{evaluate_beir, evaluate_items, load_beir, load_items};
use stillweb_index::fusion::Fusion;
use stillweb_index::{BuildOptions, SearchIndex, SearchParams, build_index};

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
    },
    /// Evaluate retrieval quality; prints JSON.
    Eval {
        /// Index directory.
        #[arg(long, env = "STILLWEB_INDEX")]
        index: PathBuf,
        /// A BEIR dataset directory (queries.jsonl, qrels/test.tsv): prints ndcg@10 and recall@100.
        #[arg(long, conflicts_with = "items", required_unless_present = "items")]
        beir: Option<PathBuf>,
        /// Fabricated items (JSON Lines with question, gold_url, negatives): prints gold@1, gold@10.
        #[arg(long)]
        items: Option<PathBuf>,
        #[command(flatten)]
        ranking: RankingArgs,
    },
}

/// Ranking parameters shared with the server.
#[derive(clap::Args, Debug)]
struct RankingArgs {
    /// Candidate documents from stage 1.
    #[arg(long, default_value_t = 100)]
    candidates: usize,
    /// Weight of the best chunk's score in stage 2.
    #[arg(long, default_value_t = SearchParams::default().chunk_weight)]
    chunk_weight: f32,
    /// Weight of the document's score in stage 2.
    #[arg(long, default_value_t = SearchParams::default().doc_weight)]
    doc_weight: f32,
    /// Use reciprocal-rank fusion with this k instead of normalised weighted fusion.
    #[arg(long)]
    rrf_k: Option<f32>,
}

impl RankingArgs {
    fn params(&self) -> SearchParams {
        SearchParams {
            candidates: self.candidates,
            chunk_weight: self.chunk_weight,
            doc_weight: self.doc_weight,
            fusion: self.rrf_k.map_or(Fusion::Weighted, |k| Fusion::Rrf { k }),
            ..SearchParams::default()
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
                ..BuildOptions::default()
            };
            let report = build_index(&corpus, &out, &options).with_context(|| {
                format!("building {} from {}", out.display(), manifest.display())
            })?;
            for source in &report.manifest.sources {
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
            println!("{}", serde_json::to_string_pretty(&report.manifest)?);
        }
        Command::Eval {
            index,
            beir,
            items,
            ranking,
        } => {
            let index = SearchIndex::open(&index)?;
            let params = ranking.params();
            let output = if let Some(dir) = beir {
                let set = load_beir(&dir)?;
                serde_json::to_value(evaluate_beir(&index, &set, &params)?)?
            } else if let Some(path) = items {
                let items = load_items(&path)?;
                serde_json::to_value(evaluate_items(&index, &items, &params)?)?
            } else {
                anyhow::bail!("pass --beir DIR or --items FILE");
            };
            let mut output = output;
            output["index"] = index.manifest().build_id.clone().into();
            output["params"] = serde_json::to_value(&params)?;
            println!("{}", serde_json::to_string_pretty(&output)?);
        }
    }
    Ok(())
}
