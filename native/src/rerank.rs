//! A BERT cross-encoder on the native engine: `[CLS] query [SEP] passage [SEP]` through the
//! int8 encoder, then the sequence-classification head in f32 (the pooler's dense layer and tanh
//! on the `[CLS]` state, and the classifier), one logit (or two classes) per pair, squashed to
//! (0, 1) as the ONNX cross-encoder squashes it. Each pair is computed on its own (per-token
//! activation scales, attention within the pair, the head in a fixed order), so a pair's score is
//! the same bits alone and in any batch.

use std::path::Path;

use tokenizers::Tokenizer;

use crate::bert::{Bert, Tensors, Workspace, encoder_prefix};
use crate::run::run_sequences;
use crate::{Kernel, Loaded, detect_kernel, workspaces};
use stillweb_model_core::tokens::encode_pairs;
use stillweb_model_core::{
    ModelConfig, ModelError, ModelKind, RerankPool, Reranker, dot, pairs_of, split_by_pool,
    two_way_softmax,
};

/// The native cross-encoder; see the module docs.
pub struct NativeCrossEncoder {
    config: ModelConfig,
    tokenizer: Tokenizer,
    bert: Bert,
    head: Head,
    kernel: Kernel,
    workspaces: Vec<Workspace>,
}

impl std::fmt::Debug for NativeCrossEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NativeCrossEncoder")
            .field("model", &self.config.id)
            .field("kernel", &self.kernel)
            .finish()
    }
}

/// `BertForSequenceClassification`'s head, in f32: `classifier(tanh(pooler(cls)))`.
#[derive(Debug)]
struct Head {
    hidden: usize,
    /// `[hidden × hidden]`, PyTorch's `[out, in]`.
    pooler_weight: Vec<f32>,
    pooler_bias: Vec<f32>,
    /// `[labels × hidden]`: one label (a relevance logit) or two (not relevant, relevant).
    classifier_weight: Vec<f32>,
    classifier_bias: Vec<f32>,
}

impl Head {
    fn read(t: &Tensors, hidden: usize) -> Result<Head, ModelError> {
        let pooler = format!("{}pooler.dense", encoder_prefix(t));
        let (classifier_bias, shape) = t.get("classifier.bias")?;
        let labels = shape.first().copied().unwrap_or(0);
        if !(labels == 1 || labels == 2) {
            return Err(ModelError::Native(format!(
                "the classifier has {labels} labels; a cross-encoder has one (a logit) or two"
            )));
        }
        Ok(Head {
            hidden,
            pooler_weight: t.expect(&format!("{pooler}.weight"), &[hidden, hidden])?,
            pooler_bias: t.expect(&format!("{pooler}.bias"), &[hidden])?,
            classifier_weight: t.expect("classifier.weight", &[labels, hidden])?,
            classifier_bias,
        })
    }

    /// `(negative, positive)` logits from the `[CLS]` token's last hidden state.
    fn logits(&self, cls: &[f32]) -> (f32, f32) {
        let pooled: Vec<f32> = self
            .pooler_weight
            .chunks(self.hidden)
            .zip(&self.pooler_bias)
            .map(|(row, bias)| (dot(row, cls) + bias).tanh())
            .collect();
        let mut logits = self
            .classifier_weight
            .chunks(self.hidden)
            .zip(&self.classifier_bias)
            .map(|(row, bias)| dot(row, &pooled) + bias);
        match (logits.next(), logits.next()) {
            (Some(negative), Some(positive)) => (negative, positive),
            (Some(logit), None) => (0.0, logit),
            _ => (0.0, 0.0),
        }
    }
}

impl NativeCrossEncoder {
    /// Loads the cross-encoder described by `DIR/model.toml` (its `weights`, with Hugging Face's
    /// `BertForSequenceClassification` names, and `config.json`), on `threads` threads.
    pub fn load(dir: &Path, threads: usize) -> Result<NativeCrossEncoder, ModelError> {
        Self::load_with(dir, threads, detect_kernel(dir))
    }

    /// [`NativeCrossEncoder::load`] with a chosen kernel (tests compare them).
    pub fn load_with(
        dir: &Path,
        threads: usize,
        kernel: Kernel,
    ) -> Result<NativeCrossEncoder, ModelError> {
        let Loaded {
            config,
            tokenizer,
            tensors,
            bert,
        } = Loaded::open(dir, ModelKind::CrossEncoder, kernel)?;
        let head = Head::read(&tensors, bert.hidden()).map_err(|e| ModelError::Config {
            path: config.weights_path().unwrap_or_default(),
            message: format!("not a cross-encoder's weights: {e}"),
        })?;
        Ok(NativeCrossEncoder {
            config,
            tokenizer,
            bert,
            head,
            kernel,
            workspaces: workspaces(threads),
        })
    }

    /// The raw `(negative, positive)` logits of each pair (a one-logit model's negative is 0),
    /// in order.
    pub fn logits(&mut self, pairs: &[(&str, &str)]) -> Result<Vec<(f32, f32)>, ModelError> {
        let encodings = encode_pairs(&self.tokenizer, pairs)?;
        let sequences: Vec<(&[u32], &[u32])> = encodings
            .iter()
            .map(|e| (e.get_ids(), e.get_type_ids()))
            .collect();
        let (head, hidden) = (&self.head, self.bert.hidden());
        run_sequences(&self.bert, &mut self.workspaces, &sequences, |states| {
            head.logits(&states[..hidden])
        })
    }

    fn scores(&mut self, pairs: &[(&str, &str)]) -> Result<Vec<f32>, ModelError> {
        Ok(self
            .logits(pairs)?
            .into_iter()
            .map(|(negative, positive)| two_way_softmax(negative, positive))
            .collect())
    }
}

impl Reranker for NativeCrossEncoder {
    fn model_id(&self) -> &str {
        &self.config.id
    }

    fn score(&mut self, query: &str, passages: &[&str]) -> Result<Vec<f32>, ModelError> {
        let pairs: Vec<(&str, &str)> = passages.iter().map(|&p| (query, p)).collect();
        self.scores(&pairs)
    }

    fn pair_tokens(&self, query: &str, passage: &str) -> Option<usize> {
        encode_pairs(&self.tokenizer, &[(query, passage)])
            .ok()
            .and_then(|e| e.first().map(|e| e.get_ids().len()))
    }

    fn score_pools(&mut self, pools: &[RerankPool]) -> Result<Vec<Vec<f32>>, ModelError> {
        let pairs: Vec<(&str, &str)> = pairs_of(pools).collect();
        Ok(split_by_pool(pools, self.scores(&pairs)?))
    }
}
