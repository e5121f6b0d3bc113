//! Multi-head self-attention of one sequence, in f32.
//!
//! The sixteen lanes of a vector hold sixteen queries, not sixteen keys: each query's scores
//! then run down a column, so the softmax's maximum and sum are plain vector operations over
//! the keys (no sums across lanes, no partial vectors at a row's end), and one division serves
//! sixteen queries. Like [`crate::math`], the code is branch-free loops over lanes, compiled by
//! [`crate::kernels`] for the widest vectors the CPU has, with the same results on each.

use crate::math::{LANES, exp};

/// Head sizes [`attention`] runs (MiniLM and BERT-base); checked when a model loads.
pub const HEAD_SIZES: [usize; 2] = [32, 64];

/// One value per query of a block.
type Lanes = [f32; LANES];

/// Buffers for [`attention`], reused across sequences and layers.
#[derive(Debug, Default)]
pub struct AttentionScratch {
    /// Each key's scores against the block's queries, then its softmax numerators.
    scores: Vec<Lanes>,
}

/// Multi-head self-attention of one sequence of `len` tokens (no padding: every token attends
/// to every token). `qkv` is `[len × 3·hidden]` (queries, keys, values side by side); writes the
/// heads' contexts into `out` `[len × hidden]`. The head size is one of [`HEAD_SIZES`].
#[inline(always)]
pub fn attention(
    qkv: &[f32],
    len: usize,
    heads: usize,
    out: &mut [f32],
    scratch: &mut AttentionScratch,
) {
    match out.len() / len / heads {
        32 => attention_heads::<32>(qkv, len, heads, out, scratch),
        64 => attention_heads::<64>(qkv, len, heads, out, scratch),
        other => unreachable!("head size {other} is refused at load"),
    }
}

/// Keys scored together: eight independent running sums keep the FMA units busy (each sum
/// waits ~4 cycles for its last FMA).
const KEYS: usize = 8;

/// Running maxima and sums over the keys, combined in a fixed order at the end.
const CHAINS: usize = 4;

#[inline(always)]
fn fma(sum: &mut Lanes, a: &Lanes, b: f32) {
    for l in 0..LANES {
        sum[l] = a[l].mul_add(b, sum[l]);
    }
}

#[inline(always)]
fn attention_heads<const D: usize>(
    qkv: &[f32],
    len: usize,
    heads: usize,
    out: &mut [f32],
    scratch: &mut AttentionScratch,
) {
    let hidden = D * heads;
    let width = 3 * hidden;
    let scale = 1.0 / (D as f32).sqrt();
    scratch
        .scores
        .resize(len.next_multiple_of(KEYS), [0.0; LANES]);
    let scores = &mut scratch.scores;
    let row = |token: usize, offset: usize| -> &[f32; D] {
        qkv[token * width + offset..]
            .first_chunk()
            .expect("qkv holds len rows of width values")
    };
    for h in 0..heads {
        let (keys, values) = (hidden + h * D, 2 * hidden + h * D);
        for first in (0..len).step_by(LANES) {
            let queries = LANES.min(len - first);
            // The block's queries transposed (dimension-major), scaled; missing queries zero.
            let mut transposed = [[0f32; LANES]; D];
            for (d, column) in transposed.iter_mut().enumerate() {
                for (q, value) in column.iter_mut().enumerate().take(queries) {
                    *value = row(first + q, h * D)[d] * scale;
                }
            }
            // scores[j][q] = query q · key j, KEYS keys at a time (past the end: the last key
            // again, scored and then ignored).
            for group in (0..len).step_by(KEYS) {
                let key = |k: usize| row((group + k).min(len - 1), keys);
                let [k0, k1, k2, k3, k4, k5, k6, k7]: [&[f32; D]; KEYS] = std::array::from_fn(key);
                // Eight named running sums: as an indexed array, the compiler vectorises across
                // them (gathers, scatters) or leaves them in memory instead of in registers.
                let [
                    mut s0,
                    mut s1,
                    mut s2,
                    mut s3,
                    mut s4,
                    mut s5,
                    mut s6,
                    mut s7,
                ] = [[0f32; LANES]; KEYS];
                for (d, query) in transposed.iter().enumerate() {
                    fma(&mut s0, query, k0[d]);
                    fma(&mut s1, query, k1[d]);
                    fma(&mut s2, query, k2[d]);
                    fma(&mut s3, query, k3[d]);
                    fma(&mut s4, query, k4[d]);
                    fma(&mut s5, query, k5[d]);
                    fma(&mut s6, query, k6[d]);
                    fma(&mut s7, query, k7[d]);
                }
                scores[group..group + KEYS].copy_from_slice(&[s0, s1, s2, s3, s4, s5, s6, s7]);
            }
            let scores = &mut scores[..len];
            // Softmax down each column: maximum, numerators, their sum.
            let mut maxima = [[f32::NEG_INFINITY; LANES]; CHAINS];
            for (j, s) in scores.iter().enumerate() {
                let m = &mut maxima[j % CHAINS];
                for l in 0..LANES {
                    m[l] = m[l].max(s[l]);
                }
            }
            let max = maxima.iter().fold([f32::NEG_INFINITY; LANES], |a, m| {
                std::array::from_fn(|l| a[l].max(m[l]))
            });
            let mut sums = [[0f32; LANES]; CHAINS];
            for (j, s) in scores.iter_mut().enumerate() {
                let total = &mut sums[j % CHAINS];
                for l in 0..LANES {
                    s[l] = exp(s[l] - max[l]);
                    total[l] += s[l];
                }
            }
            let total = sums
                .iter()
                .fold([0f32; LANES], |a, s| std::array::from_fn(|l| a[l] + s[l]));
            let inverse: Lanes = std::array::from_fn(|l| 1.0 / total[l]);
            // context[q][d] = Σ_j numerator[j][q] · value[j][d] / total[q], sixteen dimensions
            // at a time (sixteen running sums).
            for block in 0..D / LANES {
                let [
                    mut c0,
                    mut c1,
                    mut c2,
                    mut c3,
                    mut c4,
                    mut c5,
                    mut c6,
                    mut c7,
                ] = [[0f32; LANES]; 8];
                let [
                    mut c8,
                    mut c9,
                    mut c10,
                    mut c11,
                    mut c12,
                    mut c13,
                    mut c14,
                    mut c15,
                ] = [[0f32; LANES]; 8];
                for (j, s) in scores.iter().enumerate() {
                    let v: &[f32; LANES] = row(j, values)[block * LANES..]
                        .first_chunk()
                        .expect("a head is whole vectors");
                    fma(&mut c0, s, v[0]);
                    fma(&mut c1, s, v[1]);
                    fma(&mut c2, s, v[2]);
                    fma(&mut c3, s, v[3]);
                    fma(&mut c4, s, v[4]);
                    fma(&mut c5, s, v[5]);
                    fma(&mut c6, s, v[6]);
                    fma(&mut c7, s, v[7]);
                    fma(&mut c8, s, v[8]);
                    fma(&mut c9, s, v[9]);
                    fma(&mut c10, s, v[10]);
                    fma(&mut c11, s, v[11]);
                    fma(&mut c12, s, v[12]);
                    fma(&mut c13, s, v[13]);
                    fma(&mut c14, s, v[14]);
                    fma(&mut c15, s, v[15]);
                }
                let context = [
                    c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13, c14, c15,
                ];
                for q in 0..queries {
                    let target = &mut out[(first + q) * hidden + h * D + block * LANES..][..LANES];
                    for (t, c) in target.iter_mut().zip(&context) {
                        *t = c[q] * inverse[q];
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attention_matches_a_direct_computation() {
        // 37 tokens: two full blocks of 16 queries and a partial one, four full groups of
        // keys and a partial one; heads of 32 and of 64.
        for (len, hidden, heads) in [(37, 64, 2), (37, 128, 2)] {
            check_against_direct(len, hidden, heads);
        }
    }

    fn check_against_direct(len: usize, hidden: usize, heads: usize) {
        let qkv: Vec<f32> = (0..len * 3 * hidden)
            .map(|i| ((i * 7919 % 101) as f32 / 25.0) - 2.0)
            .collect();
        let mut out = vec![0f32; len * hidden];
        attention(&qkv, len, heads, &mut out, &mut AttentionScratch::default());
        let head = hidden / heads;
        for h in 0..heads {
            for i in 0..len {
                let q = |d: usize| qkv[i * 3 * hidden + h * head + d];
                let logits: Vec<f64> = (0..len)
                    .map(|j| {
                        (0..head)
                            .map(|d| f64::from(q(d) * qkv[j * 3 * hidden + hidden + h * head + d]))
                            .sum::<f64>()
                            / (head as f64).sqrt()
                    })
                    .collect();
                let z: f64 = logits.iter().map(|l| l.exp()).sum();
                for d in 0..head {
                    let want: f64 = (0..len)
                        .map(|j| {
                            logits[j].exp() / z
                                * f64::from(qkv[j * 3 * hidden + 2 * hidden + h * head + d])
                        })
                        .sum();
                    let got = f64::from(out[i * hidden + h * head + d]);
                    assert!(
                        (got - want).abs() < 1e-5,
                        "head {h} token {i} dim {d}: {got} vs {want}"
                    );
                }
            }
        }
    }
}
