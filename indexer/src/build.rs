//! `stillweb-indexer build`: a corpus manifest into an index, an overlay of one, or a set of
//! document shards (all of them, or one as a job of many); prints the build report.

use std::path::PathBuf;

use anyhow::Context;
use stillweb_corpus::manifest::CorpusManifest;
use stillweb_index::chunk_vectors::Precision;
use stillweb_index::dense::DocVectors;
use stillweb_index::{BuildOptions, IndexManifest, build_index_with, build_shards};
use stillweb_models::Embedder;

use crate::models::ModelArgs;

#[derive(clap::Args, Debug)]
pub struct Args {
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
    /// Indexing memory budget per index, in MiB (two indexes): more makes fewer segments to
    /// merge at the end, for that much more peak memory.
    #[arg(long, default_value_t = stillweb_index::WRITER_MEMORY_MIB)]
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
    /// Nodes per document graph segment at most: the graph is built one segment at a time
    /// (about 0.55 KiB of memory a node), and a search descends into every segment, so smaller
    /// segments lower the build's peak memory and cost query time and recall.
    #[arg(long, default_value_t = BuildOptions::default().graph_segment_nodes,
        value_parser = clap::value_parser!(u64).range(stillweb_index::dense::MIN_GRAPH_SEGMENT_NODES..))]
    graph_segment_nodes: u64,
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
    /// Build an overlay of this index: only the manifest's documents, under ordinals after the
    /// base's, served with it by `stillweb-server --index BASE --overlay OUT`. Repeat to
    /// stack: the base first, then the overlays already built on it, in order. A URL the
    /// layers below hold is refused, with the list of them. With --shards N, BASE is a set of
    /// N shards and the overlay a set of N (shard I served over the base's shard I; with
    /// --shard, finalize with `finalize --out OUT --overlay-of BASE`).
    #[arg(long)]
    overlay_of: Vec<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(
        (0.0..=1.0).contains(&args.max_bad_fraction),
        "--max-bad-fraction must be between 0 and 1, got {}",
        args.max_bad_fraction
    );
    let corpus = CorpusManifest::load(&args.manifest)?;
    let options = BuildOptions {
        max_bad_fraction: args.max_bad_fraction,
        writer_memory_bytes: args.writer_memory_mib.max(16) << 20,
        force: args.force,
        doc_vectors: args.doc_vectors,
        chunk_precision: args.chunk_vectors,
        graph_threads: args.graph_threads,
        graph_segment_nodes: args.graph_segment_nodes,
        reuse_vectors: args.reuse_vectors.clone(),
        overlay_of: args.overlay_of.clone(),
        preset: args.model.preset.filter(|_| !args.no_dense),
        ..BuildOptions::default()
    };
    let mut embedder = if args.no_dense {
        None
    } else {
        Some(args.model.load()?)
    };
    let embedder = embedder.as_mut().map(|e| e as &mut dyn Embedder);
    let building = || {
        format!(
            "building {} from {}",
            args.out.display(),
            args.manifest.display()
        )
    };
    match args.shards {
        None => {
            let report =
                build_index_with(&corpus, &args.out, &options, embedder).with_context(building)?;
            print_sources(&report.manifest);
            println!("{}", serde_json::to_string_pretty(&report.manifest)?);
        }
        Some(count) => {
            let reports = build_shards(&corpus, &args.out, count, args.shard, &options, embedder)
                .with_context(building)?;
            if let Some(first) = reports.first() {
                print_sources(&first.manifest);
            }
            let manifests: Vec<_> = reports.iter().map(|r| &r.manifest).collect();
            println!("{}", serde_json::to_string_pretty(&manifests)?);
        }
    }
    Ok(())
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
    let dates = &manifest.dates;
    let span = |t: Option<i64>| t.map_or_else(|| "-".into(), stillweb_corpus::date::day);
    eprintln!(
        "dates: {} documents dated ({} .. {}), {} undated (no bounded date filter matches them); as of {}",
        dates.dated,
        span(dates.oldest),
        span(dates.newest),
        dates.undated,
        span(dates.as_of)
    );
}
