//! `stillweb-indexer bench-embed`: embedding throughput on a fixed set of texts, the same way the
//! index build embeds (one call per 1,024 texts), so it can be set beside Python onnxruntime on
//! identical inputs (`benchmarks/embed_onnxruntime.py`).

use std::path::PathBuf;
use std::time::Instant;

use serde::Serialize;
use stillweb_models::Embedder;

use crate::models::ModelArgs;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[arg(long)]
    texts: PathBuf,
    /// Use only the first N texts.
    #[arg(long)]
    limit: Option<usize>,
    #[command(flatten)]
    model: ModelArgs,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let Args {
        texts,
        limit,
        model,
    } = args;
    let texts = super::load_texts(&texts, limit)?;
    let mut embedder = model.load()?;
    let tokens = super::count_tokens(&model, &texts, super::Prefix::None)?;
    let report = embed_throughput(&mut embedder, &texts, tokens, model.threads())?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

#[derive(Debug, Serialize)]
pub struct EmbedThroughput {
    pub model: String,
    pub threads: usize,
    pub texts: usize,
    /// Real (unpadded) tokens, with the model's special tokens and truncation.
    pub tokens: usize,
    pub seconds: f64,
    pub texts_per_second: f64,
    pub tokens_per_second: f64,
}

/// Embeds `texts` once to warm up (first calls allocate), then times a second pass.
pub fn embed_throughput(
    embedder: &mut dyn Embedder,
    texts: &[String],
    tokens: usize,
    threads: usize,
) -> anyhow::Result<EmbedThroughput> {
    const CALL: usize = 1024;
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    embedder.embed_documents(&refs[..refs.len().min(64)])?;
    let started = Instant::now();
    for call in refs.chunks(CALL) {
        embedder.embed_documents(call)?;
    }
    let seconds = started.elapsed().as_secs_f64();
    Ok(EmbedThroughput {
        model: embedder.model_id().to_string(),
        threads,
        texts: texts.len(),
        tokens,
        seconds,
        texts_per_second: texts.len() as f64 / seconds,
        tokens_per_second: tokens as f64 / seconds,
    })
}
