//! Model config files and the model cache that `models/fetch` fills.
//!
//! A model directory holds `model.toml` (this struct), the ONNX file and its tokenizer. Choosing
//! a model, its pooling, prefixes and limits is a config change, never a code edit.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::ModelError;

/// How token states become one vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Pooling {
    /// Attention-masked mean over tokens (sentence-transformers BERT models).
    Mean,
    /// The last real token's state (Qwen3-Embedding and other decoder embedders).
    LastToken,
    /// The first token's state.
    Cls,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// Model identifier recorded in index manifests.
    pub id: String,
    /// `embedder` (rerankers come with their own kinds).
    pub kind: String,
    /// ONNX file, relative to the config's directory.
    pub onnx: String,
    /// `tokenizer.json`, relative to the config's directory.
    pub tokenizer: String,
    pub pooling: Pooling,
    #[serde(default = "yes")]
    pub normalize: bool,
    pub dimension: usize,
    /// Inputs are truncated to this many tokens.
    pub max_tokens: usize,
    /// Prepended to queries (Qwen3-Embedding: `Instruct: ...\nQuery:`).
    #[serde(default)]
    pub query_prefix: String,
    #[serde(default)]
    pub document_prefix: String,
    /// Weight format, for the index manifest (`fp32`, `int8-dynamic`, ...).
    #[serde(default)]
    pub quantization: String,
    #[serde(skip)]
    pub dir: PathBuf,
}

fn yes() -> bool {
    true
}

impl ModelConfig {
    /// Reads `DIR/model.toml`.
    pub fn load(dir: &Path) -> Result<ModelConfig, ModelError> {
        let path = dir.join("model.toml");
        let text = std::fs::read_to_string(&path).map_err(|e| ModelError::Missing {
            path: path.clone(),
            hint: format!("{e}; run `models/fetch` to download the default models"),
        })?;
        let mut config: ModelConfig = toml::from_str(&text).map_err(|e| ModelError::Config {
            path: path.clone(),
            message: e.to_string(),
        })?;
        if config.dimension == 0 || config.max_tokens == 0 {
            return Err(ModelError::Config {
                path,
                message: "`dimension` and `max_tokens` must be positive".into(),
            });
        }
        config.dir = dir.to_path_buf();
        Ok(config)
    }

    pub fn onnx_path(&self) -> PathBuf {
        self.dir.join(&self.onnx)
    }

    pub fn tokenizer_path(&self) -> PathBuf {
        self.dir.join(&self.tokenizer)
    }
}

/// Where `models/fetch` puts models: `$STILLWEB_MODELS`, else `$XDG_CACHE_HOME/stillweb/models`,
/// else `~/.cache/stillweb/models`.
pub fn models_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("STILLWEB_MODELS") {
        return PathBuf::from(dir);
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from(".cache"));
    cache.join("stillweb").join("models")
}

/// The default embedder's directory in the model cache.
pub fn default_embedder_dir() -> PathBuf {
    models_dir().join("all-minilm-l6-v2")
}
