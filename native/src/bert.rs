//! A BERT encoder (MiniLM's shape and any other post-norm BERT) read from the published
//! safetensors weights, run with int8 linear layers ([`crate::gemm`]) and f32 everything else.

use std::path::Path;

use serde::Deserialize;

use crate::attention::{AttentionScratch, HEAD_SIZES};
use crate::gemm::{Kernel, QuantLinear, Scratch};
use crate::kernels::{attention, gelu, layer_norm};
use stillweb_model_core::ModelError;

/// The fields of Hugging Face's `config.json` the encoder needs.
#[derive(Debug, Deserialize)]
struct BertConfig {
    hidden_size: usize,
    num_attention_heads: usize,
    num_hidden_layers: usize,
    intermediate_size: usize,
    layer_norm_eps: f32,
    hidden_act: String,
}

#[derive(Debug)]
struct Norm {
    weight: Vec<f32>,
    bias: Vec<f32>,
}

#[derive(Debug)]
struct Layer {
    /// Queries, keys and values in one product (`[3·hidden × hidden]`).
    qkv: QuantLinear,
    attention_out: QuantLinear,
    attention_norm: Norm,
    intermediate: QuantLinear,
    output: QuantLinear,
    output_norm: Norm,
}

/// The encoder's weights, quantised at load.
#[derive(Debug)]
pub struct Bert {
    hidden: usize,
    heads: usize,
    eps: f32,
    word: Vec<f32>,
    position: Vec<f32>,
    token_type: Vec<f32>,
    embedding_norm: Norm,
    layers: Vec<Layer>,
}

/// Per-thread buffers for [`Bert::forward`].
#[derive(Debug, Default)]
pub struct Workspace {
    gemm: Scratch,
    attention: AttentionScratch,
    qkv: Vec<f32>,
    context: Vec<f32>,
    projected: Vec<f32>,
    intermediate: Vec<f32>,
}

/// Tensors of a safetensors file, by name.
pub(crate) struct Tensors {
    bytes: Vec<u8>,
    header: serde_json::Map<String, serde_json::Value>,
    start: usize,
    path: std::path::PathBuf,
}

impl Tensors {
    pub(crate) fn read(path: &Path) -> Result<Tensors, ModelError> {
        let bytes = std::fs::read(path).map_err(|e| ModelError::Missing {
            path: path.to_path_buf(),
            hint: format!("{e}; run `models/fetch`"),
        })?;
        let invalid = |message: String| ModelError::Config {
            path: path.to_path_buf(),
            message,
        };
        let size = bytes
            .get(..8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()) as usize)
            .ok_or_else(|| {
                invalid(
                    "not a safetensors file (shorter than its header); run `models/fetch`".into(),
                )
            })?;
        let header = bytes
            .get(8..8 + size)
            .and_then(|h| serde_json::from_slice(h).ok())
            .ok_or_else(|| {
                invalid("not a safetensors file (unreadable header); run `models/fetch`".into())
            })?;
        Ok(Tensors {
            bytes,
            header,
            start: 8 + size,
            path: path.to_path_buf(),
        })
    }

    /// An f32 tensor's values and shape.
    pub(crate) fn get(&self, name: &str) -> Result<(Vec<f32>, Vec<usize>), ModelError> {
        let invalid = |message: String| ModelError::Config {
            path: self.path.clone(),
            message: format!("tensor `{name}`: {message}"),
        };
        let entry = self
            .header
            .get(name)
            .ok_or_else(|| invalid("missing".into()))?;
        if entry["dtype"] != "F32" {
            return Err(invalid(format!("dtype {}, expected F32", entry["dtype"])));
        }
        let shape: Vec<usize> =
            serde_json::from_value(entry["shape"].clone()).map_err(|e| invalid(e.to_string()))?;
        let [a, b]: [usize; 2] = serde_json::from_value(entry["data_offsets"].clone())
            .map_err(|e| invalid(e.to_string()))?;
        let data = self
            .bytes
            .get(self.start + a..self.start + b)
            .filter(|d| d.len() == 4 * shape.iter().product::<usize>())
            .ok_or_else(|| invalid("data offsets do not match its shape or the file".into()))?;
        let values = data
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        Ok((values, shape))
    }

    pub(crate) fn has(&self, name: &str) -> bool {
        self.header.contains_key(name)
    }

    pub(crate) fn expect(&self, name: &str, shape: &[usize]) -> Result<Vec<f32>, ModelError> {
        let (values, got) = self.get(name)?;
        if got != shape {
            return Err(ModelError::Config {
                path: self.path.clone(),
                message: format!("tensor `{name}` has shape {got:?}, expected {shape:?}"),
            });
        }
        Ok(values)
    }

    fn norm(&self, prefix: &str, hidden: usize) -> Result<Norm, ModelError> {
        Ok(Norm {
            weight: self.expect(&format!("{prefix}.weight"), &[hidden])?,
            bias: self.expect(&format!("{prefix}.bias"), &[hidden])?,
        })
    }

    fn linear(
        &self,
        prefix: &str,
        inputs: usize,
        outputs: usize,
        kernel: Kernel,
    ) -> Result<QuantLinear, ModelError> {
        let weight = self.expect(&format!("{prefix}.weight"), &[outputs, inputs])?;
        let bias = self.expect(&format!("{prefix}.bias"), &[outputs])?;
        Ok(QuantLinear::new(&weight, &bias, inputs, kernel))
    }
}

/// `bert.` when the encoder sits inside a task model (a cross-encoder), else nothing.
pub(crate) fn encoder_prefix(t: &Tensors) -> &'static str {
    if t.has("bert.embeddings.word_embeddings.weight") {
        "bert."
    } else {
        ""
    }
}

impl Bert {
    /// Reads `config.json` and `weights` (safetensors, Hugging Face's BertModel names).
    pub fn load(config: &Path, weights: &Path, kernel: Kernel) -> Result<Bert, ModelError> {
        Bert::from_tensors(config, &Tensors::read(weights)?, kernel)
    }

    /// The encoder of `t`: Hugging Face's BertModel names, or a task model's (a cross-encoder's
    /// `BertForSequenceClassification`), whose encoder names start with `bert.`.
    pub(crate) fn from_tensors(
        config: &Path,
        t: &Tensors,
        kernel: Kernel,
    ) -> Result<Bert, ModelError> {
        let weights = t.path.as_path();
        let text = std::fs::read_to_string(config).map_err(|e| ModelError::Missing {
            path: config.to_path_buf(),
            hint: format!("{e}; run `models/fetch`"),
        })?;
        let c: BertConfig = serde_json::from_str(&text).map_err(|e| ModelError::Config {
            path: config.to_path_buf(),
            message: e.to_string(),
        })?;
        let head = c.hidden_size / c.num_attention_heads.max(1);
        if c.hidden_act != "gelu"
            || head * c.num_attention_heads != c.hidden_size
            || !HEAD_SIZES.contains(&head)
            || !c.hidden_size.is_multiple_of(64)
            || !c.intermediate_size.is_multiple_of(64)
        {
            return Err(ModelError::Config {
                path: config.to_path_buf(),
                message: format!(
                    "the native engine runs BERT with `gelu`, heads of {HEAD_SIZES:?} values and \
                     hidden and intermediate sizes in multiples of 64; this is `{}` with hidden \
                     size {} in {} heads and intermediate size {} (use engine = \"onnx\")",
                    c.hidden_act, c.hidden_size, c.num_attention_heads, c.intermediate_size
                ),
            });
        }
        let (h, i) = (c.hidden_size, c.intermediate_size);
        let e = encoder_prefix(t);
        let (word, word_shape) = t.get(&format!("{e}embeddings.word_embeddings.weight"))?;
        let (position, position_shape) =
            t.get(&format!("{e}embeddings.position_embeddings.weight"))?;
        let (token_type, type_shape) =
            t.get(&format!("{e}embeddings.token_type_embeddings.weight"))?;
        if [
            word_shape[1..].to_vec(),
            position_shape[1..].to_vec(),
            type_shape[1..].to_vec(),
        ] != [vec![h], vec![h], vec![h]]
        {
            return Err(ModelError::Config {
                path: weights.to_path_buf(),
                message: format!("embedding tables are not {h} wide"),
            });
        }
        let mut layers = Vec::with_capacity(c.num_hidden_layers);
        for n in 0..c.num_hidden_layers {
            let p = format!("{e}encoder.layer.{n}");
            let mut qkv_weight = Vec::with_capacity(3 * h * h);
            let mut qkv_bias = Vec::with_capacity(3 * h);
            for part in ["query", "key", "value"] {
                qkv_weight.extend(t.expect(&format!("{p}.attention.self.{part}.weight"), &[h, h])?);
                qkv_bias.extend(t.expect(&format!("{p}.attention.self.{part}.bias"), &[h])?);
            }
            layers.push(Layer {
                qkv: QuantLinear::new(&qkv_weight, &qkv_bias, h, kernel),
                attention_out: t.linear(&format!("{p}.attention.output.dense"), h, h, kernel)?,
                attention_norm: t.norm(&format!("{p}.attention.output.LayerNorm"), h)?,
                intermediate: t.linear(&format!("{p}.intermediate.dense"), h, i, kernel)?,
                output: t.linear(&format!("{p}.output.dense"), i, h, kernel)?,
                output_norm: t.norm(&format!("{p}.output.LayerNorm"), h)?,
            });
        }
        Ok(Bert {
            hidden: h,
            heads: c.num_attention_heads,
            eps: c.layer_norm_eps,
            embedding_norm: t.norm(&format!("{e}embeddings.LayerNorm"), h)?,
            word,
            position,
            token_type,
            layers,
        })
    }

    pub fn hidden(&self) -> usize {
        self.hidden
    }

    /// The longest sequence the position table covers.
    pub fn positions(&self) -> usize {
        self.position.len() / self.hidden
    }

    /// The last hidden state of each sequence, concatenated: `[Σ len × hidden]`. Each sequence
    /// is computed independently of the others (per-token quantisation, attention within the
    /// sequence), so grouping never changes a result.
    pub fn forward(
        &self,
        sequences: &[(&[u32], &[u32])],
        work: &mut Workspace,
    ) -> Result<Vec<f32>, ModelError> {
        let h = self.hidden;
        let tokens: usize = sequences.iter().map(|(ids, _)| ids.len()).sum();
        let mut x = vec![0f32; tokens * h];
        let mut row = 0;
        fn table(t: &[f32], i: usize, h: usize) -> Option<&[f32]> {
            t.get(i * h..(i + 1) * h)
        }
        for (ids, types) in sequences {
            for (p, (&id, &ty)) in ids.iter().zip(types.iter()).enumerate() {
                let (Some(w), Some(pos), Some(ty)) = (
                    table(&self.word, id as usize, h),
                    table(&self.position, p, h),
                    table(&self.token_type, ty as usize, h),
                ) else {
                    return Err(ModelError::Native(format!(
                        "token {id} (type {ty}) at position {p} is outside the model's embedding \
                         tables: the tokenizer does not belong to these weights"
                    )));
                };
                for (d, out) in x[row * h..][..h].iter_mut().enumerate() {
                    *out = w[d] + pos[d] + ty[d];
                }
                row += 1;
            }
        }
        layer_norm(
            &mut x,
            &self.embedding_norm.weight,
            &self.embedding_norm.bias,
            self.eps,
        );
        for layer in &self.layers {
            self.layer(layer, &mut x, sequences, work);
        }
        Ok(x)
    }

    fn layer(
        &self,
        layer: &Layer,
        x: &mut [f32],
        sequences: &[(&[u32], &[u32])],
        work: &mut Workspace,
    ) {
        let (h, tokens) = (self.hidden, x.len() / self.hidden);
        work.qkv.resize(tokens * 3 * h, 0.0);
        work.context.resize(tokens * h, 0.0);
        work.projected.resize(tokens * h, 0.0);
        work.intermediate
            .resize(tokens * layer.intermediate.outputs(), 0.0);
        layer.qkv.forward(x, &mut work.qkv, &mut work.gemm);
        let mut start = 0;
        for (ids, _) in sequences {
            let len = ids.len();
            attention(
                &work.qkv[start * 3 * h..(start + len) * 3 * h],
                len,
                self.heads,
                &mut work.context[start * h..(start + len) * h],
                &mut work.attention,
            );
            start += len;
        }
        let (projected, gemm) = (&mut work.projected, &mut work.gemm);
        self.residual(
            x,
            &layer.attention_out,
            &work.context,
            &layer.attention_norm,
            projected,
            gemm,
        );
        layer.intermediate.forward(x, &mut work.intermediate, gemm);
        gelu(&mut work.intermediate);
        self.residual(
            x,
            &layer.output,
            &work.intermediate,
            &layer.output_norm,
            projected,
            gemm,
        );
    }

    /// `x = norm(x + linear(input))`: how each half of a post-norm BERT layer ends.
    fn residual(
        &self,
        x: &mut [f32],
        linear: &QuantLinear,
        input: &[f32],
        norm: &Norm,
        projected: &mut [f32],
        gemm: &mut Scratch,
    ) {
        linear.forward(input, projected, gemm);
        x.iter_mut()
            .zip(projected.iter())
            .for_each(|(a, b)| *a += b);
        layer_norm(x, &norm.weight, &norm.bias, self.eps);
    }
}
