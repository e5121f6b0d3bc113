//! Building an index from a corpus manifest: read every source in order, drop duplicate URLs,
//! chunk, write both tantivy indexes into a temporary directory, verify counts and checksums, and
//! publish by rename so that readers never see a half-built index.

mod reuse;
pub mod revector;
pub(crate) mod vectors;

use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use stillweb_corpus::Document;
use stillweb_corpus::chunk::{Chunk, ChunkerConfig, chunk_text};
use stillweb_corpus::ingest::{self, Item, SourceContext, derive_title};
use stillweb_corpus::manifest::{CorpusManifest, sha256_file, source_digest};
use stillweb_corpus::url_norm::{host_of, normalize_url};
use tantivy::store::{Compressor, ZstdCompressor};
use tantivy::{Index, IndexSettings, IndexWriter, TantivyDocument};
use tracing::{info, warn};

use crate::IndexError;
use stillweb_model_core::Embedder;

use crate::analyzer::{ANALYZER, ANALYZER_DESCRIPTION, english};
use crate::dense::{DenseManifest, DocVectors};
use crate::doc_ids::DocIdWriter;
use crate::manifest::{DateReport, FORMAT_VERSION, FileReport, IndexManifest, SourceReport};
use crate::overlay::Below;
use crate::schema::{ChunkFields, DocFields};
use crate::shard::{GlobalOrds, ShardManifest, ShardOf, shard_of};
use reuse::ReusedVectors;
use vectors::ChunkVectorWriter;

use crate::chunk_vectors::Precision;

/// Bad records logged one by one per file before the log switches to a summary.
const BAD_RECORDS_LOGGED: u64 = 20;

/// How new indexes store chunk vectors: i8 holds a quarter of f32's bytes, and on SciFact and
/// the fabricated items it scored within 0.001 nDCG@10 and 0.01 gold@1 of f32 (BENCHMARKS.md,
/// the storage diet).
pub const CHUNK_PRECISION: Precision = Precision::I8;

/// tantivy's indexing buffer per index, in MiB, by default: the two indexes' buffers are most
/// of a large build's peak while it reads its sources (at 256 MiB the ~1M-chunk build held
/// ~510 MiB in them; BENCHMARKS.md, memory on one machine), and smaller buffers only mean more
/// segments to merge at the end.
pub const WRITER_MEMORY_MIB: usize = 64;

/// Knobs of a build.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// A source fails the build when more than this share of its records is bad.
    pub max_bad_fraction: f64,
    /// tantivy indexing memory budget, per index, in bytes: the text indexes' share of a
    /// build's peak (a buffer is written out as a segment when full, and the segments merged
    /// at the end).
    pub writer_memory_bytes: usize,
    /// Replace an existing index at the output path.
    pub force: bool,
    pub chunker: ChunkerConfig,
    /// How documents are represented in the dense document index (when an embedder is given).
    pub doc_vectors: DocVectors,
    /// How chunk vectors are stored (the graph is built from full-precision vectors either way).
    pub chunk_precision: Precision,
    /// Threads inserting the document graph's nodes; 0: one per core. 1 makes the graph
    /// reproducible byte for byte (more threads are faster, but their graphs differ a little).
    pub graph_threads: usize,
    /// Nodes per document graph segment at most ([`crate::dense::GRAPH_SEGMENT_NODES`]): the
    /// graph's share of the build's peak memory, against one more walk per segment a search.
    pub graph_segment_nodes: u64,
    /// Build only this shard of a set (see [`crate::shard`]).
    pub shard: Option<ShardOf>,
    /// An earlier build (same model, engine and chunker; f32 chunk vectors) whose stored vectors
    /// are taken for the documents it indexed unchanged, instead of embedding them again (see
    /// `build/reuse.rs`).
    pub reuse_vectors: Option<PathBuf>,
    /// Build an overlay of these layers (the base index, then its overlays in order; see
    /// [`crate::overlay`]): only the manifest's documents, under ordinals after theirs, refusing
    /// URLs they hold. Empty: an index of its own.
    pub overlay_of: Vec<PathBuf>,
    /// The preset whose embedder this build uses, recorded in the manifest.
    pub preset: Option<crate::search::Preset>,
}

impl Default for BuildOptions {
    fn default() -> Self {
        BuildOptions {
            max_bad_fraction: 0.01,
            writer_memory_bytes: WRITER_MEMORY_MIB << 20,
            force: false,
            chunker: ChunkerConfig::default(),
            doc_vectors: DocVectors::BestChunk,
            chunk_precision: CHUNK_PRECISION,
            graph_threads: 0,
            graph_segment_nodes: crate::dense::GRAPH_SEGMENT_NODES,
            shard: None,
            reuse_vectors: None,
            overlay_of: Vec::new(),
            preset: None,
        }
    }
}

/// What a build produced (also written to the index as its manifest).
#[derive(Debug, Clone)]
pub struct BuildReport {
    pub manifest: IndexManifest,
    pub elapsed: Duration,
}

/// Builds the lexical index described by `corpus` at `out` (no dense vectors).
pub fn build_index(
    corpus: &CorpusManifest,
    out: &Path,
    options: &BuildOptions,
) -> Result<BuildReport, IndexError> {
    build_index_with(corpus, out, options, None)
}

/// Builds the index described by `corpus` at `out`; with an embedder, every chunk is embedded and a
/// dense document index is built too.
pub fn build_index_with(
    corpus: &CorpusManifest,
    out: &Path,
    options: &BuildOptions,
    embedder: Option<&mut dyn Embedder>,
) -> Result<BuildReport, IndexError> {
    let started = Instant::now();
    if out.exists() && !options.force {
        return Err(IndexError::Exists {
            path: out.to_path_buf(),
        });
    }
    // Resolve every source and check checksums before any work, so a wrong path fails fast.
    let mut plans = Vec::new();
    for index in 0..corpus.sources.len() {
        plans.push(plan_source(corpus, index)?);
    }
    let manifest = stage_and_publish(out, options.force, |tmp| {
        build_into(tmp, corpus, plans, options, embedder)
    })?;
    let elapsed = started.elapsed();
    info!(
        path = %out.display(),
        build_id = %manifest.build_id,
        documents = manifest.documents,
        chunks = manifest.chunks,
        elapsed_s = elapsed.as_secs_f64(),
        "index published"
    );
    Ok(BuildReport { manifest, elapsed })
}

/// Builds shards of the set at `set` (`set/shard-I`): shard `only`, as one job of many (the set
/// is finalized by [`crate::shard::finalize`] once every shard exists), or all `count` one
/// after another, then finalizes the set.
pub fn build_shards(
    corpus: &CorpusManifest,
    set: &Path,
    count: u32,
    only: Option<u32>,
    options: &BuildOptions,
    mut embedder: Option<&mut dyn Embedder>,
) -> Result<Vec<BuildReport>, IndexError> {
    let invalid = |reason: String| IndexError::Shards {
        path: set.to_path_buf(),
        reason,
    };
    if count == 0 {
        return Err(invalid("--shards must be at least 1".into()));
    }

    if let Some(i) = only.filter(|&i| i >= count) {
        return Err(invalid(format!(
            "--shard {i} is outside 0..{count} (shards are numbered from 0)"
        )));
    }
    let mut reports = Vec::new();
    for index in only.map_or(0..count, |i| i..i + 1) {
        let options = BuildOptions {
            shard: Some(ShardOf { index, count }),
            // An overlay set's shard I goes over the base set's shard I.
            overlay_of: options
                .overlay_of
                .iter()
                .map(|set| crate::shard::shard_dir(set, index))
                .collect(),
            ..options.clone()
        };
        let out = crate::shard::shard_dir(set, index);
        reports.push(build_index_with(
            corpus,
            &out,
            &options,
            embedder.as_mut().map(|e| &mut **e as &mut dyn Embedder),
        )?);
    }
    if only.is_none() {
        crate::shard::finalize_over(set, &options.overlay_of)?;
    }
    Ok(reports)
}

/// The temporary directory beside `out` that an index for `out` is built in (`.NAME.tmp-PID`),
/// to be published with [`publish`]. Refuses an existing `out` unless `force`; removes what
/// killed builds of the same output left behind.
fn staging_dir(out: &Path, force: bool) -> Result<PathBuf, IndexError> {
    let parent = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| IndexError::io(parent, e))?;
    let out = parent.join(out.file_name().unwrap_or("index".as_ref()));
    remove_abandoned_builds(&out);
    if out.exists() && !force {
        return Err(IndexError::Exists { path: out });
    }
    Ok(sibling(&out, "tmp", std::process::id()))
}

/// `.NAME.KIND-PID` beside `out`: a build's staging directory (`tmp`), or an index it moved
/// aside while publishing (`old`).
fn sibling(out: &Path, kind: &str, pid: u32) -> PathBuf {
    let name = out
        .file_name()
        .map_or("index".into(), |n| n.to_string_lossy().into_owned());
    out.with_file_name(format!(".{name}.{kind}-{pid}"))
}

/// Clears what earlier builds of `out` left when they were killed (directories of processes that
/// are gone): staging directories are removed, and an index moved aside while publishing is put
/// back if `out` is missing (removed otherwise), so interrupted builds neither pile up nor lose
/// the index they were replacing.
fn remove_abandoned_builds(out: &Path) {
    let (Some(parent), Some(name)) = (out.parent(), out.file_name()) else {
        return;
    };
    let name = name.to_string_lossy();
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    // Sorted, so that of several moved-aside indexes the same one is restored every time.
    let mut entries: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
    entries.sort();
    for path in entries {
        let file_name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let Some((kind, pid)) = file_name.as_deref().and_then(|f| {
            let rest = f.strip_prefix(&format!(".{name}."))?;
            let (kind, pid) = rest.split_once('-')?;
            Some((kind.to_string(), pid.parse::<u32>().ok()?))
        }) else {
            continue;
        };
        let alive = pid != std::process::id() && Path::new(&format!("/proc/{pid}")).exists();
        if alive || !(kind == "tmp" || kind == "old") {
            continue;
        }
        if kind == "old" && !out.exists() {
            info!(path = %path.display(), "restoring the index an interrupted build had moved aside");
            if std::fs::rename(&path, out).is_ok() {
                continue;
            }
        }
        info!(path = %path.display(), "removing an abandoned build directory");
        let _ = std::fs::remove_dir_all(&path);
    }
}

struct SourcePlan {
    report: SourceReport,
    files: Vec<PathBuf>,
    context: SourceContext,
    expected_documents: Option<u64>,
}

fn plan_source(corpus: &CorpusManifest, index: usize) -> Result<SourcePlan, IndexError> {
    let spec = &corpus.sources[index];
    let name = corpus.source_name(index);
    let files = corpus.resolve(index)?;
    let mut reports = Vec::new();
    let mut hashes = Vec::new();
    for file in &files {
        let sha256 = sha256_file(file)?;
        let bytes = std::fs::metadata(file)
            .map_err(|e| IndexError::io(file, e))?
            .len();
        let file_name = file
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        hashes.push((file_name, sha256.clone()));
        reports.push(FileReport {
            path: file.display().to_string(),
            sha256,
            bytes,
            ignored: ingest::companion_reason(file, spec.format).map(str::to_string),
            ..FileReport::default()
        });
    }
    let digest = source_digest(&hashes);
    if let Some(expected) = &spec.sha256
        && !expected.eq_ignore_ascii_case(&digest)
    {
        return Err(stillweb_corpus::CorpusError::Checksum {
            what: format!("source `{name}` ({})", spec.path),
            expected: expected.clone(),
            actual: digest,
        }
        .into());
    }
    Ok(SourcePlan {
        report: SourceReport {
            name: name.clone(),
            format: spec.format,
            license: spec.license.clone(),
            sha256: digest,
            files: reports,
        },
        files,
        context: SourceContext {
            name,
            default_date: spec
                .default_date
                .clone()
                .unwrap_or_else(|| stillweb_corpus::manifest::NO_DATE.into()),
        },
        expected_documents: spec.expected_documents,
    })
}

struct Writers<'e> {
    docs: IndexWriter,
    chunks: IndexWriter,
    doc_fields: DocFields,
    chunk_fields: ChunkFields,
    doc_count: u64,
    chunk_count: u64,
    ids: DocIdWriter,
    dense: Option<DenseBuild<'e>>,
    dates: DateReport,
}

/// Chunks waiting for their vectors, in chunk-id order, and where the vectors go.
struct DenseBuild<'e> {
    embedder: &'e mut dyn Embedder,
    writer: ChunkVectorWriter,
    pending: Vec<Pending>,
    /// How many of `pending` are texts to embed.
    pending_texts: usize,
    chunk_counts: Vec<u32>,
    reuse: Option<ReusedVectors>,
}

/// A chunk waiting to be written: its text to embed, or a vector an earlier build stored.
enum Pending {
    Embed(String),
    Stored(Vec<f32>),
}

/// Chunks embedded per model call batch from the indexer.
const EMBED_BATCH: usize = 1024;

impl DenseBuild<'_> {
    /// Queues the chunks of one document: `texts` to embed, unless `stored` has their vectors.
    fn push(
        &mut self,
        texts: Vec<String>,
        stored: Option<Vec<Vec<f32>>>,
    ) -> Result<(), IndexError> {
        match stored {
            Some(vectors) => self
                .pending
                .extend(vectors.into_iter().map(Pending::Stored)),
            None => {
                self.pending_texts += texts.len();
                self.pending.extend(texts.into_iter().map(Pending::Embed));
            }
        }
        if self.pending_texts >= EMBED_BATCH || self.pending.len() >= 4 * EMBED_BATCH {
            self.flush()?;
        }
        Ok(())
    }

    /// Embeds the queued texts in one model call and writes every queued vector in order.
    fn flush(&mut self) -> Result<(), IndexError> {
        let texts: Vec<&str> = self
            .pending
            .iter()
            .filter_map(|p| match p {
                Pending::Embed(text) => Some(text.as_str()),
                Pending::Stored(_) => None,
            })
            .collect();
        let mut embedded = if texts.is_empty() {
            Vec::new()
        } else {
            self.embedder
                .embed_documents(&texts)
                .map_err(|e| IndexError::Model(e.to_string()))?
        }
        .into_iter();
        for pending in std::mem::take(&mut self.pending) {
            let vector = match pending {
                Pending::Stored(vector) => vector,
                Pending::Embed(_) => embedded.next().ok_or_else(|| {
                    IndexError::Model("the embedder returned fewer vectors than texts".into())
                })?,
            };
            self.writer.write(&vector)?;
        }
        self.pending_texts = 0;
        Ok(())
    }
}

/// Stored text (titles, URLs, full pages for visits) is most of the document index's bytes, and
/// a served index keeps the pages it reads mapped: with zstd in 32 KiB blocks instead of
/// tantivy's default LZ4 in 16 KiB blocks, the document index of the 971k-chunk bench corpus went
/// from 422 to 302 MB, for more CPU per fetched block.
/// The compressor is recorded per store, so indexes built with LZ4 stay readable.
fn store_settings() -> IndexSettings {
    IndexSettings {
        docstore_compression: Compressor::Zstd(ZstdCompressor {
            compression_level: Some(3),
        }),
        docstore_blocksize: 32 * 1024,
        ..IndexSettings::default()
    }
}

fn create_index(dir: &Path, schema: tantivy::schema::Schema) -> Result<Index, IndexError> {
    std::fs::create_dir_all(dir).map_err(|e| IndexError::io(dir, e))?;
    let index = Index::builder()
        .schema(schema)
        .settings(store_settings())
        .create_in_dir(dir)?;
    index.tokenizers().register(ANALYZER, english());
    Ok(index)
}

fn build_into(
    tmp: &Path,
    corpus: &CorpusManifest,
    plans: Vec<SourcePlan>,
    options: &BuildOptions,
    embedder: Option<&mut dyn Embedder>,
) -> Result<IndexManifest, IndexError> {
    let (doc_schema, doc_fields) = DocFields::schema();
    let (chunk_schema, chunk_fields) = ChunkFields::schema();
    let doc_index = create_index(&tmp.join("docs"), doc_schema)?;
    let chunk_index = create_index(&tmp.join("chunks"), chunk_schema)?;
    let mut writers = Writers {
        docs: doc_index.writer(options.writer_memory_bytes)?,
        chunks: chunk_index.writer(options.writer_memory_bytes)?,
        doc_fields,
        chunk_fields,
        doc_count: 0,
        chunk_count: 0,
        ids: DocIdWriter::create(tmp)?,
        dense: None,
        dates: DateReport::default(),
    };
    let below = match options.overlay_of.as_slice() {
        [] => None,
        layers => Some(Below::open(layers, options.shard)?),
    };
    if let Some(below) = &below {
        let model = embedder.as_ref().map(|e| (e.model_id(), e.dimension()));
        below.check_compatible(&options.chunker, model)?;
    }
    let mut dense_model = None;
    if let Some(embedder) = embedder {
        dense_model = Some((
            embedder.model_id().to_string(),
            embedder.dimension(),
            embedder.engine().to_string(),
        ));
        let reuse = match &options.reuse_vectors {
            Some(dir) => Some(ReusedVectors::open(
                dir,
                embedder.model_id(),
                embedder.dimension(),
                embedder.engine(),
                &options.chunker,
            )?),
            None => None,
        };
        writers.dense = Some(DenseBuild {
            writer: ChunkVectorWriter::create(tmp, embedder.dimension())?,
            embedder,
            pending: Vec::new(),
            pending_texts: 0,
            chunk_counts: Vec::new(),
            reuse,
        });
    }
    // An overlay's documents follow its layers'.
    let first = below.as_ref().map_or(0, |b| b.manifest().first_ordinal);
    let mut stream = Stream {
        seen: HashSet::new(),
        first,
        next: first,
        shard: options.shard,
        kept: Vec::new(),
        below,
        held_below: Vec::new(),
    };
    let mut sources = Vec::new();
    for mut plan in plans {
        let mut reports = std::mem::take(&mut plan.report.files);
        for (file, report) in plan.files.iter().zip(reports.iter_mut()) {
            if let Some(reason) = &report.ignored {
                info!(source = %plan.report.name, file = %file.display(), reason = %reason, "file ignored");
                continue;
            }
            ingest_file(file, &plan, report, &mut writers, &mut stream, options)?;
        }
        plan.report.files = reports;
        check_source(&plan, options)?;
        sources.push(plan.report);
    }
    if let Some(below) = &stream.below
        && !stream.held_below.is_empty()
    {
        return Err(below.conflict(&stream.held_below));
    }
    // The text indexes are finished first, so that their indexing buffers (up to
    // `writer_memory_bytes` each) are freed before the graph, the build's largest allocation,
    // is built: the peak is the larger of the two phases, not their sum.
    let dense_build = writers.dense.take();
    writers.ids.finish()?;
    if options.shard.is_some() {
        GlobalOrds::write(tmp, &stream.kept)?;
    }
    writers.docs.commit()?;
    writers.chunks.commit()?;
    let (doc_count, chunk_count) = (writers.doc_count, writers.chunk_count);
    merge_to_one_segment(&doc_index, writers.docs)?;
    merge_to_one_segment(&chunk_index, writers.chunks)?;
    // The indexing buffers and the merges' memory are free now; without this glibc keeps most
    // of it through the graph phase.
    stillweb_native::memory::release_free_memory();
    let dense = match dense_build {
        Some(mut build) => {
            build.flush()?;
            if let Some(reuse) = &build.reuse {
                info!(
                    from = %reuse.dir().display(),
                    chunks = reuse.chunks,
                    embedded = build.writer.written() - reuse.chunks,
                    "reused stored chunk vectors"
                );
            }
            info!(
                chunks = build.writer.written(),
                "building the dense document index"
            );
            let graph_segment_nodes = crate::dense::recorded_segment_limit(
                crate::dense::graph_nodes(options.doc_vectors, &build.chunk_counts),
                options.graph_segment_nodes,
            );
            let chunk_vectors = build.writer.finish(
                &build.chunk_counts,
                options.doc_vectors,
                options.graph_threads,
                options.graph_segment_nodes,
                options.chunk_precision,
            )?;
            let (model_id, dimension, engine) = dense_model.unwrap_or_default();
            Some(DenseManifest {
                model_id,
                dimension,
                engine: Some(engine),
                metric: "cosine (unit vectors, inner product)".into(),
                quantization: crate::dense::GRAPH_QUANTIZATION.into(),
                doc_vectors: options.doc_vectors,
                chunk_vectors,
                chunk_precision: options.chunk_precision,
                hnsw_connectivity: 16,
                hnsw_expansion_add: 128,
                hnsw_expansion_search: 128,
                graph_segment_nodes,
            })
        }
        None => None,
    };

    let duplicates = sources
        .iter()
        .flat_map(|s| &s.files)
        .map(|f| f.duplicates)
        .sum();
    let bad_records = sources.iter().map(SourceReport::bad_records).sum();
    let mut build_id = IndexManifest::compute_build_id(
        &sources,
        &options.chunker,
        ANALYZER_DESCRIPTION,
        dense.as_ref(),
        options.shard.map(|s| s.count),
    );
    if let Some(below) = &stream.below {
        build_id = below.build_id(&build_id);
    }
    let manifest = IndexManifest {
        format_version: FORMAT_VERSION,
        build_id,
        stillweb_version: env!("CARGO_PKG_VERSION").to_string(),
        created_unix: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        corpus_name: corpus.name.clone(),
        sources,
        chunker: options.chunker.clone(),
        analyzer: ANALYZER_DESCRIPTION.to_string(),
        documents: doc_count,
        chunks: chunk_count,
        duplicates,
        bad_records,
        dates: DateReport {
            as_of: as_of(corpus)?.or(writers.dates.newest),
            ..writers.dates
        },
        dense,
        shard: options.shard.map(|s| ShardManifest {
            index: s.index,
            count: s.count,
            corpus_documents: stream.next - stream.first,
            corpus_chunks: None,
            finalized: false,
        }),
        overlay: stream.below.as_ref().map(Below::manifest),
        preset: options.preset.map(|p| p.name().to_string()),
    };
    manifest.write(tmp)?;
    Ok(manifest)
}

/// The corpus manifest's frozen clock, when it sets one.
fn as_of(corpus: &CorpusManifest) -> Result<Option<i64>, IndexError> {
    corpus
        .as_of
        .as_deref()
        .map(|text| {
            stillweb_corpus::date::parse_instant(text).map_err(|e| {
                IndexError::Corpus(stillweb_corpus::CorpusError::Manifest {
                    path: corpus.base_dir.clone(),
                    message: format!("`as_of`: {e}"),
                })
            })
        })
        .transpose()
}

/// One segment per index: fewer, larger posting lists make queries faster, and the index is
/// read-only from here on.
fn merge_to_one_segment(index: &Index, mut writer: IndexWriter) -> Result<(), IndexError> {
    let segments = index.searchable_segment_ids()?;
    if segments.len() > 1 {
        writer.merge(&segments).wait()?;
    }
    writer.garbage_collect_files().wait()?;
    writer.wait_merging_threads()?;
    Ok(())
}

fn check_source(plan: &SourcePlan, options: &BuildOptions) -> Result<(), IndexError> {
    let documents = plan.report.documents();
    let bad = plan.report.bad_records();
    let total = documents + bad;
    if bad > 0 && total > 0 {
        let share = bad as f64 / total as f64;
        if share > options.max_bad_fraction {
            return Err(IndexError::TooManyBad {
                source_name: plan.report.name.clone(),
                bad,
                total,
                share: share * 100.0,
                max: options.max_bad_fraction * 100.0,
            });
        }
    }
    if let Some(expected) = plan.expected_documents
        && expected != documents
    {
        return Err(IndexError::ExpectedCount {
            source_name: plan.report.name.clone(),
            expected,
            actual: documents,
        });
    }
    Ok(())
}

fn ingest_file(
    file: &Path,
    plan: &SourcePlan,
    report: &mut FileReport,
    writers: &mut Writers,
    stream: &mut Stream,
    options: &BuildOptions,
) -> Result<(), IndexError> {
    let items = ingest::open(file, plan.report.format, &plan.context)?;
    let expected = plan.expected_documents.filter(|_| plan.files.len() == 1);
    let progress = Progress::new(&plan.report.name, file, expected);
    for item in items {
        match item {
            Item::Document(doc) => {
                report.documents += 1;
                // Readers validated the URL already.
                let Ok(key) = normalize_url(&doc.url) else {
                    continue;
                };
                match stream.admit(&key)? {
                    Admit::Duplicate => {
                        report.duplicates += 1;
                        continue;
                    }
                    Admit::Elsewhere => {}
                    Admit::HeldBelow => stream.held_below.push(doc.url),
                    Admit::Here => writers.add(doc, &key, &options.chunker)?,
                }
                progress.tick(report.documents);
            }
            Item::Skipped(reason) => *report.skipped.entry(reason.to_string()).or_default() += 1,
            Item::Bad(bad) => {
                report.bad_records += 1;
                if report.bad_records <= BAD_RECORDS_LOGGED {
                    warn!(source = %plan.report.name, file = %file.display(), position = %bad.position, reason = %bad.reason, "bad record skipped");
                } else if report.bad_records == BAD_RECORDS_LOGGED + 1 {
                    warn!(file = %file.display(), "more bad records; only the count is reported from here on");
                }
            }
        }
    }
    progress.finish(report);
    info!(
        source = %plan.report.name,
        file = %file.display(),
        documents = report.documents,
        duplicates = report.duplicates,
        bad_records = report.bad_records,
        skipped = ?report.skipped,
        "file read"
    );
    Ok(())
}

/// The deduplicated document stream: every build reads all of it, so a shard's documents get
/// the single build's global ordinals.
struct Stream {
    seen: HashSet<u128>,
    /// The first document's global ordinal (after an overlay's layers below).
    first: u64,
    /// The next document's global ordinal.
    next: u64,
    shard: Option<ShardOf>,
    /// The global ordinals of the documents this build keeps (a shard's).
    kept: Vec<u64>,
    /// An overlay's layers below, whose URLs it must not hold.
    below: Option<Below>,
    /// The URLs of documents the layers below hold already (an overlay refuses them all).
    held_below: Vec<String>,
}

enum Admit {
    /// An earlier document had the URL.
    Duplicate,
    /// Another shard's document.
    Elsewhere,
    /// This build's.
    Here,
    /// An overlay's document whose URL a layer below holds.
    HeldBelow,
}

impl Stream {
    fn admit(&mut self, url_key: &str) -> Result<Admit, IndexError> {
        if !self.seen.insert(url_hash(url_key)) {
            return Ok(Admit::Duplicate);
        }
        if let Some(s) = self.shard
            && shard_of(url_key, s.count) != s.index
        {
            self.next += 1;
            return Ok(Admit::Elsewhere);
        }
        // The layers below hold the URL in this build's shard, if anywhere.
        if let Some(below) = &self.below
            && below.holds(url_key)?
        {
            return Ok(Admit::HeldBelow);
        }
        self.kept.push(self.next);
        self.next += 1;
        Ok(Admit::Here)
    }
}

/// 128-bit hash of a normalised URL: the duplicate set stays small at tens of millions of URLs.
fn url_hash(key: &str) -> u128 {
    let mut a = std::hash::DefaultHasher::new();
    key.hash(&mut a);
    let mut b = std::hash::DefaultHasher::new();
    (key, 0x5717_u16).hash(&mut b);
    (u128::from(a.finish()) << 64) | u128::from(b.finish())
}

impl Writers<'_> {
    fn add(
        &mut self,
        doc: Document,
        url_key: &str,
        chunker: &ChunkerConfig,
    ) -> Result<(), IndexError> {
        let ord = self.doc_count;
        let f = self.doc_fields;
        let display_title = if doc.title.trim().is_empty() {
            derive_title(&doc.text, &doc.url)
        } else {
            doc.title.clone()
        };
        let mut d = TantivyDocument::default();
        d.add_u64(f.ord, ord);
        d.add_text(f.doc_id, &doc.id);
        self.ids.push(&doc.id)?;
        d.add_text(f.url_key, url_key);
        d.add_text(f.host, host_of(url_key));
        d.add_text(f.url, &doc.url);
        d.add_text(f.title, &display_title);
        d.add_text(f.date, &doc.date);
        let published = stillweb_corpus::date::document_instant(&doc.date);
        if let Some(t) = published {
            d.add_i64(f.published, t);
        }
        self.dates.count(published);
        d.add_text(f.content, format!("{}\n{}", doc.title, doc.text));
        let mut chunks = chunk_text(&doc.text, chunker);
        if chunks.is_empty() {
            // A title-only page: one empty chunk, indexed and embedded as its title (every chunk
            // carries its page's title), so stage 2 can rank the page like any other.
            chunks.push(Chunk { start: 0, end: 0 });
        }
        d.add_u64(f.chunk_count, chunks.len() as u64);
        if let Some(dense) = &mut self.dense {
            dense
                .chunk_counts
                .push(u32::try_from(chunks.len()).unwrap_or(u32::MAX));
            let stored = match &mut dense.reuse {
                Some(reuse) => reuse.vectors(url_key, &doc.title, &doc.text, chunks.len())?,
                None => None,
            };
            // Embedded with its title, as BM25 indexes it: a chunk alone loses its context.
            let texts = match stored {
                Some(_) => Vec::new(),
                None => chunks
                    .iter()
                    .map(|c| format!("{}\n{}", doc.title, c.slice(&doc.text)))
                    .collect(),
            };
            dense.push(texts, stored)?;
        }
        for chunk in chunks {
            let c = self.chunk_fields;
            let text = chunk.slice(&doc.text);
            let mut cd = TantivyDocument::default();
            cd.add_u64(c.chunk_id, self.chunk_count);
            cd.add_u64(c.doc_ord, ord);
            cd.add_u64(c.start, chunk.start as u64);
            cd.add_u64(c.end, chunk.end as u64);
            cd.add_text(c.context, format!("{}\n{text}", doc.title));
            self.chunks.add_document(cd)?;
            self.chunk_count += 1;
        }
        d.add_text(f.body, doc.text);
        self.docs.add_document(d)?;
        self.doc_count += 1;
        Ok(())
    }
}

/// Writes an index for `out` into a fresh staging directory beside it with `write`, then
/// publishes it; a failed `write` leaves nothing behind, and `out` as it was.
pub(crate) fn stage_and_publish<T>(
    out: &Path,
    force: bool,
    write: impl FnOnce(&Path) -> Result<T, IndexError>,
) -> Result<T, IndexError> {
    let tmp = staging_dir(out, force)?;
    let written = match write(&tmp) {
        Ok(written) => written,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e);
        }
    };
    publish(&tmp, out)?;
    Ok(written)
}

/// Writes the finished `tmp` directory's checksums and replaces `out` with it. An existing index
/// is swapped with the new one in one atomic step (`renameat2(RENAME_EXCHANGE)`), so a build
/// killed at any moment leaves `out` whole, old or new; the old one, now at `tmp`, is removed
/// after. Where the filesystem cannot swap, the old index is moved aside first, and a build
/// killed between the two renames has it put back by the next build of `out`.
fn publish(tmp: &Path, out: &Path) -> Result<(), IndexError> {
    readable_by_all(tmp)?;
    // Last, over the finished files: what the server checks before it serves them.
    crate::checksums::write(tmp)?;
    if !out.exists() {
        return std::fs::rename(tmp, out).map_err(|e| IndexError::io(out, e));
    }
    if exchange(tmp, out).is_ok() {
        return std::fs::remove_dir_all(tmp).map_err(|e| IndexError::io(tmp, e));
    }
    let old = sibling(out, "old", std::process::id());
    std::fs::rename(out, &old).map_err(|e| IndexError::io(out, e))?;
    if let Err(e) = std::fs::rename(tmp, out) {
        let _ = std::fs::rename(&old, out);
        return Err(IndexError::io(out, e));
    }
    std::fs::remove_dir_all(&old).map_err(|e| IndexError::io(&old, e))
}

/// Atomically swaps two paths of one filesystem (Linux `renameat2` with `RENAME_EXCHANGE`).
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use rustix::fs::{CWD, RenameFlags, renameat_with};
    renameat_with(CWD, a, CWD, b, RenameFlags::EXCHANGE).map_err(std::io::Error::from)
}

/// Makes every file under `dir` readable by everyone. An index is a read-only artifact that is
/// often served by another user than the one who built it (a container's non-root user over a
/// mounted volume), but tantivy writes its `meta.json` and `.managed.json` through temporary
/// files, which are created owner-only whatever the umask.
fn readable_by_all(dir: &Path) -> Result<(), IndexError> {
    use std::os::unix::fs::PermissionsExt;
    for entry in std::fs::read_dir(dir).map_err(|e| IndexError::io(dir, e))? {
        let path = entry.map_err(|e| IndexError::io(dir, e))?.path();
        let meta = std::fs::metadata(&path).map_err(|e| IndexError::io(&path, e))?;
        if meta.is_dir() {
            readable_by_all(&path)?;
        } else if meta.permissions().mode() & 0o044 != 0o044 {
            let mode = meta.permissions().mode() | 0o044;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode))
                .map_err(|e| IndexError::io(&path, e))?;
        }
    }
    Ok(())
}

/// A progress bar with rate and ETA on a terminal; periodic log lines otherwise.
struct Progress {
    bar: Option<ProgressBar>,
    label: String,
    last_log: std::cell::Cell<Instant>,
    started: Instant,
}

impl Progress {
    fn new(source: &str, file: &Path, expected: Option<u64>) -> Progress {
        let label = format!(
            "{source}: {}",
            file.file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
        );
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = match expected {
                Some(n) => ProgressBar::new(n).with_style(
                    ProgressStyle::with_template(
                        "{prefix} [{bar:30}] {pos}/{len} docs {per_sec} eta {eta}",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
                ),
                None => ProgressBar::new_spinner().with_style(
                    ProgressStyle::with_template(
                        "{spinner} {prefix} {pos} docs {per_sec} {elapsed}",
                    )
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                ),
            };
            bar.set_draw_target(ProgressDrawTarget::stderr_with_hz(4));
            bar.set_prefix(label.clone());
            bar
        });
        Progress {
            bar,
            label,
            last_log: std::cell::Cell::new(Instant::now()),
            started: Instant::now(),
        }
    }

    fn tick(&self, documents: u64) {
        if let Some(bar) = &self.bar {
            bar.set_position(documents);
        } else if self.last_log.get().elapsed() >= Duration::from_secs(10) {
            self.last_log.set(Instant::now());
            let rate = documents as f64 / self.started.elapsed().as_secs_f64().max(1e-9);
            info!(file = %self.label, documents, docs_per_s = rate.round(), "indexing");
        }
    }

    fn finish(&self, report: &FileReport) {
        if let Some(bar) = &self.bar {
            bar.set_position(report.documents);
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn published_files_are_readable_by_everyone() {
        let dir = tempfile::tempdir().expect("tempdir");
        let nested = dir.path().join("docs");
        std::fs::create_dir(&nested).expect("mkdir");
        let private = nested.join("meta.json");
        std::fs::write(&private, "{}").expect("write");
        std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o600)).expect("chmod");
        super::readable_by_all(dir.path()).expect("readable");
        let mode = std::fs::metadata(&private)
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o644);
    }
}
