//! The ONNX Runtime embedder: tokenize (explicit truncation; longest-in-batch padding on the
//! configured side), run the model, pool (mean, last real token or first real token), normalise.
//!
//! Texts are tokenized first and embedded in batches of similar token counts, so that little of
//! each batch is padding (sorting by characters left ~40% padding on scientific text), and
//! returned in the caller's order.

use std::path::Path;

use ndarray::{ArrayViewD, Axis, Ix2, Ix3};
use ort::session::Session;
use tokenizers::Tokenizer;

use crate::batch::{TokenBatch, TokenRow, input_names};
use crate::onnx;
use crate::runtime::{ExecutionProvider, open_session};
use crate::tokens::{load_tokenizer, pool};
use crate::{Embedder, ModelConfig, ModelError, ModelKind, PaddingSide, Pooling, normalize};

/// Texts per model call unless the config says otherwise.
const BATCH: usize = 32;

/// An embedder backed by an ONNX model and a Hugging Face tokenizer.
pub struct OnnxEmbedder {
    config: ModelConfig,
    pooling: Pooling,
    side: PaddingSide,
    session: Session,
    tokenizer: Tokenizer,
    pad_id: u32,
    input_names: Vec<String>,
}

impl std::fmt::Debug for OnnxEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnnxEmbedder")
            .field("model", &self.config.id)
            .finish()
    }
}

impl OnnxEmbedder {
    /// Loads the model described by `DIR/model.toml`.
    pub fn load(
        dir: &Path,
        provider: ExecutionProvider,
        threads: usize,
    ) -> Result<OnnxEmbedder, ModelError> {
        let config = ModelConfig::load(dir)?;
        config.expect_kind(&[ModelKind::Embedder])?;
        let (tokenizer, pad_id) = load_tokenizer(&config.tokenizer_path(), config.max_tokens)?;
        let session = open_session(&config.onnx_path(), provider, threads)?;
        let input_names = input_names(&session, &config.onnx_path())?;
        Ok(OnnxEmbedder {
            pooling: config.pooling.unwrap_or(Pooling::Mean),
            side: config.padding_side.unwrap_or(PaddingSide::Right),
            config,
            session,
            tokenizer,
            pad_id,
            input_names,
        })
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// `batch` texts per model call at most. A dynamically quantised model computes one
    /// activation scale per call, so a text's vector depends slightly on what shares its call:
    /// queries therefore go one per call (a query always gets the same vector, alone or in a
    /// batch request), while documents are batched (the build is still deterministic: the same
    /// corpus gives the same calls).
    fn embed(
        &mut self,
        texts: &[&str],
        prefix: &str,
        batch: usize,
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        let inputs: Vec<String> = texts.iter().map(|t| format!("{prefix}{t}")).collect();
        let mut rows: Vec<TokenRow> =
            stillweb_model_core::tokens::encode_all(&self.tokenizer, inputs)?
                .iter()
                .map(|e| TokenRow {
                    ids: e.get_ids().to_vec(),
                    type_ids: e.get_type_ids().to_vec(),
                })
                .collect();
        let mut order: Vec<usize> = (0..rows.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(rows[i].ids.len()));
        let mut out = vec![Vec::new(); texts.len()];
        for batch in order.chunks(batch) {
            let batch_rows: Vec<TokenRow> = batch
                .iter()
                .map(|&i| std::mem::take(&mut rows[i]))
                .collect();
            let vectors = self.embed_rows(&batch_rows)?;
            for (&i, v) in batch.iter().zip(vectors) {
                out[i] = v;
            }
        }
        Ok(out)
    }

    fn embed_rows(&mut self, rows: &[TokenRow]) -> Result<Vec<Vec<f32>>, ModelError> {
        let batch = TokenBatch::new(rows, self.pad_id, self.side);
        let (rows, cols) = (batch.rows(), batch.cols());
        let mask = &batch.mask;
        let outputs = batch.run(&mut self.session, &self.input_names)?;
        let hidden: ArrayViewD<'_, f32> = outputs[0].try_extract_array::<f32>().map_err(onnx)?;
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
                    let real = (0..cols).filter(|&c| mask[[r, c]] != 0);
                    let rows = real.map(|c| tokens.row(c));
                    vectors.push(pool(rows, tokens.shape()[1], self.pooling));
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

    fn engine(&self) -> &str {
        "onnx"
    }

    fn embed_queries(&mut self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        let prefix = self.config.query_prefix.clone();
        // Dynamic int8 quantisation takes one activation scale per call: such a model embeds
        // queries one per call, so that a query's vector never depends on what shares its
        // batch. Other models batch the queries a batcher gathered.
        let batch = if self.config.quantization.starts_with("int8") {
            1
        } else {
            self.config.batch_size.unwrap_or(BATCH)
        };
        self.embed(texts, &prefix, batch)
    }

    fn embed_documents(&mut self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        let prefix = self.config.document_prefix.clone();
        let batch = self.config.batch_size.unwrap_or(BATCH);
        self.embed(texts, &prefix, batch)
    }
}
