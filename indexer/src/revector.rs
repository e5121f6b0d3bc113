//! `stillweb-indexer revector`: a copy of an index with its dense part changed from its stored
//! chunk vectors, without embedding again; `upgrade`: a copy of a previous-format index in this
//! format, likewise.

use std::path::PathBuf;

use anyhow::Context;
use stillweb_index::chunk_vectors::Precision;
use stillweb_index::dense::DocVectors;
use stillweb_index::revector::{Revector, revector};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Index built with an embedder.
    #[arg(long)]
    index: PathBuf,
    /// Output index directory (published by rename, like a build).
    #[arg(long)]
    out: PathBuf,
    /// best-chunk, mean or lead (rebuilds the graph).
    #[arg(long, required_unless_present_any = ["chunk_vectors", "graph_segment_nodes"])]
    doc_vectors: Option<DocVectors>,
    /// f32, f16 or i8, no higher than the index's own.
    #[arg(long)]
    chunk_vectors: Option<Precision>,
    /// Rebuild the graph in segments of at most this many nodes (as `build`'s flag; without it
    /// a rebuilt graph is split as the source's was).
    #[arg(long, value_parser = clap::value_parser!(u64).range(stillweb_index::dense::MIN_GRAPH_SEGMENT_NODES..))]
    graph_segment_nodes: Option<u64>,
    /// Threads inserting the document graph; 0 = one per core, 1 = reproducible byte for byte.
    #[arg(long, default_value_t = 0)]
    graph_threads: usize,
    /// Replace an existing index at --out.
    #[arg(long)]
    force: bool,
}

/// Prints the new index's manifest (JSON).
pub fn run(args: Args) -> anyhow::Result<()> {
    let change = Revector {
        doc_vectors: args.doc_vectors,
        chunk_precision: args.chunk_vectors,
        graph_segment_nodes: args.graph_segment_nodes,
        graph_threads: args.graph_threads,
    };
    let manifest = revector(&args.index, &args.out, change, args.force).with_context(|| {
        format!(
            "changing the vectors of {} into {}",
            args.index.display(),
            args.out.display()
        )
    })?;
    println!("{}", serde_json::to_string_pretty(&manifest)?);
    Ok(())
}

#[derive(clap::Args, Debug)]
pub struct UpgradeArgs {
    /// Index of format version 4.
    #[arg(long)]
    index: PathBuf,
    /// Output index directory (published by rename, like a build; may not be --index).
    #[arg(long)]
    out: PathBuf,
    /// Replace an existing index at --out.
    #[arg(long)]
    force: bool,
}

/// Prints the upgraded index's manifest (JSON).
pub fn upgrade(args: UpgradeArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.index != args.out,
        "--out must differ from --index: the upgrade links the index's files into a new one"
    );
    let manifest = stillweb_index::revector::upgrade(&args.index, &args.out, args.force)
        .with_context(|| {
            format!(
                "upgrading {} into {}",
                args.index.display(),
                args.out.display()
            )
        })?;
    println!("{}", serde_json::to_string_pretty(&manifest)?);
    Ok(())
}
