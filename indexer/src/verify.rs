//! `stillweb-indexer verify`: every file of an index against the checksums its build wrote (what
//! the server does before it reports ready).

use std::path::PathBuf;

use stillweb_index::checksums::Verified;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[arg(long, env = "STILLWEB_INDEX")]
    index: PathBuf,
}

/// Prints files, bytes, seconds and GB/s (JSON), or fails naming the first file that changed.
pub fn run(args: Args) -> anyhow::Result<()> {
    match stillweb_index::checksums::verify(&args.index)? {
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
            args.index.display()
        ),
    }
    Ok(())
}
