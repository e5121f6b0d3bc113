//! A deterministic hashing embedder: no model, no runtime, for fast unit tests of the plumbing.
//! Texts sharing words get similar vectors; it measures nothing about quality.

use crate::{Embedder, ModelError, normalize};

#[derive(Debug, Clone)]
pub struct HashingEmbedder {
    dimension: usize,
}

impl HashingEmbedder {
    pub fn new(dimension: usize) -> HashingEmbedder {
        HashingEmbedder {
            dimension: dimension.max(1),
        }
    }

    fn embed(&self, text: &str) -> Vec<f32> {
        let mut v = vec![0f32; self.dimension];
        for word in text
            .split(|c: char| !c.is_alphanumeric())
            .filter(|w| !w.is_empty())
        {
            let word = word.to_lowercase();
            let mut h: u64 = 0xcbf2_9ce4_8422_2325;
            for b in word.bytes() {
                h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
            }
            let slot = usize::try_from(h % self.dimension as u64).unwrap_or(0);
            v[slot] += if h & (1 << 63) == 0 { 1.0 } else { -1.0 };
        }
        normalize(&mut v);
        v
    }
}

impl Embedder for HashingEmbedder {
    fn model_id(&self) -> &str {
        "stillweb/hashing-test-embedder"
    }

    fn dimension(&self) -> usize {
        self.dimension
    }

    fn engine(&self) -> &str {
        "hashing"
    }

    fn embed_queries(&mut self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        Ok(texts.iter().map(|t| self.embed(t)).collect())
    }

    fn embed_documents(&mut self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        Ok(texts.iter().map(|t| self.embed(t)).collect())
    }
}
