//! The x86-64 kernels, the one place in stillweb with `unsafe`: what depends on the CPU's
//! instruction set.
//!
//! - [`amx_matmul`]: Intel AMX tile instructions for the int8 products of [`crate::gemm`]. AMX
//!   multiplies 16 × 64 int8 tiles in one instruction (measured here at ~1.2–1.7 int8 TOP/s per
//!   core on MiniLM's shapes, against ~0.15 TFLOP/s fp32); the tile registers have no
//!   intrinsics on stable Rust, so the instructions are written as inline assembly. Safety rests
//!   on what [`amx_available`] and [`amx_matmul`] check: the CPU reports AMX-TILE and AMX-INT8,
//!   Linux granted this process the tile state (`arch_prctl`), and every tile load or store stays
//!   inside the slices it is given (asserted before any instruction runs).
//! - [`vnni_matmul`]: the int8 products on AVX-512 VNNI (`vpdpbusd`, 64 multiply-adds an
//!   instruction) for CPUs without AMX (Intel Ice Lake and later, AMD Zen 4 and later), on
//!   AMX's weight layout, in register blocks of 8 rows × 48 outputs.
//! - [`avx2_matmul`]: the int8 products on AVX2's 16-bit multiply-adds (`vpmaddwd`), for CPUs
//!   with neither AMX nor AVX-512 VNNI, in register blocks of 4 rows × 16 outputs.
//! - `dispatched!`: runs safe kernels compiled for AVX-512 (or AVX2) where the CPU has it. The same source runs
//!   either way, with the same operations in the same order (Rust never fuses a multiply and an
//!   add on its own), so the results are identical; only the vector width changes.
#![allow(unsafe_code)]

use std::arch::asm;
use std::sync::OnceLock;

/// Linux `arch_prctl` request for permission to use an extended state component.
#[cfg(target_os = "linux")]
const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
/// The AMX tile data state component.
#[cfg(target_os = "linux")]
const XFEATURE_XTILEDATA: libc::c_long = 18;

/// True when AMX int8 can run in this process; asks Linux for the tile state once.
pub fn amx_available() -> bool {
    static AVAILABLE: OnceLock<bool> = OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        // CPUID leaf 7: EDX bit 24 is AMX-TILE, bit 25 AMX-INT8.
        let leaf = std::arch::x86_64::__cpuid_count(7, 0);
        let cpu = leaf.edx & (1 << 24) != 0 && leaf.edx & (1 << 25) != 0;
        cpu && tile_permission()
    })
}

/// Asks Linux for the AMX tile state (other systems: no AMX).
#[cfg(target_os = "linux")]
fn tile_permission() -> bool {
    // SAFETY: a plain system call with integer arguments; it only changes this process's
    // permission to use the tile state and reports failure as a non-zero result.
    unsafe {
        libc::syscall(
            libc::SYS_arch_prctl,
            ARCH_REQ_XCOMP_PERM,
            XFEATURE_XTILEDATA,
        ) == 0
    }
}

#[cfg(not(target_os = "linux"))]
fn tile_permission() -> bool {
    false
}

/// Palette 1 with tiles 0–7 at their full 16 rows × 64 bytes.
#[repr(C, align(64))]
struct TileConfig([u8; 64]);

const FULL_TILES: TileConfig = {
    let mut c = [0u8; 64];
    c[0] = 1;
    let mut t = 0;
    while t < 8 {
        c[16 + 2 * t] = 64;
        c[48 + t] = 16;
        t += 1;
    }
    TileConfig(c)
};

/// `out[m × n] = a[m × k] · b` in exact i32 arithmetic, where `a` is row-major int8 and `b` is
/// the weight matrix packed by [`crate::gemm::PackedWeights`]: for each block of 16 output
/// columns, for each block of 64 inputs, 16 rows of 16 columns × 4 consecutive inputs. `m` and
/// `n` are multiples of 32, `k` of 64.
pub fn amx_matmul(a: &[i8], b: &[i8], out: &mut [i32], m: usize, k: usize, n: usize) {
    assert!(amx_available(), "AMX int8 is not available in this process");
    assert!(
        m.is_multiple_of(32) && n.is_multiple_of(32) && k.is_multiple_of(64),
        "shape {m}×{k}×{n}"
    );
    assert!(a.len() >= m * k && b.len() >= k * n && out.len() >= m * n);
    let k_blocks = k / 64;
    let (a, b, c) = (a.as_ptr(), b.as_ptr(), out.as_mut_ptr().cast::<u8>());
    let row_c = n * 4;
    // SAFETY: AMX is available and permitted (asserted above). Every tile load reads 16 rows of
    // 64 bytes: A tiles start at row `mb` or `mb + 16` (< m) and column `kb * 64` (< k) with
    // stride k, so they stay within a[..m * k]; B tiles are 1 KiB blocks at
    // (column block × k_blocks + kb) KiB < k * n bytes. Stores write 16 rows of 64 bytes at
    // row ≤ m - 16, byte column ≤ 4n - 64 with stride 4n, inside out[..m * n]. The tile
    // registers are configured here and released before returning, and no other code in this
    // program uses them.
    unsafe {
        asm!("ldtilecfg [{}]", in(reg) FULL_TILES.0.as_ptr());
        for mb in (0..m).step_by(32) {
            for nb in (0..n).step_by(32) {
                asm!(
                    "tilezero tmm0",
                    "tilezero tmm1",
                    "tilezero tmm2",
                    "tilezero tmm3"
                );
                let a0 = a.add(mb * k);
                let a1 = a.add((mb + 16) * k);
                let b0 = b.add((nb / 16) * k_blocks * 1024);
                let b1 = b.add((nb / 16 + 1) * k_blocks * 1024);
                for kb in 0..k_blocks {
                    asm!(
                        "tileloadd tmm4, [{a0} + {lda}*1]",
                        "tileloadd tmm6, [{b0} + {ldb}*1]",
                        "tdpbssd tmm0, tmm4, tmm6",
                        "tileloadd tmm5, [{a1} + {lda}*1]",
                        "tdpbssd tmm2, tmm5, tmm6",
                        "tileloadd tmm7, [{b1} + {ldb}*1]",
                        "tdpbssd tmm1, tmm4, tmm7",
                        "tdpbssd tmm3, tmm5, tmm7",
                        a0 = in(reg) a0.add(kb * 64),
                        a1 = in(reg) a1.add(kb * 64),
                        b0 = in(reg) b0.add(kb * 1024),
                        b1 = in(reg) b1.add(kb * 1024),
                        lda = in(reg) k,
                        ldb = in(reg) 64usize,
                        options(nostack),
                    );
                }
                let c0 = c.add(mb * row_c + nb * 4);
                asm!(
                    "tilestored [{c0} + {ldc}*1], tmm0",
                    "tilestored [{c1} + {ldc}*1], tmm1",
                    "tilestored [{c2} + {ldc}*1], tmm2",
                    "tilestored [{c3} + {ldc}*1], tmm3",
                    c0 = in(reg) c0,
                    c1 = in(reg) c0.add(64),
                    c2 = in(reg) c0.add(16 * row_c),
                    c3 = in(reg) c0.add(16 * row_c + 64),
                    ldc = in(reg) row_c,
                    options(nostack),
                );
            }
        }
        asm!("tilerelease", options(nostack));
    }
}

/// The widest vector code this CPU runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Vectors {
    Avx512,
    Avx2,
    Baseline,
}

fn vectors() -> Vectors {
    static VECTORS: OnceLock<Vectors> = OnceLock::new();
    *VECTORS.get_or_init(|| {
        if is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vl")
            && is_x86_feature_detected!("avx512dq")
            && is_x86_feature_detected!("fma")
        {
            Vectors::Avx512
        } else if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            Vectors::Avx2
        } else {
            Vectors::Baseline
        }
    })
}

/// For each kernel body (a safe `#[inline(always)]` function), a public function that runs it
/// compiled for AVX-512 or AVX2 with FMA where the CPU has them, and as it is elsewhere.
macro_rules! dispatched {
    ($($(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),*) $(-> $ret:ty)? => $body:path;)*) => {$(
        $(#[$doc])*
        pub fn $name($($arg: $ty),*) $(-> $ret)? {
            #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")]
            fn avx512($($arg: $ty),*) $(-> $ret)? {
                $body($($arg),*)
            }
            #[target_feature(enable = "avx2,fma")]
            fn avx2($($arg: $ty),*) $(-> $ret)? {
                $body($($arg),*)
            }
            match vectors() {
                // SAFETY: the CPU has every feature the function is compiled for (checked in
                // `vectors`).
                Vectors::Avx512 => unsafe { avx512($($arg),*) },
                // SAFETY: as above.
                Vectors::Avx2 => unsafe { avx2($($arg),*) },
                Vectors::Baseline => $body($($arg),*),
            }
        }
    )*};
}

dispatched! {
    /// [`crate::math::layer_norm`].
    fn layer_norm(x: &mut [f32], weight: &[f32], bias: &[f32], eps: f32) => crate::math::layer_norm;
    /// [`crate::math::gelu`].
    fn gelu(x: &mut [f32]) => crate::math::gelu;
    /// [`crate::attention::attention`].
    fn attention(qkv: &[f32], len: usize, heads: usize, out: &mut [f32], scratch: &mut crate::attention::AttentionScratch) => crate::attention::attention;
    /// [`crate::int8::quantize_rows`].
    fn quantize_rows(x: &[f32], width: usize, q: &mut [i8], scales: &mut Vec<f32>) => crate::int8::quantize_rows;
    /// [`crate::int8::dequantize`].
    fn dequantize(sums: &[i32], row_scales: &[f32], scales: &[f32], bias: &[f32], y: &mut [f32]) => crate::int8::dequantize;
    /// [`crate::int8::portable_matmul`].
    fn portable_matmul(a: &[i8], weights: &[i8], inputs: usize, rows: usize, sums: &mut [i32]) => crate::int8::portable_matmul;
    /// [`crate::int8::dot_f32_i8`].
    fn dot_f32_i8(query: &[f32], bytes: &[u8]) -> f32 => crate::int8::dot_f32_i8;
}

/// Asks the CPU to bring `bytes` into its caches (every 64-byte line), so that a walk over
/// scattered rows (the index's graph) waits for many of them at once rather than one by one.
pub fn prefetch(bytes: &[u8]) {
    use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
    for line in bytes.chunks(64) {
        // SAFETY: SSE is part of x86-64, and a prefetch is a hint that never faults or reads
        // into the program: any address is allowed, and this one is inside `bytes`.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(line.as_ptr().cast()) };
    }
}

/// True when the CPU runs AVX2 ([`avx2_matmul`]).
pub fn avx2_available() -> bool {
    is_x86_feature_detected!("avx2")
}

/// True when the CPU runs AVX-512 VNNI ([`vnni_matmul`]).
pub fn vnni_available() -> bool {
    static VNNI: OnceLock<bool> = OnceLock::new();
    *VNNI.get_or_init(|| {
        is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512vnni")
    })
}

/// Rows [`avx2_matmul`] computes together: 4 rows × 16 outputs are eight accumulators, leaving
/// AVX2's sixteen registers room for the weights and the broadcast activations.
const AVX2_ROWS: usize = 4;

/// `sums[r][o] = Σᵢ a[r][i] · w[o][i]`, exact, for the first `rows` rows rounded up to 4 (`a`
/// holds them, zero past the real rows, and `sums` has room). `pairs` is the weight matrix as
/// packed by [`crate::gemm`]: for each block of 16 outputs, for each pair of inputs, the 16
/// outputs' two weights as i16. Each `vpmaddwd` adds one pair of inputs' products into 8 i32
/// lanes (16 multiply-adds); |Σ| ≤ inputs · 127² fits i32 for any real layer.
pub fn avx2_matmul(a: &[i8], pairs: &[i16], inputs: usize, rows: usize, sums: &mut [i32]) {
    assert!(avx2_available(), "this CPU has no AVX2");
    let outputs = pairs.len() / inputs.max(1);
    let rows = rows.next_multiple_of(AVX2_ROWS);
    assert!(
        inputs.is_multiple_of(2) && outputs.is_multiple_of(16) && pairs.len() == inputs * outputs,
        "shape {inputs}×{outputs}"
    );
    assert!(a.len() >= rows * inputs && sums.len() >= rows * outputs);
    // SAFETY: the CPU has AVX2 (asserted above).
    unsafe {
        avx2_blocks(
            &a[..rows * inputs],
            pairs,
            inputs,
            &mut sums[..rows * outputs],
        )
    }
}

/// [`avx2_matmul`] on exactly `a.len() / inputs` rows (a multiple of [`AVX2_ROWS`]).
#[target_feature(enable = "avx2")]
fn avx2_blocks(a: &[i8], pairs: &[i16], inputs: usize, sums: &mut [i32]) {
    use std::arch::x86_64::{
        __m256i, _mm256_add_epi32, _mm256_loadu_si256, _mm256_madd_epi16, _mm256_set1_epi32,
        _mm256_setzero_si256, _mm256_storeu_si256,
    };
    let (rows, outputs) = (a.len() / inputs, sums.len() / (a.len() / inputs).max(1));
    // The activations widened once, so each pair of them is one 32-bit broadcast.
    let wide: Vec<i16> = a.iter().map(|&v| i16::from(v)).collect();
    // Each block of 16 outputs' weights (12 KiB at 384 inputs) stays in cache over all rows.
    for (block, weights) in pairs.chunks_exact(16 * inputs).enumerate() {
        for first in (0..rows).step_by(AVX2_ROWS) {
            let mut acc = [_mm256_setzero_si256(); 2 * AVX2_ROWS];
            for pair in 0..inputs / 2 {
                // SAFETY: `weights` holds inputs / 2 pairs of 16 outputs × 2 i16 (32 values).
                let (w0, w1) = unsafe {
                    let w = weights.as_ptr().add(32 * pair);
                    (
                        _mm256_loadu_si256(w.cast::<__m256i>()),
                        _mm256_loadu_si256(w.add(16).cast::<__m256i>()),
                    )
                };
                for r in 0..AVX2_ROWS {
                    // SAFETY: row first + r < rows, and 2 · pair + 1 < inputs, inside `wide`.
                    let x = unsafe {
                        wide.as_ptr()
                            .add((first + r) * inputs + 2 * pair)
                            .cast::<i32>()
                            .read_unaligned()
                    };
                    let x = _mm256_set1_epi32(x);
                    acc[2 * r] = _mm256_add_epi32(acc[2 * r], _mm256_madd_epi16(x, w0));
                    acc[2 * r + 1] = _mm256_add_epi32(acc[2 * r + 1], _mm256_madd_epi16(x, w1));
                }
            }
            for r in 0..AVX2_ROWS {
                let out = &mut sums[(first + r) * outputs + 16 * block..][..16];
                // SAFETY: `out` holds 16 i32, two unaligned 256-bit stores.
                unsafe {
                    _mm256_storeu_si256(out.as_mut_ptr().cast::<__m256i>(), acc[2 * r]);
                    _mm256_storeu_si256(out.as_mut_ptr().add(8).cast::<__m256i>(), acc[2 * r + 1]);
                }
            }
        }
    }
}

/// Rows [`vnni_matmul`] computes together, and blocks of 16 outputs: 8 rows × 3 blocks are 24
/// accumulators, leaving AVX-512's 32 registers room for the 3 weight vectors and a broadcast.
const VNNI_ROWS: usize = 8;
const VNNI_BLOCKS: usize = 3;

/// `sums[r][o] = Σᵢ a[r][i] · w[o][i]`, exact, on AVX-512 VNNI, for the first `rows` rows rounded
/// up to 8 (`a` holds them, zero past the real rows, and `sums` has room). `tiles` is the weight
/// matrix in [`amx_matmul`]'s layout, which is also VNNI's: within each block of 16 outputs, each
/// 64 bytes hold the 16 outputs' weights for 4 consecutive inputs, one 32-bit lane per output.
/// `weight_sums[o]` is the sum of output `o`'s weights. `vpdpbusd` multiplies unsigned by signed
/// bytes, so the activations are shifted to `a + 128` (their top bit flipped) and `128 · Σ w`
/// taken off each sum: exact, as every partial sum fits in i32 (|Σ| ≤ inputs · 255 · 128).
pub fn vnni_matmul(
    a: &[i8],
    tiles: &[i8],
    weight_sums: &[i32],
    inputs: usize,
    rows: usize,
    sums: &mut [i32],
) {
    assert!(vnni_available(), "this CPU has no AVX-512 VNNI");
    let outputs = weight_sums.len();
    let rows = rows.next_multiple_of(VNNI_ROWS);
    assert!(
        inputs.is_multiple_of(64)
            && inputs <= 1 << 16
            && outputs.is_multiple_of(16)
            && tiles.len() == inputs * outputs,
        "shape {inputs}×{outputs}"
    );
    assert!(a.len() >= rows * inputs && sums.len() >= rows * outputs);
    // The activations shifted once, so each group of four is one 32-bit broadcast.
    let shifted: Vec<u8> = a[..rows * inputs]
        .iter()
        .map(|&v| v.cast_unsigned() ^ 0x80)
        .collect();
    let sums = &mut sums[..rows * outputs];
    let blocks = outputs / 16;
    let whole = blocks - blocks % VNNI_BLOCKS;
    // SAFETY: the CPU has AVX-512 VNNI (asserted above), and every block passed lies inside
    // `tiles`, `weight_sums` and `sums` (whole ≤ blocks, and the remainder is < VNNI_BLOCKS).
    unsafe {
        for first in (0..whole).step_by(VNNI_BLOCKS) {
            vnni_blocks::<VNNI_BLOCKS>(&shifted, tiles, weight_sums, inputs, first, sums);
        }
        match blocks - whole {
            0 => {}
            1 => vnni_blocks::<1>(&shifted, tiles, weight_sums, inputs, whole, sums),
            _ => vnni_blocks::<2>(&shifted, tiles, weight_sums, inputs, whole, sums),
        }
    }
}

/// [`vnni_matmul`] for output blocks `first..first + B`, on all `shifted.len() / inputs` rows (a
/// multiple of [`VNNI_ROWS`]). The blocks' weights (16 · B · inputs bytes: 18 KiB at 384
/// inputs, 72 KiB at 1,536) are read again for every 8 rows and stay in cache.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
fn vnni_blocks<const B: usize>(
    shifted: &[u8],
    tiles: &[i8],
    weight_sums: &[i32],
    inputs: usize,
    first: usize,
    sums: &mut [i32],
) {
    use std::arch::x86_64::{
        __m512i, _mm512_dpbusd_epi32, _mm512_loadu_si512, _mm512_set1_epi32, _mm512_setzero_si512,
        _mm512_slli_epi32, _mm512_storeu_si512, _mm512_sub_epi32,
    };
    let rows = shifted.len() / inputs;
    let outputs = weight_sums.len();
    assert!((first + B) * 16 <= outputs && tiles.len() >= (first + B) * 16 * inputs);
    let panel = |b: usize| &tiles[(first + b) * 16 * inputs..][..16 * inputs];
    let panels: [&[i8]; B] = std::array::from_fn(panel);
    // 128 · Σ w for each output of the blocks.
    let corrections: [__m512i; B] = std::array::from_fn(|b| {
        let w_sums = &weight_sums[(first + b) * 16..][..16];
        // SAFETY: `w_sums` holds 16 i32, one unaligned 512-bit load.
        _mm512_slli_epi32::<7>(unsafe { _mm512_loadu_si512(w_sums.as_ptr().cast::<__m512i>()) })
    });
    for row in (0..rows).step_by(VNNI_ROWS) {
        let mut acc = [[_mm512_setzero_si512(); B]; VNNI_ROWS];
        for quad in 0..inputs / 4 {
            // SAFETY: each panel holds inputs / 4 quads of 64 bytes.
            let w: [__m512i; B] = std::array::from_fn(|b| unsafe {
                _mm512_loadu_si512(panels[b].as_ptr().add(64 * quad).cast::<__m512i>())
            });
            for (r, acc) in acc.iter_mut().enumerate() {
                // SAFETY: row + r < rows and 4 · quad + 3 < inputs, inside `shifted`.
                let x = unsafe {
                    shifted
                        .as_ptr()
                        .add((row + r) * inputs + 4 * quad)
                        .cast::<i32>()
                        .read_unaligned()
                };
                let x = _mm512_set1_epi32(x);
                for b in 0..B {
                    acc[b] = _mm512_dpbusd_epi32(acc[b], x, w[b]);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate() {
            for b in 0..B {
                let out = &mut sums[(row + r) * outputs + (first + b) * 16..][..16];
                // SAFETY: `out` holds 16 i32, one unaligned 512-bit store.
                unsafe {
                    _mm512_storeu_si512(
                        out.as_mut_ptr().cast::<__m512i>(),
                        _mm512_sub_epi32(acc[b], corrections[b]),
                    );
                }
            }
        }
    }
}
