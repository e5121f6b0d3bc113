//! The rerankers on the random-weight fixtures `models/make-fixtures` builds (real Qwen3 and BERT
//! tokenizers, real architectures, random weights): these prove the plumbing — prompt template,
//! truncation, padding side, batching, the yes/no read-out — and say nothing about quality.

use std::path::{Path, PathBuf};

use stillweb_models::batch::TokenRow;
use stillweb_models::batcher::BatchPolicy;
use stillweb_models::config::fixtures_dir;
use stillweb_models::rerank::{
    ASSISTANT_SUFFIX, CrossEncoder, DEFAULT_INSTRUCTION, Qwen3Reranker, SYSTEM_PREFIX, format_pair,
};
use stillweb_models::worker::RerankWorker;
use stillweb_models::{
    ExecutionProvider, ModelConfig, ModelError, PaddingSide, RerankPool, Reranker, load_reranker,
};

fn fixture(name: &str) -> Option<PathBuf> {
    let dir = fixtures_dir().join(name);
    stillweb_test_support::fetched(
        &dir.join("model.toml"),
        "models/fetch && models/make-fixtures",
    )
    .then_some(dir)
}

fn qwen(dir: &Path, side: PaddingSide, batch_size: usize) -> Qwen3Reranker {
    let mut config = ModelConfig::load(dir).expect("config");
    config.padding_side = Some(side);
    config.batch_size = Some(batch_size);
    Qwen3Reranker::new(config, ExecutionProvider::Cpu, 1).expect("load qwen3 fixture")
}

fn reference(dir: &Path) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(dir.join("reference.json")).expect("reference.json");
    serde_json::from_str(&text).expect("reference json")
}

fn ids(value: &serde_json::Value) -> Vec<u32> {
    value
        .as_array()
        .expect("ids")
        .iter()
        .map(|v| v.as_u64().expect("id") as u32)
        .collect()
}

fn floats(value: &serde_json::Value) -> Vec<f64> {
    value
        .as_array()
        .expect("floats")
        .iter()
        .map(|v| v.as_f64().expect("float"))
        .collect()
}

const PASSAGES: [&str; 5] = [
    "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France.",
    "Paris",
    "It was designed by Gustave Eiffel's company and built from 1887 to 1889 as the entrance arch to the 1889 World's Fair. Locals at first criticised its design, but it has become a global cultural icon of France and one of the most recognisable structures in the world.",
    "Der Eiffelturm ist ein 330 Meter hoher Eisenfachwerkturm in Paris. 埃菲尔铁塔 🗼",
    "",
];

fn assert_close(a: &[f32], b: &[f32], tolerance: f32, what: &str) {
    assert_eq!(a.len(), b.len(), "{what}");
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!(
            (x - y).abs() <= tolerance,
            "{what}: score {i} differs: {x} vs {y}"
        );
    }
}

#[test]
fn qwen3_prompt_template_is_byte_exact() {
    let expected = "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n<|im_start|>user\n<Instruct>: Given a web search query, retrieve relevant passages that answer the query\n<Query>: who built the eiffel tower\n<Document>: Gustave Eiffel's company.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n";
    let prompt = format!(
        "{SYSTEM_PREFIX}{}{ASSISTANT_SUFFIX}",
        format_pair(
            DEFAULT_INSTRUCTION,
            "who built the eiffel tower",
            "Gustave Eiffel's company."
        )
    );
    assert_eq!(prompt, expected);

    let Some(dir) = fixture("qwen3-reranker-tiny") else {
        return;
    };
    let reranker = qwen(&dir, PaddingSide::Left, 16);
    let ids = reranker
        .pair_ids("who built the eiffel tower", "Gustave Eiffel's company.")
        .expect("ids");
    // The special tokens are single tokens, and the ids decode back to the exact prompt.
    assert_eq!(ids[0], 151_644, "<|im_start|>");
    let think_end = ids.iter().rposition(|&t| t == 151_668).expect("</think>");
    assert_eq!(
        think_end,
        ids.len() - 2,
        "</think> then a blank line ends the prompt"
    );
    let tokenizer = tokenizers::Tokenizer::from_file(dir.join("tokenizer.json")).expect("tok");
    assert_eq!(tokenizer.decode(&ids, false).expect("decode"), expected);
}

#[test]
fn qwen3_truncates_only_the_document_and_keeps_the_template() {
    let Some(dir) = fixture("qwen3-reranker-tiny") else {
        return;
    };
    let reranker = qwen(&dir, PaddingSide::Left, 16);
    let long = "word ".repeat(5_000);
    let ids = reranker.pair_ids("a query", &long).expect("ids");
    let config = ModelConfig::load(&dir).expect("config");
    assert_eq!(ids.len(), config.max_tokens);
    let short = reranker.pair_ids("a query", "word").expect("ids");
    let template = |ids: &[u32]| (ids[..30].to_vec(), ids[ids.len() - 8..].to_vec());
    assert_eq!(template(&ids), template(&short));
}

#[test]
fn qwen3_graph_matches_the_numpy_reference() {
    let Some(dir) = fixture("qwen3-reranker-tiny") else {
        return;
    };
    let mut reranker = qwen(&dir, PaddingSide::Left, 16);
    let cases = reference(&dir);
    let rows: Vec<Vec<u32>> = cases.iter().map(|c| ids(&c["input_ids"])).collect();
    let logits = reranker.no_yes_logits(rows).expect("run");
    for (case, (no, yes)) in cases.iter().zip(logits) {
        let want = floats(&case["no_yes_logits"]);
        assert!(
            (f64::from(no) - want[0]).abs() < 1e-4 && (f64::from(yes) - want[1]).abs() < 1e-4,
            "ONNX ({no}, {yes}) vs NumPy {want:?}"
        );
    }
}

#[test]
fn qwen3_scores_do_not_depend_on_padding_side_or_batching() {
    let Some(dir) = fixture("qwen3-reranker-tiny") else {
        return;
    };
    let query = "who designed the eiffel tower";
    let left = qwen(&dir, PaddingSide::Left, 16)
        .score(query, &PASSAGES)
        .expect("left");
    let right = qwen(&dir, PaddingSide::Right, 16)
        .score(query, &PASSAGES)
        .expect("right");
    let mut single = qwen(&dir, PaddingSide::Left, 1);
    let one_by_one: Vec<f32> = PASSAGES
        .iter()
        .map(|p| single.score(query, &[p]).expect("single")[0])
        .collect();
    assert_close(&left, &right, 1e-5, "left vs right padding");
    assert_close(&left, &one_by_one, 1e-5, "batched vs one at a time");
    assert!(left.iter().all(|s| (0.0..=1.0).contains(s)));
    // Random weights, but the scores are not all the same: the read-out sees the input.
    let spread = left.iter().cloned().fold(f32::MIN, f32::max)
        - left.iter().cloned().fold(f32::MAX, f32::min);
    assert!(spread > 1e-3, "scores {left:?}");
}

#[test]
fn cross_encoder_matches_reference_and_batching() {
    let Some(dir) = fixture("cross-encoder-tiny") else {
        return;
    };
    let config = ModelConfig::load(&dir).expect("config");
    let mut encoder = CrossEncoder::new(config.clone(), ExecutionProvider::Cpu, 1).expect("load");
    let cases = reference(&dir);
    let rows: Vec<TokenRow> = cases
        .iter()
        .map(|c| TokenRow {
            ids: ids(&c["input_ids"]),
            type_ids: ids(&c["token_type_ids"]),
        })
        .collect();
    for (case, (_, logit)) in cases.iter().zip(encoder.logits(rows).expect("run")) {
        let want = floats(&case["logits"])[0];
        assert!((f64::from(logit) - want).abs() < 1e-4, "{logit} vs {want}");
    }

    let row = encoder
        .pair_row("query words", "passage words")
        .expect("pair");
    assert_eq!(row.ids.first(), Some(&101), "[CLS]");
    assert_eq!(row.type_ids.iter().filter(|&&t| t == 1).count(), 3);

    let query = "who designed the eiffel tower";
    let batched = encoder.score(query, &PASSAGES).expect("batched");
    let mut single_config = config;
    single_config.batch_size = Some(1);
    let mut single = CrossEncoder::new(single_config, ExecutionProvider::Cpu, 1).expect("load");
    let one_by_one: Vec<f32> = PASSAGES
        .iter()
        .map(|p| single.score(query, &[p]).expect("single")[0])
        .collect();
    assert_close(&batched, &one_by_one, 1e-5, "batched vs one at a time");
}

#[test]
fn wrong_configs_are_refused_with_reasons() {
    let Some(dir) = fixture("qwen3-reranker-tiny") else {
        return;
    };
    let mut config = ModelConfig::load(&dir).expect("config");
    config.yes_token_id = Some(42);
    let err = Qwen3Reranker::new(config, ExecutionProvider::Cpu, 1).expect_err("bad yes id");
    assert!(err.to_string().contains("yes_token_id"), "{err}");

    let Some(bert) = fixture("cross-encoder-tiny") else {
        return;
    };
    let mut config = ModelConfig::load(&bert).expect("config");
    config.padding_side = Some(PaddingSide::Left);
    let err = CrossEncoder::new(config, ExecutionProvider::Cpu, 1).expect_err("left padding");
    assert!(err.to_string().contains("position_ids"), "{err}");

    let embedder = stillweb_models::config::default_embedder_dir();
    if embedder.join("model.toml").is_file() {
        let Err(err) = load_reranker(&embedder, None, ExecutionProvider::Cpu, 1) else {
            panic!("an embedder loaded as a reranker");
        };
        assert!(matches!(err, ModelError::Config { .. }), "{err}");
        assert!(
            err.to_string()
                .contains("expected cross-encoder or qwen3-reranker")
        );
    }
    let reranker = load_reranker(&dir, None, ExecutionProvider::Cpu, 1).expect("load by kind");
    assert_eq!(reranker.model_id(), "stillweb/qwen3-reranker-tiny-random");
}

/// A reranker that records how many pools each `score_pools` call held.
struct Counting {
    inner: Box<dyn Reranker>,
    calls: std::sync::Arc<std::sync::Mutex<Vec<usize>>>,
}

impl Reranker for Counting {
    fn model_id(&self) -> &str {
        self.inner.model_id()
    }
    fn score(&mut self, query: &str, passages: &[&str]) -> Result<Vec<f32>, ModelError> {
        self.inner.score(query, passages)
    }
    fn score_pools(&mut self, pools: &[RerankPool]) -> Result<Vec<Vec<f32>>, ModelError> {
        self.calls.lock().expect("calls").push(pools.len());
        self.inner.score_pools(pools)
    }
}

/// Concurrent requests through the dynamic batcher (gathered into shared, length-sorted model
/// runs) get the scores each would get alone, for both kinds of reranker.
#[test]
fn batched_across_requests_scores_equal_one_request_at_a_time() {
    for name in ["cross-encoder-tiny", "qwen3-reranker-tiny"] {
        let Some(dir) = fixture(name) else {
            return;
        };
        let queries = [
            "who designed the eiffel tower",
            "height of the tower in metres",
            "paris",
            "Wann wurde der Eiffelturm gebaut?",
            "a query about something else entirely, long enough to change the batch's padding",
            "埃菲尔铁塔",
        ];
        let mut alone = load_reranker(&dir, None, ExecutionProvider::Cpu, 1).expect("load");
        let expected: Vec<Vec<f32>> = queries
            .iter()
            .enumerate()
            .map(|(i, q)| {
                let passages: Vec<&str> = PASSAGES.iter().copied().skip(i % 3).collect();
                alone.score(q, &passages).expect("alone")
            })
            .collect();

        let calls = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let model = Counting {
            inner: load_reranker(&dir, None, ExecutionProvider::Cpu, 1).expect("load"),
            calls: std::sync::Arc::clone(&calls),
        };
        // A long wait: every request arrives before the first run starts.
        let policy = BatchPolicy {
            max_cost: 1 << 20,
            max_wait: std::time::Duration::from_millis(500),
            queue: 64,
        };
        let worker = RerankWorker::spawn_batching(vec![Box::new(model)], "test-rerank", policy)
            .expect("spawn");
        let handles: Vec<_> = queries
            .iter()
            .enumerate()
            .map(|(i, q)| {
                let (worker, q) = (worker.clone(), q.to_string());
                let passages: Vec<String> =
                    PASSAGES.iter().skip(i % 3).map(|p| p.to_string()).collect();
                std::thread::spawn(move || worker.rerank(&q, passages).expect("batched"))
            })
            .collect();
        for (i, handle) in handles.into_iter().enumerate() {
            let got = handle.join().expect("join");
            assert_close(&got, &expected[i], 1e-5, &format!("{name}: request {i}"));
        }
        let calls = calls.lock().expect("calls").clone();
        assert_eq!(
            calls.iter().sum::<usize>(),
            queries.len(),
            "{name}: {calls:?}"
        );
        assert!(
            calls.len() < queries.len(),
            "{name}: concurrent pools shared model runs: {calls:?}"
        );
    }
}
