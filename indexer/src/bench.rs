//! `stillweb-indexer bench-embed`: embedding throughput on a fixed set of texts, the same way the
//! index build embeds (one call per 1,024 texts), so it can be set beside Python onnxruntime on
//! identical inputs (`benchmarks/embed_onnxruntime.py`).

use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use serde::Serialize;
use stillweb_models::Embedder;

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

/// Texts from JSON Lines: each line a JSON string or an object with a `text` field.
pub fn load_texts(path: &Path, limit: Option<usize>) -> anyhow::Result<Vec<String>> {
    let data =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut texts = Vec::new();
    for (n, line) in data
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let value: serde_json::Value = serde_json::from_str(line)
            .with_context(|| format!("{}:{}: not JSON", path.display(), n + 1))?;
        let text = match &value {
            serde_json::Value::String(s) => s.clone(),
            v => v["text"]
                .as_str()
                .with_context(|| {
                    format!(
                        "{}:{}: expected a string or {{\"text\": …}}",
                        path.display(),
                        n + 1
                    )
                })?
                .to_string(),
        };
        texts.push(text);
        if limit.is_some_and(|l| texts.len() >= l) {
            break;
        }
    }
    anyhow::ensure!(!texts.is_empty(), "{} holds no texts", path.display());
    Ok(texts)
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
