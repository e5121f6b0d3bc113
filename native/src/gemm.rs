//! Linear layers in int8: weights quantised once per output channel, activations per row (per
//! token) at each call, products summed exactly in i32, then scaled back to f32.
//!
//! Per-row activation scales are what make the native engine's vectors independent of batching:
//! a token's quantisation depends on that token alone, so a text gets the same vector whatever
//! shares its call (ONNX Runtime's dynamic quantisation uses one scale per call). Four kernels
//! compute the same i32 sums: AMX tiles where the CPU has them, else AVX-512 VNNI, else AVX2's
//! 16-bit multiply-adds, else a portable loop; the results are identical bit for bit, so an index
//! built on one machine is queried alike on another.

use crate::int8::quantize_row;
use crate::kernels;

/// Which int8 product kernel runs. All give identical results.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// Intel AMX tiles (Sapphire Rapids and later, with Linux permission).
    Amx,
    /// AVX-512 VNNI's byte multiply-adds on the tile layout: CPUs without AMX (Intel Ice Lake and
    /// later, AMD Zen 4 and later).
    Vnni,
    /// AVX2's 16-bit multiply-adds on weights packed in pairs: CPUs with AVX2 but neither AMX nor
    /// AVX-512 VNNI (AMD Zen 1–3, Intel before Ice Lake).
    Avx2,
    /// Row-major weights and plain loops the compiler vectorises: any CPU.
    Portable,
}

impl Kernel {
    /// True when `STILLWEB_NATIVE_KERNEL=portable` asks for the portable kernel.
    pub fn forced_portable() -> bool {
        std::env::var("STILLWEB_NATIVE_KERNEL").is_ok_and(|k| k == "portable")
    }

    /// The fastest kernel this process can run, or the portable one when
    /// `STILLWEB_NATIVE_KERNEL=portable` asks for it (to measure it, or to check that the
    /// kernels give the same vectors).
    pub fn detect() -> Kernel {
        if Kernel::forced_portable() {
            Kernel::Portable
        } else if kernels::amx_available() {
            Kernel::Amx
        } else if kernels::vnni_available() {
            Kernel::Vnni
        } else if kernels::avx2_available() {
            Kernel::Avx2
        } else {
            Kernel::Portable
        }
    }
}

/// Rows are processed in multiples of this (AMX's two 16-row tiles).
pub const ROW_BLOCK: usize = 32;

/// Rows [`QuantLinear::forward`] quantises, multiplies and dequantises in one pass (32, 64, 256
/// and a whole call measured slower), in whole row blocks.
const ROWS_PER_PASS: usize = 128;
const _: () = assert!(ROWS_PER_PASS.is_multiple_of(ROW_BLOCK));

/// `y = x · Wᵀ + b` with int8 weights (one scale per output channel, symmetric).
#[derive(Debug)]
pub struct QuantLinear {
    inputs: usize,
    outputs: usize,
    weights: Weights,
    scales: Vec<f32>,
    bias: Vec<f32>,
}

/// The int8 weights, laid out for their kernel.
#[derive(Debug)]
enum Weights {
    /// [`Kernel::Amx`]: the tile layout of [`kernels::amx_matmul`].
    Tiles(Vec<i8>),
    /// [`Kernel::Vnni`]: the same layout, with each output's weight sum (what `vpdpbusd`'s
    /// unsigned inputs need).
    VnniTiles { tiles: Vec<i8>, sums: Vec<i32> },
    /// [`Kernel::Avx2`]: the pair layout of [`kernels::avx2_matmul`], widened to i16.
    Pairs(Vec<i16>),
    /// [`Kernel::Portable`]: row-major `[outputs × inputs]`.
    Rows(Vec<i8>),
}

/// Per-thread buffers reused across calls.
#[derive(Debug, Default)]
pub struct Scratch {
    quantized: Vec<i8>,
    row_scales: Vec<f32>,
    sums: Vec<i32>,
}

impl QuantLinear {
    /// From an f32 weight `[outputs × inputs]` (PyTorch's layout) and bias. The AMX kernel needs
    /// `inputs` a multiple of 64 and `outputs` of 32 (MiniLM: 384, 1,152, 1,536); the VNNI
    /// kernel `inputs` a multiple of 64 and `outputs` of 16; the AVX2 kernel even `inputs` and
    /// `outputs` a multiple of 16.
    pub fn new(weight: &[f32], bias: &[f32], inputs: usize, kernel: Kernel) -> QuantLinear {
        let outputs = bias.len();
        assert_eq!(weight.len(), inputs * outputs, "weight shape");
        let mut rows = vec![0i8; inputs * outputs];
        let mut scales = vec![0f32; outputs];
        for (o, (row, q)) in weight
            .chunks(inputs)
            .zip(rows.chunks_mut(inputs))
            .enumerate()
        {
            scales[o] = quantize_row(row, q);
        }
        let weights = match kernel {
            Kernel::Portable => Weights::Rows(rows),
            Kernel::Amx => {
                assert!(
                    inputs.is_multiple_of(64) && outputs.is_multiple_of(32),
                    "{inputs}×{outputs}"
                );
                Weights::Tiles(pack_tiles(&rows, inputs, outputs))
            }
            Kernel::Vnni => {
                assert!(
                    inputs.is_multiple_of(64) && outputs.is_multiple_of(16),
                    "{inputs}×{outputs}"
                );
                Weights::VnniTiles {
                    sums: rows
                        .chunks(inputs)
                        .map(|row| row.iter().map(|&w| i32::from(w)).sum())
                        .collect(),
                    tiles: pack_tiles(&rows, inputs, outputs),
                }
            }
            Kernel::Avx2 => {
                assert!(
                    inputs.is_multiple_of(2) && outputs.is_multiple_of(16),
                    "{inputs}×{outputs}"
                );
                Weights::Pairs(pack_pairs(&rows, inputs, outputs))
            }
        };
        QuantLinear {
            inputs,
            outputs,
            weights,
            scales,
            bias: bias.to_vec(),
        }
    }

    pub fn outputs(&self) -> usize {
        self.outputs
    }

    /// The int8 products alone: `sums[r][o] = Σ a[r][i] · W[o][i]` (exact) for the first `rows`
    /// rows of `a`, which holds `rows` rounded up to [`ROW_BLOCK`] (zero rows after them). What
    /// [`QuantLinear::forward`] spends its product time in, and what `stillweb-indexer
    /// bench-gemm` measures.
    pub fn products(&self, a: &[i8], rows: usize, sums: &mut [i32]) {
        let padded = rows.div_ceil(ROW_BLOCK) * ROW_BLOCK;
        assert!(a.len() >= padded * self.inputs && sums.len() >= padded * self.outputs);
        match &self.weights {
            Weights::Tiles(tiles) => {
                kernels::amx_matmul(a, tiles, sums, padded, self.inputs, self.outputs);
            }
            Weights::VnniTiles {
                tiles,
                sums: w_sums,
            } => {
                kernels::vnni_matmul(a, tiles, w_sums, self.inputs, rows, sums);
            }
            Weights::Pairs(pairs) => kernels::avx2_matmul(a, pairs, self.inputs, rows, sums),
            Weights::Rows(w) => kernels::portable_matmul(a, w, self.inputs, rows, sums),
        }
    }

    /// `y[rows × outputs] = x[rows × inputs] · Wᵀ + b`.
    pub fn forward(&self, x: &[f32], y: &mut [f32], scratch: &mut Scratch) {
        // A pass of rows at a time, so its i32 sums (768 KB for 128 rows of a 1,536-wide layer;
        // 3 MB for a whole 512-token call) stay in L2 between the products and their
        // dequantisation. Each row is computed on its own, so this changes no result.
        for (x, y) in x
            .chunks(ROWS_PER_PASS * self.inputs)
            .zip(y.chunks_mut(ROWS_PER_PASS * self.outputs))
        {
            self.forward_rows(x, y, scratch);
        }
    }

    fn forward_rows(&self, x: &[f32], y: &mut [f32], scratch: &mut Scratch) {
        let rows = x.len() / self.inputs;
        let padded = rows.div_ceil(ROW_BLOCK) * ROW_BLOCK;
        // Every real row is overwritten below; only the padding rows must be zero.
        scratch.quantized.resize(padded * self.inputs, 0);
        scratch.quantized[rows * self.inputs..].fill(0);
        kernels::quantize_rows(
            x,
            self.inputs,
            &mut scratch.quantized,
            &mut scratch.row_scales,
        );
        scratch.sums.resize(padded * self.outputs, 0);
        self.products(&scratch.quantized, rows, &mut scratch.sums);
        kernels::dequantize(
            &scratch.sums,
            &scratch.row_scales,
            &self.scales,
            &self.bias,
            y,
        );
    }
}

/// Row-major `[outputs × inputs]` int8 into AMX's B layout: for each block of 16 outputs, for each
/// block of 64 inputs, 16 rows holding 16 outputs × 4 consecutive inputs.
fn pack_tiles(rows: &[i8], inputs: usize, outputs: usize) -> Vec<i8> {
    let mut packed = Vec::with_capacity(rows.len());
    for column_block in 0..outputs / 16 {
        for input_block in 0..inputs / 64 {
            for r in 0..16 {
                for c in 0..16 {
                    let row = &rows[(column_block * 16 + c) * inputs..][..inputs];
                    packed.extend_from_slice(&row[input_block * 64 + 4 * r..][..4]);
                }
            }
        }
    }
    packed
}

/// Row-major `[outputs × inputs]` int8 into [`kernels::avx2_matmul`]'s layout, widened to i16: for
/// each block of 16 outputs, for each pair of inputs (2j, 2j + 1), the 16 outputs' two weights
/// side by side (one 32-bit lane of `vpmaddwd` per output).
fn pack_pairs(rows: &[i8], inputs: usize, outputs: usize) -> Vec<i16> {
    let mut packed = Vec::with_capacity(rows.len());
    for column_block in 0..outputs / 16 {
        for pair in 0..inputs / 2 {
            for c in 0..16 {
                let row = &rows[(column_block * 16 + c) * inputs..][..inputs];
                packed.extend([i16::from(row[2 * pair]), i16::from(row[2 * pair + 1])]);
            }
        }
    }
    packed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::math::rounded_int;

    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                ((s >> 40) as f32 / (1u64 << 24) as f32) - 0.5
            })
            .collect()
    }

    #[test]
    fn int8_layer_is_close_to_f32_and_exact_across_kernels() {
        // 37 rows: one partial pass; 300: two whole passes and a partial one.
        for rows in [37, 300] {
            check_kernels(128, 64, rows);
        }
    }

    fn check_kernels(inputs: usize, outputs: usize, rows: usize) {
        let w = values(inputs * outputs, 1);
        let b = values(outputs, 2);
        let mut x = values(rows * inputs, 3);
        x[5] = 40.0; // an outlier only affects its own row's scale
        let portable = QuantLinear::new(&w, &b, inputs, Kernel::Portable);
        let mut y = vec![0f32; rows * outputs];
        portable.forward(&x, &mut y, &mut Scratch::default());
        for r in 1..rows {
            for o in 0..outputs {
                let exact: f32 = (0..inputs)
                    .map(|i| x[r * inputs + i] * w[o * inputs + i])
                    .sum::<f32>()
                    + b[o];
                assert!(
                    (exact - y[r * outputs + o]).abs() < 0.05,
                    "{r},{o}: {exact} vs {}",
                    y[r * outputs + o]
                );
            }
        }
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        for (kernel, available) in [
            (Kernel::Amx, kernels::amx_available()),
            (Kernel::Vnni, kernels::vnni_available()),
            (Kernel::Avx2, kernels::avx2_available()),
        ] {
            if !available {
                eprintln!("skipping the {kernel:?} comparison: this CPU (or kernel) lacks it");
                continue;
            }
            let layer = QuantLinear::new(&w, &b, inputs, kernel);
            let mut z = vec![0f32; rows * outputs];
            layer.forward(&x, &mut z, &mut Scratch::default());
            assert_eq!(bits(&y), bits(&z), "{kernel:?} and portable differ");
        }
    }

    #[test]
    fn vnni_products_equal_the_plain_loop_on_extreme_bytes() {
        // 7 blocks of 16 outputs: two whole groups of three and one left over; 13 rows: one
        // whole group of 8 and a padded one.
        let (inputs, outputs, rows) = (384, 112, 13);
        if !kernels::vnni_available() {
            eprintln!("SKIPPED: this CPU has no AVX-512 VNNI");
            return;
        }
        let byte = |i: usize| ((i * 7919 + 13) % 256) as u8 as i8; // all of -128..=127
        let mut a: Vec<i8> = (0..rows * inputs).map(byte).collect();
        a.resize(16 * inputs, 0);
        let w: Vec<i8> = (0..outputs * inputs)
            .map(|i| byte(i * 31 + 5).max(-127))
            .collect();
        let weight_sums: Vec<i32> = w
            .chunks(inputs)
            .map(|r| r.iter().map(|&x| i32::from(x)).sum())
            .collect();
        let (mut plain, mut fast) = (vec![0i32; 16 * outputs], vec![0i32; 16 * outputs]);
        kernels::portable_matmul(&a, &w, inputs, rows, &mut plain);
        let tiles = pack_tiles(&w, inputs, outputs);
        kernels::vnni_matmul(&a, &tiles, &weight_sums, inputs, rows, &mut fast);
        assert_eq!(plain[..rows * outputs], fast[..rows * outputs]);
    }

    #[test]
    fn rounding_is_half_to_even() {
        for (x, r) in [
            (0.5, 0),
            (1.5, 2),
            (-2.5, -2),
            (126.6, 127),
            (-126.6, -127),
            (-0.4, 0),
        ] {
            assert_eq!(rounded_int(x), r, "{x}");
        }
    }
}
