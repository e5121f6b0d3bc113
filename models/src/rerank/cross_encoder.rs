//! A BERT-style cross-encoder: the tokenizer's pair encoding (`[CLS] query [SEP] passage [SEP]`,
//! segment ids 0/1, longest-first truncation), one relevance logit per pair, squashed to (0, 1)
//! by a sigmoid (or, for a two-class head, the softmax of the second class).

use ndarray::{ArrayViewD, Axis};
use tokenizers::{EncodeInput, Tokenizer};

use super::{PairRunner, RerankPool, Reranker, pairs_of, split_by_pool};
use crate::batch::TokenRow;
use crate::onnx;
use crate::runtime::ExecutionProvider;
use crate::tokens::load_tokenizer;
use crate::{ModelConfig, ModelError, PaddingSide, two_way_softmax};

pub struct CrossEncoder {
    config: ModelConfig,
    runner: PairRunner,
    tokenizer: Tokenizer,
}

impl std::fmt::Debug for CrossEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrossEncoder")
            .field("model", &self.config.id)
            .finish()
    }
}

impl CrossEncoder {
    pub fn new(
        config: ModelConfig,
        provider: ExecutionProvider,
        threads: usize,
    ) -> Result<CrossEncoder, ModelError> {
        let (tokenizer, pad_id) = load_tokenizer(&config.tokenizer_path(), config.max_tokens)?;
        let runner = PairRunner::new(&config, provider, threads, pad_id, PaddingSide::Right)?;
        Ok(CrossEncoder {
            config,
            runner,
            tokenizer,
        })
    }

    /// The encoded pair, as the model reads it.
    pub fn pair_row(&self, query: &str, passage: &str) -> Result<TokenRow, ModelError> {
        let encoding = self
            .tokenizer
            .encode(EncodeInput::Dual(query.into(), passage.into()), true)
            .map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        Ok(TokenRow {
            ids: encoding.get_ids().to_vec(),
            type_ids: encoding.get_type_ids().to_vec(),
        })
    }

    /// Raw logits for already-encoded rows (for tests against reference logits).
    pub fn logits(&mut self, rows: Vec<TokenRow>) -> Result<Vec<(f32, f32)>, ModelError> {
        self.runner.run(rows, |outputs, _| {
            let logits: ArrayViewD<'_, f32> = outputs[0].try_extract_array::<f32>().map_err(onnx)?;
            match logits.shape() {
                [_] => Ok(logits.iter().map(|&l| (0.0, l)).collect()),
                [_, 1] => Ok(logits.iter().map(|&l| (0.0, l)).collect()),
                [_, 2] => Ok(logits
                    .axis_iter(Axis(0))
                    .map(|row| (row[0], row[1]))
                    .collect()),
                shape => Err(ModelError::Onnx(format!(
                    "cross-encoder output should be [batch], [batch, 1] or [batch, 2], got {shape:?}"
                ))),
            }
        })
    }
}

impl Reranker for CrossEncoder {
    fn model_id(&self) -> &str {
        &self.config.id
    }

    fn score(&mut self, query: &str, passages: &[&str]) -> Result<Vec<f32>, ModelError> {
        let rows = passages
            .iter()
            .map(|p| self.pair_row(query, p))
            .collect::<Result<Vec<_>, _>>()?;
        self.score_rows(rows)
    }

    fn pair_tokens(&self, query: &str, passage: &str) -> Option<usize> {
        self.pair_row(query, passage).ok().map(|row| row.ids.len())
    }

    fn score_pools(&mut self, pools: &[RerankPool]) -> Result<Vec<Vec<f32>>, ModelError> {
        let rows = pairs_of(pools)
            .map(|(query, passage)| self.pair_row(query, passage))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(split_by_pool(pools, self.score_rows(rows)?))
    }
}

impl CrossEncoder {
    fn score_rows(&mut self, rows: Vec<TokenRow>) -> Result<Vec<f32>, ModelError> {
        Ok(self
            .logits(rows)?
            .into_iter()
            .map(|(negative, positive)| two_way_softmax(negative, positive))
            .collect())
    }
}
