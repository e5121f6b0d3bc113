//! Every chunk's embedding on disk, row by row in chunk-id order, so stage 2 can score the chunks
//! of its candidates from the mapped file — and, at 384 dimensions, the largest part of an index.
//! A build stores them at one [`Precision`]:
//!
//! - `f32`: little-endian floats, 4 bytes a dimension (`chunks.f32`);
//! - `f16`: IEEE half floats, little-endian, 2 bytes a dimension (`chunks.f16`);
//! - `i8`: a little-endian f32 scale, then one signed byte a dimension; the component is
//!   `scale × byte`, the scale being the row's largest magnitude / 127 (`chunks.i8`).
//!
//! The query stays f32: a similarity is the exact dot product of the query with the stored
//! (rounded) row. `BENCHMARKS.md` has the quality and memory of each.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::IndexError;
use crate::dense::graph_error;

/// How chunk vectors are stored.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Precision {
    I8,
    F16,
    /// Also what indexes from before the choice existed hold.
    #[default]
    F32,
}

impl std::str::FromStr for Precision {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "f32" => Ok(Precision::F32),
            "f16" => Ok(Precision::F16),
            "i8" => Ok(Precision::I8),
            other => Err(format!(
                "unknown chunk vector precision `{other}` (f32, f16, i8)"
            )),
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Precision::F32 => "f32",
            Precision::F16 => "f16",
            Precision::I8 => "i8",
        })
    }
}

/// The scale before an i8 row's bytes.
const SCALE_BYTES: usize = 4;

impl Precision {
    /// The file holding the rows, inside the index's `dense/` directory.
    pub fn file_name(self) -> &'static str {
        match self {
            Precision::F32 => "chunks.f32",
            Precision::F16 => "chunks.f16",
            Precision::I8 => "chunks.i8",
        }
    }

    /// Bytes of one row of `dimension` components.
    pub fn row_width(self, dimension: usize) -> usize {
        match self {
            Precision::F32 => 4 * dimension,
            Precision::F16 => 2 * dimension,
            Precision::I8 => SCALE_BYTES + dimension,
        }
    }

    /// Appends `vector` encoded as one row to `out`.
    pub fn encode(self, vector: &[f32], out: &mut Vec<u8>) {
        match self {
            Precision::F32 => out.extend(vector.iter().flat_map(|x| x.to_le_bytes())),
            Precision::F16 => out.extend(
                vector
                    .iter()
                    .flat_map(|&x| half::f16::from_f32(x).to_le_bytes()),
            ),
            Precision::I8 => {
                let largest = vector.iter().fold(0f32, |m, x| m.max(x.abs()));
                let scale = if largest > 0.0 { largest / 127.0 } else { 1.0 };
                out.extend(scale.to_le_bytes());
                out.extend(
                    vector
                        .iter()
                        .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8 as u8),
                );
            }
        }
    }

    /// Decodes one row into `out` (as many components as `out` holds).
    pub fn decode(self, row: &[u8], out: &mut [f32]) {
        match self {
            Precision::F32 => {
                for (x, b) in out.iter_mut().zip(row.chunks_exact(4)) {
                    *x = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                }
            }
            Precision::F16 => {
                for (x, b) in out.iter_mut().zip(row.chunks_exact(2)) {
                    *x = f16_to_f32(u16::from_le_bytes([b[0], b[1]]));
                }
            }
            Precision::I8 => {
                let (scale, bytes) = split_i8_row(row);
                for (x, &b) in out.iter_mut().zip(bytes) {
                    *x = scale * f32::from(b as i8);
                }
            }
        }
    }

    /// The dot product of `query` with an encoded row, read in place. Deterministic: the same
    /// inputs always sum in the same order.
    pub fn dot(self, query: &[f32], row: &[u8]) -> f32 {
        match self {
            Precision::F32 => stillweb_model_core::dot_le_bytes(query, row),
            Precision::F16 => dot_f16(query, row),
            Precision::I8 => {
                let (scale, bytes) = split_i8_row(row);
                scale * stillweb_native::dot_f32_i8(query, bytes)
            }
        }
    }
}

fn split_i8_row(row: &[u8]) -> (f32, &[u8]) {
    let (scale, bytes) = row.split_at(SCALE_BYTES);
    (
        f32::from_le_bytes([scale[0], scale[1], scale[2], scale[3]]),
        bytes,
    )
}

/// Independent running sums, as in [`stillweb_model_core::dot`], so the loops vectorise.
const LANES: usize = 16;

fn dot_f16(query: &[f32], bytes: &[u8]) -> f32 {
    let n = query.len().min(bytes.len() / 2);
    let (q_lanes, q_tail) = query[..n].as_chunks::<LANES>();
    let (b_lanes, b_tail) = bytes[..2 * n].as_chunks::<{ 2 * LANES }>();
    let half_at = |b: &[u8], i: usize| f16_to_f32(u16::from_le_bytes([b[2 * i], b[2 * i + 1]]));
    let mut sums = [0f32; LANES];
    for (q, b) in q_lanes.iter().zip(b_lanes) {
        for i in 0..LANES {
            sums[i] += q[i] * half_at(b, i);
        }
    }
    let tail: f32 = q_tail
        .iter()
        .enumerate()
        .map(|(i, q)| q * half_at(b_tail, i))
        .sum();
    sums.iter().sum::<f32>() + tail
}

/// An IEEE half float's value, without branches the compiler cannot turn into selects (so the
/// dot product's loop vectorises): the exponent is rebiased, infinities and NaNs keep the top
/// exponent, and subnormals are renormalised by one float subtraction (F. Giesen's method).
/// Checked against the `half` crate for all 65,536 inputs.
fn f16_to_f32(h: u16) -> f32 {
    const SHIFTED_EXP: u32 = 0x7c00 << 13;
    let h = u32::from(h);
    let mut bits = (h & 0x7fff) << 13;
    let exp = bits & SHIFTED_EXP;
    bits += (127 - 15) << 23;
    let value = if exp == SHIFTED_EXP {
        f32::from_bits(bits + ((128 - 16) << 23))
    } else if exp == 0 {
        f32::from_bits(bits + (1 << 23)) - f32::from_bits(113 << 23)
    } else {
        f32::from_bits(bits)
    };
    f32::from_bits(value.to_bits() | ((h & 0x8000) << 16))
}

/// Chunk vectors memory-mapped from `dense/chunks.{f32,f16,i8}`: the page cache holds them,
/// shared and reclaimable, rather than a private copy per process.
pub(crate) struct ChunkVectors {
    bytes: tantivy::directory::OwnedBytes,
    pub(crate) precision: Precision,
    pub(crate) dimension: usize,
}

impl ChunkVectors {
    /// Maps the rows of `precision` in `dir` and checks it holds exactly `rows` vectors of
    /// `dimension`.
    pub(crate) fn open(
        dir: &Path,
        precision: Precision,
        dimension: usize,
        rows: u64,
    ) -> Result<ChunkVectors, IndexError> {
        Self::open_file(&dir.join(precision.file_name()), precision, dimension, rows)
    }

    /// Maps the rows at `path` (chunk vectors, or a mean graph's document vectors).
    pub(crate) fn open_file(
        path: &Path,
        precision: Precision,
        dimension: usize,
        rows: u64,
    ) -> Result<ChunkVectors, IndexError> {
        let mapped = crate::dense::map_file(path)?;
        let expected = rows as usize * precision.row_width(dimension);
        if mapped.len() != expected {
            return Err(graph_error(
                path,
                format!(
                    "{} bytes, expected {expected} ({rows} {precision} vectors of {dimension} dimensions); rebuild the index",
                    mapped.len()
                ),
            ));
        }
        Ok(ChunkVectors {
            bytes: mapped,
            precision,
            dimension,
        })
    }

    fn row_bytes(&self, id: u64) -> &[u8] {
        let width = self.precision.row_width(self.dimension);
        let start = id as usize * width;
        &self.bytes.as_slice()[start..start + width]
    }

    /// Copies row `id` into `out`, decoded.
    pub(crate) fn read_row(&self, id: u64, out: &mut [f32]) {
        self.precision.decode(self.row_bytes(id), out);
    }

    /// Asks for row `id` to be brought into the caches.
    pub(crate) fn prefetch(&self, id: u64) {
        stillweb_native::prefetch(self.row_bytes(id));
    }

    /// The dot product of `query` with row `id`, read straight from the mapped bytes.
    pub(crate) fn dot(&self, query: &[f32], id: u64) -> f32 {
        self.precision.dot(query, self.row_bytes(id))
    }
}

/// Rows read with positioned reads instead of a mapping, for a build: it reads every row once
/// or twice, and a mapping would keep each page it read in the build's resident memory until the
/// end (over 1.4 GiB of f32 rows at 1M chunks), where a read leaves it only in the page cache.
pub(crate) struct RowFile {
    file: std::fs::File,
    path: std::path::PathBuf,
    pub(crate) precision: Precision,
    pub(crate) dimension: usize,
    pub(crate) rows: u64,
}

impl RowFile {
    /// Opens the rows of `precision` in `dir` and checks it holds exactly `rows` vectors of
    /// `dimension`.
    pub(crate) fn open(
        dir: &Path,
        precision: Precision,
        dimension: usize,
        rows: u64,
    ) -> Result<RowFile, IndexError> {
        let path = dir.join(precision.file_name());
        let file = std::fs::File::open(&path).map_err(|e| IndexError::io(&path, e))?;
        let len = file.metadata().map_err(|e| IndexError::io(&path, e))?.len();
        let expected = rows * precision.row_width(dimension) as u64;
        if len != expected {
            return Err(graph_error(
                &path,
                format!(
                    "{len} bytes, expected {expected} ({rows} {precision} vectors of {dimension} dimensions); rebuild the index"
                ),
            ));
        }
        Ok(RowFile {
            file,
            path,
            precision,
            dimension,
            rows,
        })
    }

    /// Reads row `id` into `out`, decoded (`bytes` is scratch space).
    pub(crate) fn read_row(
        &self,
        id: u64,
        bytes: &mut Vec<u8>,
        out: &mut [f32],
    ) -> Result<(), IndexError> {
        use std::os::unix::fs::FileExt;
        let width = self.precision.row_width(self.dimension);
        bytes.resize(width, 0);
        self.file
            .read_exact_at(bytes, id * width as u64)
            .map_err(|e| IndexError::io(&self.path, e))?;
        self.precision.decode(bytes, out);
        Ok(())
    }

    /// Writes every row to `dir` at `precision` (through a temporary file, renamed when
    /// complete), reading them in order.
    pub(crate) fn write_as(&self, dir: &Path, precision: Precision) -> Result<(), IndexError> {
        use std::io::Read;
        let width = self.precision.row_width(self.dimension);
        let mut input = std::io::BufReader::with_capacity(1 << 20, &self.file);
        let mut bytes = vec![0u8; width];
        let rows = (0..self.rows).map(|_| {
            input
                .read_exact(&mut bytes)
                .map_err(|e| IndexError::io(&self.path, e))?;
            let mut row = vec![0f32; self.dimension];
            self.precision.decode(&bytes, &mut row);
            Ok(row)
        });
        write_rows(&dir.join(precision.file_name()), precision, rows)
    }
}

/// Writes `rows` to `path` at `precision`, through a temporary file renamed when complete.
pub(crate) fn write_rows(
    path: &Path,
    precision: Precision,
    rows: impl Iterator<Item = Result<Vec<f32>, IndexError>>,
) -> Result<(), IndexError> {
    use std::io::Write;
    let partial = path.with_extension("partial");
    let file = std::fs::File::create(&partial).map_err(|e| IndexError::io(&partial, e))?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    let mut encoded = Vec::new();
    for row in rows {
        let row = row?;
        encoded.clear();
        precision.encode(&row, &mut encoded);
        out.write_all(&encoded)
            .map_err(|e| IndexError::io(&partial, e))?;
    }
    out.into_inner()
        .map_err(|e| IndexError::io(&partial, e.into_error()))?
        .sync_all()
        .map_err(|e| IndexError::io(&partial, e))?;
    std::fs::rename(&partial, path).map_err(|e| IndexError::io(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_decoding_matches_the_half_crate_for_every_input() {
        for bits in 0..=u16::MAX {
            let ours = f16_to_f32(bits);
            let theirs = half::f16::from_bits(bits).to_f32();
            if theirs.is_nan() {
                assert!(ours.is_nan(), "{bits:#06x}");
            } else {
                assert_eq!(ours.to_bits(), theirs.to_bits(), "{bits:#06x}");
            }
        }
    }

    fn unit(n: usize, seed: u32) -> Vec<f32> {
        let mut v: Vec<f32> = (0..n)
            .map(|i| (((i as u32).wrapping_mul(2_654_435_761) ^ seed) % 2001) as f32 - 1000.0)
            .collect();
        stillweb_model_core::normalize(&mut v);
        v
    }

    #[test]
    fn every_precision_round_trips_within_its_rounding_and_dots_its_own_decoding() {
        for n in [1, 15, 16, 17, 384] {
            let v = unit(n, 7);
            let q = unit(n, 99);
            for (precision, tolerance) in [
                (Precision::F32, 0.0),
                (Precision::F16, 1e-3),
                (Precision::I8, 1.0 / 127.0),
            ] {
                let mut row = Vec::new();
                precision.encode(&v, &mut row);
                assert_eq!(row.len(), precision.row_width(n), "{precision} {n}");
                let mut back = vec![0f32; n];
                precision.decode(&row, &mut back);
                let largest = v.iter().fold(0f32, |m, x| m.max(x.abs()));
                for (a, b) in v.iter().zip(&back) {
                    assert!(
                        (a - b).abs() <= tolerance * largest.max(1e-6),
                        "{precision} {n}: {a} vs {b}"
                    );
                }
                let decoded = stillweb_model_core::dot(&q, &back);
                let direct = precision.dot(&q, &row);
                assert!(
                    (decoded - direct).abs() < 1e-5,
                    "{precision} {n}: {decoded} vs {direct}"
                );
                let exact = stillweb_model_core::dot(&q, &v);
                assert!(
                    (exact - direct).abs() < 0.01,
                    "{precision} {n}: {exact} vs {direct}"
                );
            }
        }
    }

    #[test]
    fn a_zero_vector_stays_zero_in_i8() {
        let mut row = Vec::new();
        Precision::I8.encode(&[0.0; 8], &mut row);
        let mut back = [1f32; 8];
        Precision::I8.decode(&row, &mut back);
        assert_eq!(back, [0.0; 8]);
    }

    #[test]
    fn precisions_parse_print_and_order_by_fidelity() {
        for p in [Precision::F32, Precision::F16, Precision::I8] {
            assert_eq!(p.to_string().parse::<Precision>(), Ok(p));
        }
        assert!(Precision::I8 < Precision::F16 && Precision::F16 < Precision::F32);
        let refused = "q4".parse::<Precision>();
        assert!(
            matches!(&refused, Err(e) if e.contains("f32, f16, i8")),
            "{refused:?}"
        );
    }
}
