//! The ANN comparison's data and stillweb's side of it: usearch built with the settings of every
//! stillweb document graph, timed the way the server calls it (one query per call, one thread).
//! The peers (faiss-cpu HNSW, hnswlib) read the same files in benchmarks/ann_peers.py.
//!
//! Files in the data directory, all little-endian: `base.f32` (n × d), `queries.f32` (q × d),
//! `truth.u32` (q × 10 exact inner-product neighbours, best first), `meta.json` (n, q, d).

use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use serde::{Deserialize, Serialize};
use stillweb_models::Embedder;

/// Neighbours per query that recall is measured at.
pub const K: usize = 10;

#[derive(Debug, Serialize, Deserialize)]
pub struct Meta {
    pub base: usize,
    pub queries: usize,
    pub dimension: usize,
    pub source: String,
}

/// Writes the data directory: the first `rows` chunk vectors of an index, `queries` query texts
/// embedded as the server embeds them, and the exact top 10 of each by brute force.
pub fn prepare(
    index_dir: &Path,
    rows: usize,
    query_texts: &[String],
    embedder: &mut dyn Embedder,
    out: &Path,
) -> anyhow::Result<Meta> {
    let dimension = embedder.dimension();
    let vectors_path = index_dir.join("dense").join("chunks.f32");
    // The graphs compared are built from full-precision vectors, as a build builds its own.
    anyhow::ensure!(
        vectors_path.is_file(),
        "{} is missing: the ANN comparison needs an index with f32 chunk vectors \
         (build it with --chunk-vectors f32)",
        vectors_path.display()
    );
    let bytes = std::fs::read(&vectors_path)
        .with_context(|| format!("reading {}", vectors_path.display()))?;
    let available = bytes.len() / (dimension * 4);
    anyhow::ensure!(
        rows > 0 && rows <= available,
        "--rows {rows}: {} holds {available} vectors of {dimension} dimensions",
        vectors_path.display()
    );
    let base = floats(&bytes[..rows * dimension * 4]);
    let mut queries = Vec::with_capacity(query_texts.len() * dimension);
    for text in query_texts {
        queries.extend(stillweb_models::embed_query(embedder, text)?);
    }
    let truth: Vec<u32> = queries
        .chunks_exact(dimension)
        .flat_map(|q| exact_top(&base, dimension, q))
        .collect();
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    write_le(&out.join("base.f32"), base.iter().map(|x| x.to_le_bytes()))?;
    write_le(
        &out.join("queries.f32"),
        queries.iter().map(|x| x.to_le_bytes()),
    )?;
    write_le(
        &out.join("truth.u32"),
        truth.iter().map(|x| x.to_le_bytes()),
    )?;
    let meta = Meta {
        base: rows,
        queries: query_texts.len(),
        dimension,
        source: vectors_path.display().to_string(),
    };
    std::fs::write(out.join("meta.json"), serde_json::to_string_pretty(&meta)?)?;
    Ok(meta)
}

fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn write_le<const N: usize>(
    path: &Path,
    values: impl Iterator<Item = [u8; N]>,
) -> anyhow::Result<()> {
    let bytes: Vec<u8> = values.flatten().collect();
    std::fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}

/// The `K` rows of `base` with the largest inner product with `query` (ties: lower row first).
fn exact_top(base: &[f32], dimension: usize, query: &[f32]) -> Vec<u32> {
    let mut scored: Vec<(f32, u32)> = base
        .chunks_exact(dimension)
        .enumerate()
        .map(|(i, row)| (stillweb_models::dot(query, row), i as u32))
        .collect();
    let cut = K.min(scored.len());
    scored.select_nth_unstable_by(cut.saturating_sub(1), |a, b| {
        b.0.total_cmp(&a.0).then(a.1.cmp(&b.1))
    });
    scored.truncate(cut);
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    scored.into_iter().map(|(_, i)| i).collect()
}

#[derive(Debug, Serialize)]
pub struct AnnResult {
    pub engine: String,
    pub base: usize,
    pub build_threads: usize,
    pub build_seconds: f64,
    /// Serialised graph and vectors, per vector.
    pub bytes_per_vector: f64,
    /// What usearch reports it holds in memory, per vector.
    pub memory_bytes_per_vector: f64,
    pub searches: Vec<AnnSearch>,
}

#[derive(Debug, Serialize)]
pub struct AnnSearch {
    pub ef: usize,
    pub recall_at_10: f64,
    pub qps: f64,
    pub p50_us: f64,
    pub p99_us: f64,
}

/// Builds usearch over `base.f32` with stillweb's graph settings at `quantization` (`f32`, `f16`
/// or `i8`, as an index manifest names it) from `threads` threads, then times single-thread
/// searches at each `ef`.
pub fn run_usearch(
    data: &Path,
    quantization: &str,
    threads: usize,
    efs: &[usize],
) -> anyhow::Result<AnnResult> {
    let meta: Meta = serde_json::from_str(
        &std::fs::read_to_string(data.join("meta.json")).with_context(|| {
            format!("reading {}/meta.json (run ann-data first)", data.display())
        })?,
    )?;
    let d = meta.dimension;
    let base = floats(&std::fs::read(data.join("base.f32"))?);
    let queries = floats(&std::fs::read(data.join("queries.f32"))?);
    let truth_bytes = std::fs::read(data.join("truth.u32"))?;
    let truth: Vec<u32> = truth_bytes
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    anyhow::ensure!(
        base.len() == meta.base * d && queries.len() == meta.queries * d,
        "{}: files disagree with meta.json",
        data.display()
    );
    let options =
        stillweb_index::dense::graph_options(d, quantization).map_err(|e| anyhow::anyhow!(e))?;
    let graph = usearch::Index::new(&options)?;
    graph.reserve_capacity_and_threads(meta.base, threads)?;
    let started = Instant::now();
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|first| {
                let (graph, base) = (&graph, &base);
                scope.spawn(move || -> anyhow::Result<()> {
                    for i in (first..meta.base).step_by(threads) {
                        graph.add(i as u64, &base[i * d..(i + 1) * d])?;
                    }
                    Ok(())
                })
            })
            .collect();
        workers.into_iter().try_for_each(|w| {
            w.join()
                .map_err(|_| anyhow::anyhow!("a builder thread panicked"))?
        })
    })?;
    let build_seconds = started.elapsed().as_secs_f64();
    let mut searches = Vec::new();
    for &ef in efs {
        graph.change_expansion_search(ef);
        let mut latencies = Vec::with_capacity(meta.queries);
        let mut found = 0usize;
        let started = Instant::now();
        for (q, expected) in queries.chunks_exact(d).zip(truth.chunks_exact(K)) {
            let t = Instant::now();
            let matches = graph.search(q, K)?;
            latencies.push(t.elapsed().as_secs_f64() * 1e6);
            found += matches
                .keys
                .iter()
                .filter(|k| expected.contains(&(**k as u32)))
                .count();
        }
        let seconds = started.elapsed().as_secs_f64();
        latencies.sort_by(f64::total_cmp);
        searches.push(AnnSearch {
            ef,
            recall_at_10: found as f64 / (meta.queries * K) as f64,
            qps: meta.queries as f64 / seconds,
            p50_us: percentile(&latencies, 0.50),
            p99_us: percentile(&latencies, 0.99),
        });
    }
    Ok(AnnResult {
        engine: format!("usearch {:?}", options.quantization),
        base: meta.base,
        build_threads: threads,
        build_seconds,
        bytes_per_vector: graph.serialized_length() as f64 / meta.base as f64,
        memory_bytes_per_vector: graph.memory_usage() as f64 / meta.base as f64,
        searches,
    })
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_top_orders_by_inner_product_then_row() {
        // Four 2-d rows; rows 1 and 3 tie.
        let base = [1.0, 0.0, 0.0, 1.0, 0.6, 0.8, 0.0, 1.0];
        let top = exact_top(&base, 2, &[0.0, 1.0]);
        assert_eq!(top, vec![1, 3, 2, 0]);
    }

    #[test]
    fn rows_beyond_the_index_are_refused_and_the_rest_written() {
        let dir = tempfile::tempdir().expect("tempdir");
        let dense = dir.path().join("dense");
        std::fs::create_dir_all(&dense).expect("mkdir");
        let vectors: Vec<u8> = (0..3 * 16).flat_map(|i| (i as f32).to_le_bytes()).collect();
        std::fs::write(dense.join("chunks.f32"), vectors).expect("write");
        let mut embedder = stillweb_models::fake::HashingEmbedder::new(16);
        let out = dir.path().join("data");
        for rows in [0, 4] {
            let err = prepare(dir.path(), rows, &["q".into()], &mut embedder, &out)
                .expect_err("out of range")
                .to_string();
            assert!(
                err.contains(&format!("--rows {rows}")) && err.contains("holds 3 vectors"),
                "{err}"
            );
        }
        let meta = prepare(dir.path(), 2, &["q".into()], &mut embedder, &out).expect("prepare");
        assert_eq!((meta.base, meta.queries, meta.dimension), (2, 1, 16));
        let base = std::fs::metadata(out.join("base.f32")).expect("base").len();
        assert_eq!(base, 2 * 16 * 4);

        // The written data runs; a quantization usearch graphs do not have is refused by name.
        let result = run_usearch(&out, "i8", 1, &[8]).expect("usearch");
        assert_eq!(result.engine, "usearch I8");
        let err = run_usearch(&out, "int4", 1, &[8])
            .expect_err("unknown")
            .to_string();
        assert!(
            err.contains("int4") && err.contains("f32, f16, i8"),
            "{err}"
        );
    }
}
