//! The ONNX Runtime embedder: tokenize (explicit truncation and longest-in-batch padding, whatever
//! the tokenizer.json says), run the model, pool (mean or last token), normalise.
//!
//! Texts are embedded in length-sorted batches, so that padding is small, and returned in the
//! caller's order.

use std::borrow::Cow;
use std::path::Path;

use ndarray::{Array2, ArrayViewD, Axis, Ix2, Ix3};
use ort::session::{Session, SessionInputValue};
use ort::value::Tensor;
use tokenizers::{PaddingDirection, PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use crate::runtime::{ExecutionProvider, open_session};
use crate::{Embedder, ModelConfig, ModelError, Pooling, normalize};

/// Texts per model call.
const BATCH: usize = 32;

/// An embedder backed by an ONNX model and a Hugging Face tokenizer.
pub struct OnnxEmbedder {
    config: ModelConfig,
    session: Session,
    tokenizer: Tokenizer,
    input_names: Vec<String>,
}

impl std::fmt::Debug for OnnxEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnnxEmbedder")
            .field("model", &self.config.id)
            .finish()
    }
}

/// Loads a tokenizer with explicit truncation to `max_tokens` and longest-in-batch padding.
pub fn load_tokenizer(
    path: &Path,
    max_tokens: usize,
    direction: PaddingDirection,
) -> Result<Tokenizer, ModelError> {
    if !path.is_file() {
        return Err(ModelError::Missing {
            path: path.to_path_buf(),
            hint: "run `models/fetch`".into(),
        });
    }
    let mut tokenizer = Tokenizer::from_file(path)
        .map_err(|e| ModelError::Tokenizer(format!("{}: {e}", path.display())))?;
    let (pad_id, pad_token) = tokenizer
        .get_padding()
        .map(|p| (p.pad_id, p.pad_token.clone()))
        .unwrap_or((0, "[PAD]".to_string()));
    tokenizer.with_padding(Some(PaddingParams {
        strategy: PaddingStrategy::BatchLongest,
        direction,
        pad_id,
        pad_token,
        ..PaddingParams::default()
    }));
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: max_tokens,
            ..TruncationParams::default()
        }))
        .map_err(|e| ModelError::Tokenizer(e.to_string()))?;
    Ok(tokenizer)
}

impl OnnxEmbedder {
    /// Loads the model described by `DIR/model.toml`.
    pub fn load(
        dir: &Path,
        provider: ExecutionProvider,
        threads: usize,
    ) -> Result<OnnxEmbedder, ModelError> {
        let config = ModelConfig::load(dir)?;
        if config.kind != "embedder" {
            return Err(ModelError::Config {
                path: dir.join("model.toml"),
                message: format!("kind is `{}`, expected `embedder`", config.kind),
            });
        }
        let tokenizer = load_tokenizer(
            &config.tokenizer_path(),
            config.max_tokens,
            PaddingDirection::Right,
        )?;
        let session = open_session(&config.onnx_path(), provider, threads)?;
        let input_names: Vec<String> = session
            .inputs()
            .iter()
            .map(|i| i.name().to_string())
            .collect();
        for name in &input_names {
            if !matches!(
                name.as_str(),
                "input_ids" | "attention_mask" | "token_type_ids" | "position_ids"
            ) {
                return Err(ModelError::Config {
                    path: config.onnx_path(),
                    message: format!("unsupported model input `{name}`"),
                });
            }
        }
        Ok(OnnxEmbedder {
            config,
            session,
            tokenizer,
            input_names,
        })
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    fn embed(&mut self, texts: &[&str], prefix: &str) -> Result<Vec<Vec<f32>>, ModelError> {
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(texts[i].len()));
        let mut out = vec![Vec::new(); texts.len()];
        for batch in order.chunks(BATCH) {
            let inputs: Vec<String> = batch
                .iter()
                .map(|&i| format!("{prefix}{}", texts[i]))
                .collect();
            let vectors = self.embed_batch(&inputs)?;
            for (&i, v) in batch.iter().zip(vectors) {
                out[i] = v;
            }
        }
        Ok(out)
    }

    fn embed_batch(&mut self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        let rows = encodings.len();
        let cols = encodings.first().map_or(0, |e| e.len());
        let mut ids = Array2::<i64>::zeros((rows, cols));
        let mut mask = Array2::<i64>::zeros((rows, cols));
        let mut types = Array2::<i64>::zeros((rows, cols));
        let mut positions = Array2::<i64>::zeros((rows, cols));
        for (r, e) in encodings.iter().enumerate() {
            let mut position = 0i64;
            for c in 0..cols {
                ids[[r, c]] = i64::from(e.get_ids()[c]);
                mask[[r, c]] = i64::from(e.get_attention_mask()[c]);
                types[[r, c]] = i64::from(e.get_type_ids()[c]);
                positions[[r, c]] = position;
                position += mask[[r, c]];
            }
        }
        let mut inputs: Vec<(Cow<'_, str>, SessionInputValue<'_>)> = Vec::new();
        for name in &self.input_names {
            let array = match name.as_str() {
                "input_ids" => ids.clone(),
                "attention_mask" => mask.clone(),
                "token_type_ids" => types.clone(),
                _ => positions.clone(),
            };
            inputs.push((Cow::Owned(name.clone()), Tensor::from_array(array)?.into()));
        }
        let outputs = self.session.run(inputs)?;
        let hidden: ArrayViewD<'_, f32> = outputs[0].try_extract_array::<f32>()?;
        let dim = self.config.dimension;
        let mut vectors = Vec::with_capacity(rows);
        match hidden.ndim() {
            2 => {
                let pooled = hidden
                    .into_dimensionality::<Ix2>()
                    .map_err(|e| ModelError::Onnx(e.to_string()))?;
                for row in pooled.axis_iter(Axis(0)) {
                    vectors.push(row.to_vec());
                }
            }
            3 => {
                let states = hidden
                    .into_dimensionality::<Ix3>()
                    .map_err(|e| ModelError::Onnx(e.to_string()))?;
                for (r, tokens) in states.axis_iter(Axis(0)).enumerate() {
                    let real: Vec<usize> = (0..cols).filter(|&c| mask[[r, c]] != 0).collect();
                    let v = match self.config.pooling {
                        Pooling::Mean => {
                            let mut sum = vec![0f32; tokens.shape()[1]];
                            for &c in &real {
                                for (s, x) in sum.iter_mut().zip(tokens.row(c)) {
                                    *s += x;
                                }
                            }
                            let n = real.len().max(1) as f32;
                            sum.iter_mut().for_each(|s| *s /= n);
                            sum
                        }
                        Pooling::LastToken => real.last().map_or_else(
                            || vec![0.0; tokens.shape()[1]],
                            |&c| tokens.row(c).to_vec(),
                        ),
                        Pooling::Cls => tokens.row(0).to_vec(),
                    };
                    vectors.push(v);
                }
            }
            n => {
                return Err(ModelError::Onnx(format!(
                    "model output has {n} dimensions, expected 2 or 3"
                )));
            }
        }
        for v in &mut vectors {
            if v.len() != dim {
                return Err(ModelError::Config {
                    path: self.config.dir.join("model.toml"),
                    message: format!(
                        "model produces {}-d vectors but the config says {dim}",
                        v.len()
                    ),
                });
            }
            if self.config.normalize {
                normalize(v);
            }
        }
        Ok(vectors)
    }
}

impl Embedder for OnnxEmbedder {
    fn model_id(&self) -> &str {
        &self.config.id
    }

    fn dimension(&self) -> usize {
        self.config.dimension
    }

    fn embed_queries(&mut self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        let prefix = self.config.query_prefix.clone();
        self.embed(texts, &prefix)
    }

    fn embed_documents(&mut self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        let prefix = self.config.document_prefix.clone();
        self.embed(texts, &prefix)
    }
}
