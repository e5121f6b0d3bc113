//! Architectures other than x86-64: the portable bodies, and no vector int8 kernel (their
//! `*_available` say so, so [`crate::gemm::Kernel::detect`] never picks one).

pub use crate::attention::attention;
pub use crate::int8::{dequantize, dot_f32_i8, portable_matmul, quantize_rows};
pub use crate::math::{gelu, layer_norm};

/// A cache hint elsewhere; nothing here.
pub fn prefetch(_bytes: &[u8]) {}

pub fn amx_available() -> bool {
    false
}

pub fn vnni_available() -> bool {
    false
}

pub fn avx2_available() -> bool {
    false
}

/// Never called: [`amx_available`] is false here.
pub fn amx_matmul(_a: &[i8], _b: &[i8], _out: &mut [i32], _m: usize, _k: usize, _n: usize) {
    unreachable!("AMX exists only on x86-64");
}

/// Never called: [`vnni_available`] is false here.
pub fn vnni_matmul(
    _a: &[i8],
    _tiles: &[i8],
    _weight_sums: &[i32],
    _inputs: usize,
    _rows: usize,
    _sums: &mut [i32],
) {
    unreachable!("AVX-512 VNNI exists only on x86-64");
}

/// Never called: [`avx2_available`] is false here.
pub fn avx2_matmul(_a: &[i8], _pairs: &[i16], _inputs: usize, _rows: usize, _sums: &mut [i32]) {
    unreachable!("AVX2 exists only on x86-64");
}
