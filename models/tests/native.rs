//! The native int8 engine on the real all-MiniLM-L6-v2 weights that `models/fetch` installs:
//! close to the fp32 ONNX model, identical across kernels, threads and batching.

use std::path::PathBuf;

use stillweb_models::config::{default_embedder_dir, models_dir};
use stillweb_models::{Embedder, ExecutionProvider, NativeEmbedder, OnnxEmbedder, dot};
use stillweb_native::Kernel;

fn native(threads: usize, kernel: Kernel) -> Option<NativeEmbedder> {
    let dir = default_embedder_dir();
    if !stillweb_test_support::fetched(&dir.join("model.safetensors"), "models/fetch") {
        return None;
    }
    Some(NativeEmbedder::load_with(&dir, threads, kernel).expect("load the native MiniLM"))
}

/// Passages to embed: the first Cranfield abstracts where the shared data is beside the
/// checkout (long, technical, truncated at 256 tokens), else a few fixed sentences.
fn passages(n: usize) -> Vec<String> {
    let shared = std::env::var_os("STILLWEB_SHARED_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data"));
    let corpus = shared.join("beir/cranfield/corpus.jsonl");
    let Ok(text) = std::fs::read_to_string(&corpus) else {
        eprintln!("{} not found: using fixed sentences", corpus.display());
        return [
            "The Mona Lisa is a half-length portrait painting by Italian artist Leonardo da Vinci.",
            "Brno is a city in the South Moravian Region of the Czech Republic.",
            "what causes the northern lights",
            "Antibiotic resistance arises when bacteria evolve mechanisms that protect them from drugs.",
        ]
        .map(String::from)
        .to_vec();
    };
    text.lines()
        .take(n)
        .map(|line| {
            let doc: serde_json::Value = serde_json::from_str(line).expect("corpus line");
            format!(
                "{} {}",
                doc["title"].as_str().unwrap_or(""),
                doc["text"].as_str().unwrap_or("")
            )
        })
        .collect()
}

#[test]
fn native_vectors_are_close_to_fp32_onnx() {
    let Some(mut native) = native(2, Kernel::detect()) else {
        return;
    };
    let fp32_dir = models_dir().join("all-minilm-l6-v2-fp32");
    let mut fp32 = OnnxEmbedder::load(&fp32_dir, ExecutionProvider::Cpu, 2).expect("fp32 MiniLM");
    let texts = passages(300);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let ours = native.embed_documents(&refs).expect("native");
    let reference = fp32.embed_documents(&refs).expect("fp32");
    let stats = |a: &[Vec<f32>], b: &[Vec<f32>]| {
        let cosines: Vec<f32> = a.iter().zip(b).map(|(x, y)| dot(x, y)).collect();
        let min = cosines.iter().copied().fold(1.0, f32::min);
        (min, cosines.iter().sum::<f32>() / cosines.len() as f32)
    };
    let (min, mean) = stats(&ours, &reference);
    eprintln!(
        "native int8 vs fp32 over {} passages: cosine min {min:.4}, mean {mean:.5}",
        texts.len()
    );
    assert!(min >= 0.99 && mean >= 0.995, "min {min}, mean {mean}");
    // The other engine on the same weights (what `--engine onnx` gives).
    let mut onnx =
        OnnxEmbedder::load(&default_embedder_dir(), ExecutionProvider::Cpu, 2).expect("ONNX int8");
    let (min, mean) = stats(&ours, &onnx.embed_documents(&refs).expect("ONNX int8"));
    eprintln!(
        "native int8 vs ONNX int8 over {} passages: cosine min {min:.4}, mean {mean:.5}",
        texts.len()
    );
    assert!(min >= 0.99 && mean >= 0.995, "min {min}, mean {mean}");
}

#[test]
fn kernels_threads_and_batching_give_identical_vectors() {
    let Some(mut two) = native(2, Kernel::detect()) else {
        return;
    };
    let texts = passages(40);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let bits = |vs: Vec<Vec<f32>>| -> Vec<Vec<u32>> {
        vs.into_iter()
            .map(|v| v.into_iter().map(f32::to_bits).collect())
            .collect()
    };
    let batched = bits(two.embed_documents(&refs).expect("batched"));
    let alone: Vec<Vec<u32>> = refs
        .iter()
        .flat_map(|t| bits(two.embed_queries(&[t]).expect("alone")))
        .collect();
    assert_eq!(batched, alone, "a text's vector depends on its batch");
    let mut one = native(1, Kernel::detect()).expect("one thread");
    assert_eq!(
        batched,
        bits(one.embed_documents(&refs).expect("one thread"))
    );
    // A copy sharing the weights (a server's other search threads) computes the same, while
    // the first is still in use.
    let mut shared = two.share().expect("the native engine shares its weights");
    assert_eq!(
        batched,
        bits(shared.embed_documents(&refs).expect("shared copy"))
    );
    assert_eq!(batched, bits(two.embed_documents(&refs).expect("after")));
    let kernel = Kernel::detect();
    if kernel != Kernel::Portable {
        let mut portable = native(2, Kernel::Portable).expect("portable");
        assert_eq!(
            batched,
            bits(portable.embed_documents(&refs).expect("portable")),
            "{kernel:?} and portable kernels differ"
        );
    } else {
        eprintln!("SKIPPED the kernel comparison: the detected kernel is the portable one");
    }
}

/// Queries gathered from concurrent callers and embedded in batches (as a server's search
/// threads drain them) get the vectors they get alone, bit for bit, at every length: one query of
/// each length from 3 to 130 tokens, mixed into batches that pack several lengths into each
/// forward call (the engine pads nothing: a call's rows are its queries' real tokens).
#[test]
fn gathered_queries_of_every_length_equal_queries_alone() {
    use stillweb_models::worker::{DrainThreads, EmbedWorker};
    let Some(mut alone) = native(1, Kernel::detect()) else {
        return;
    };
    const WORDS: [&str; 8] = [
        "river", "light", "stone", "music", "glass", "winter", "paper", "field",
    ];
    // Each word is one token: a query of n words is n + 2 tokens with [CLS] and [SEP].
    let queries: Vec<String> = (1..=128)
        .map(|n| {
            (0..n)
                .map(|i| WORDS[(i * 5 + n) % WORDS.len()])
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let bits = |v: &[f32]| -> Vec<u32> { v.iter().map(|x| x.to_bits()).collect() };
    let want: Vec<Vec<u32>> = queries
        .iter()
        .map(|q| bits(&alone.embed_queries(&[q.as_str()]).expect("alone")[0]))
        .collect();

    let copies: Vec<Box<dyn Embedder>> = (0..2)
        .map(|_| Box::new(native(1, Kernel::detect()).expect("copy")) as Box<dyn Embedder>)
        .collect();
    let worker = EmbedWorker::lend_copies(copies).gathering(32);
    // Two drain threads (a server's search threads) and 16 callers, each leaving its queries
    // one at a time.
    let drains = DrainThreads::spawn(&worker, 2).expect("drain threads");
    let got: Vec<(usize, Vec<u32>)> = std::thread::scope(|scope| {
        let callers: Vec<_> = (0..16)
            .map(|c| {
                let (queries, drains) = (&queries, &drains);
                scope.spawn(move || {
                    (c..queries.len())
                        .step_by(16)
                        .map(|i| (i, bits(&drains.embed_query(&queries[i]).expect("a vector"))))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        callers
            .into_iter()
            .flat_map(|c| c.join().expect("caller"))
            .collect()
    });
    assert_eq!(got.len(), queries.len());
    for (i, vector) in got {
        assert_eq!(
            vector,
            want[i],
            "query of {} tokens: gathered != alone",
            i + 3
        );
    }
    // All of them in one call: forward calls that pack queries of many lengths.
    let refs: Vec<&str> = queries.iter().map(String::as_str).collect();
    let together: Vec<Vec<u32>> = alone
        .embed_queries(&refs)
        .expect("together")
        .iter()
        .map(|v| bits(v))
        .collect();
    assert_eq!(together, want, "one call of every length != alone");
    let stats = worker.batch_stats().expect("gathering");
    eprintln!("{} queries in {} drains", stats.requests, stats.runs);
    assert_eq!(stats.requests, queries.len() as u64);
}

/// A copy of the default embedder's directory with `edit` applied to its model.toml and
/// config.json (the weights linked, not copied); None where models/fetch has not run.
fn edited_copy(edit: impl Fn(&str, &str) -> String) -> Option<tempfile::TempDir> {
    let source = default_embedder_dir();
    if !stillweb_test_support::fetched(&source.join("model.safetensors"), "models/fetch") {
        return None;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    for name in ["model.toml", "config.json"] {
        let text = std::fs::read_to_string(source.join(name)).expect("read");
        std::fs::write(dir.path().join(name), edit(name, &text)).expect("write");
    }
    std::fs::copy(
        source.join("tokenizer.json"),
        dir.path().join("tokenizer.json"),
    )
    .expect("tokenizer");
    std::os::unix::fs::symlink(
        source.join("model.safetensors"),
        dir.path().join("model.safetensors"),
    )
    .expect("link weights");
    Some(dir)
}

fn load_error(dir: &tempfile::TempDir) -> String {
    NativeEmbedder::load(dir.path(), 1)
        .expect_err("refused")
        .to_string()
}

#[test]
fn bad_model_directories_are_refused_at_load_with_the_reason() {
    let Some(dir) = edited_copy(|name, text| match name {
        "model.toml" => text.replace("model.safetensors", "gone.safetensors"),
        _ => text.to_string(),
    }) else {
        return;
    };
    let error = load_error(&dir);
    assert!(
        error.contains("gone.safetensors") && error.contains("models/fetch"),
        "{error}"
    );

    let dir = edited_copy(|name, text| match name {
        "model.toml" => text.replace("max_tokens = 256", "max_tokens = 600"),
        _ => text.to_string(),
    })
    .expect("copy");
    let error = load_error(&dir);
    assert!(
        error.contains("max_tokens = 600 but the weights have positions for 512"),
        "{error}"
    );

    // A feed-forward size the int8 tiles cannot hold (not a multiple of 64): refused before
    // the weights are read, not a failed assertion while packing them.
    let dir = edited_copy(|name, text| match name {
        "config.json" => text.replace("\"intermediate_size\": 1536", "\"intermediate_size\": 1000"),
        _ => text.to_string(),
    })
    .expect("copy");
    let error = load_error(&dir);
    assert!(
        error.contains("multiples of 64") && error.contains("engine = \"onnx\""),
        "{error}"
    );

    let dir = edited_copy(|name, text| match name {
        "model.toml" => text.replace("weights = \"model.safetensors\"\n", ""),
        _ => text.to_string(),
    })
    .expect("copy");
    let error = load_error(&dir);
    assert!(
        error.contains("model.toml") && error.contains("needs `weights`"),
        "{error}"
    );

    // One layer more than the weights hold: the missing tensor is named.
    let dir = edited_copy(|name, text| match name {
        "config.json" => text.replace("\"num_hidden_layers\": 6", "\"num_hidden_layers\": 7"),
        _ => text.to_string(),
    })
    .expect("copy");
    let error = load_error(&dir);
    assert!(
        error.contains("tensor `encoder.layer.6.attention.self.query.weight`: missing"),
        "{error}"
    );

    let dir = edited_copy(|_, text| text.to_string()).expect("copy");
    let weights = dir.path().join("model.safetensors");
    std::fs::remove_file(&weights).expect("unlink");
    std::fs::write(&weights, b"not a tensor file").expect("write");
    let error = load_error(&dir);
    assert!(
        error.contains("not a safetensors file") && error.contains("models/fetch"),
        "{error}"
    );
}

#[test]
fn a_tokenizer_that_does_not_belong_to_the_weights_is_named() {
    // Qwen3's tokenizer gives ids far past MiniLM's 30,522-row word table.
    let qwen = models_dir().join("qwen3-tokenizer/tokenizer.json");
    let Some(dir) = edited_copy(|_, text| text.to_string()) else {
        return;
    };
    if !stillweb_test_support::fetched(&qwen, "models/fetch") {
        return;
    }
    std::fs::copy(&qwen, dir.path().join("tokenizer.json")).expect("tokenizer");
    let mut e = NativeEmbedder::load(dir.path(), 1).expect("loads: the mismatch shows per text");
    let error = e
        .embed_queries(&["Schrödinger's cat, 量子"])
        .expect_err("foreign ids")
        .to_string();
    assert!(
        error.contains("outside the model's embedding tables") && error.contains("tokenizer"),
        "{error}"
    );
}
