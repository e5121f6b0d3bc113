//! The kernels that depend on the CPU: on x86-64, AMX, AVX-512 VNNI and AVX2 int8 products and
//! the AVX-512 / AVX2 builds of the f32 kernels ([`x86`], the only `unsafe` code in stillweb);
//! on every other architecture, the portable bodies as they are. Callers see one set of
//! functions either way.

#[cfg(target_arch = "x86_64")]
mod x86;
#[cfg(target_arch = "x86_64")]
pub use x86::{
    amx_available, amx_matmul, attention, avx2_available, avx2_matmul, dequantize, dot_f32_i8,
    gelu, layer_norm, portable_matmul, prefetch, quantize_rows, vnni_available, vnni_matmul,
};

#[cfg(not(target_arch = "x86_64"))]
mod portable;
#[cfg(not(target_arch = "x86_64"))]
pub use portable::{
    amx_available, amx_matmul, attention, avx2_available, avx2_matmul, dequantize, dot_f32_i8,
    gelu, layer_norm, portable_matmul, prefetch, quantize_rows, vnni_available, vnni_matmul,
};
