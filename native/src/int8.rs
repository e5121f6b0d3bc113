//! The int8 product's portable parts: per-row quantisation, the exact integer product as plain
//! loops (the portable kernel), and dequantisation. [`crate::kernels`] runs them compiled for
//! the CPU's widest vectors; the other kernels must give the same sums bit for bit.

use crate::math::{LANES, rounded_int};

/// Quantises each row of `x` (`width` values) into `q`, appending its scale to `scales`.
#[inline(always)]
pub fn quantize_rows(x: &[f32], width: usize, q: &mut [i8], scales: &mut Vec<f32>) {
    scales.clear();
    for (row, q) in x.chunks(width).zip(q.chunks_mut(width)) {
        scales.push(quantize_row(row, q));
    }
}

/// `y[r][o] = sums[r][o] · row_scales[r] · scales[o] + bias[o]`, for the rows of `y`.
#[inline(always)]
pub fn dequantize(sums: &[i32], row_scales: &[f32], scales: &[f32], bias: &[f32], y: &mut [f32]) {
    let width = bias.len();
    for ((out, sums), &row_scale) in y.chunks_mut(width).zip(sums.chunks(width)).zip(row_scales) {
        for (((out, &s), &scale), &b) in out.iter_mut().zip(sums).zip(scales).zip(bias) {
            *out = s as f32 * (row_scale * scale) + b;
        }
    }
}

/// The portable kernel: `sums[r][o] = a[r] · weights[o]` for the first `rows` rows, weights
/// row-major `[outputs × inputs]`.
#[inline(always)]
pub fn portable_matmul(a: &[i8], weights: &[i8], inputs: usize, rows: usize, sums: &mut [i32]) {
    let outputs = weights.len() / inputs;
    for (a_row, out) in a.chunks(inputs).zip(sums.chunks_mut(outputs)).take(rows) {
        for (w_row, s) in weights.chunks(inputs).zip(out.iter_mut()) {
            *s = dot_i8(a_row, w_row);
        }
    }
}

/// Symmetric int8 quantisation of one row: `q = round(x / scale)` with `scale = max|x| / 127`;
/// returns the scale (0 for an all-zero row).
#[inline(always)]
pub(crate) fn quantize_row(x: &[f32], q: &mut [i8]) -> f32 {
    let (lanes, tail) = x.as_chunks::<LANES>();
    let mut maxima = [0f32; LANES];
    for chunk in lanes {
        for i in 0..LANES {
            maxima[i] = maxima[i].max(chunk[i].abs());
        }
    }
    let max = tail.iter().chain(&maxima).fold(0f32, |m, v| m.max(v.abs()));
    if max == 0.0 {
        q.fill(0);
        return 0.0;
    }
    let inverse = 127.0 / max;
    for (q, v) in q.iter_mut().zip(x) {
        *q = rounded_int(v * inverse) as i8;
    }
    max / 127.0
}

#[inline(always)]
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| i32::from(x) * i32::from(y))
        .sum()
}

/// The dot product of an f32 query with a row of signed bytes (stored as `u8`), summed in the
/// same order on every CPU (Rust never fuses the multiply-add), so the result does not depend on
/// which build of it runs.
pub fn dot_f32_i8(query: &[f32], bytes: &[u8]) -> f32 {
    let n = query.len().min(bytes.len());
    let (q_lanes, q_tail) = query[..n].as_chunks::<LANES>();
    let (b_lanes, b_tail) = bytes[..n].as_chunks::<LANES>();
    let mut sums = [0f32; LANES];
    for (q, b) in q_lanes.iter().zip(b_lanes) {
        for i in 0..LANES {
            sums[i] += q[i] * f32::from(b[i] as i8);
        }
    }
    let tail: f32 = q_tail
        .iter()
        .zip(b_tail)
        .map(|(q, &b)| q * f32::from(b as i8))
        .sum();
    sums.iter().sum::<f32>() + tail
}
