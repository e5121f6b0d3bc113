//! The document graph on disk as links only: usearch builds the HNSW graph, and the build keeps
//! its adjacency lists (`dense/graph.links`) but not usearch's copy of every vector, so each
//! vector is stored once — the rows stage 2 already reads ([`crate::chunk_vectors`]) — and the
//! walk scores nodes from those rows, memory-mapped like everything else a query touches.
//!
//! A large graph is built as segments, each an HNSW graph over a range of the keys (as a Lucene
//! index holds a graph per segment): usearch builds a graph in memory, so one graph per index
//! made a build's peak grow with the corpus, while a segment's is bounded by its size. A search
//! walks every segment and keeps the best.
//!
//! The file, little-endian: one segment as `SEGMENT`, or several as
//! `b"SWLINKS2"  keys: u64  segments: u64` followed by each segment's `base: u64` (its first key)
//! and `SEGMENT` over keys `base..base + nodes`, the segments in key order, covering every key.
//!
//! ```text
//! SEGMENT:
//! b"SWLINKS1"  nodes: u64  levels: u32  linked: u32  entry: u64
//! level 0:     offsets: u64 × (nodes + 1)          edges: u32 × offsets[nodes]
//! level l ≥ 1: members: u64  keys: u32 × members (ascending)
//!              offsets: u64 × (members + 1)        edges: u32 × offsets[members]
//! ```
//!
//! A segment's keys are local, `0..nodes`; a key that is no node (a document without chunks)
//! has no links and no link leads to it. The walk is HNSW's: a greedy descent from `entry`
//! through the upper levels, then a best-first beam of `ef` at level 0.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::io::Write;
use std::path::{Path, PathBuf};

use tantivy::directory::OwnedBytes;

use crate::IndexError;
use crate::dense::graph_error;

const MAGIC: &[u8; 8] = b"SWLINKS1";
const SEGMENTED_MAGIC: &[u8; 8] = b"SWLINKS2";
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

/// One segment's graph: its keys are `base..base + nodes`, stored as `0..nodes`.
#[derive(Debug)]
struct Segment {
    base: u64,
    nodes: u64,
    linked: u64,
    entry: u64,
    levels: Vec<Level>,
}

/// A memory-mapped `graph.links`.
pub(crate) struct Links {
    bytes: OwnedBytes,
    nodes: u64,
    segments: Vec<Segment>,
}

impl std::fmt::Debug for Links {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Links")
            .field("nodes", &self.nodes)
            .field("segments", &self.segments.len())
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

/// Writes the links of `graph` (whose keys are `keys`, all below `nodes`) to `path` as one
/// segment.
pub(crate) fn write(
    graph: &usearch::Index,
    keys: &[u64],
    nodes: u64,
    path: &Path,
) -> Result<(), IndexError> {
    let mut writer = LinksWriter::create(path, nodes, 1)?;
    writer.append(graph, keys, 0..nodes)?;
    writer.finish()
}

/// Writes a graph's segments one after another, so only the one being built is in memory,
/// through a temporary file renamed when the last is written.
pub(crate) struct LinksWriter {
    path: PathBuf,
    partial: PathBuf,
    out: std::io::BufWriter<std::fs::File>,
    nodes: u64,
    segments: u64,
    written: u64,
    next_base: u64,
}

impl LinksWriter {
    /// A file for a graph over keys `0..nodes` in `segments` segments.
    pub(crate) fn create(path: &Path, nodes: u64, segments: u64) -> Result<Self, IndexError> {
        let partial = path.with_extension("links.partial");
        let file = std::fs::File::create(&partial).map_err(|e| IndexError::io(&partial, e))?;
        let mut writer = LinksWriter {
            path: path.to_path_buf(),
            partial,
            out: std::io::BufWriter::with_capacity(1 << 20, file),
            nodes,
            segments,
            written: 0,
            next_base: 0,
        };
        if segments != 1 {
            writer.put(SEGMENTED_MAGIC)?;
            writer.put(&nodes.to_le_bytes())?;
            writer.put(&segments.to_le_bytes())?;
        }
        Ok(writer)
    }

    fn put(&mut self, bytes: &[u8]) -> Result<(), IndexError> {
        self.out
            .write_all(bytes)
            .map_err(|e| IndexError::io(&self.partial, e))
    }

    /// Appends the segment over keys `range` (the next ones): `graph`'s keys are `keys`, local
    /// to the range (key `k` stands for `range.start + k`).
    pub(crate) fn append(
        &mut self,
        graph: &usearch::Index,
        keys: &[u64],
        range: std::ops::Range<u64>,
    ) -> Result<(), IndexError> {
        let path = self.path.clone();
        if range.start != self.next_base || range.end > self.nodes || self.written == self.segments
        {
            return Err(graph_error(
                &path,
                format!(
                    "segment {range:?} after {} of {} segments ending at {} of {} keys",
                    self.written, self.segments, self.next_base, self.nodes
                ),
            ));
        }
        let nodes = range.end - range.start;
        if nodes > u64::from(u32::MAX) {
            return Err(graph_error(
                &path,
                format!("{nodes} nodes; a graph segment holds at most 2^32 - 1"),
            ));
        }
        if self.segments != 1 {
            self.put(&range.start.to_le_bytes())?;
        }
        let level_of: Vec<usize> = keys.iter().map(|&k| graph.level_of_key(k)).collect();
        let top = level_of.iter().copied().max().unwrap_or(0);
        // The first key on the top level, so that two exports of one graph are identical.
        let entry = keys
            .iter()
            .zip(&level_of)
            .find(|&(_, &l)| l == top)
            .map_or(0, |(&k, _)| k);
        self.put(MAGIC)?;
        self.put(&nodes.to_le_bytes())?;
        self.put(&(top as u32 + 1).to_le_bytes())?;
        self.put(&(keys.len() as u32).to_le_bytes())?;
        self.put(&entry.to_le_bytes())?;
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
                self.put(&(m.len() as u64).to_le_bytes())?;
                for &k in &m {
                    self.put(&(k as u32).to_le_bytes())?;
                }
                m
            };
            let mut edges = Vec::new();
            let mut offset = 0u64;
            self.put(&offset.to_le_bytes())?;
            for &key in &members {
                neighbours.clear();
                neighbours.extend(graph.neighbors(key, level));
                for &n in &neighbours {
                    if n >= nodes {
                        return Err(graph_error(
                            &path,
                            format!("node {key} links to {n}, past the segment's {nodes} nodes"),
                        ));
                    }
                    edges.push(n as u32);
                }
                offset += neighbours.len() as u64;
                self.put(&offset.to_le_bytes())?;
            }
            for e in edges {
                self.put(&e.to_le_bytes())?;
            }
        }
        self.written += 1;
        self.next_base = range.end;
        Ok(())
    }

    /// Syncs the file and renames it into place once every segment is written.
    pub(crate) fn finish(self) -> Result<(), IndexError> {
        if self.written != self.segments || self.next_base != self.nodes {
            return Err(graph_error(
                &self.path,
                format!(
                    "{} of {} segments written, up to key {} of {}",
                    self.written, self.segments, self.next_base, self.nodes
                ),
            ));
        }
        let partial = self.partial;
        self.out
            .into_inner()
            .map_err(|e| IndexError::io(&partial, e.into_error()))?
            .sync_all()
            .map_err(|e| IndexError::io(&partial, e))?;
        std::fs::rename(&partial, &self.path).map_err(|e| IndexError::io(&self.path, e))
    }
}

/// A node and its similarity, ordered by similarity, then by key (so every walk is deterministic).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Scored(f32, u64);

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
        let (nodes, segments) = if b.len() >= 24 && &b[..8] == SEGMENTED_MAGIC {
            let (nodes, count) = (u64_at(b, 8), u64_at(b, 16));
            let mut segments = Vec::new();
            let mut at = 24;
            for _ in 0..count {
                if at + 8 > b.len() {
                    return Err(damaged(format!("{} bytes, cut short", b.len())));
                }
                let base = u64_at(b, at);
                let (segment, end) = Segment::parse(b, at + 8, base).map_err(&damaged)?;
                segments.push(segment);
                at = end;
            }
            if at != b.len() {
                return Err(damaged(format!("{} bytes, expected {at}", b.len())));
            }
            (nodes, segments)
        } else {
            let (segment, end) = Segment::parse(b, 0, 0).map_err(&damaged)?;
            if end != b.len() {
                return Err(damaged(format!("{} bytes, expected {end}", b.len())));
            }
            (segment.nodes, vec![segment])
        };
        let mut next = 0;
        for s in &segments {
            if s.base != next {
                return Err(damaged(format!(
                    "a segment starts at key {}, expected {next}",
                    s.base
                )));
            }
            next = s.base + s.nodes;
        }
        if next != nodes {
            return Err(damaged(format!(
                "the segments cover {next} keys of {nodes}"
            )));
        }
        Ok(Links {
            bytes,
            nodes,
            segments,
        })
    }

    /// Keys that can be nodes (some may have no links).
    pub(crate) fn nodes(&self) -> u64 {
        self.nodes
    }

    /// Keys that are nodes of the graph.
    pub(crate) fn linked(&self) -> u64 {
        self.segments.iter().map(|s| s.linked).sum()
    }

    /// The graph's segments (one unless it was built in parts).
    pub(crate) fn segments(&self) -> usize {
        self.segments.len()
    }

    /// The `count` nodes most similar to the query among those `allowed` passes, best first:
    /// `similarity(key)` scores a node, and `prefetch(key)` is called for each of a node's
    /// unseen neighbours before any is scored (their rows are scattered: fetched together, the
    /// memory waits overlap). The beam holds `max(ef, count)`; nodes the filter drops are walked
    /// through but never returned, so a filter does not cut the search short.
    ///
    /// The segments are searched together: each segment's descent gives an entry to one beam
    /// over all of them, and a candidate is expanded while it beats the worst of that beam or
    /// of its own segment's, `ef / segments` wide. So every segment is walked at least that far
    /// (one beam alone stopped walking a segment whose good region lay behind weaker nodes),
    /// a segment holding many of the best is walked as far as one graph would be, and a search
    /// costs less than a full walk per segment. With one segment this is HNSW's walk.
    pub(crate) fn search(
        &self,
        count: usize,
        ef: usize,
        similarity: impl Fn(u64) -> f32,
        prefetch: impl Fn(u64),
        allowed: impl Fn(u64) -> bool,
    ) -> Vec<(u64, f32)> {
        if count == 0 {
            return Vec::new();
        }
        let b = self.bytes.as_slice();
        let ef = ef.max(count);
        let ef_own = ef.div_ceil(self.segments.len().max(1));
        let mut visited = Visited::new(self.nodes);
        // Candidates to expand, best first, each with its segment's index.
        let mut frontier: BinaryHeap<(Scored, usize)> = BinaryHeap::new();
        // The best `ef` allowed nodes so far, and each segment's best `ef_own`; worst on top.
        let mut best = Beam::new(ef);
        let mut own: Vec<Beam> = self.segments.iter().map(|_| Beam::new(ef_own)).collect();
        for (i, segment) in self.segments.iter().enumerate() {
            if segment.linked == 0 {
                continue;
            }
            let entry = segment.descend(b, &similarity);
            visited.insert(entry.1);
            frontier.push((entry, i));
            if allowed(entry.1) {
                best.offer(entry);
                own[i].offer(entry);
            }
        }
        let mut unseen = Vec::new();
        while let Some((next, i)) = frontier.pop() {
            if !best.reaches(next) && !own[i].reaches(next) {
                if self.segments.len() == 1 {
                    break;
                }
                continue;
            }
            let segment = &self.segments[i];
            unseen.clear();
            unseen.extend(
                segment
                    .neighbours(b, (next.1 - segment.base) as u32, 0)
                    .map(|n| segment.base + u64::from(n))
                    .filter(|&n| visited.insert(n)),
            );
            for &n in &unseen {
                prefetch(n);
            }
            for &n in &unseen {
                let s = Scored(similarity(n), n);
                if best.admits(s) || own[i].admits(s) {
                    frontier.push((s, i));
                    if allowed(n) {
                        best.offer(s);
                        own[i].offer(s);
                    }
                }
            }
        }
        let mut out: Vec<Scored> = best.0.into_iter().map(|r| r.0).collect();
        out.sort_unstable_by(|a, b| b.cmp(a));
        out.truncate(count);
        out.into_iter().map(|s| (s.1, s.0)).collect()
    }
}

/// The best `.1` nodes seen, worst on top.
struct Beam(BinaryHeap<std::cmp::Reverse<Scored>>, usize);

impl Beam {
    fn new(width: usize) -> Beam {
        Beam(BinaryHeap::with_capacity(width + 1), width)
    }

    /// Whether `s` would enter: the beam is not full, or `s` beats its worst.
    fn admits(&self, s: Scored) -> bool {
        self.0.len() < self.1 || self.0.peek().is_some_and(|w| s > w.0)
    }

    /// Whether a candidate `s` is still worth expanding: the beam is not full, or `s` is no
    /// worse than its worst (it may be that node itself).
    fn reaches(&self, s: Scored) -> bool {
        self.0.len() < self.1 || self.0.peek().is_some_and(|w| s >= w.0)
    }

    fn offer(&mut self, s: Scored) {
        if self.admits(s) {
            self.0.push(std::cmp::Reverse(s));
            if self.0.len() > self.1 {
                self.0.pop();
            }
        }
    }
}

impl Segment {
    /// Reads the `SEGMENT` at byte `start` of `b`, whose keys begin at `base`; where it ends.
    fn parse(b: &[u8], start: usize, base: u64) -> Result<(Segment, usize), String> {
        let need = |at: usize, len: usize| -> Result<usize, String> {
            at.checked_add(len)
                .filter(|&end| end <= b.len())
                .ok_or_else(|| format!("{} bytes, cut short", b.len()))
        };
        need(start, HEADER)?;
        if &b[start..start + 8] != MAGIC {
            return Err("not a stillweb graph links file".into());
        }
        let nodes = u64_at(b, start + 8);
        let level_count = u32_at(b, start + 16) as usize;
        let linked = u64::from(u32_at(b, start + 20));
        let entry = u64_at(b, start + 24);
        let mut levels = Vec::with_capacity(level_count.min(64));
        let mut at = start + HEADER;
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
            at = need(at, members.saturating_add(1).saturating_mul(8))?;
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
        if linked > nodes || (nodes > 0 && (level_count == 0 || entry >= nodes)) {
            return Err(format!("entry {entry}, {linked} linked of {nodes} nodes"));
        }
        let segment = Segment {
            base,
            nodes,
            linked,
            entry,
            levels,
        };
        Ok((segment, at))
    }

    /// The neighbours of local `key` at `level` (none if it is not on that level).
    fn neighbours<'a>(
        &self,
        b: &'a [u8],
        key: u32,
        level: usize,
    ) -> impl Iterator<Item = u32> + 'a {
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

    /// HNSW's greedy descent from the entry through the upper levels: where this segment's
    /// level-0 walk starts (its key global).
    fn descend(&self, b: &[u8], similarity: &impl Fn(u64) -> f32) -> Scored {
        let score = |local: u32| {
            let key = self.base + u64::from(local);
            Scored(similarity(key), key)
        };
        let mut current = score(self.entry as u32);
        for level in (1..self.levels.len()).rev() {
            loop {
                let mut moved = false;
                for n in self.neighbours(b, (current.1 - self.base) as u32, level) {
                    let s = score(n);
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
        current
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
    fn insert(&mut self, node: u64) -> bool {
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

    /// Of 50 queries' (seeded from `seed`) exact 10 nearest rows, how many a walk finds; each
    /// walk returns 10, best first.
    fn found_of_top_10(links: &Links, rows: &[Vec<f32>], seed: u64) -> usize {
        let mut found = 0;
        for q in 0..50 {
            let query = unit(seed + q, rows[0].len());
            let sim = |k: u64| stillweb_model_core::dot(&query, &rows[k as usize]);
            let mut exact: Vec<(u64, f32)> = (0..rows.len() as u64).map(|k| (k, sim(k))).collect();
            exact.sort_by(|a, b| b.1.total_cmp(&a.1));
            let walked = links.search(10, 64, sim, |_| {}, |_| true);
            assert_eq!(walked.len(), 10);
            assert!(walked.windows(2).all(|w| w[0].1 >= w[1].1), "best first");
            found += walked
                .iter()
                .filter(|(k, _)| exact[..10].iter().any(|(e, _)| e == k))
                .count();
        }
        found
    }

    #[test]
    fn the_walk_finds_the_exact_neighbours_of_a_small_graph() {
        let dimension = 16;
        let rows: Vec<Vec<f32>> = (0..2_000).map(|i| unit(i, dimension)).collect();
        let keys: Vec<u64> = (0..rows.len() as u64).collect();
        let (_dir, links) = built(&rows, &keys, keys.len() as u64);
        assert_eq!(links.linked(), 2_000);
        let found = found_of_top_10(&links, &rows, 10_000);
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

    #[test]
    fn segments_are_walked_together_and_a_cut_or_misordered_file_is_refused() {
        let dimension = 16;
        let rows: Vec<Vec<f32>> = (0..3_000).map(|i| unit(i, dimension)).collect();
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join(crate::dense::DOC_GRAPH);
        let mut writer = LinksWriter::create(&path, 3_000, 3).expect("create");
        for part in [0..1_000u64, 1_000..2_500, 2_500..3_000] {
            let graph = crate::dense::new_graph(&path, dimension, "f32").expect("graph");
            graph.reserve(1_500).expect("reserve");
            let keys: Vec<u64> = (0..part.end - part.start).collect();
            for &k in &keys {
                graph.add(k, &rows[(part.start + k) as usize]).expect("add");
            }
            writer.append(&graph, &keys, part).expect("append");
        }
        writer.finish().expect("finish");
        let links = Links::open(&path).expect("open");
        assert_eq!(
            (links.segments(), links.nodes(), links.linked()),
            (3, 3_000, 3_000)
        );
        let found = found_of_top_10(&links, &rows, 20_000);
        eprintln!("3 segments: recall@10 {found}/500");
        assert!(found >= 490, "recall@10 {found}/500");

        let bytes = std::fs::read(&path).expect("read");
        std::fs::write(&path, &bytes[..bytes.len() - 5]).expect("cut");
        let err = Links::open(&path).expect_err("cut short");
        assert!(err.to_string().contains("rebuild"), "{err}");

        let graph = crate::dense::new_graph(&path, dimension, "f32").expect("graph");
        let mut writer = LinksWriter::create(&path, 3_000, 2).expect("create");
        let err = writer.append(&graph, &[], 10..20).expect_err("gap");
        assert!(err.to_string().contains("segment"), "{err}");
        writer.append(&graph, &[], 0..20).expect("first");
        let err = writer.finish().expect_err("unfinished");
        assert!(err.to_string().contains("1 of 2 segments"), "{err}");
    }
}
