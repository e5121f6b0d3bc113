//! `stillweb-indexer export`: a corpus's documents or chunks as JSON Lines, exactly as the build
//! reads and splits them, so that other engines (Lucene, bm25s, Python onnxruntime) are measured
//! on the same inputs.

use std::collections::HashSet;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::Context;
use stillweb_corpus::chunk::{ChunkerConfig, chunk_text};
use stillweb_corpus::ingest::{self, Item, SourceContext};
use stillweb_corpus::manifest::CorpusManifest;
use stillweb_corpus::url_norm::normalize_url;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[arg(long)]
    manifest: PathBuf,
    #[arg(long, value_enum)]
    unit: Unit,
    /// Stop after N lines.
    #[arg(long)]
    limit: Option<usize>,
    #[arg(long)]
    out: PathBuf,
}

/// Prints the count of what was written.
pub fn run(args: Args) -> anyhow::Result<()> {
    let corpus = CorpusManifest::load(&args.manifest)?;
    println!("{}", export(&corpus, args.unit, args.limit, &args.out)?);
    Ok(())
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Unit {
    /// `{"id", "url", "title", "contents"}` per document (`contents` is title and text, the
    /// fields the BM25 document index searches; the shape Anserini's JsonCollection reads).
    Documents,
    /// `{"text"}` per chunk.
    Chunks,
}

/// Writes up to `limit` units; returns how many were written. Duplicate URLs are skipped as the
/// build skips them; bad records are skipped silently (the build reports them).
fn export(
    manifest: &CorpusManifest,
    unit: Unit,
    limit: Option<usize>,
    out: &Path,
) -> anyhow::Result<usize> {
    let file = std::fs::File::create(out).with_context(|| format!("creating {}", out.display()))?;
    let mut out = std::io::BufWriter::new(file);
    let chunker = ChunkerConfig::default();
    let mut seen = HashSet::new();
    let mut written = 0;
    for (i, source) in manifest.sources.iter().enumerate() {
        let context = SourceContext {
            name: manifest.source_name(i),
            default_date: source
                .default_date
                .clone()
                .unwrap_or_else(|| "1970-01-01".into()),
        };
        for path in manifest.resolve(i)? {
            // Files beside the data that are not data (a multistream dump's index), as the
            // build skips them.
            if ingest::companion_reason(&path, source.format).is_some() {
                continue;
            }
            for item in ingest::open(&path, source.format, &context)? {
                let Item::Document(doc) = item else { continue };
                let Ok(key) = normalize_url(&doc.url) else {
                    continue;
                };
                if !seen.insert(key) {
                    continue;
                }
                let lines = match unit {
                    Unit::Documents => vec![serde_json::json!({
                        "id": doc.id,
                        "url": doc.url,
                        "title": doc.title,
                        "contents": format!("{}\n{}", doc.title, doc.text),
                    })],
                    Unit::Chunks => chunk_text(&doc.text, &chunker)
                        .into_iter()
                        .map(|c| serde_json::json!({ "text": c.slice(&doc.text) }))
                        .collect(),
                };
                for line in lines {
                    if limit.is_some_and(|l| written >= l) {
                        out.flush()?;
                        return Ok(written);
                    }
                    serde_json::to_writer(&mut out, &line)?;
                    out.write_all(b"\n")?;
                    written += 1;
                }
            }
        }
    }
    out.flush()?;
    Ok(written)
}
