//! The `bench-*` subcommands, one module each: instruments that measure the models on this
//! machine the way the index build and the server use them, printing JSON.

pub mod embed;
pub mod gemm;
pub mod queries;
pub mod query_batches;
pub mod rerank;

use std::path::Path;

use anyhow::Context;

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
