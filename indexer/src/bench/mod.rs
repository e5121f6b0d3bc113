//! The `bench-*` subcommands, one module each: instruments that measure the models on this
//! machine the way the index build and the server use them, printing JSON.

pub mod embed;
pub mod gemm;
pub mod queries;
pub mod query_batches;
pub mod rerank;

use std::path::Path;

use anyhow::Context;

use crate::models::ModelArgs;

/// The tokens `model`'s tokenizer gives `texts` (special tokens included, nothing padded), each
/// with `prefix` (a model's query or document prefix) before it.
pub fn count_tokens(model: &ModelArgs, texts: &[String], prefix: Prefix) -> anyhow::Result<usize> {
    let config = stillweb_models::ModelConfig::load(&model.dir())?;
    let (tokenizer, _) =
        stillweb_models::tokens::load_tokenizer(&config.tokenizer_path(), config.max_tokens)?;
    let prefix = match prefix {
        Prefix::None => "",
        Prefix::Query => config.query_prefix.as_str(),
    };
    let inputs = texts.iter().map(|t| format!("{prefix}{t}")).collect();
    Ok(stillweb_models::tokens::encode_all(&tokenizer, inputs)?
        .iter()
        .map(|e| e.get_ids().len())
        .sum())
}

/// What [`count_tokens`] puts before each text.
#[derive(Debug, Clone, Copy)]
pub enum Prefix {
    None,
    Query,
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
