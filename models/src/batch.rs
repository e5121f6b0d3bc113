//! Token batches: rows of token ids padded into the `[batch, tokens]` tensors a transformer takes,
//! fed to a session by input name. Positions count real tokens only, so a row gets the same
//! positions whichever side it is padded on.

use std::borrow::Cow;

use ndarray::Array2;
use ort::session::{Session, SessionInputValue, SessionOutputs};
use ort::value::Tensor;

use crate::onnx;
use crate::{ModelError, PaddingSide};

/// One row before padding: token ids and, for pair encodings, segment (type) ids.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TokenRow {
    pub ids: Vec<u32>,
    pub type_ids: Vec<u32>,
}

impl TokenRow {
    pub fn new(ids: Vec<u32>) -> TokenRow {
        let type_ids = vec![0; ids.len()];
        TokenRow { ids, type_ids }
    }
}

/// Padded model inputs.
#[derive(Debug, Clone)]
pub struct TokenBatch {
    pub ids: Array2<i64>,
    pub mask: Array2<i64>,
    pub types: Array2<i64>,
    pub positions: Array2<i64>,
    /// Per row, the column of its last real token.
    pub last: Vec<usize>,
}

/// The inputs a model may declare; anything else is refused at load.
pub const KNOWN_INPUTS: [&str; 4] = [
    "input_ids",
    "attention_mask",
    "token_type_ids",
    "position_ids",
];

impl TokenBatch {
    /// Pads `rows` to the longest with `pad_id` on `side`.
    pub fn new(rows: &[TokenRow], pad_id: u32, side: PaddingSide) -> TokenBatch {
        let cols = rows.iter().map(|r| r.ids.len()).max().unwrap_or(0);
        let shape = (rows.len(), cols);
        let mut batch = TokenBatch {
            ids: Array2::from_elem(shape, i64::from(pad_id)),
            mask: Array2::zeros(shape),
            types: Array2::zeros(shape),
            positions: Array2::zeros(shape),
            last: Vec::with_capacity(rows.len()),
        };
        for (r, row) in rows.iter().enumerate() {
            let offset = match side {
                PaddingSide::Left => cols - row.ids.len(),
                PaddingSide::Right => 0,
            };
            for (i, (&id, &ty)) in row.ids.iter().zip(&row.type_ids).enumerate() {
                batch.ids[[r, offset + i]] = i64::from(id);
                batch.mask[[r, offset + i]] = 1;
                batch.types[[r, offset + i]] = i64::from(ty);
                batch.positions[[r, offset + i]] = i as i64;
            }
            batch.last.push((offset + row.ids.len()).saturating_sub(1));
        }
        batch
    }

    pub fn rows(&self) -> usize {
        self.ids.nrows()
    }

    pub fn cols(&self) -> usize {
        self.ids.ncols()
    }

    /// Runs `session`, feeding each of `input_names` its tensor.
    pub fn run<'s>(
        &self,
        session: &'s mut Session,
        input_names: &[String],
    ) -> Result<SessionOutputs<'s>, ModelError> {
        let mut inputs: Vec<(Cow<'_, str>, SessionInputValue<'_>)> = Vec::new();
        for name in input_names {
            let array = match name.as_str() {
                "input_ids" => &self.ids,
                "attention_mask" => &self.mask,
                "token_type_ids" => &self.types,
                _ => &self.positions,
            };
            inputs.push((
                Cow::Owned(name.clone()),
                Tensor::from_array(array.clone()).map_err(onnx)?.into(),
            ));
        }
        session.run(inputs).map_err(onnx)
    }
}

/// The session's input names, refusing any this crate cannot feed.
pub fn input_names(
    session: &Session,
    onnx_path: &std::path::Path,
) -> Result<Vec<String>, ModelError> {
    let names: Vec<String> = session
        .inputs()
        .iter()
        .map(|i| i.name().to_string())
        .collect();
    for name in &names {
        if !KNOWN_INPUTS.contains(&name.as_str()) {
            return Err(ModelError::Config {
                path: onnx_path.to_path_buf(),
                message: format!(
                    "unsupported model input `{name}` (known: {})",
                    KNOWN_INPUTS.join(", ")
                ),
            });
        }
    }
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn left_and_right_padding_place_tokens_and_positions() {
        let rows = [TokenRow::new(vec![7, 8, 9]), TokenRow::new(vec![5])];
        let right = TokenBatch::new(&rows, 0, PaddingSide::Right);
        assert_eq!(right.ids.row(1).to_vec(), vec![5, 0, 0]);
        assert_eq!(right.mask.row(1).to_vec(), vec![1, 0, 0]);
        assert_eq!(right.positions.row(1).to_vec(), vec![0, 0, 0]);
        assert_eq!(right.last, vec![2, 0]);
        let left = TokenBatch::new(&rows, 0, PaddingSide::Left);
        assert_eq!(left.ids.row(1).to_vec(), vec![0, 0, 5]);
        assert_eq!(left.mask.row(1).to_vec(), vec![0, 0, 1]);
        assert_eq!(left.positions.row(0).to_vec(), vec![0, 1, 2]);
        assert_eq!(left.last, vec![2, 2]);
    }
}
