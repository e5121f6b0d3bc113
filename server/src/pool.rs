//! A named thread pool for CPU-bound search work, so that tantivy queries and document fetches
//! never block the async runtime; handlers only await the result.

use std::sync::Arc;

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

    /// Runs `work` on the pool and awaits its result. A panic inside `work` becomes an internal
    /// error for this request only.
    pub async fn run<T, F>(&self, work: F) -> Result<T, ApiError>
    where
        T: Send + 'static,
        F: FnOnce() -> Result<T, ApiError> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        self.pool.spawn(move || {
            let _ = tx.send(work());
        });
        rx.await
            .map_err(|_| ApiError::internal("search task ended without a result (panic)"))?
    }
}
