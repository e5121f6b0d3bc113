//! Batching without model threads: callers leave requests in one queue, and whoever drains it
//! (a thread of the caller's own pool) runs everything waiting in one model call. A lone request
//! is drained at once, so an idle server adds no wait; while the pool's threads are busy,
//! requests pile up by themselves and the next drain takes them together.
//!
//! Who drains is the caller's business: [`Gather::leave`] says when a drain must be scheduled
//! (none is queued yet), and [`Gather::drain`] calls back when another must follow (requests
//! remain). At most one drain is queued at a time, so a burst of requests schedules one drain, not
//! one each; a running drain takes its share of what waits among the idle drainers and asks for
//! the next drain before it runs, so the pool's threads drain side by side.
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
    state: Mutex<State<Req, Out>>,
    counters: Counters,
    max: usize,
    /// Drains that may run side by side (the pool's threads): a drain takes its share of what
    /// waits, so that one batch does not leave the other threads idle.
    drainers: usize,
}

struct State<Req, Out> {
    waiting: VecDeque<Job<Req, Out>>,
    /// A drain is scheduled and has not started.
    drain_queued: bool,
    /// Drains running now.
    running: usize,
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
            state: Mutex::new(State {
                waiting: VecDeque::new(),
                drain_queued: false,
                running: 0,
            }),
            counters: Counters::default(),
            max: max.max(1),
            drainers: drainers.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<Req, Out>> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Leaves `request`; `reply` gets its output from whichever drain runs it. A request of a
    /// caller whose `alive` turns false is dropped unrun. True when the caller must schedule a
    /// drain (no drain is queued).
    #[must_use = "when true, a drain must be scheduled or the request waits forever"]
    pub fn leave(&self, request: Req, alive: Option<Arc<AtomicBool>>, reply: Reply<Out>) -> bool {
        let mut state = self.lock();
        state.waiting.push_back(Job::new(request, 1, alive, reply));
        !std::mem::replace(&mut state.drain_queued, true)
    }

    /// Takes a batch of what waits (at most `max`, and no more than its share among the
    /// drainers not running), runs it with `run` and replies to each request. Calls `schedule`
    /// when requests remain and no drain is queued for them: before running when it left some
    /// (another thread can take them meanwhile), and after when more arrived.
    pub fn drain(&self, run: impl Fn(&[Req]) -> Result<Vec<Out>, ModelError>, schedule: impl Fn()) {
        let (batch, rest) = {
            let mut state = self.lock();
            state.drain_queued = false;
            let idle = self.drainers.saturating_sub(state.running).max(1);
            let take = state
                .waiting
                .len()
                .div_ceil(idle)
                .clamp(1, self.max)
                .min(state.waiting.len());
            state.running += 1;
            let batch: Vec<Job<Req, Out>> = state.waiting.drain(..take).collect();
            (batch, self.queue_another(&mut state))
        };
        if rest {
            schedule();
        }
        run_batch(
            &mut (),
            &|_: &mut (), requests: &[Req]| run(requests),
            batch,
            &self.counters,
        );
        let more = {
            let mut state = self.lock();
            state.running -= 1;
            self.queue_another(&mut state)
        };
        if more {
            schedule();
        }
    }

    /// Marks a drain queued when requests wait and none is; true when it must be scheduled.
    fn queue_another(&self, state: &mut State<Req, Out>) -> bool {
        !state.waiting.is_empty() && !std::mem::replace(&mut state.drain_queued, true)
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
    fn a_lone_request_schedules_a_drain_and_runs_alone() {
        let gather = Gather::new(32, 2);
        let (tx, rx) = mpsc::channel();
        assert!(gather.leave(4, None, reply_to(&tx, 4)));
        let batches = Mutex::new(Vec::new());
        gather.drain(double(&batches), || panic!("nothing is left"));
        assert_eq!(rx.try_recv().expect("a reply").1.expect("doubled"), 8);
        assert_eq!(*batches.lock().expect("lock"), vec![vec![4]]);
    }

    #[test]
    fn requests_left_while_a_drain_is_queued_share_one_batch_split_among_the_drainers() {
        let gather = Gather::new(32, 2);
        let (tx, rx) = mpsc::channel();
        // Only the first leave schedules a drain.
        let scheduled: Vec<bool> = (1..=6)
            .map(|n| gather.leave(n, None, reply_to(&tx, n)))
            .collect();
        assert_eq!(scheduled, [true, false, false, false, false, false]);
        let batches = Mutex::new(Vec::new());
        let scheduled = AtomicBool::new(false);
        // Half for this drain, which asks for another before it runs; that one runs meanwhile
        // (on another thread, here inside the first batch) and takes the rest.
        let first = |xs: &[u32]| {
            assert!(
                scheduled.load(Ordering::SeqCst),
                "the second drain is scheduled first"
            );
            gather.drain(double(&batches), || panic!("nothing is left"));
            double(&batches)(xs)
        };
        gather.drain(first, || scheduled.store(true, Ordering::SeqCst));
        assert_eq!(
            *batches.lock().expect("lock"),
            vec![vec![4, 5, 6], vec![1, 2, 3]]
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
                runs: 2,
                requests: 6,
                cancelled: 0
            }
        );
    }

    #[test]
    fn batches_hold_at_most_max_and_a_failing_request_fails_only_itself() {
        let gather = Gather::new(3, 1);
        let (tx, rx) = mpsc::channel();
        for n in [1, 13, 2, 3, 4] {
            let _ = gather.leave(n, None, reply_to(&tx, n));
        }
        let batches = Mutex::new(Vec::new());
        let again = AtomicBool::new(false);
        gather.drain(double(&batches), || again.store(true, Ordering::SeqCst));
        assert!(again.load(Ordering::SeqCst));
        gather.drain(double(&batches), || panic!("nothing is left"));
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
        let _ = gather.leave(1, Some(Arc::clone(&alive)), reply_to(&tx, 1));
        let _ = gather.leave(2, None, reply_to(&tx, 2));
        alive.store(false, Ordering::Release);
        let batches = Mutex::new(Vec::new());
        gather.drain(double(&batches), || panic!("nothing is left"));
        assert_eq!(*batches.lock().expect("lock"), vec![vec![2]]);
        let outs: std::collections::HashMap<u32, Result<u32, ModelError>> = rx.try_iter().collect();
        assert!(matches!(outs[&1], Err(ModelError::Cancelled)));
        assert_eq!(gather.stats().cancelled, 1);
    }

    #[test]
    fn a_request_left_during_a_drain_schedules_the_next_one() {
        let gather = Arc::new(Gather::new(8, 1));
        let (tx, rx) = mpsc::channel();
        assert!(gather.leave(1, None, reply_to(&tx, 1)));
        let batches = Mutex::new(Vec::new());
        let (g, tx2) = (Arc::clone(&gather), tx.clone());
        let run = |xs: &[u32]| {
            // A request arrives while this batch runs: the drain has started, so it is
            // not queued, and the newcomer schedules one.
            if xs == [1] {
                assert!(g.leave(2, None, reply_to(&tx2, 2)));
            }
            double(&batches)(xs)
        };
        gather.drain(run, || panic!("the newcomer scheduled its own drain"));
        gather.drain(double(&batches), || panic!("nothing is left"));
        assert_eq!(rx.try_iter().count(), 2);
    }
}
