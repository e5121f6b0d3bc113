//! The document graph on disk as links only: usearch builds the HNSW graph, and the build keeps
//! its adjacency lists (`dense/graph.links`) but not usearch's copy of every vector, so each
//! vector is stored once — the rows stage 2 already reads ([`crate::chunk_vectors`]) — and the
//! walk scores nodes from those rows, memory-mapped like everything else a query touches.
//!
//! The file, little-endian:
//!
//! ```text
//! b"SWLINKS1"  nodes: u64  levels: u32  linked: u32  entry: u64
//! level 0:     offsets: u64 × (nodes + 1)          edges: u32 × offsets[nodes]
//! level l ≥ 1: members: u64  keys: u32 × members (ascending)
//!              offsets: u64 × (members + 1)        edges: u32 × offsets[members]
//! ```
//!
//! Node keys are `0..nodes`; a key that is no node (a document without chunks) has no links and
//! no link leads to it. The walk is HNSW's: a greedy descent from `entry` through the upper
//! levels, then a best-first beam of `ef` at level 0.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::io::Write;
use std::path::Path;

use tantivy::directory::OwnedBytes;

use crate::IndexError;
use crate::dense::graph_error;

const MAGIC: &[u8; 8] = b"SWLINKS1";
const HEADER: usize = 32;

/// One level's adjacency: the byte offsets of its member keys (upper levels), offsets and edges.
#[derive(Debug, Clone, Copy)]
struct Level {
    /// Byte offset of the ascending member keys; `None` at level 0, where every key is a member.
    keys: Option<usize>,
    members: usize,
    offsets: usize,
    edges: usize,
}

/// A memory-mapped `graph.links`.
pub(crate) struct Links {
    bytes: OwnedBytes,
    nodes: u64,
    linked: u64,
    entry: u64,
    levels: Vec<Level>,
}

impl std::fmt::Debug for Links {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Links")
            .field("nodes", &self.nodes)
            .field("levels", &self.levels.len())
            .finish()
    }
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(b)
}

/// Writes the links of `graph` (whose keys are `keys`, all below `nodes`) to `path`, through a
/// temporary file renamed when complete.
pub(crate) fn write(
    graph: &usearch::Index,
    keys: &[u64],
    nodes: u64,
    path: &Path,
) -> Result<(), IndexError> {
    if nodes > u64::from(u32::MAX) {
        return Err(graph_error(
            path,
            format!("{nodes} nodes; a graph holds at most 2^32 - 1 (shard the index)"),
        ));
    }
    let level_of: Vec<usize> = keys.iter().map(|&k| graph.level_of_key(k)).collect();
    let top = level_of.iter().copied().max().unwrap_or(0);
    // The first key on the top level, so that two exports of one graph are identical.
    let entry = keys
        .iter()
        .zip(&level_of)
        .find(|&(_, &l)| l == top)
        .map_or(0, |(&k, _)| k);
    let partial = path.with_extension("links.partial");
    let file = std::fs::File::create(&partial).map_err(|e| IndexError::io(&partial, e))?;
    let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
    let mut put = |bytes: &[u8]| {
        out.write_all(bytes)
            .map_err(|e| IndexError::io(&partial, e))
    };
    put(MAGIC)?;
    put(&nodes.to_le_bytes())?;
    put(&(top as u32 + 1).to_le_bytes())?;
    put(&(keys.len() as u32).to_le_bytes())?;
    put(&entry.to_le_bytes())?;
    let mut neighbours = Vec::new();
    for level in 0..=top {
        // Level 0 lists every key (a missing one has no links); upper levels, their members.
        let members: Vec<u64> = if level == 0 {
            (0..nodes).collect()
        } else {
            let mut m: Vec<u64> = keys
                .iter()
                .zip(&level_of)
                .filter(|&(_, &l)| l >= level)
                .map(|(&k, _)| k)
                .collect();
            m.sort_unstable();
            put(&(m.len() as u64).to_le_bytes())?;
            for &k in &m {
                put(&(k as u32).to_le_bytes())?;
            }
            m
        };
        let mut edges = Vec::new();
        let mut offset = 0u64;
        put(&offset.to_le_bytes())?;
        for &key in &members {
            neighbours.clear();
            neighbours.extend(graph.neighbors(key, level));
            for &n in &neighbours {
                if n >= nodes {
                    return Err(graph_error(
                        path,
                        format!("node {key} links to {n}, past the {nodes} nodes"),
                    ));
                }
                edges.push(n as u32);
            }
            offset += neighbours.len() as u64;
            put(&offset.to_le_bytes())?;
        }
        for e in edges {
            put(&e.to_le_bytes())?;
        }
    }
    out.into_inner()
        .map_err(|e| IndexError::io(&partial, e.into_error()))?
        .sync_all()
        .map_err(|e| IndexError::io(&partial, e))?;
    std::fs::rename(&partial, path).map_err(|e| IndexError::io(path, e))
}

/// A node and its similarity, ordered by similarity, then by key (so every walk is deterministic).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Scored(f32, u32);

impl Eq for Scored {}

impl Ord for Scored {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0.total_cmp(&other.0).then(other.1.cmp(&self.1))
    }
}

impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Links {
    /// Maps `path` and checks its layout (not every link: a link past the nodes is skipped when
    /// walked, and the checksums catch a damaged file).
    pub(crate) fn open(path: &Path) -> Result<Links, IndexError> {
        let bytes = crate::dense::map_file(path)?;
        let damaged = |why: String| graph_error(path, format!("{why}; rebuild the index"));
        let b = bytes.as_slice();
        if b.len() < HEADER || &b[..8] != MAGIC {
            return Err(damaged("not a stillweb graph links file".into()));
        }
        let nodes = u64_at(b, 8);
        let level_count = u32_at(b, 16) as usize;
        let linked = u64::from(u32_at(b, 20));
        let entry = u64_at(b, 24);
        let mut levels = Vec::with_capacity(level_count);
        let mut at = HEADER;
        let need = |at: usize, len: usize| -> Result<usize, IndexError> {
            at.checked_add(len)
                .filter(|&end| end <= b.len())
                .ok_or_else(|| damaged(format!("{} bytes, cut short", b.len())))
        };
        for level in 0..level_count {
            let (keys, members) = if level == 0 {
                (None, nodes as usize)
            } else {
                need(at, 8)?;
                let members = u64_at(b, at) as usize;
                at += 8;
                let keys = at;
                at = need(at, members.saturating_mul(4))?;
                (Some(keys), members)
            };
            let offsets = at;
            at = need(at, (members + 1).saturating_mul(8))?;
            let edge_count = u64_at(b, at - 8) as usize;
            let edges = at;
            at = need(at, edge_count.saturating_mul(4))?;
            levels.push(Level {
                keys,
                members,
                offsets,
                edges,
            });
        }
        if at != b.len() {
            return Err(damaged(format!("{} bytes, expected {at}", b.len())));
        }
        if linked > nodes || (nodes > 0 && (level_count == 0 || entry >= nodes)) {
            return Err(damaged(format!(
                "entry {entry}, {linked} linked of {nodes} nodes"
            )));
        }
        Ok(Links {
            bytes,
            nodes,
            linked,
            entry,
            levels,
        })
    }

    /// Keys that can be nodes (some may have no links).
    pub(crate) fn nodes(&self) -> u64 {
        self.nodes
    }

    /// Keys that are nodes of the graph.
    pub(crate) fn linked(&self) -> u64 {
        self.linked
    }

    /// The neighbours of `key` at `level` (none if it is not on that level).
    fn neighbours(&self, key: u32, level: usize) -> impl Iterator<Item = u32> + '_ {
        let b = self.bytes.as_slice();
        let l = self.levels[level];
        let slot = match l.keys {
            None => Some(key as usize).filter(|&k| k < l.members),
            Some(keys) => {
                let (mut lo, mut hi) = (0, l.members);
                while lo < hi {
                    let mid = (lo + hi) / 2;
                    if u32_at(b, keys + 4 * mid) < key {
                        lo = mid + 1;
                    } else {
                        hi = mid;
                    }
                }
                (lo < l.members && u32_at(b, keys + 4 * lo) == key).then_some(lo)
            }
        };
        let range = slot.map_or(0..0, |s| {
            u64_at(b, l.offsets + 8 * s) as usize..u64_at(b, l.offsets + 8 * (s + 1)) as usize
        });
        let nodes = self.nodes;
        range
            .map(move |i| u32_at(b, l.edges + 4 * i))
            .filter(move |&n| u64::from(n) < nodes)
    }

    /// The `count` nodes most similar to the query among those `allowed` passes, best first:
    /// `similarity(key)` scores a node, and `prefetch(key)` is called for each of a node's
    /// unseen neighbours before any is scored (their rows are scattered: fetched together, the
    /// memory waits overlap). The beam holds `max(ef, count)`; nodes the filter drops are walked
    /// through but never returned, so a filter does not cut the search short.
    pub(crate) fn search(
        &self,
        count: usize,
        ef: usize,
        similarity: impl Fn(u64) -> f32,
        prefetch: impl Fn(u64),
        allowed: impl Fn(u64) -> bool,
    ) -> Vec<(u64, f32)> {
        if self.nodes == 0 || count == 0 {
            return Vec::new();
        }
        let mut current = Scored(similarity(self.entry), self.entry as u32);
        for level in (1..self.levels.len()).rev() {
            loop {
                let mut moved = false;
                for n in self.neighbours(current.1, level) {
                    let s = Scored(similarity(u64::from(n)), n);
                    if s > current {
                        current = s;
                        moved = true;
                    }
                }
                if !moved {
                    break;
                }
            }
        }
        let ef = ef.max(count);
        let mut visited = Visited::new(self.nodes);
        visited.insert(current.1);
        let mut frontier = BinaryHeap::from([current]);
        let mut unseen = Vec::new();
        // The best `ef` allowed nodes so far, worst on top.
        let mut best: BinaryHeap<std::cmp::Reverse<Scored>> = BinaryHeap::new();
        if allowed(u64::from(current.1)) {
            best.push(std::cmp::Reverse(current));
        }
        while let Some(next) = frontier.pop() {
            if best.len() >= ef && best.peek().is_some_and(|w| next < w.0) {
                break;
            }
            unseen.clear();
            unseen.extend(self.neighbours(next.1, 0).filter(|&n| visited.insert(n)));
            for &n in &unseen {
                prefetch(u64::from(n));
            }
            for &n in &unseen {
                let s = Scored(similarity(u64::from(n)), n);
                if best.len() < ef || best.peek().is_some_and(|w| s > w.0) {
                    frontier.push(s);
                    if allowed(u64::from(n)) {
                        best.push(std::cmp::Reverse(s));
                        if best.len() > ef {
                            best.pop();
                        }
                    }
                }
            }
        }
        let mut out: Vec<Scored> = best.into_iter().map(|r| r.0).collect();
        out.sort_unstable_by(|a, b| b.cmp(a));
        out.truncate(count);
        out.into_iter().map(|s| (u64::from(s.1), s.0)).collect()
    }
}

/// The nodes a walk has seen: a bit per node, the words it set cleared again when it ends, kept
/// per thread so a search allocates nothing once warm.
struct Visited {
    bits: Vec<u64>,
    touched: Vec<usize>,
}

thread_local! {
    static VISITED: std::cell::RefCell<(Vec<u64>, Vec<usize>)> = const {
        std::cell::RefCell::new((Vec::new(), Vec::new()))
    };
}

impl Visited {
    fn new(nodes: u64) -> Visited {
        let (mut bits, touched) = VISITED.with(|v| std::mem::take(&mut *v.borrow_mut()));
        let words = nodes.div_ceil(64) as usize;
        if bits.len() < words {
            bits.resize(words, 0);
        }
        Visited { bits, touched }
    }

    /// Marks `node`; whether it was unmarked.
    fn insert(&mut self, node: u32) -> bool {
        let (word, bit) = (node as usize / 64, 1u64 << (node % 64));
        let w = &mut self.bits[word];
        if *w & bit != 0 {
            return false;
        }
        if *w == 0 {
            self.touched.push(word);
        }
        *w |= bit;
        true
    }
}

impl Drop for Visited {
    fn drop(&mut self) {
        for &word in &self.touched {
            self.bits[word] = 0;
        }
        self.touched.clear();
        let taken = (
            std::mem::take(&mut self.bits),
            std::mem::take(&mut self.touched),
        );
        VISITED.with(|v| *v.borrow_mut() = taken);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(seed: u64, dimension: usize) -> Vec<f32> {
        let mut state = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let mut v: Vec<f32> = (0..dimension)
            .map(|_| {
                state = state
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                ((state >> 33) as f32 / (1u64 << 31) as f32) - 0.5
            })
            .collect();
        stillweb_model_core::normalize(&mut v);
        v
    }

    fn built(rows: &[Vec<f32>], keys: &[u64], nodes: u64) -> (tempfile::TempDir, Links) {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(crate::dense::DOC_GRAPH);
        let graph = crate::dense::new_graph(&path, rows[0].len(), "f32").expect("graph");
        graph.reserve(keys.len()).expect("reserve");
        for (&key, row) in keys.iter().zip(rows) {
            graph.add(key, row).expect("add");
        }
        write(&graph, keys, nodes, &path).expect("write");
        (dir, Links::open(&path).expect("open"))
    }

    #[test]
    fn the_walk_finds_the_exact_neighbours_of_a_small_graph() {
        let dimension = 16;
        let rows: Vec<Vec<f32>> = (0..2_000).map(|i| unit(i, dimension)).collect();
        let keys: Vec<u64> = (0..rows.len() as u64).collect();
        let (_dir, links) = built(&rows, &keys, keys.len() as u64);
        assert_eq!(links.linked(), 2_000);
        let mut found = 0;
        for q in 0..50 {
            let query = unit(10_000 + q, dimension);
            let sim = |k: u64| stillweb_model_core::dot(&query, &rows[k as usize]);
            let mut exact: Vec<(u64, f32)> = keys.iter().map(|&k| (k, sim(k))).collect();
            exact.sort_by(|a, b| b.1.total_cmp(&a.1));
            let walked = links.search(10, 64, sim, |_| {}, |_| true);
            assert_eq!(walked.len(), 10);
            assert!(walked.windows(2).all(|w| w[0].1 >= w[1].1), "best first");
            found += walked
                .iter()
                .filter(|(k, _)| exact[..10].iter().any(|(e, _)| e == k))
                .count();
        }
        assert!(found >= 490, "recall@10 {found}/500");
    }

    #[test]
    fn a_filtered_walk_returns_only_allowed_nodes_and_enough_of_them() {
        let dimension = 8;
        let rows: Vec<Vec<f32>> = (0..3_000).map(|i| unit(i, dimension)).collect();
        let keys: Vec<u64> = (0..rows.len() as u64).collect();
        let (_dir, links) = built(&rows, &keys, keys.len() as u64);
        let query = unit(77_777, dimension);
        let sim = |k: u64| stillweb_model_core::dot(&query, &rows[k as usize]);
        let walked = links.search(20, 32, sim, |_| {}, |k| k % 7 == 3);
        assert_eq!(walked.len(), 20);
        assert!(walked.iter().all(|(k, _)| k % 7 == 3));
    }

    #[test]
    fn keys_without_links_are_never_reached_and_damage_is_named() {
        let dimension = 4;
        // Every third key is missing: a document without chunks.
        let keys: Vec<u64> = (0..150).filter(|k| k % 3 != 1).collect();
        let rows: Vec<Vec<f32>> = keys.iter().map(|&k| unit(k, dimension)).collect();
        let (dir, links) = built(&rows, &keys, 150);
        assert_eq!(links.linked(), 100);
        let query = unit(5, dimension);
        let walked = links.search(
            100,
            100,
            |k| stillweb_model_core::dot(&query, &unit(k, 4)),
            |_| {},
            |_| true,
        );
        assert_eq!(walked.len(), 100);
        assert!(walked.iter().all(|(k, _)| k % 3 != 1));

        let path = dir.path().join(crate::dense::DOC_GRAPH);
        let bytes = std::fs::read(&path).expect("read");
        std::fs::write(&path, &bytes[..bytes.len() - 3]).expect("cut");
        let err = Links::open(&path).expect_err("cut short");
        assert!(err.to_string().contains("graph.links"), "{err}");
        assert!(err.to_string().contains("rebuild"), "{err}");
    }
}
