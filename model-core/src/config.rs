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

/// What a model directory holds; decides which fields of [`ModelConfig`] apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelKind {
    /// Text → vector (`pooling`, `dimension`, prefixes).
    Embedder,
    /// BERT-style (query, passage) pair → one relevance logit.
    CrossEncoder,
    /// Qwen3-Reranker: a causal LM judging yes/no under its prompt template (`no_token_id`,
    /// `yes_token_id`, `instruction`).
    Qwen3Reranker,
}

impl ModelKind {
    pub fn name(self) -> &'static str {
        match self {
            ModelKind::Embedder => "embedder",
            ModelKind::CrossEncoder => "cross-encoder",
            ModelKind::Qwen3Reranker => "qwen3-reranker",
        }
    }
}

/// What runs a model on the CPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Engine {
    /// ONNX Runtime.
    #[default]
    Onnx,
    /// [`crate::native`]: int8 products with per-token activation scales.
    NativeInt8,
}

impl std::str::FromStr for Engine {
    type Err = String;

    fn from_str(s: &str) -> Result<Engine, String> {
        match s {
            "onnx" => Ok(Engine::Onnx),
            "native-int8" => Ok(Engine::NativeInt8),
            other => Err(format!("unknown engine `{other}` (onnx, native-int8)")),
        }
    }
}

/// Which end of a batch row the padding goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PaddingSide {
    Left,
    Right,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// Model identifier recorded in index manifests and `/info`.
    pub id: String,
    pub kind: ModelKind,
    /// ONNX file, relative to the config's directory.
    pub onnx: String,
    /// `tokenizer.json`, relative to the config's directory.
    pub tokenizer: String,
    /// Inputs are truncated to this many tokens.
    pub max_tokens: usize,
    /// What runs the model on the CPU: ONNX Runtime over `onnx` (the default), or stillweb's
    /// own int8 BERT encoder over `weights` (embedders only; GPUs always use ONNX Runtime).
    #[serde(default)]
    pub engine: Engine,
    /// Safetensors weights (with Hugging Face's `config.json` beside them) for the native engine,
    /// relative to the config's directory.
    #[serde(default)]
    pub weights: Option<String>,
    /// Weight format, for the index manifest (`fp32`, `int8-dynamic`, ...).
    #[serde(default)]
    pub quantization: String,
    /// Where padding goes in a batch. Scores must not depend on it (tested); left padding keeps
    /// the last real token of every row in the last column, as decoder models are usually run.
    #[serde(default)]
    pub padding_side: Option<PaddingSide>,
    /// Texts or pairs per model call (default: 32 for embedders, 16 for rerankers).
    #[serde(default)]
    pub batch_size: Option<usize>,

    // Embedders.
    #[serde(default)]
    pub pooling: Option<Pooling>,
    #[serde(default = "yes")]
    pub normalize: bool,
    #[serde(default)]
    pub dimension: usize,
    /// Prepended to queries (Qwen3-Embedding: `Instruct: ...\nQuery:`).
    #[serde(default)]
    pub query_prefix: String,
    #[serde(default)]
    pub document_prefix: String,

    // Qwen3-Reranker.
    /// Token ids whose logits at the last position are the model's "no" and "yes"; checked
    /// against the tokenizer at load.
    #[serde(default)]
    pub no_token_id: Option<u32>,
    #[serde(default)]
    pub yes_token_id: Option<u32>,
    /// The task instruction of the prompt template (default: the model card's web-search one).
    #[serde(default)]
    pub instruction: Option<String>,

    #[serde(skip)]
    pub dir: PathBuf,
}

fn yes() -> bool {
    true
}

impl ModelConfig {
    /// Reads `DIR/model.toml` and checks that the fields its kind needs are there.
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
        let invalid = |message: &str| ModelError::Config {
            path: path.clone(),
            message: message.to_string(),
        };
        if config.max_tokens == 0 || config.batch_size == Some(0) {
            return Err(invalid("`max_tokens` and `batch_size` must be positive"));
        }
        match config.kind {
            ModelKind::Embedder if config.dimension == 0 || config.pooling.is_none() => {
                return Err(invalid(
                    "an embedder needs `pooling` (mean, last_token, cls) and a positive `dimension`",
                ));
            }
            ModelKind::Qwen3Reranker
                if config.no_token_id.is_none() || config.yes_token_id.is_none() =>
            {
                return Err(invalid(
                    "a qwen3-reranker needs `no_token_id` and `yes_token_id`",
                ));
            }
            _ => {}
        }
        config.dir = dir.to_path_buf();
        Ok(config)
    }

    /// Fails unless this is a `kind` model.
    pub fn expect_kind(&self, kinds: &[ModelKind]) -> Result<(), ModelError> {
        if kinds.contains(&self.kind) {
            return Ok(());
        }
        let expected: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
        Err(ModelError::Config {
            path: self.dir.join("model.toml"),
            message: format!(
                "kind is `{}`, expected {}",
                self.kind.name(),
                expected.join(" or ")
            ),
        })
    }

    pub fn onnx_path(&self) -> PathBuf {
        self.dir.join(&self.onnx)
    }

    pub fn weights_path(&self) -> Option<PathBuf> {
        self.weights.as_ref().map(|w| self.dir.join(w))
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

/// Where `models/make-fixtures` puts the random-weight test rerankers.
pub fn fixtures_dir() -> PathBuf {
    models_dir().join("fixtures")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_parse_by_their_config_names() {
        assert_eq!("onnx".parse(), Ok(Engine::Onnx));
        assert_eq!("native-int8".parse(), Ok(Engine::NativeInt8));
        assert_eq!(
            "native".parse::<Engine>(),
            Err("unknown engine `native` (onnx, native-int8)".to_string())
        );
        let config: ModelConfig = toml::from_str(
            "id = \"m\"\nkind = \"embedder\"\nonnx = \"m.onnx\"\ntokenizer = \"t.json\"\nmax_tokens = 8\nengine = \"native-int8\"",
        )
        .expect("config");
        assert_eq!(config.engine, Engine::NativeInt8);
    }
}
