//! Dynamic batching across requests: concurrent callers' requests wait in one queue, and each
//! model thread takes as many as fit a cost budget (tokens, say) and runs them in one model call.
//! While a model is busy the queue fills by itself, so a loaded server runs full batches with no
//! added wait; an idle model waits at most `max_wait` after the first request for company.
//!
//! A request whose caller has gone (see [`on_behalf_of`]) is dropped before it runs. When a batch
//! fails, each of its requests is run alone, so one bad request fails only itself.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, mpsc};
use std::time::{Duration, Instant};

use crate::ModelError;

/// How much a model thread gathers before it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchPolicy {
    /// Gather requests until their summed cost reaches this (a single request larger than the
    /// budget runs alone).
    pub max_cost: usize,
    /// How long an idle model waits, after the oldest queued request arrived, for more.
    pub max_wait: Duration,
    /// Requests that may wait in the queue; callers beyond it block until there is room.
    pub queue: usize,
}

impl BatchPolicy {
    /// One request per model call, never waiting: the behaviour without batching.
    pub const UNBATCHED: BatchPolicy = BatchPolicy {
        max_cost: 0,
        max_wait: Duration::ZERO,
        queue: 1024,
    };
}

/// Runs one batch: one output per request, in order.
pub type RunBatch<M, Req, Out> = Arc<RunFn<M, Req, Out>>;
type RunFn<M, Req, Out> = dyn Fn(&mut M, &[Req]) -> Result<Vec<Out>, ModelError> + Send + Sync;
/// A batch run as [`run_batch`] takes it: a batcher's shared [`RunFn`], or a drain's closure.
pub(crate) type RunWith<'a, M, Req, Out> =
    dyn Fn(&mut M, &[Req]) -> Result<Vec<Out>, ModelError> + 'a;

/// Where a request's output goes (called on a model thread).
pub type Reply<Out> = Box<dyn FnOnce(Result<Out, ModelError>) + Send>;

pub(crate) struct Job<Req, Out> {
    request: Req,
    cost: usize,
    arrived: Instant,
    caller: Option<Arc<AtomicBool>>,
    reply: Reply<Out>,
}

impl<Req, Out> Job<Req, Out> {
    pub(crate) fn new(
        request: Req,
        cost: usize,
        caller: Option<Arc<AtomicBool>>,
        reply: Reply<Out>,
    ) -> Self {
        Job {
            request,
            cost,
            arrived: Instant::now(),
            caller,
            reply,
        }
    }

    fn caller_gone(&self) -> bool {
        self.caller
            .as_ref()
            .is_some_and(|alive| !alive.load(Ordering::Acquire))
    }
}

/// What a batcher has done since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BatchStats {
    /// Model runs (each one batch).
    pub runs: u64,
    /// Requests those runs answered.
    pub requests: u64,
    /// Requests dropped unrun because their caller had gone.
    pub cancelled: u64,
}

#[derive(Default)]
pub(crate) struct Counters {
    runs: AtomicU64,
    requests: AtomicU64,
    cancelled: AtomicU64,
}

impl Counters {
    pub(crate) fn stats(&self) -> BatchStats {
        BatchStats {
            runs: self.runs.load(Ordering::Relaxed),
            requests: self.requests.load(Ordering::Relaxed),
            cancelled: self.cancelled.load(Ordering::Relaxed),
        }
    }
}

struct Queue<Req, Out> {
    counters: Counters,
    state: Mutex<QueueState<Req, Out>>,
    /// Signalled when a job arrives or the last handle is dropped.
    arrived: Condvar,
    /// Signalled when jobs leave the queue.
    room: Condvar,
}

struct QueueState<Req, Out> {
    jobs: VecDeque<Job<Req, Out>>,
    handles: usize,
}

impl<Req, Out> Queue<Req, Out> {
    fn lock(&self) -> MutexGuard<'_, QueueState<Req, Out>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A cloneable handle to models that serve one queue with dynamic batching.
pub struct Batcher<Req: Send + 'static, Out: Send + 'static> {
    queue: Arc<Queue<Req, Out>>,
    policy: BatchPolicy,
}

impl<Req: Send + 'static, Out: Send + 'static> std::fmt::Debug for Batcher<Req, Out> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batcher")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl<Req: Send + 'static, Out: Send + 'static> Clone for Batcher<Req, Out> {
    fn clone(&self) -> Self {
        self.queue.lock().handles += 1;
        Batcher {
            queue: Arc::clone(&self.queue),
            policy: self.policy,
        }
    }
}

impl<Req: Send + 'static, Out: Send + 'static> Drop for Batcher<Req, Out> {
    fn drop(&mut self) {
        let mut state = self.queue.lock();
        state.handles -= 1;
        if state.handles == 0 {
            drop(state);
            self.queue.arrived.notify_all();
        }
    }
}

impl<Req: Send + 'static, Out: Send + 'static> Batcher<Req, Out> {
    /// Moves each of `models` (copies of one model) onto its own thread named `name`; each
    /// gathers batches under `policy` and runs them with `run`. The threads end when the last
    /// handle is dropped and the queue is empty.
    pub fn spawn<M: Send + 'static>(
        models: Vec<M>,
        name: &str,
        policy: BatchPolicy,
        run: RunBatch<M, Req, Out>,
    ) -> std::io::Result<Self> {
        let queue = Arc::new(Queue {
            counters: Counters::default(),
            state: Mutex::new(QueueState {
                jobs: VecDeque::new(),
                handles: 1,
            }),
            arrived: Condvar::new(),
            room: Condvar::new(),
        });
        for mut model in models {
            let (queue, run) = (Arc::clone(&queue), Arc::clone(&run));
            std::thread::Builder::new()
                .name(name.to_string())
                .spawn(move || {
                    while let Some(batch) = next_batch(&queue, &policy) {
                        run_batch(&mut model, &*run, batch, &queue.counters);
                    }
                })?;
        }
        Ok(Batcher { queue, policy })
    }

    pub fn policy(&self) -> BatchPolicy {
        self.policy
    }

    pub fn stats(&self) -> BatchStats {
        self.queue.counters.stats()
    }

    /// Queues `request` (of `cost`, in the policy's unit) and waits for its output. Blocks
    /// while the queue is full.
    pub fn call(&self, request: Req, cost: usize) -> Result<Out, ModelError> {
        let (tx, rx) = mpsc::sync_channel(1);
        self.submit(
            request,
            cost,
            Box::new(move |out| {
                let _ = tx.send(out);
            }),
        );
        rx.recv().map_err(|_| ModelError::WorkerGone)?
    }

    /// Queues `request` without blocking, for callers that must not (async tasks): `reply`
    /// gets its output on a model thread; a request of a caller whose `alive` turns false is
    /// dropped unrun. Gives the request back when the queue is full.
    pub fn try_submit(
        &self,
        request: Req,
        cost: usize,
        alive: Option<Arc<AtomicBool>>,
        reply: Reply<Out>,
    ) -> Result<(), Req> {
        let mut state = self.queue.lock();
        if state.jobs.len() >= self.policy.queue.max(1) {
            return Err(request);
        }
        state.jobs.push_back(Job::new(request, cost, alive, reply));
        drop(state);
        self.queue.arrived.notify_one();
        Ok(())
    }

    /// Queues `request`; `reply` gets its output (or error) on a model thread.
    pub fn submit(&self, request: Req, cost: usize, reply: Reply<Out>) {
        let job = Job::new(request, cost, CALLER.with(|c| c.borrow().clone()), reply);
        let mut state = self.queue.lock();
        while state.jobs.len() >= self.policy.queue.max(1) {
            state = self
                .queue
                .room
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        state.jobs.push_back(job);
        drop(state);
        self.queue.arrived.notify_one();
    }
}

/// Waits for work and takes the next batch; `None` once every handle is gone and the queue is
/// empty.
fn next_batch<Req, Out>(
    queue: &Queue<Req, Out>,
    policy: &BatchPolicy,
) -> Option<Vec<Job<Req, Out>>> {
    let mut state = queue.lock();
    loop {
        if let Some(first) = state.jobs.front() {
            let deadline = first.arrived + policy.max_wait;
            let queued: usize = state.jobs.iter().map(|j| j.cost).sum();
            let now = Instant::now();
            if queued >= policy.max_cost || now >= deadline || state.handles == 0 {
                break;
            }
            state = queue
                .arrived
                .wait_timeout(state, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            continue;
        }
        if state.handles == 0 {
            return None;
        }
        state = queue
            .arrived
            .wait(state)
            .unwrap_or_else(PoisonError::into_inner);
    }
    let mut batch = Vec::new();
    let mut cost = 0;
    while let Some(job) = state.jobs.front() {
        if !batch.is_empty() && cost + job.cost > policy.max_cost {
            break;
        }
        cost += job.cost;
        batch.extend(state.jobs.pop_front());
    }
    let more = !state.jobs.is_empty();
    drop(state);
    queue.room.notify_all();
    if more {
        // Another model thread may take the rest.
        queue.arrived.notify_one();
    }
    Some(batch)
}

/// Runs the batch's live jobs together, or each alone if that fails, and replies to each.
pub(crate) fn run_batch<M, Req, Out>(
    model: &mut M,
    run: &RunWith<'_, M, Req, Out>,
    batch: Vec<Job<Req, Out>>,
    counters: &Counters,
) {
    let (live, gone): (Vec<_>, Vec<_>) = batch.into_iter().partition(|j| !j.caller_gone());
    counters
        .cancelled
        .fetch_add(gone.len() as u64, Ordering::Relaxed);
    for job in gone {
        (job.reply)(Err(ModelError::Cancelled));
    }
    if live.is_empty() {
        return;
    }
    counters.runs.fetch_add(1, Ordering::Relaxed);
    counters
        .requests
        .fetch_add(live.len() as u64, Ordering::Relaxed);
    let (requests, replies): (Vec<Req>, Vec<Reply<Out>>) =
        live.into_iter().map(|j| (j.request, j.reply)).unzip();
    match run(model, &requests) {
        Ok(outputs) if outputs.len() == requests.len() => {
            for (reply, out) in replies.into_iter().zip(outputs) {
                reply(Ok(out));
            }
        }
        result if requests.len() == 1 => {
            let error = result.err().unwrap_or_else(|| {
                ModelError::Output("the model gave no single output for one request".into())
            });
            if let Some(reply) = replies.into_iter().next() {
                reply(Err(error));
            }
        }
        _ => {
            for (request, reply) in requests.into_iter().zip(replies) {
                reply(
                    run(model, std::slice::from_ref(&request)).and_then(|mut out| {
                        match (out.pop(), out.is_empty()) {
                            (Some(o), true) => Ok(o),
                            _ => Err(ModelError::Output(
                                "the model gave no single output for one request".into(),
                            )),
                        }
                    }),
                );
            }
        }
    }
}

thread_local! {
    static CALLER: RefCell<Option<Arc<AtomicBool>>> = const { RefCell::new(None) };
}

/// Runs `work` on behalf of a caller who may leave: requests it queues on a [`Batcher`] are
/// dropped before they run once `alive` is false (set it when the caller stops waiting).
pub fn on_behalf_of<R>(alive: Arc<AtomicBool>, work: impl FnOnce() -> R) -> R {
    let previous = CALLER.with(|c| c.replace(Some(alive)));
    struct Restore(Option<Arc<AtomicBool>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            CALLER.with(|c| *c.borrow_mut() = previous);
        }
    }
    let _restore = Restore(previous);
    work()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model that records each batch it runs and doubles numbers; 13 fails.
    struct Doubler {
        batches: Arc<Mutex<Vec<Vec<u32>>>>,
        /// When set, each batch says it has started, then waits to be let through.
        gate: Option<(mpsc::Sender<()>, mpsc::Receiver<()>)>,
    }

    fn gated(
        batches: &Arc<Mutex<Vec<Vec<u32>>>>,
    ) -> (Doubler, mpsc::Receiver<()>, mpsc::Sender<()>) {
        let (entered_tx, entered) = mpsc::channel();
        let (open, go) = mpsc::channel();
        let model = Doubler {
            batches: Arc::clone(batches),
            gate: Some((entered_tx, go)),
        };
        (model, entered, open)
    }

    fn doubler(batches: &Arc<Mutex<Vec<Vec<u32>>>>) -> Doubler {
        Doubler {
            batches: Arc::clone(batches),
            gate: None,
        }
    }

    fn run() -> RunBatch<Doubler, u32, u32> {
        Arc::new(|model: &mut Doubler, requests: &[u32]| {
            if let Some((entered, go)) = &model.gate {
                let _ = entered.send(());
                let _ = go.recv();
            }
            model.batches.lock().expect("lock").push(requests.to_vec());
            if requests.contains(&13) {
                return Err(ModelError::Output("13".into()));
            }
            Ok(requests.iter().map(|r| r * 2).collect())
        })
    }

    fn policy(max_cost: usize, wait_ms: u64) -> BatchPolicy {
        BatchPolicy {
            max_cost,
            max_wait: Duration::from_millis(wait_ms),
            queue: 64,
        }
    }

    #[test]
    fn concurrent_requests_share_batches_and_get_their_own_answers() {
        let batches = Arc::new(Mutex::new(Vec::new()));
        let batcher =
            Batcher::spawn(vec![doubler(&batches)], "t", policy(8, 200), run()).expect("spawn");
        let handles: Vec<_> = (0..8u32)
            .map(|i| {
                let b = batcher.clone();
                std::thread::spawn(move || b.call(i, 1).expect("answered"))
            })
            .collect();
        let answers: Vec<u32> = handles
            .into_iter()
            .map(|h| h.join().expect("joined"))
            .collect();
        assert_eq!(answers, (0..8).map(|i| i * 2).collect::<Vec<_>>());
        let batches = batches.lock().expect("lock");
        assert!(
            batches.len() < 8,
            "8 concurrent requests in fewer model calls: {batches:?}"
        );
        assert!(batches.iter().all(|b| b.len() <= 8), "within the budget");
    }

    #[test]
    fn a_full_budget_runs_without_waiting_and_a_large_request_runs_alone() {
        let batches = Arc::new(Mutex::new(Vec::new()));
        // A wait far longer than the test: only the budget can start these batches.
        let batcher =
            Batcher::spawn(vec![doubler(&batches)], "t", policy(4, 60_000), run()).expect("spawn");
        let started = Instant::now();
        assert_eq!(batcher.call(5, 10).expect("answered"), 10);
        assert!(started.elapsed() < Duration::from_secs(30));
        assert_eq!(batches.lock().expect("lock").as_slice(), &[vec![5]]);
    }

    #[test]
    fn a_failing_request_fails_alone() {
        let batches = Arc::new(Mutex::new(Vec::new()));
        let (model, entered, open) = gated(&batches);
        let batcher = Batcher::spawn(vec![model], "t", policy(100, 0), run()).expect("spawn");
        // The first call holds the model at the gate while the next three queue behind it.
        let first = {
            let b = batcher.clone();
            std::thread::spawn(move || b.call(1, 1))
        };
        entered.recv().expect("entered");
        let others: Vec<_> = [12u32, 13, 14]
            .into_iter()
            .map(|i| {
                let b = batcher.clone();
                std::thread::spawn(move || b.call(i, 1))
            })
            .collect();
        while batcher.queue.lock().jobs.len() < 3 {
            std::thread::sleep(Duration::from_millis(5));
        }
        for _ in 0..8 {
            let _ = open.send(());
        }
        assert_eq!(first.join().expect("joined").expect("answered"), 2);
        let results: Vec<_> = others
            .into_iter()
            .map(|h| h.join().expect("joined"))
            .collect();
        assert_eq!(results[0].as_ref().expect("answered"), &24);
        assert!(matches!(results[1], Err(ModelError::Output(_))));
        assert_eq!(results[2].as_ref().expect("answered"), &28);
        // Queued from three threads, so in any order; they ran together first.
        let batches = batches.lock().expect("lock");
        assert!(
            batches.iter().any(|b| {
                let mut b = b.clone();
                b.sort_unstable();
                b == [12, 13, 14]
            }),
            "ran together first: {batches:?}"
        );
    }

    #[test]
    fn requests_of_callers_who_left_are_dropped_before_they_run() {
        let batches = Arc::new(Mutex::new(Vec::new()));
        let (model, entered, open) = gated(&batches);
        let batcher = Batcher::spawn(vec![model], "t", policy(1, 0), run()).expect("spawn");
        let first = {
            let b = batcher.clone();
            std::thread::spawn(move || b.call(1, 1))
        };
        entered.recv().expect("entered");
        let alive = Arc::new(AtomicBool::new(true));
        let left = {
            let (b, alive) = (batcher.clone(), Arc::clone(&alive));
            std::thread::spawn(move || on_behalf_of(alive, || b.call(7, 1)))
        };
        while batcher.queue.lock().jobs.is_empty() {
            std::thread::sleep(Duration::from_millis(5));
        }
        alive.store(false, Ordering::Release);
        for _ in 0..4 {
            let _ = open.send(());
        }
        assert_eq!(first.join().expect("joined").expect("answered"), 2);
        assert!(matches!(
            left.join().expect("joined"),
            Err(ModelError::Cancelled)
        ));
        let stats = batcher.stats();
        assert_eq!((stats.requests, stats.cancelled), (1, 1), "{stats:?}");
        assert!(
            batches
                .lock()
                .expect("lock")
                .iter()
                .all(|b| !b.contains(&7)),
            "the abandoned request never reached the model"
        );
    }

    #[test]
    fn threads_end_when_the_last_handle_is_dropped() {
        let batches = Arc::new(Mutex::new(Vec::new()));
        let batcher =
            Batcher::spawn(vec![doubler(&batches)], "t", policy(1, 0), run()).expect("spawn");
        let queue = Arc::downgrade(&batcher.queue);
        drop(batcher);
        for _ in 0..200 {
            if queue.strong_count() == 0 {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        panic!("the model thread still holds the queue");
    }
}
