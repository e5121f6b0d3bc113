//! `stillweb-indexer bench-gemm`: the native engine's int8 product rate at MiniLM's weight
//! shapes, measured as `benchmarks/gemm.py` measures ONNX Runtime's.

use std::time::Instant;

use serde::Serialize;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Rows (tokens) per product.
    #[arg(long, default_value_t = 4096)]
    rows: usize,
    /// Threads sharing the rows; 0 = one per core.
    #[arg(long, default_value_t = 0)]
    threads: usize,
    /// Seconds each shape runs for (after one warm-up call).
    #[arg(long, default_value_t = 2.0)]
    seconds: f64,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let report = gemm_throughput(
        args.rows,
        crate::models::threads_or_cores(args.threads),
        args.seconds,
    );
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}

/// MiniLM's weight shapes (inputs, outputs), as in `benchmarks/gemm.py`.
const GEMM_SHAPES: [(usize, usize); 3] = [(384, 1536), (1536, 384), (384, 384)];

#[derive(Debug, Serialize)]
pub struct GemmThroughput {
    pub kernel: String,
    pub threads: usize,
    pub rows: usize,
    /// GOP/s (2 per multiply-add) by shape `ROWSxINPUTSxOUTPUTS`.
    pub int8: std::collections::BTreeMap<String, f64>,
    pub int8_ceiling_gops: f64,
}

/// The native int8 products on `rows` rows at each MiniLM shape, the rows split over `threads`
/// threads; each rate is sustained over `seconds` after one warm-up call.
pub fn gemm_throughput(rows: usize, threads: usize, seconds: f64) -> GemmThroughput {
    use stillweb_native::gemm::{Kernel, QuantLinear, ROW_BLOCK};
    let kernel = Kernel::detect();
    let threads = threads.max(1);
    let per_thread = rows.div_ceil(threads).div_ceil(ROW_BLOCK) * ROW_BLOCK;
    let mut int8 = std::collections::BTreeMap::new();
    for (inputs, outputs) in GEMM_SHAPES {
        // Any values do: the products' cost does not depend on them.
        let weight: Vec<f32> = (0..inputs * outputs)
            .map(|i| (i * 7919 % 255) as f32 / 127.0 - 1.0)
            .collect();
        let layer = QuantLinear::new(&weight, &vec![0.0; outputs], inputs, kernel);
        let a: Vec<i8> = (0..per_thread * inputs).map(|i| (i % 255) as i8).collect();
        let mut sums = vec![vec![0i32; per_thread * outputs]; threads];
        let run = |sums: &mut [Vec<i32>]| {
            std::thread::scope(|scope| {
                for s in sums.iter_mut() {
                    let (layer, a) = (&layer, &a);
                    scope.spawn(move || layer.products(a, per_thread, s));
                }
            });
        };
        run(&mut sums);
        let (mut calls, started) = (0u32, Instant::now());
        while started.elapsed().as_secs_f64() < seconds {
            run(&mut sums);
            calls += 1;
        }
        let ops = 2.0 * (per_thread * threads * inputs * outputs) as f64 * f64::from(calls);
        let gops = ops / started.elapsed().as_secs_f64() / 1e9;
        int8.insert(
            format!("{}x{inputs}x{outputs}", per_thread * threads),
            (gops * 10.0).round() / 10.0,
        );
    }
    GemmThroughput {
        kernel: format!("{kernel:?}"),
        threads,
        rows: per_thread * threads,
        int8_ceiling_gops: int8.values().copied().fold(0.0, f64::max),
        int8,
    }
}
