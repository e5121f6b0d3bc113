//! Combining several scorers' opinions about the same candidates.
//!
//! Each signal is a list of `(id, score)`; fusion returns one list sorted by fused score, ties
//! broken by ascending id so that results are deterministic. Two methods:
//! - [`Fusion::Weighted`]: min-max normalise each signal over the candidates, then a weighted sum
//!   (a candidate missing from a signal gets 0 from it);
//! - [`Fusion::Rrf`]: reciprocal-rank fusion, `Σ w / (k + rank)`.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

/// How signals are combined.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "method", rename_all = "snake_case")]
pub enum Fusion {
    Weighted,
    Rrf { k: f32 },
}

/// One scorer's output with its weight.
#[derive(Debug, Clone)]
pub struct Signal<'a> {
    pub weight: f32,
    pub scores: &'a [(u64, f32)],
}

/// Fuses `signals` over the union of their ids.
pub fn fuse(method: Fusion, signals: &[Signal<'_>]) -> Vec<(u64, f32)> {
    let mut fused: HashMap<u64, f32> = HashMap::new();
    for signal in signals {
        for &(id, _) in signal.scores {
            fused.entry(id).or_insert(0.0);
        }
        match method {
            Fusion::Weighted => {
                let (lo, hi) = signal
                    .scores
                    .iter()
                    .filter(|(_, s)| s.is_finite())
                    .fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), &(_, s)| {
                        (lo.min(s), hi.max(s))
                    });
                let span = hi - lo;
                for &(id, s) in signal.scores {
                    let norm = if !s.is_finite() {
                        0.0
                    } else if span > 0.0 {
                        (s - lo) / span
                    } else {
                        1.0
                    };
                    *fused.entry(id).or_insert(0.0) += signal.weight * norm;
                }
            }
            Fusion::Rrf { k } => {
                for (rank, (id, _)) in sorted(signal.scores.to_vec()).into_iter().enumerate() {
                    *fused.entry(id).or_insert(0.0) += signal.weight / (k + rank as f32 + 1.0);
                }
            }
        }
    }
    sorted(fused.into_iter().collect())
}

/// Sorts by score descending (NaN last), then id ascending.
pub fn sorted(mut scores: Vec<(u64, f32)>) -> Vec<(u64, f32)> {
    scores.sort_by(|a, b| {
        let (sa, sb) = (nan_low(a.1), nan_low(b.1));
        sb.total_cmp(&sa).then(a.0.cmp(&b.0))
    });
    scores
}

fn nan_low(s: f32) -> f32 {
    if s.is_nan() { f32::NEG_INFINITY } else { s }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn weighted_normalises_each_signal() {
        let a = [(1, 10.0), (2, 5.0), (3, 0.0)];
        let b = [(3, 1.0), (2, 0.5)];
        let out = fuse(
            Fusion::Weighted,
            &[
                Signal {
                    weight: 1.0,
                    scores: &a,
                },
                Signal {
                    weight: 1.0,
                    scores: &b,
                },
            ],
        );
        // 1: 1.0 + 0; 2: 0.5 + 0; 3: 0 + 1.0 → tie between 1 and 3 broken by id.
        assert_eq!(out, [(1, 1.0), (3, 1.0), (2, 0.5)]);
    }

    #[test]
    fn rrf_uses_ranks() {
        let a = [(1, 3.0), (2, 2.0)];
        let b = [(2, 9.0), (1, 1.0)];
        let out = fuse(
            Fusion::Rrf { k: 60.0 },
            &[
                Signal {
                    weight: 1.0,
                    scores: &a,
                },
                Signal {
                    weight: 1.0,
                    scores: &b,
                },
            ],
        );
        assert_eq!(out.iter().map(|x| x.0).collect::<Vec<_>>(), [1, 2]);
        assert!((out[0].1 - out[1].1).abs() < 1e-9);
    }

    #[test]
    fn nan_sorts_last() {
        assert_eq!(sorted(vec![(1, f32::NAN), (2, 0.1)])[0].0, 2);
    }

    /// The obvious oracle: for one signal with weight 1, weighted fusion preserves its order.
    fn naive_order(scores: &[(u64, f32)]) -> Vec<u64> {
        let mut v = scores.to_vec();
        v.sort_by(|a, b| {
            b.1.partial_cmp(&a.1)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(a.0.cmp(&b.0))
        });
        v.into_iter().map(|x| x.0).collect()
    }

    proptest! {
        #[test]
        fn single_signal_keeps_its_order(raw in proptest::collection::hash_map(0u64..1000, 0f32..100.0, 0..50)) {
            let scores: Vec<(u64, f32)> = raw.into_iter().collect();
            let fused = fuse(Fusion::Weighted, &[Signal { weight: 1.0, scores: &scores }]);
            prop_assert_eq!(fused.iter().map(|x| x.0).collect::<Vec<_>>(), naive_order(&scores));
            let rrf = fuse(Fusion::Rrf { k: 60.0 }, &[Signal { weight: 1.0, scores: &scores }]);
            prop_assert_eq!(rrf.iter().map(|x| x.0).collect::<Vec<_>>(), naive_order(&scores));
        }

        #[test]
        fn fusion_is_independent_of_input_order(raw in proptest::collection::hash_map(0u64..100, 0f32..10.0, 0..30), seed in 0u64..1000) {
            let a: Vec<(u64, f32)> = raw.iter().map(|(k, v)| (*k, *v)).collect();
            let b: Vec<(u64, f32)> = raw.iter().map(|(k, v)| (*k, (*v * (seed as f32 + 1.0)) % 7.0)).collect();
            let mut a_rev = a.clone();
            a_rev.reverse();
            let one = fuse(Fusion::Weighted, &[Signal { weight: 0.7, scores: &a }, Signal { weight: 0.3, scores: &b }]);
            let two = fuse(Fusion::Weighted, &[Signal { weight: 0.3, scores: &b }, Signal { weight: 0.7, scores: &a_rev }]);
            prop_assert_eq!(one.iter().map(|x| x.0).collect::<Vec<_>>(), two.iter().map(|x| x.0).collect::<Vec<_>>());
        }
    }
}
