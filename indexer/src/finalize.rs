//! `stillweb-indexer finalize`: a shard set built by `build --shards N --shard I` jobs made
//! servable: the shards checked to belong together and given the corpus-wide BM25 statistics.

use std::path::PathBuf;

use anyhow::Context;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// The set's directory (holding shard-0 … shard-{N-1}).
    #[arg(long)]
    out: PathBuf,
    /// For an overlay set (built with `--shards N --overlay-of BASE`): the sets it was built
    /// on, the base set first, as the build was given them.
    #[arg(long)]
    overlay_of: Vec<PathBuf>,
}

/// Prints the set's build id and counts (JSON).
pub fn run(args: Args) -> anyhow::Result<()> {
    let report = stillweb_index::shard::finalize_over(&args.out, &args.overlay_of)
        .with_context(|| format!("finalizing the shard set at {}", args.out.display()))?;
    println!(
        "{}",
        serde_json::json!({
            "build_id": report.build_id,
            "shards": report.shards,
            "documents": report.documents,
            "chunks": report.chunks,
        })
    );
    Ok(())
}
