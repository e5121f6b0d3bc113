//! Affordable vectors for scale runs: a passage's vector is the normalised mean of its sentences'
//! vectors, and each distinct sentence is embedded once.
//!
//! Embedding a million chunks with MiniLM takes hours on 2 cores; a scale corpus generated with
//! fixed sentence variants (`synth --variants`) holds a few hundred thousand distinct sentences,
//! which take minutes. The vectors live in the model's space and cost the same to store and
//! search, but they are not what the model would give the whole chunk: scale indexes built this
//! way measure speed and memory, never quality. Queries are embedded normally.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use stillweb_corpus::chunk::sentence_spans;
use stillweb_models::{Embedder, ModelError, normalize};

#[derive(Debug)]
pub struct SentenceComposed<E> {
    inner: E,
    /// Sentence hash → row in `vectors`.
    rows: HashMap<u64, u32>,
    vectors: Vec<f32>,
    pub passages: usize,
}

impl<E: Embedder> SentenceComposed<E> {
    pub fn new(inner: E) -> SentenceComposed<E> {
        SentenceComposed {
            inner,
            rows: HashMap::new(),
            vectors: Vec::new(),
            passages: 0,
        }
    }

    /// Distinct sentences embedded so far.
    pub fn sentences(&self) -> usize {
        self.rows.len()
    }

    /// Resident memory of the sentence vectors (their length: a grown vector's spare capacity
    /// is never touched) and their map (a slot is its entry and a control byte): a scale build's
    /// peak includes it, a real build has no such cache.
    pub fn cache_bytes(&self) -> usize {
        self.vectors.len() * size_of::<f32>() + self.rows.capacity() * (size_of::<(u64, u32)>() + 1)
    }
}

fn key(sentence: &str) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    sentence.hash(&mut h);
    h.finish()
}

/// The sentences of `text`; a first line (the title the build puts before each chunk) is one of
/// them, so that it is not glued to a different first sentence in every chunk.
fn sentences(text: &str) -> Vec<&str> {
    let (title, body) = match text.split_once('\n') {
        Some((title, body)) => (Some(title).filter(|t| !t.trim().is_empty()), body),
        None => (None, text),
    };
    let mut out: Vec<&str> = title.into_iter().collect();
    out.extend(sentence_spans(body).into_iter().map(|(a, b)| &body[a..b]));
    if out.is_empty() {
        out.push(text);
    }
    out
}

impl<E: Embedder> Embedder for SentenceComposed<E> {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }

    fn dimension(&self) -> usize {
        self.inner.dimension()
    }

    fn engine(&self) -> &str {
        self.inner.engine()
    }

    fn embed_queries(&mut self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        self.inner.embed_queries(texts)
    }

    fn embed_documents(&mut self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelError> {
        let split: Vec<Vec<&str>> = texts.iter().map(|t| sentences(t)).collect();
        let mut missing: Vec<&str> = Vec::new();
        let mut queued: HashMap<u64, ()> = HashMap::new();
        for s in split.iter().flatten() {
            let k = key(s);
            if !self.rows.contains_key(&k) && queued.insert(k, ()).is_none() {
                missing.push(s);
            }
        }
        if !missing.is_empty() {
            let embedded = self.inner.embed_documents(&missing)?;
            for (s, v) in missing.iter().zip(embedded) {
                let row = (self.vectors.len() / self.dimension()) as u32;
                self.vectors.extend_from_slice(&v);
                self.rows.insert(key(s), row);
            }
        }
        let dim = self.dimension();
        self.passages += texts.len();
        Ok(split
            .iter()
            .map(|parts| {
                let mut sum = vec![0f32; dim];
                for s in parts {
                    let row = self.rows[&key(s)] as usize;
                    for (x, y) in sum
                        .iter_mut()
                        .zip(&self.vectors[row * dim..(row + 1) * dim])
                    {
                        *x += y;
                    }
                }
                normalize(&mut sum);
                sum
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stillweb_models::fake::HashingEmbedder;

    #[test]
    fn each_distinct_sentence_is_embedded_once_and_passages_are_their_mean() {
        let mut composed = SentenceComposed::new(HashingEmbedder::new(16));
        let a = "The castle stands above Brno. Its walls are old.";
        let b = "Its walls are old. Visitors climb the tower.";
        let out = composed.embed_documents(&[a, b]).expect("embed");
        assert_eq!(composed.sentences(), 3);
        let mut plain = HashingEmbedder::new(16);
        let parts = plain
            .embed_documents(&["The castle stands above Brno.", "Its walls are old."])
            .expect("embed");
        let mut mean: Vec<f32> = parts[0].iter().zip(&parts[1]).map(|(x, y)| x + y).collect();
        normalize(&mut mean);
        for (x, y) in out[0].iter().zip(&mean) {
            assert!((x - y).abs() < 1e-6);
        }
        composed.embed_documents(&[b]).expect("again");
        assert_eq!(composed.sentences(), 3);
        assert_eq!(
            sentences("Brno\nThe castle. Old walls."),
            ["Brno", "The castle.", "Old walls."]
        );
    }
}
