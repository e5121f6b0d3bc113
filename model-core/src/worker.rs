//! Threads that own models. Callers send work over a bounded channel and wait for the reply, so
//! an ONNX session is only ever driven by its own thread, and a flood of requests waits at the
//! channel instead of piling up without bound. Several copies of a model (one session each) can
//! serve one channel: a caller that blocks on the reply then never waits for another caller's
//! model run, and each request's result stays the same whichever copy computes it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, mpsc};

use crate::batcher::{BatchPolicy, BatchStats, Batcher, RunBatch};
use crate::gather::Gather;
use crate::{Embedder, ModelError, RerankPool, Reranker};

type Job<M> = Box<dyn FnOnce(&mut M) + Send>;

/// A cloneable handle to a model `M` running on its own thread.
pub struct ModelWorker<M: ?Sized + Send + 'static> {
    sender: mpsc::SyncSender<Job<M>>,
}

impl<M: ?Sized + Send + 'static> Clone for ModelWorker<M> {
    fn clone(&self) -> Self {
        ModelWorker {
            sender: self.sender.clone(),
        }
    }
}

impl<M: ?Sized + Send + 'static> std::fmt::Debug for ModelWorker<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelWorker").finish_non_exhaustive()
    }
}

impl<M: ?Sized + Send + 'static> ModelWorker<M> {
    /// Moves `model` onto a new thread named `name`; at most `queue` jobs wait for it.
    pub fn spawn(model: Box<M>, name: &str, queue: usize) -> std::io::Result<Self> {
        Self::spawn_copies(vec![model], name, queue)
    }

    /// Moves each of `models` (copies of one model) onto its own thread named `name`; they take
    /// jobs from one queue, where at most `queue` wait.
    pub fn spawn_copies(models: Vec<Box<M>>, name: &str, queue: usize) -> std::io::Result<Self> {
        let (sender, receiver) = mpsc::sync_channel::<Job<M>>(queue.max(1));
        let receiver = Arc::new(Mutex::new(receiver));
        for mut model in models {
            let receiver = Arc::clone(&receiver);
            std::thread::Builder::new()
                .name(name.to_string())
                .spawn(move || {
                    loop {
                        // The lock is held only while waiting for the next job, not while running it.
                        let job = receiver
                            .lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .recv();
                        match job {
                            Ok(job) => job(&mut model),
                            Err(_) => break,
                        }
                    }
                })?;
        }
        Ok(ModelWorker { sender })
    }

    /// Runs `work` on the model's thread and waits for its result.
    pub fn call<R: Send + 'static>(
        &self,
        work: impl FnOnce(&mut M) -> Result<R, ModelError> + Send + 'static,
    ) -> Result<R, ModelError> {
        let (reply, result) = mpsc::sync_channel(1);
        self.sender
            .send(Box::new(move |model: &mut M| {
                let _ = reply.send(work(model));
            }))
            .map_err(|_| ModelError::WorkerGone)?;
        result.recv().map_err(|_| ModelError::WorkerGone)?
    }
}

/// A handle to an embedder's copies: each on its own thread ([`EmbedWorker::spawn_copies`]), or
/// lent to the calling thread ([`EmbedWorker::lend_copies`], no thread hop: for callers that
/// are themselves a fixed pool of threads, one copy each), optionally gathering concurrent
/// callers' queries into one model call ([`EmbedWorker::gathering`]).
#[derive(Debug, Clone)]
pub struct EmbedWorker {
    runs: Runs,
    /// Queries left for a drain on the callers' pool ([`EmbedWorker::leave_query`]).
    gather: Option<Arc<Gather<String, Vec<f32>>>>,
    model_id: String,
    dimension: usize,
    engine: String,
}

#[derive(Debug, Clone)]
enum Runs {
    OnThreads(ModelWorker<dyn Embedder>),
    OnCaller(Arc<Lender>),
}

/// Copies of a model that callers borrow one at a time, waiting while all are out.
struct Lender {
    free: Mutex<Vec<Box<dyn Embedder>>>,
    returned: std::sync::Condvar,
    copies: usize,
}

impl std::fmt::Debug for Lender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lender").finish_non_exhaustive()
    }
}

impl Lender {
    fn with<R>(&self, work: impl FnOnce(&mut dyn Embedder) -> R) -> R {
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        let mut model = loop {
            match free.pop() {
                Some(model) => break model,
                None => {
                    free = self
                        .returned
                        .wait(free)
                        .unwrap_or_else(PoisonError::into_inner);
                }
            }
        };
        drop(free);
        let result = work(&mut *model);
        self.free
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(model);
        self.returned.notify_one();
        result
    }
}

impl EmbedWorker {
    pub fn spawn(embedder: Box<dyn Embedder>, name: &str, queue: usize) -> std::io::Result<Self> {
        Self::spawn_copies(vec![embedder], name, queue)
    }

    /// One thread per copy of the embedder (each its own session), serving one queue.
    ///
    /// # Panics
    /// If `embedders` is empty.
    pub fn spawn_copies(
        embedders: Vec<Box<dyn Embedder>>,
        name: &str,
        queue: usize,
    ) -> std::io::Result<Self> {
        assert!(!embedders.is_empty(), "an embed worker needs a model");
        let model_id = embedders[0].model_id().to_string();
        let dimension = embedders[0].dimension();
        let engine = embedders[0].engine().to_string();
        Ok(EmbedWorker {
            runs: Runs::OnThreads(ModelWorker::spawn_copies(embedders, name, queue)?),
            gather: None,
            model_id,
            dimension,
            engine,
        })
    }

    /// Copies of the embedder that each caller borrows and runs on its own thread.
    ///
    /// # Panics
    /// If `embedders` is empty.
    pub fn lend_copies(embedders: Vec<Box<dyn Embedder>>) -> Self {
        assert!(!embedders.is_empty(), "an embed worker needs a model");
        EmbedWorker {
            model_id: embedders[0].model_id().to_string(),
            dimension: embedders[0].dimension(),
            engine: embedders[0].engine().to_string(),
            gather: None,
            runs: Runs::OnCaller(Arc::new(Lender {
                copies: embedders.len(),
                free: Mutex::new(embedders),
                returned: std::sync::Condvar::new(),
            })),
        }
    }

    /// This worker, with concurrent callers' queries gathered and embedded up to `max` per
    /// model call by whoever drains them ([`EmbedWorker::leave_query`],
    /// [`EmbedWorker::drain_queries`]), split among as many drains as there are copies. A
    /// query's vector must not depend on what shares its call: true of every engine here (the
    /// native engine quantises per token and packs sequences without padding; the ONNX
    /// embedder embeds a per-call-quantised model's queries one per call).
    pub fn gathering(self, max: usize) -> Self {
        let drainers = match &self.runs {
            Runs::OnCaller(lender) => lender.copies,
            Runs::OnThreads(_) => 1,
        };
        EmbedWorker {
            gather: Some(Arc::new(Gather::new(max, drainers))),
            ..self
        }
    }

    /// What the gathered queries' drains have run, when queries are gathered.
    pub fn batch_stats(&self) -> Option<BatchStats> {
        self.gather.as_ref().map(|g| g.stats())
    }

    /// Whether queries are gathered (then [`EmbedWorker::leave_query`] takes them).
    pub fn gathers_queries(&self) -> bool {
        self.gather.is_some()
    }

    /// Leaves one query to be embedded with whatever else waits; `reply` gets its vector from
    /// the drain that runs it. A query of a caller whose `alive` turns false is dropped unrun.
    /// True when the caller must schedule one drain for it ([`EmbedWorker::drain_queries`] on
    /// a thread of its pool). Without gathering, the query is embedded at once on this thread.
    #[must_use = "when true, a drain must be scheduled or the query waits forever"]
    pub fn leave_query(
        &self,
        text: String,
        alive: Option<Arc<AtomicBool>>,
        reply: Box<dyn FnOnce(Result<Vec<f32>, ModelError>) + Send>,
    ) -> bool {
        match &self.gather {
            Some(gather) => {
                gather.leave(text, alive, reply);
                true
            }
            None => {
                reply(self.embed_query(&text));
                false
            }
        }
    }

    /// Embeds a batch of the gathered queries on this thread (see [`Gather::drain`]).
    pub fn drain_queries(&self) {
        if let Some(gather) = &self.gather {
            gather.drain(|texts: &[String]| self.embed_queries(texts));
        }
    }

    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    pub fn dimension(&self) -> usize {
        self.dimension
    }

    /// The engine the copies run (`onnx`, `native-int8`, …).
    pub fn engine(&self) -> &str {
        &self.engine
    }

    pub fn embed_query(&self, text: &str) -> Result<Vec<f32>, ModelError> {
        match &self.runs {
            Runs::OnThreads(worker) => {
                let text = text.to_string();
                worker.call(move |e| crate::embed_query(e, &text))
            }
            Runs::OnCaller(lender) => lender.with(|e| crate::embed_query(e, text)),
        }
    }

    /// Queries' vectors from one model call, in order.
    pub fn embed_queries(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
        match &self.runs {
            Runs::OnThreads(worker) => {
                let texts = texts.to_vec();
                worker.call(move |e| queries_of(e, &texts))
            }
            Runs::OnCaller(lender) => lender.with(|e| queries_of(e, texts)),
        }
    }

    pub fn embed_documents(&self, texts: Vec<String>) -> Result<Vec<Vec<f32>>, ModelError> {
        match &self.runs {
            Runs::OnThreads(worker) => worker.call(move |e| embed_all(e, &texts)),
            Runs::OnCaller(lender) => lender.with(|e| embed_all(e, &texts)),
        }
    }
}

/// Threads that drain a gathering worker's queries when asked, as a server's search threads do,
/// for tools and tests that have no search pool. Dropped, they stop once their drains end.
#[derive(Debug)]
pub struct DrainThreads {
    worker: EmbedWorker,
    ask: mpsc::Sender<()>,
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl DrainThreads {
    /// `threads` threads draining `worker`'s gathered queries.
    pub fn spawn(worker: &EmbedWorker, threads: usize) -> std::io::Result<Self> {
        let (ask, asked) = mpsc::channel::<()>();
        let asked = Arc::new(Mutex::new(asked));
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..threads.max(1))
            .map(|_| {
                let (worker, asked, stop) = (worker.clone(), asked.clone(), stop.clone());
                std::thread::Builder::new()
                    .name("stillweb-drain".into())
                    .spawn(move || {
                        let next = || {
                            let asked = asked.lock().unwrap_or_else(PoisonError::into_inner);
                            asked.recv().is_ok()
                        };
                        while next() && !stop.load(Ordering::Acquire) {
                            worker.drain_queries();
                        }
                    })
            })
            .collect::<std::io::Result<Vec<_>>>()?;
        Ok(DrainThreads {
            worker: worker.clone(),
            ask,
            stop,
            threads,
        })
    }

    /// One query's vector, gathered with whatever else waits and embedded by a drain.
    pub fn embed_query(&self, text: &str) -> Result<Vec<f32>, ModelError> {
        let (tx, rx) = mpsc::sync_channel(1);
        let reply = Box::new(move |vector| {
            let _ = tx.send(vector);
        });
        if self.worker.leave_query(text.to_string(), None, reply) {
            let _ = self.ask.send(());
        }
        rx.recv().map_err(|_| ModelError::WorkerGone)?
    }
}

impl Drop for DrainThreads {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        for _ in &self.threads {
            let _ = self.ask.send(());
        }
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// One vector per query, or an error naming the mismatch.
fn queries_of(embedder: &mut dyn Embedder, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let vectors = embedder.embed_queries(&refs)?;
    if vectors.len() != texts.len() {
        return Err(ModelError::Output(format!(
            "{} vectors for {} queries",
            vectors.len(),
            texts.len()
        )));
    }
    Ok(vectors)
}

fn embed_all(embedder: &mut dyn Embedder, texts: &[String]) -> Result<Vec<Vec<f32>>, ModelError> {
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    embedder.embed_documents(&refs)
}

/// A reranker behind a dynamic batcher: concurrent searches' pools are gathered (up to a token
/// budget, see [`BatchPolicy`]) and scored in one [`Reranker::score_pools`] call, their pairs
/// sorted by length across requests. It is itself a [`Reranker`], so search code takes either.
#[derive(Debug, Clone)]
pub struct RerankWorker {
    batcher: Batcher<RerankPool, Vec<f32>>,
    model_id: String,
}

impl RerankWorker {
    /// One reranker, one pool per model call (no batching across requests).
    pub fn spawn(reranker: Box<dyn Reranker>, name: &str, queue: usize) -> std::io::Result<Self> {
        let policy = BatchPolicy {
            queue,
            ..BatchPolicy::UNBATCHED
        };
        Self::spawn_batching(vec![reranker], name, policy)
    }

    /// Copies of one reranker (one is enough for a model that uses every core; several for one
    /// that waits on others, such as a remote tier), each on its own thread, gathering batches
    /// from one queue under `policy` (costs in [`RerankPool::estimated_tokens`]).
    pub fn spawn_batching(
        rerankers: Vec<Box<dyn Reranker>>,
        name: &str,
        policy: BatchPolicy,
    ) -> std::io::Result<Self> {
        let model_id = rerankers
            .first()
            .map(|r| r.model_id().to_string())
            .unwrap_or_default();
        let run: RunBatch<Box<dyn Reranker>, RerankPool, Vec<f32>> =
            Arc::new(|reranker: &mut Box<dyn Reranker>, pools: &[RerankPool]| {
                reranker.score_pools(pools)
            });
        Ok(RerankWorker {
            batcher: Batcher::spawn(rerankers, name, policy, run)?,
            model_id,
        })
    }

    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    pub fn policy(&self) -> BatchPolicy {
        self.batcher.policy()
    }

    pub fn batch_stats(&self) -> BatchStats {
        self.batcher.stats()
    }

    /// Scores `passages` against `query` (one score each, in order), batched with whatever
    /// other requests are waiting.
    pub fn rerank(&self, query: &str, passages: Vec<String>) -> Result<Vec<f32>, ModelError> {
        let count = passages.len();
        let pool = RerankPool {
            query: query.to_string(),
            passages,
        };
        let cost = pool.estimated_tokens();
        let scores = self.batcher.call(pool, cost)?;
        if scores.len() != count {
            return Err(ModelError::Output(format!(
                "the reranker gave {} scores for {count} passages",
                scores.len()
            )));
        }
        Ok(scores)
    }
}

impl RerankWorker {
    /// Queues a pool without blocking (for async callers, which then hold no thread while it
    /// waits its turn); `reply` gets the scores on a model thread. A pool whose caller's `alive`
    /// turns false is dropped unrun. Fails (dropping `reply`) when the queue is full.
    pub fn submit(
        &self,
        query: String,
        passages: Vec<String>,
        alive: Option<Arc<AtomicBool>>,
        reply: Box<dyn FnOnce(Result<Vec<f32>, ModelError>) + Send>,
    ) -> Result<(), ModelError> {
        let count = passages.len();
        let pool = RerankPool { query, passages };
        let cost = pool.estimated_tokens();
        let reply = Box::new(move |out: Result<Vec<f32>, ModelError>| {
            reply(out.and_then(|scores| {
                if scores.len() == count {
                    Ok(scores)
                } else {
                    Err(ModelError::Output(format!(
                        "the reranker gave {} scores for {count} passages",
                        scores.len()
                    )))
                }
            }))
        });
        self.batcher
            .try_submit(pool, cost, alive, reply)
            .map_err(|_| {
                ModelError::Unavailable(format!(
                    "the reranker's queue is full ({} pools waiting)",
                    self.batcher.policy().queue
                ))
            })
    }
}

impl Reranker for RerankWorker {
    fn model_id(&self) -> &str {
        &self.model_id
    }

    fn score(&mut self, query: &str, passages: &[&str]) -> Result<Vec<f32>, ModelError> {
        self.rerank(query, passages.iter().map(|p| p.to_string()).collect())
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
                std::thread::spawn(move || w.embed_query(&format!("query {i}")).expect("embed"))
            })
            .collect();
        for h in handles {
            let v = h.join().expect("join");
            assert_eq!(v.len(), 16);
        }
    }

    #[test]
    fn lent_copies_answer_alike_from_many_threads() {
        let copies: Vec<Box<dyn Embedder>> = (0..2)
            .map(|_| Box::new(HashingEmbedder::new(16)) as Box<dyn Embedder>)
            .collect();
        let lent = EmbedWorker::lend_copies(copies);
        let expected = lent.embed_query("same query").expect("embed");
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let w = lent.clone();
                std::thread::spawn(move || w.embed_query("same query").expect("embed"))
            })
            .collect();
        for h in handles {
            assert_eq!(h.join().expect("join"), expected);
        }
        assert_eq!(lent.engine(), "hashing");
    }

    #[test]
    fn copies_share_the_queue_and_answer_alike() {
        let copies: Vec<Box<dyn Embedder>> = (0..3)
            .map(|_| Box::new(HashingEmbedder::new(16)) as Box<dyn Embedder>)
            .collect();
        let worker = EmbedWorker::spawn_copies(copies, "test-embed", 4).expect("spawn");
        let expected = worker.embed_query("same query").expect("embed");
        let handles: Vec<_> = (0..12)
            .map(|_| {
                let w = worker.clone();
                std::thread::spawn(move || w.embed_query("same query").expect("embed"))
            })
            .collect();
        for h in handles {
            assert_eq!(h.join().expect("join"), expected);
        }
    }
}
