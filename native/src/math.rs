//! The float parts of a BERT layer besides attention: layer norm, GELU and exp, written as
//! branch-free loops over slices with explicit lanes so the compiler vectorises them and every
//! sum runs in a fixed order (the same inputs give the same bits on every machine). The kernels
//! are called through [`crate::kernels`], which runs them compiled for the widest vectors the CPU
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
    fn layer_norm_is_normalised() {
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
    }
}
