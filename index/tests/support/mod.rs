//! The synthetic corpus the index tests share: documents of words drawn by a simple LCG, the
//! same text for a document's number whichever documents are kept.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

pub const WORDS: &[&str] = &[
    "river",
    "mountain",
    "engine",
    "violin",
    "comet",
    "harvest",
    "glacier",
    "senate",
    "protein",
    "harbor",
    "lantern",
    "falcon",
    "copper",
    "orchard",
    "thunder",
    "cathedral",
    "meadow",
    "reactor",
    "sonnet",
    "canyon",
    "saddle",
    "quartz",
    "tundra",
    "vaccine",
    "pendulum",
    "lagoon",
    "turbine",
    "fresco",
    "monsoon",
    "beacon",
];

/// Writes `DIR/docs.jsonl` with the documents among `0..documents` that `keep` selects, and
/// `DIR/m.toml` naming it; returns the manifest's path.
pub fn write_corpus(dir: &Path, documents: usize, keep: impl Fn(usize) -> bool) -> PathBuf {
    let mut state: u64 = 42;
    let mut next = || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 33) as usize
    };
    let mut lines = String::new();
    for d in 0..documents {
        let sentences: Vec<String> = (0..3 + next() % 4)
            .map(|_| {
                let words: Vec<&str> = (0..6 + next() % 6)
                    .map(|_| WORDS[next() % WORDS.len()])
                    .collect();
                format!("The {}.", words.join(" "))
            })
            .collect();
        if keep(d) {
            let doc = serde_json::json!({"id": d.to_string(), "url": format!("https://synthetic.example/{d}"),
                                         "title": format!("Doc {d}"), "text": sentences.join(" ")});
            lines.push_str(&doc.to_string());
            lines.push('\n');
        }
    }
    std::fs::write(dir.join("docs.jsonl"), lines).expect("write corpus");
    std::fs::write(
        dir.join("m.toml"),
        "name = \"synthetic\"\n[[source]]\nformat = \"jsonl\"\npath = \"docs.jsonl\"\n",
    )
    .expect("write manifest");
    dir.join("m.toml")
}
