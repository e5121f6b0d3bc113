//! Text into tokens and token states into one vector, the same for every engine.

use std::path::Path;

use tokenizers::{EncodeInput, Encoding, Tokenizer, TruncationParams};

use crate::{ModelError, Pooling};

/// `texts` tokenized in order (with special tokens): in parallel, except on a thread of a rayon
/// pool, where the tokenizers crate's parallel iterator would run in that pool, and while it
/// waited the thread would take up the pool's other jobs. A search thread holding a model copy
/// then started another search's model call in the middle of its own; with every copy held that
/// way, the server's two search threads waited for each other forever.
pub fn encode_all(tokenizer: &Tokenizer, texts: Vec<String>) -> Result<Vec<Encoding>, ModelError> {
    let tokenized = match rayon::current_thread_index() {
        None => tokenizer.encode_batch(texts, true),
        Some(_) => texts
            .into_iter()
            .map(|text| tokenizer.encode(text, true))
            .collect(),
    };
    tokenized.map_err(|e| ModelError::Tokenizer(e.to_string()))
}

/// (query, passage) pairs encoded as a cross-encoder reads them (`[CLS] query [SEP] passage
/// [SEP]`, segment ids 0 then 1, the longer side truncated first), in order; serial on a rayon
/// pool's thread, as [`encode_all`].
pub fn encode_pairs(
    tokenizer: &Tokenizer,
    pairs: &[(&str, &str)],
) -> Result<Vec<Encoding>, ModelError> {
    let inputs: Vec<EncodeInput<'_>> = pairs
        .iter()
        .map(|&(query, passage)| EncodeInput::Dual(query.into(), passage.into()))
        .collect();
    let tokenized = match rayon::current_thread_index() {
        None => tokenizer.encode_batch(inputs, true),
        Some(_) => inputs
            .into_iter()
            .map(|input| tokenizer.encode(input, true))
            .collect(),
    };
    tokenized.map_err(|e| ModelError::Tokenizer(e.to_string()))
}

/// A tokenizer with explicit truncation to `max_tokens` and no padding of its own (whatever its
/// tokenizer.json says: MiniLM's forces 128), plus the id it pads with.
pub fn load_tokenizer(path: &Path, max_tokens: usize) -> Result<(Tokenizer, u32), ModelError> {
    if !path.is_file() {
        return Err(ModelError::Missing {
            path: path.to_path_buf(),
            hint: "run `models/fetch`".into(),
        });
    }
    let mut tokenizer = Tokenizer::from_file(path)
        .map_err(|e| ModelError::Tokenizer(format!("{}: {e}", path.display())))?;
    let pad_id = tokenizer.get_padding().map_or(0, |p| p.pad_id);
    tokenizer.with_padding(None);
    tokenizer
        .with_truncation(Some(TruncationParams {
            max_length: max_tokens,
            ..TruncationParams::default()
        }))
        .map_err(|e| ModelError::Tokenizer(e.to_string()))?;
    Ok((tokenizer, pad_id))
}

/// One vector from a text's token states, in order (real tokens only): their mean, the last or
/// the first. No tokens give a zero vector.
pub fn pool<'a, R: IntoIterator<Item = &'a f32>>(
    rows: impl Iterator<Item = R>,
    hidden: usize,
    pooling: Pooling,
) -> Vec<f32> {
    let mut pooled = vec![0f32; hidden];
    let mut count = 0usize;
    for row in rows {
        match pooling {
            Pooling::Mean => pooled.iter_mut().zip(row).for_each(|(s, x)| *s += x),
            Pooling::LastToken => pooled.iter_mut().zip(row).for_each(|(s, x)| *s = *x),
            Pooling::Cls if count == 0 => pooled.iter_mut().zip(row).for_each(|(s, x)| *s = *x),
            Pooling::Cls => {}
        }
        count += 1;
    }
    if pooling == Pooling::Mean {
        pooled.iter_mut().for_each(|s| *s /= count.max(1) as f32);
    }
    pooled
}
