//! Batching without model threads: callers leave requests in one queue, and whoever drains it
//! (a thread of the caller's own pool) runs what waits there in one model call.
//!
//! Each request left asks for one drain, queued on the caller's pool behind the work already
//! there, where the request's own run would have been. A lone request is drained at once; while
//! the pool's threads are busy, requests pile up by themselves, and a drain takes an even share
//! of them among the drainers in one call, so that a burst (a batch call's queries) is split
//! over the pool's threads instead of landing on whichever drain runs while the others are busy.
//! Drains that find their requests already taken return at once.
//!
//! As in [`crate::batcher`], a request whose caller has gone is dropped unrun, and when a
//! batch fails each of its requests is run alone, so one bad request fails only itself.

use std::collections::VecDeque;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::ModelError;
use crate::batcher::{BatchStats, Counters, Job, Reply, run_batch};

/// A queue of requests that drains run in batches of at most `max` each.
pub struct Gather<Req, Out> {
    waiting: Mutex<VecDeque<Job<Req, Out>>>,
    counters: Counters,
    max: usize,
    /// Drains that may run side by side (the pool's threads): a drain takes an even share of
    /// what waits, so that one batch does not leave the other threads idle.
    drainers: usize,
}

impl<Req, Out> std::fmt::Debug for Gather<Req, Out> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gather")
            .field("max", &self.max)
            .field("drainers", &self.drainers)
            .finish_non_exhaustive()
    }
}

impl<Req, Out> Gather<Req, Out> {
    /// Batches of at most `max` requests, spread over up to `drainers` drains at once.
    pub fn new(max: usize, drainers: usize) -> Self {
        Gather {
            waiting: Mutex::new(VecDeque::new()),
            counters: Counters::default(),
            max: max.max(1),
            drainers: drainers.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<Job<Req, Out>>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Leaves `request`; `reply` gets its output from whichever drain runs it. A request of a
    /// caller whose `alive` turns false is dropped unrun. The caller must then schedule one
    /// [`Gather::drain`]: the drains outnumber the requests waiting, so none waits forever.
    pub fn leave(&self, request: Req, alive: Option<Arc<AtomicBool>>, reply: Reply<Out>) {
        self.lock().push_back(Job::new(request, 1, alive, reply));
    }

    /// Runs its share of the waiting requests (the oldest; an even split among the drainers, at
    /// most `max`) in one call with `run`, and replies to each. Returns at once when nothing
    /// waits (earlier drains took this drain's request).
    pub fn drain(&self, run: impl Fn(&[Req]) -> Result<Vec<Out>, ModelError>) {
        let batch: Vec<Job<Req, Out>> = {
            let mut waiting = self.lock();
            if waiting.is_empty() {
                return;
            }
            let take = waiting.len().div_ceil(self.drainers).min(self.max);
            waiting.drain(..take).collect()
        };
        run_batch(
            &mut (),
            &|_: &mut (), requests: &[Req]| run(requests),
            batch,
            &self.counters,
        );
    }

    /// What the drains have run since the start.
    pub fn stats(&self) -> BatchStats {
        self.counters.stats()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::Ordering;
    use std::sync::mpsc;

    use super::*;

    fn reply_to(tx: &mpsc::Sender<(u32, Result<u32, ModelError>)>, n: u32) -> Reply<u32> {
        let tx = tx.clone();
        Box::new(move |out| {
            let _ = tx.send((n, out));
        })
    }

    fn double(batches: &Mutex<Vec<Vec<u32>>>) -> impl Fn(&[u32]) -> Result<Vec<u32>, ModelError> {
        move |xs: &[u32]| {
            batches.lock().expect("lock").push(xs.to_vec());
            if xs.contains(&13) {
                return Err(ModelError::Output("13".into()));
            }
            Ok(xs.iter().map(|x| x * 2).collect())
        }
    }

    #[test]
    fn a_lone_request_runs_alone_and_a_drain_without_requests_returns() {
        let gather = Gather::new(32, 2);
        let (tx, rx) = mpsc::channel();
        gather.leave(4, None, reply_to(&tx, 4));
        let batches = Mutex::new(Vec::new());
        gather.drain(double(&batches));
        gather.drain(double(&batches));
        assert_eq!(rx.try_recv().expect("a reply").1.expect("doubled"), 8);
        assert_eq!(*batches.lock().expect("lock"), vec![vec![4]]);
    }

    #[test]
    fn requests_waiting_together_are_split_among_the_drainers() {
        let gather = Gather::new(32, 2);
        let (tx, rx) = mpsc::channel();
        for n in 1..=6 {
            gather.leave(n, None, reply_to(&tx, n));
        }
        let batches = Mutex::new(Vec::new());
        // Half for the first drain; the second runs meanwhile (on another thread, here inside
        // the first batch) and takes half of the rest, the third the last one. The other three
        // drains find nothing.
        let first = |xs: &[u32]| {
            gather.drain(double(&batches));
            double(&batches)(xs)
        };
        gather.drain(first);
        gather.drain(double(&batches));
        for _ in 4..=6 {
            gather.drain(|_: &[u32]| panic!("nothing is left"));
        }
        assert_eq!(
            *batches.lock().expect("lock"),
            vec![vec![4, 5], vec![1, 2, 3], vec![6]]
        );
        let mut outs: Vec<(u32, u32)> = rx
            .try_iter()
            .map(|(n, o)| (n, o.expect("doubled")))
            .collect();
        outs.sort_unstable();
        assert_eq!(outs, (1..=6).map(|n| (n, 2 * n)).collect::<Vec<_>>());
        assert_eq!(
            gather.stats(),
            BatchStats {
                runs: 3,
                requests: 6,
                cancelled: 0
            }
        );
    }

    #[test]
    fn a_burst_left_while_a_drain_runs_is_still_split_between_the_drainers() {
        let gather = Gather::new(32, 2);
        let (tx, rx) = mpsc::channel();
        gather.leave(1, None, reply_to(&tx, 1));
        let batches = Mutex::new(Vec::new());
        // While one thread embeds the lone request, a batch call's eight arrive: the other
        // thread's drain takes half, not all eight, so the first thread has the rest to share
        // when it is done instead of idling beside a batch of eight. Run one after another, as
        // here, each later drain halves what is left.
        let first = |xs: &[u32]| {
            for n in 2..=9 {
                gather.leave(n, None, reply_to(&tx, n));
            }
            gather.drain(double(&batches));
            double(&batches)(xs)
        };
        gather.drain(first);
        for _ in 3..=9 {
            gather.drain(double(&batches));
        }
        assert_eq!(
            *batches.lock().expect("lock"),
            vec![vec![2, 3, 4, 5], vec![1], vec![6, 7], vec![8], vec![9]]
        );
        assert_eq!(rx.try_iter().count(), 9);
    }

    #[test]
    fn batches_hold_at_most_max_and_a_failing_request_fails_only_itself() {
        let gather = Gather::new(3, 1);
        let (tx, rx) = mpsc::channel();
        for n in [1, 13, 2, 3, 4] {
            gather.leave(n, None, reply_to(&tx, n));
        }
        let batches = Mutex::new(Vec::new());
        gather.drain(double(&batches));
        gather.drain(double(&batches));
        // The failed batch [1, 13, 2] is rerun one request at a time.
        assert_eq!(
            *batches.lock().expect("lock"),
            vec![vec![1, 13, 2], vec![1], vec![13], vec![2], vec![3, 4]]
        );
        let outs: std::collections::HashMap<u32, Result<u32, ModelError>> = rx.try_iter().collect();
        assert!(outs[&13].is_err());
        assert_eq!(outs[&1].as_ref().ok(), Some(&2));
        assert_eq!(outs[&4].as_ref().ok(), Some(&8));
    }

    #[test]
    fn requests_of_callers_gone_are_dropped_unrun() {
        let gather = Gather::new(8, 1);
        let (tx, rx) = mpsc::channel();
        let alive = Arc::new(AtomicBool::new(true));
        gather.leave(1, Some(Arc::clone(&alive)), reply_to(&tx, 1));
        gather.leave(2, None, reply_to(&tx, 2));
        alive.store(false, Ordering::Release);
        let batches = Mutex::new(Vec::new());
        gather.drain(double(&batches));
        assert_eq!(*batches.lock().expect("lock"), vec![vec![2]]);
        let outs: std::collections::HashMap<u32, Result<u32, ModelError>> = rx.try_iter().collect();
        assert!(matches!(outs[&1], Err(ModelError::Cancelled)));
        assert_eq!(gather.stats().cancelled, 1);
    }
}
