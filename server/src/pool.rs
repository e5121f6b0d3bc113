//! A named thread pool for CPU-bound search work, so that tantivy queries and document fetches
//! never block the async runtime; handlers only await the result.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use stillweb_models::batcher::on_behalf_of;
use tokio::sync::oneshot;

use crate::error::ApiError;

/// Runs closures on dedicated `stillweb-search-N` threads.
#[derive(Debug, Clone)]
pub struct SearchPool {
    pool: Arc<rayon::ThreadPool>,
}

impl SearchPool {
    pub fn new(threads: usize) -> std::io::Result<SearchPool> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads.max(1))
            .thread_name(|i| format!("stillweb-search-{i}"))
            .panic_handler(|_| tracing::error!("a search task panicked; its request gets a 500"))
            .build()
            .map_err(std::io::Error::other)?;
        Ok(SearchPool {
            pool: Arc::new(pool),
        })
    }

    /// Queues `work` on the pool without waiting for it, behind the work already waiting when
    /// called from outside the pool (from one of its own threads, rayon would run it first).
    pub fn spawn(&self, work: impl FnOnce() + Send + 'static) {
        self.pool.spawn(work);
    }

    /// Runs `work` on the pool and awaits its result. A panic inside `work` becomes an internal
    /// error for this request only. Work whose caller stopped waiting before a thread reached it
    /// (the client went away, or the request timed out in the queue) is skipped, and model
    /// requests (reranking) that running work queued are dropped before they run, so that an
    /// overloaded server does not spend its cores on answers nobody will read.
    pub async fn run<T, F>(&self, work: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce() -> Result<T, ApiError> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let waiting = Waiting::new();
        let alive = waiting.flag();
        self.pool.spawn(move || {
            if !tx.is_closed() {
                let _ = tx.send(on_behalf_of(alive, work));
            }
        });
        let result = rx
            .await
            .map_err(|_| ApiError::internal("search task ended without a result (panic)"))?;
        drop(waiting);
        result
    }
}

/// True while a caller waits; false once its future is dropped (the client went away, or a
/// timeout fired), so that model requests queued for it are dropped unrun.
pub struct Waiting(Arc<AtomicBool>);

impl Waiting {
    pub fn new() -> Waiting {
        Waiting(Arc::new(AtomicBool::new(true)))
    }

    /// The flag batchers read.
    pub fn flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.0)
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn work_whose_caller_stopped_waiting_is_skipped() {
        let pool = SearchPool::new(1).expect("pool");
        // Occupy the only thread until released.
        let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
        let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
        pool.pool.spawn(move || {
            let _ = started_tx.send(());
            let _ = release_rx.recv();
        });
        started_rx.recv().expect("first job started");

        let ran = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&ran);
        let gave_up = tokio::time::timeout(
            Duration::from_millis(20),
            pool.run(move || {
                flag.store(true, Ordering::SeqCst);
                Ok(())
            }),
        )
        .await;
        assert!(
            gave_up.is_err(),
            "the caller timed out while the job was queued"
        );
        release_tx.send(()).expect("release");
        // A later job is answered, so the pool has gone past the skipped one.
        assert_eq!(pool.run(|| Ok(7)).await.expect("later job"), 7);
        assert!(!ran.load(Ordering::SeqCst), "abandoned work was skipped");
    }
}
