//! Qwen3-Reranker: a causal LM that answers "yes" or "no" to "does this document meet the query?".
//!
//! The prompt is the model card's, byte for byte: a system turn stating the task, a user turn with
//! `<Instruct>`, `<Query>` and `<Document>`, and an assistant turn opened with an empty think
//! block. As in the reference implementation, the system prefix, the pair and the assistant suffix
//! are tokenized separately and concatenated, and only the pair is truncated (from its end, so the
//! document's tail goes first). The score is softmax over the `no` and `yes` logits at the last
//! real token.

use ndarray::{ArrayViewD, Ix3};
use ort::session::SessionOutputs;
use tokenizers::Tokenizer;

use super::{PairRunner, RerankPool, Reranker, pairs_of, split_by_pool};
use crate::batch::{TokenBatch, TokenRow};
use crate::onnx;
use crate::runtime::ExecutionProvider;
use crate::tokens::load_tokenizer;
use crate::{ModelConfig, ModelError, PaddingSide, two_way_softmax};

/// The system turn and the opening of the user turn.
pub const SYSTEM_PREFIX: &str = "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n";
/// The end of the user turn and the assistant turn with an empty think block.
pub const ASSISTANT_SUFFIX: &str = "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
/// The model card's instruction for web search.
pub const DEFAULT_INSTRUCTION: &str =
    "Given a web search query, retrieve relevant passages that answer the query";

/// The user turn's content for one pair.
pub fn format_pair(instruction: &str, query: &str, document: &str) -> String {
    format!("<Instruct>: {instruction}\n<Query>: {query}\n<Document>: {document}")
}

pub struct Qwen3Reranker {
    config: ModelConfig,
    runner: PairRunner,
    tokenizer: Tokenizer,
    instruction: String,
    prefix: Vec<u32>,
    suffix: Vec<u32>,
    no: u32,
    yes: u32,
}

impl std::fmt::Debug for Qwen3Reranker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Qwen3Reranker")
            .field("model", &self.config.id)
            .finish()
    }
}

impl Qwen3Reranker {
    pub fn new(
        config: ModelConfig,
        provider: ExecutionProvider,
        threads: usize,
    ) -> Result<Qwen3Reranker, ModelError> {
        let invalid = |message: String| ModelError::Config {
            path: config.dir.join("model.toml"),
            message,
        };
        let (tokenizer, _) = load_tokenizer(&config.tokenizer_path(), config.max_tokens)?;
        let token_id = |field: Option<u32>, token: &str| -> Result<u32, ModelError> {
            let expected = tokenizer.token_to_id(token);
            match field {
                Some(id) if Some(id) == expected => Ok(id),
                other => Err(invalid(format!(
                    "{token}_token_id is {other:?} but the tokenizer maps `{token}` to {expected:?}"
                ))),
            }
        };
        let no = token_id(config.no_token_id, "no")?;
        let yes = token_id(config.yes_token_id, "yes")?;
        let pad_id = tokenizer.token_to_id("<|endoftext|>").unwrap_or(0);
        let encode = |text: &str| -> Result<Vec<u32>, ModelError> {
            Ok(tokenizer
                .encode(text, false)
                .map_err(|e| ModelError::Tokenizer(e.to_string()))?
                .get_ids()
                .to_vec())
        };
        let prefix = encode(SYSTEM_PREFIX)?;
        let suffix = encode(ASSISTANT_SUFFIX)?;
        if prefix.len() + suffix.len() >= config.max_tokens {
            return Err(invalid(format!(
                "max_tokens {} leaves no room for the pair after the {}-token prompt template",
                config.max_tokens,
                prefix.len() + suffix.len()
            )));
        }
        let runner = PairRunner::new(&config, provider, threads, pad_id, PaddingSide::Left)?;
        Ok(Qwen3Reranker {
            instruction: config
                .instruction
                .clone()
                .unwrap_or_else(|| DEFAULT_INSTRUCTION.to_string()),
            config,
            runner,
            tokenizer,
            prefix,
            suffix,
            no,
            yes,
        })
    }

    /// The token ids the model reads for one pair: template prefix, truncated pair, suffix.
    pub fn pair_ids(&self, query: &str, document: &str) -> Result<Vec<u32>, ModelError> {
        let body = self
            .tokenizer
            .encode(format_pair(&self.instruction, query, document), false)
            .map_err(|e| ModelError::Tokenizer(e.to_string()))?;
        let room = self.config.max_tokens - self.prefix.len() - self.suffix.len();
        let body = &body.get_ids()[..body.len().min(room)];
        Ok([self.prefix.as_slice(), body, self.suffix.as_slice()].concat())
    }

    /// Scores already-tokenized rows (for tests against reference logits).
    pub fn score_ids(&mut self, rows: Vec<Vec<u32>>) -> Result<Vec<f32>, ModelError> {
        let logits = self.no_yes_logits(rows)?;
        Ok(logits
            .into_iter()
            .map(|(no, yes)| two_way_softmax(no, yes))
            .collect())
    }

    /// The raw `(no, yes)` logits at each row's last real token.
    pub fn no_yes_logits(&mut self, rows: Vec<Vec<u32>>) -> Result<Vec<(f32, f32)>, ModelError> {
        let (no, yes) = (self.no as usize, self.yes as usize);
        let rows: Vec<TokenRow> = rows.into_iter().map(TokenRow::new).collect();
        self.runner.run(rows, |outputs, batch| {
            last_token_logits(outputs, batch, no, yes)
        })
    }
}

/// `(no, yes)` at each row's last real token. The output is either the exported `[batch, tokens,
/// 2]` (columns no, yes) or full-vocabulary logits `[batch, tokens, vocab]`.
fn last_token_logits(
    outputs: &SessionOutputs<'_>,
    batch: &TokenBatch,
    no: usize,
    yes: usize,
) -> Result<Vec<(f32, f32)>, ModelError> {
    let logits: ArrayViewD<'_, f32> = outputs[0].try_extract_array::<f32>().map_err(onnx)?;
    let logits = logits.into_dimensionality::<Ix3>().map_err(|e| {
        ModelError::Onnx(format!(
            "reranker output should be [batch, tokens, 2 or vocab]: {e}"
        ))
    })?;
    let width = logits.shape()[2];
    let (no_col, yes_col) = match width {
        2 => (0, 1),
        w if w > no.max(yes) => (no, yes),
        w => {
            return Err(ModelError::Onnx(format!(
                "reranker output has {w} columns: neither [no, yes] nor the vocabulary"
            )));
        }
    };
    Ok(batch
        .last
        .iter()
        .enumerate()
        .map(|(r, &c)| (logits[[r, c, no_col]], logits[[r, c, yes_col]]))
        .collect())
}

impl Reranker for Qwen3Reranker {
    fn model_id(&self) -> &str {
        &self.config.id
    }

    fn score(&mut self, query: &str, passages: &[&str]) -> Result<Vec<f32>, ModelError> {
        let rows = passages
            .iter()
            .map(|p| self.pair_ids(query, p))
            .collect::<Result<Vec<_>, _>>()?;
        self.score_ids(rows)
    }

    fn pair_tokens(&self, query: &str, passage: &str) -> Option<usize> {
        self.pair_ids(query, passage).ok().map(|ids| ids.len())
    }

    fn score_pools(&mut self, pools: &[RerankPool]) -> Result<Vec<Vec<f32>>, ModelError> {
        let rows = pairs_of(pools)
            .map(|(query, passage)| self.pair_ids(query, passage))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(split_by_pool(pools, self.score_ids(rows)?))
    }
}
