//! Rerankers: models that read a query and a passage together and judge relevance.
//!
//! - [`CrossEncoder`]: a BERT-style pair classifier (`[CLS] query [SEP] passage [SEP]` → logit);
//! - [`Qwen3Reranker`]: a causal LM asked, under its official prompt template, whether the
//!   document meets the query; the score is softmax over its `no`/`yes` logits at the last real
//!   token.
//!
//! Both sort their pairs by length into batches (little padding), and return scores in the
//! caller's order; [`Reranker::score_pools`] does the same over several requests' pools at once
//! (the dynamic batcher's call). Scores do not depend on batching or the padding side (tested to
//! 1e-5).

mod cross_encoder;
mod qwen3;

use std::path::Path;

use ort::session::{Session, SessionOutputs};

pub use cross_encoder::CrossEncoder;
pub use qwen3::{ASSISTANT_SUFFIX, DEFAULT_INSTRUCTION, Qwen3Reranker, SYSTEM_PREFIX, format_pair};

use crate::batch::{TokenBatch, TokenRow};
use crate::runtime::ExecutionProvider;
use crate::{Engine, ModelConfig, ModelError, ModelKind, PaddingSide, RerankPool, Reranker};
pub(crate) use stillweb_model_core::{pairs_of, split_by_pool};

/// Loads the reranker described by `DIR/model.toml` (`kind = "cross-encoder"` or
/// `"qwen3-reranker"`) on `engine`, or the one its `model.toml` names. A cross-encoder runs on
/// the native int8 engine on CPUs when asked; GPUs and Qwen3-Reranker always use ONNX Runtime.
pub fn load_reranker(
    dir: &Path,
    engine: Option<Engine>,
    provider: ExecutionProvider,
    threads: usize,
) -> Result<Box<dyn Reranker>, ModelError> {
    let config = ModelConfig::load(dir)?;
    config.expect_kind(&[ModelKind::CrossEncoder, ModelKind::Qwen3Reranker])?;
    let engine = engine.unwrap_or(config.engine);
    Ok(match (config.kind, engine, provider) {
        (ModelKind::Qwen3Reranker, Engine::NativeInt8, _) => {
            return Err(ModelError::Config {
                path: dir.join("model.toml"),
                message: "the native-int8 engine runs BERT cross-encoders, not Qwen3-Reranker; \
                          use engine = \"onnx\""
                    .into(),
            });
        }
        (ModelKind::Qwen3Reranker, ..) => Box::new(Qwen3Reranker::new(config, provider, threads)?),
        (_, Engine::NativeInt8, ExecutionProvider::Cpu) => {
            Box::new(stillweb_native::NativeCrossEncoder::load(dir, threads)?)
        }
        _ => Box::new(CrossEncoder::new(config, provider, threads)?),
    })
}

/// Pairs per model call unless the config says otherwise.
const BATCH: usize = 16;

/// The part both rerankers share: a session fed padded token rows in length-sorted batches.
struct PairRunner {
    session: Session,
    input_names: Vec<String>,
    pad_id: u32,
    side: PaddingSide,
    batch_size: usize,
}

impl PairRunner {
    fn new(
        config: &ModelConfig,
        provider: ExecutionProvider,
        threads: usize,
        pad_id: u32,
        default_side: PaddingSide,
    ) -> Result<PairRunner, ModelError> {
        let session = crate::runtime::open_session(&config.onnx_path(), provider, threads)?;
        let input_names = crate::batch::input_names(&session, &config.onnx_path())?;
        let side = config.padding_side.unwrap_or(default_side);
        if side == PaddingSide::Left && !input_names.iter().any(|n| n == "position_ids") {
            return Err(ModelError::Config {
                path: config.dir.join("model.toml"),
                message: "left padding needs a model that takes `position_ids` (otherwise the \
                          padding shifts every position); use padding_side = \"right\""
                    .into(),
            });
        }
        Ok(PairRunner {
            session,
            input_names,
            pad_id,
            side,
            batch_size: config.batch_size.unwrap_or(BATCH),
        })
    }

    /// Runs `rows` in batches; `read` turns one batch's outputs into one value per row. Values
    /// come back in the order of `rows`.
    fn run<T: Copy + Default>(
        &mut self,
        rows: Vec<TokenRow>,
        read: impl Fn(&SessionOutputs<'_>, &TokenBatch) -> Result<Vec<T>, ModelError>,
    ) -> Result<Vec<T>, ModelError> {
        let mut order: Vec<usize> = (0..rows.len()).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(rows[i].ids.len()));
        let mut scores = vec![T::default(); rows.len()];
        for chunk in order.chunks(self.batch_size) {
            let batch_rows: Vec<TokenRow> = chunk.iter().map(|&i| rows[i].clone()).collect();
            let batch = TokenBatch::new(&batch_rows, self.pad_id, self.side);
            let outputs = batch.run(&mut self.session, &self.input_names)?;
            let batch_scores = read(&outputs, &batch)?;
            if batch_scores.len() != chunk.len() {
                return Err(ModelError::Onnx(format!(
                    "model returned {} scores for {} pairs",
                    batch_scores.len(),
                    chunk.len()
                )));
            }
            for (&i, s) in chunk.iter().zip(batch_scores) {
                scores[i] = s;
            }
        }
        Ok(scores)
    }
}
