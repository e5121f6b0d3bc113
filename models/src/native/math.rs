//! The float parts of a BERT layer: layer norm, GELU, softmax and attention, written as
//! branch-free loops over slices with explicit lanes so the compiler vectorises them and every
//! sum runs in a fixed order (the same inputs give the same bits on every machine). The kernels
//! are called through [`super::cpu`], which runs them compiled for the widest vectors the CPU
//! has, so they and everything they call are `#[inline(always)]`. Products that accumulate use
//! `mul_add` (one rounding, the same in hardware and in libm's software fallback).

/// Lanes of the running sums (a single running sum is a dependency chain the compiler must
/// keep in order, so it cannot use SIMD).
pub(super) const LANES: usize = 16;

#[inline(always)]
fn sum(x: &[f32]) -> f32 {
    let (lanes, tail) = x.as_chunks::<LANES>();
    let mut sums = [0f32; LANES];
    for chunk in lanes {
        for i in 0..LANES {
            sums[i] += chunk[i];
        }
    }
    sums.iter().sum::<f32>() + tail.iter().sum::<f32>()
}

/// The largest value (lanes as in [`sum`]: a single running maximum does not vectorise).
#[inline(always)]
fn maximum(x: &[f32]) -> f32 {
    let (lanes, tail) = x.as_chunks::<LANES>();
    let mut maxima = [f32::NEG_INFINITY; LANES];
    for chunk in lanes {
        for i in 0..LANES {
            maxima[i] = maxima[i].max(chunk[i]);
        }
    }
    tail.iter()
        .chain(&maxima)
        .fold(f32::NEG_INFINITY, |m, &v| m.max(v))
}

/// `x = (x - mean) / sqrt(var + eps) * weight + bias`, per row of `weight.len()` values.
#[inline(always)]
pub fn layer_norm(x: &mut [f32], weight: &[f32], bias: &[f32], eps: f32) {
    let n = weight.len();
    let mut centred = vec![0f32; n];
    for row in x.chunks_mut(n) {
        let mean = sum(row) / n as f32;
        for (c, v) in centred.iter_mut().zip(row.iter()) {
            *c = (v - mean) * (v - mean);
        }
        let scale = 1.0 / (sum(&centred) / n as f32 + eps).sqrt();
        for ((v, w), b) in row.iter_mut().zip(weight).zip(bias) {
            *v = (*v - mean) * scale * w + b;
        }
    }
}

/// Round half to even for |x| < 2²² without a libm call.
#[inline(always)]
fn round(x: f32) -> f32 {
    (x + MAGIC) - MAGIC
}

/// 1.5 · 2²³: adding it to a float below 2²² in magnitude leaves that float rounded to the
/// nearest integer (half to even) in the low mantissa bits.
const MAGIC: f32 = 12_582_912.0;

/// `x` rounded half to even, as an integer (|x| < 2²²), without a float-to-int conversion (whose
/// saturating semantics keep loops from vectorising) or a libm call.
#[inline(always)]
pub(super) fn rounded_int(x: f32) -> i32 {
    (x + MAGIC).to_bits() as i32 - MAGIC.to_bits() as i32
}

/// e^x with relative error ~2e-7 (Cephes' expf polynomial after reducing by powers of two);
/// inputs are clamped to f32's range of finite results.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    let x = x.clamp(-87.0, 88.0);
    let n = round(x * std::f32::consts::LOG2_E);
    let r = x - n * 0.693_359_4 + n * 2.121_944_4e-4;
    let p = ((((1.987_569_1e-4 * r + 1.398_199_9e-3) * r + 8.333_452e-3) * r + 4.166_579_6e-2) * r
        + 1.666_666_5e-1)
        * r
        + 0.5;
    let e = p * r * r + r + 1.0;
    // 2ⁿ from the bits of n + 127 (an integer in 1..=215 after the clamp) as it sits in the
    // mantissa of MAGIC + n + 127: no float-to-int conversion, so the loop vectorises.
    e * f32::from_bits((n + (127.0 + 12_582_912.0)).to_bits() << 23)
}

/// erf(x) to ~1.5e-7 (Abramowitz & Stegun 7.1.26).
#[inline(always)]
fn erf(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = ((((1.061_405_4 * t - 1.453_152) * t + 1.421_413_8) * t - 0.284_496_74) * t
        + 0.254_829_6)
        * t;
    (1.0 - poly * exp(-a * a)).copysign(x)
}

/// BERT's exact (erf) GELU, in place.
#[inline(always)]
pub fn gelu(x: &mut [f32]) {
    for v in x {
        *v = 0.5 * *v * (1.0 + erf(*v * std::f32::consts::FRAC_1_SQRT_2));
    }
}

/// Softmax of one row, in place.
#[inline(always)]
pub fn softmax(x: &mut [f32]) {
    let max = maximum(x);
    for v in x.iter_mut() {
        *v = exp(*v - max);
    }
    let inverse = 1.0 / sum(x);
    x.iter_mut().for_each(|v| *v *= inverse);
}

/// Buffers for [`attention`], reused across sequences and layers.
#[derive(Debug, Default)]
pub struct AttentionScratch {
    keys_t: Vec<f32>,
    scores: Vec<f32>,
}

/// Head sizes [`attention`] runs (MiniLM and BERT-base); checked when a model loads.
pub const HEAD_SIZES: [usize; 2] = [32, 64];

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

/// `sums += q · keys`, lane by lane.
#[inline(always)]
fn fma_lanes(sums: &mut [f32; LANES], q: f32, keys: &[f32; LANES]) {
    for l in 0..LANES {
        sums[l] = q.mul_add(keys[l], sums[l]);
    }
}

/// Queries computed together: with two blocks of keys that is 8 independent running sums, enough
/// to keep the FMA units busy (one running sum waits ~4 cycles for each FMA).
const QUERIES: usize = 4;

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
    // Keys in tiles of LANES keys × D values (tile-major, then value, then key), padded with
    // zero keys to whole pairs of tiles.
    let padded = len.next_multiple_of(2 * LANES);
    scratch.keys_t.clear();
    scratch.keys_t.resize(D * padded, 0.0);
    scratch.scores.resize(QUERIES * padded, 0.0);
    let (keys_t, scores) = (&mut scratch.keys_t, &mut scratch.scores);
    #[inline(always)]
    fn tile<const D: usize>(keys_t: &[f32], t: usize) -> &[[f32; LANES]; D] {
        let (rows, _) = keys_t[t * D * LANES..][..D * LANES].as_chunks::<LANES>();
        rows.try_into().expect("a tile is D rows")
    }
    for h in 0..heads {
        for j in 0..len {
            let key = &qkv[j * width + hidden + h * D..][..D];
            let (t, l) = (j / LANES, j % LANES);
            for (d, &k) in key.iter().enumerate() {
                keys_t[(t * D + d) * LANES + l] = k;
            }
        }
        for first in (0..len).step_by(QUERIES) {
            let rows = QUERIES.min(len - first);
            let mut queries = [[0f32; D]; QUERIES];
            for (r, query) in queries.iter_mut().enumerate().take(rows) {
                let source = &qkv[(first + r) * width + h * D..][..D];
                for (q, &v) in query.iter_mut().zip(source) {
                    *q = v * scale;
                }
            }
            for pair in 0..padded / (2 * LANES) {
                let (t0, t1) = (tile::<D>(keys_t, 2 * pair), tile::<D>(keys_t, 2 * pair + 1));
                let mut sums = [[0f32; LANES]; 2 * QUERIES];
                for d in 0..D {
                    let (k0, k1) = (&t0[d], &t1[d]);
                    let [a, b, c, e, f, g, h, i] = &mut sums;
                    fma_lanes(a, queries[0][d], k0);
                    fma_lanes(b, queries[0][d], k1);
                    fma_lanes(c, queries[1][d], k0);
                    fma_lanes(e, queries[1][d], k1);
                    fma_lanes(f, queries[2][d], k0);
                    fma_lanes(g, queries[2][d], k1);
                    fma_lanes(h, queries[3][d], k0);
                    fma_lanes(i, queries[3][d], k1);
                }
                for (r, pair_sums) in sums.chunks_exact(2).enumerate() {
                    let row = &mut scores[r * padded + 2 * pair * LANES..][..2 * LANES];
                    row[..LANES].copy_from_slice(&pair_sums[0]);
                    row[LANES..].copy_from_slice(&pair_sums[1]);
                }
            }
            for r in 0..rows {
                softmax(&mut scores[r * padded..][..len]);
            }
            let mut contexts = [[0f32; D]; QUERIES];
            for j in 0..len {
                let value = &qkv[j * width + 2 * hidden + h * D..][..D];
                for (r, context) in contexts.iter_mut().enumerate() {
                    let p = scores[r * padded + j];
                    for (c, &v) in context.iter_mut().zip(value) {
                        *c = p.mul_add(v, *c);
                    }
                }
            }
            for (r, context) in contexts.iter().enumerate().take(rows) {
                out[(first + r) * hidden + h * D..][..D].copy_from_slice(context);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_and_gelu_match_reference_values() {
        for i in -400..=400 {
            let x = i as f32 / 20.0;
            let (got, want) = (exp(x), x.exp());
            assert!(
                (got - want).abs() <= 4e-7 * want,
                "exp({x}) = {got}, want {want}"
            );
        }
        // GELU(x) = x Φ(x): reference values from scipy.stats.norm.cdf.
        for (x, want) in [
            (1.0f32, 0.841_344_7f32),
            (-1.0, -0.158_655_25),
            (0.5, 0.345_731_37),
            (3.0, 2.995_950_5),
            (-3.0, -0.004_049_46),
        ] {
            let mut g = [x];
            gelu(&mut g);
            assert!(
                (g[0] - want).abs() < 1e-6,
                "gelu({x}) = {}, want {want}",
                g[0]
            );
        }
    }

    #[test]
    fn layer_norm_and_softmax_are_normalised() {
        let mut x: Vec<f32> = (0..40)
            .map(|i| (i as f32 * 0.37).sin() * 3.0 + 1.0)
            .collect();
        layer_norm(&mut x, &[1.0; 20], &[0.0; 20], 1e-12);
        for row in x.chunks(20) {
            let mean = row.iter().sum::<f32>() / 20.0;
            let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / 20.0;
            assert!(
                mean.abs() < 1e-5 && (var - 1.0).abs() < 1e-4,
                "{mean} {var}"
            );
        }
        let mut s = vec![1.0, 2.0, 3.0, -100.0];
        softmax(&mut s);
        assert!((s.iter().sum::<f32>() - 1.0).abs() < 1e-6 && s[2] > s[1] && s[3] < 1e-30);
    }

    #[test]
    fn attention_matches_a_direct_computation() {
        // 37 tokens: two pairs of key tiles (the second partly padding) and a last group of
        // one query.
        let (len, hidden, heads) = (37, 64, 2);
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
