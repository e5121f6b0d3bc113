//! The real all-MiniLM-L6-v2 (int8 ONNX) from the model cache that `models/fetch` fills.

use stillweb_models::config::default_embedder_dir;
use stillweb_models::{Embedder, ExecutionProvider, OnnxEmbedder, dot};

fn embedder() -> Option<OnnxEmbedder> {
    let dir = default_embedder_dir();
    if !stillweb_test_support::fetched(&dir.join("model.toml"), "models/fetch") {
        return None;
    }
    Some(OnnxEmbedder::load(&dir, ExecutionProvider::Cpu, 2).expect("load MiniLM"))
}

#[test]
fn embeddings_are_unit_vectors_that_rank_paraphrases_first() {
    let Some(mut e) = embedder() else { return };
    assert_eq!(e.dimension(), 384);
    let docs = [
        "The cat sat on the mat.",
        "Stock markets fell sharply on Monday after the announcement.",
        "A kitten was resting on a rug.",
    ];
    let vectors = e.embed_documents(&docs).expect("embed");
    for v in &vectors {
        let norm: f32 = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "norm {norm}");
    }
    let query = &e
        .embed_queries(&["a small cat lying on a carpet"])
        .expect("embed")[0];
    let scores: Vec<f32> = vectors.iter().map(|v| dot(query, v)).collect();
    assert!(scores[2] > scores[1] && scores[0] > scores[1], "{scores:?}");
}

#[test]
fn batching_and_order_do_not_change_vectors() {
    let Some(mut e) = embedder() else { return };
    let texts: Vec<String> = (0..40)
        .map(|i| {
            format!(
                "Sentence number {i} talks about {}.",
                "topic ".repeat(i % 7 + 1)
            )
        })
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    // Queries go one per model call: alone or in a batch, a query gets the same vector.
    let queries = e.embed_queries(&refs).expect("queries");
    // Documents are batched; with dynamic int8 quantisation (one activation scale per call) a
    // document's vector moves slightly with its batch, but the same batch gives the same vectors.
    let together = e.embed_documents(&refs).expect("batch");
    assert_eq!(together, e.embed_documents(&refs).expect("again"));
    for (i, text) in refs.iter().enumerate().step_by(7) {
        assert_eq!(
            queries[i],
            e.embed_queries(&[text]).expect("query")[0],
            "query {i}"
        );
        let alone = &e.embed_documents(&[text]).expect("single")[0];
        let cosine: f32 = alone.iter().zip(&together[i]).map(|(a, b)| a * b).sum();
        assert!(cosine > 0.99, "text {i}: cosine {cosine} alone vs batched");
    }
}

#[test]
fn long_inputs_are_truncated_not_rejected() {
    let Some(mut e) = embedder() else { return };
    let long = "word ".repeat(5000);
    let v = e.embed_documents(&[&long]).expect("embed");
    assert_eq!(v[0].len(), 384);
}

/// The fp32 model (no per-call quantisation) embeds a batcher's gathered queries in one padded
/// batch: each query's vector is the one it gets alone (to float rounding).
#[test]
fn fp32_queries_batched_equal_queries_alone() {
    let dir = stillweb_models::models_dir().join("all-minilm-l6-v2-fp32");
    if !stillweb_test_support::fetched(&dir.join("model.toml"), "models/fetch") {
        return;
    }
    let mut e = OnnxEmbedder::load(&dir, ExecutionProvider::Cpu, 2).expect("load fp32 MiniLM");
    let queries = [
        "who designed the eiffel tower",
        "a considerably longer query about the effects of vitamin D on bone density in adults",
        "paris",
        "Wann wurde der Eiffelturm gebaut?",
    ];
    let together = e.embed_queries(&queries).expect("batch");
    for (i, query) in queries.iter().enumerate() {
        let alone = &e.embed_queries(&[query]).expect("alone")[0];
        let worst = alone
            .iter()
            .zip(&together[i])
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(
            worst < 1e-5,
            "query {i}: differs by {worst} batched vs alone"
        );
    }
}
