//! Running the encoder over many sequences: longest first, in calls of about
//! [`TOKENS_PER_CALL`] tokens, each call taken by the next free thread. What the embedder and the
//! cross-encoder share; a sequence's result never depends on its call (see [`Bert::forward`]).

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::bert::{Bert, Workspace};
use stillweb_model_core::ModelError;

/// Tokens per forward call: what measured fastest (256, 1,024 and 2,048 were slower); the
/// linear layers then work through a call's rows in passes that fit in L2.
const TOKENS_PER_CALL: usize = 512;

/// `finish(states)` for every sequence (token ids, type ids), where `states` are its last
/// hidden states (`[len × hidden]`), in the order of `sequences`; one thread per workspace.
pub(crate) fn run_sequences<T: Send>(
    bert: &Bert,
    workspaces: &mut [Workspace],
    sequences: &[(&[u32], &[u32])],
    finish: impl Fn(&[f32]) -> T + Sync,
) -> Result<Vec<T>, ModelError> {
    let len = |i: usize| sequences[i].0.len();
    let mut order: Vec<usize> = (0..sequences.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(len(i)));
    let mut calls: Vec<&[usize]> = Vec::new();
    let mut rest = &order[..];
    while !rest.is_empty() {
        let mut tokens = 0;
        let n = rest
            .iter()
            .take_while(|&&i| {
                let fits = tokens == 0 || tokens + len(i) <= TOKENS_PER_CALL;
                tokens += len(i);
                fits
            })
            .count();
        calls.push(&rest[..n]);
        rest = &rest[n..];
    }
    let next = AtomicUsize::new(0);
    let (calls, finish) = (&calls, &finish);
    // Each worker takes the next call until none is left.
    let work = |workspace: &mut Workspace| -> Result<Vec<(usize, T)>, ModelError> {
        let mut done = Vec::new();
        while let Some(call) = calls.get(next.fetch_add(1, Ordering::Relaxed)) {
            let batch: Vec<(&[u32], &[u32])> = call.iter().map(|&i| sequences[i]).collect();
            let states = bert.forward(&batch, workspace)?;
            let mut start = 0;
            for (&i, (ids, _)) in call.iter().zip(&batch) {
                let end = start + ids.len() * bert.hidden();
                done.push((i, finish(&states[start..end])));
                start = end;
            }
        }
        Ok(done)
    };
    let workers = workspaces.len().min(calls.len());
    let results: Vec<Result<Vec<(usize, T)>, ModelError>> = if workers <= 1 {
        workspaces.iter_mut().take(1).map(work).collect()
    } else {
        std::thread::scope(|scope| {
            let work = &work;
            let handles: Vec<_> = workspaces
                .iter_mut()
                .take(workers)
                .map(|workspace| scope.spawn(move || work(workspace)))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or(Err(ModelError::WorkerGone)))
                .collect()
        })
    };
    let mut out: Vec<Option<T>> = (0..sequences.len()).map(|_| None).collect();
    for result in results {
        for (i, value) in result? {
            out[i] = Some(value);
        }
    }
    out.into_iter()
        .map(|v| v.ok_or(ModelError::WorkerGone))
        .collect()
}
