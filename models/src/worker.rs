//! A thread that owns an embedder. Callers send work over a bounded channel and wait for the
//! reply, so an ONNX session is only ever driven by its own thread and a flood of requests waits
//! at the channel instead of piling up without bound.

use std::sync::mpsc;

use crate::{Embedder, ModelError};

enum Job {
    Queries(
        Vec<String>,
        mpsc::SyncSender<Result<Vec<Vec<f32>>, ModelError>>,
    ),
    Documents(
        Vec<String>,
        mpsc::SyncSender<Result<Vec<Vec<f32>>, ModelError>>,
    ),
}

/// A cloneable handle to an embedder running on its own thread.
#[derive(Debug, Clone)]
pub struct EmbedWorker {
    sender: mpsc::SyncSender<Job>,
    model_id: String,
    dimension: usize,
}

impl EmbedWorker {
    /// Moves `embedder` onto a new thread named `name`; at most `queue` jobs wait for it.
    pub fn spawn(
        mut embedder: Box<dyn Embedder>,
        name: &str,
        queue: usize,
    ) -> std::io::Result<EmbedWorker> {
        let (sender, receiver) = mpsc::sync_channel::<Job>(queue.max(1));
        let model_id = embedder.model_id().to_string();
        let dimension = embedder.dimension();
        std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                for job in receiver {
                    match job {
                        Job::Queries(texts, reply) => {
                            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                            let _ = reply.send(embedder.embed_queries(&refs));
                        }
                        Job::Documents(texts, reply) => {
                            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
                            let _ = reply.send(embedder.embed_documents(&refs));
                        }
                    }
                }
            })?;
        Ok(EmbedWorker {
            sender,
            model_id,
            dimension,
        })
    }

    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    pub fn dimension(&self) -> usize {
        self.dimension
    }

    pub fn embed_queries(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, ModelError> {
        let (reply, result) = mpsc::sync_channel(1);
        self.sender
            .send(Job::Queries(texts, reply))
            .map_err(|_| ModelError::WorkerGone)?;
        result.recv().map_err(|_| ModelError::WorkerGone)?
    }

    pub fn embed_documents(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, ModelError> {
        let (reply, result) = mpsc::sync_channel(1);
        self.sender
            .send(Job::Documents(texts, reply))
            .map_err(|_| ModelError::WorkerGone)?;
        result.recv().map_err(|_| ModelError::WorkerGone)?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake::HashingEmbedder;

    #[test]
    fn worker_answers_from_many_threads() {
        let worker =
            EmbedWorker::spawn(Box::new(HashingEmbedder::new(16)), "test-embed", 2).expect("spawn");
        let handles: Vec<_> = (0..8)
            .map(|i| {
                let w = worker.clone();
                std::thread::spawn(move || {
                    w.embed_queries(vec![format!("query {i}")]).expect("embed")
                })
            })
            .collect();
        for h in handles {
            let v = h.join().expect("join");
            assert_eq!(v[0].len(), 16);
        }
    }
}
