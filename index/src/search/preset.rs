//! Named presets: the models and ranking a user picks with one flag (`--preset`), for the
//! indexer (which embedder builds the vectors) and the server (which embedder and reranker it
//! loads, the mode, the rerank pool and the reranker's weight). Each field of a preset can still
//! be overridden by its own flag; the chosen figures are in BENCHMARKS.md ("A trained reader").

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::Mode;

/// A named search configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Preset {
    /// RL rollouts: all-MiniLM-L6-v2 hybrid retrieval, no reranker (the fastest searches).
    Fast,
    /// Agent evaluation: the same hybrid retrieval (and index), then the trained MiniLM-L12 MS
    /// MARCO cross-encoder over a pool of 50 chunks with MaxP, its logit interpolated with the
    /// retrieval score. (bge-small as the embedder measured no better once reranked, at twice
    /// the embedding cost and a lower Recall@100: BENCHMARKS.md.)
    Quality,
}

impl Preset {
    pub const ALL: [Preset; 2] = [Preset::Fast, Preset::Quality];

    pub fn name(self) -> &'static str {
        match self {
            Preset::Fast => "fast",
            Preset::Quality => "quality",
        }
    }

    /// What it is for, in a line (`--help`, `/info`, the console).
    pub fn purpose(self) -> &'static str {
        match self {
            Preset::Fast => "RL rollouts: MiniLM-L6 hybrid retrieval, no reranker",
            Preset::Quality => {
                "agent evaluation: MiniLM-L6 hybrid retrieval, then the MiniLM-L12 cross-encoder \
                 over 50 chunks (MaxP), interpolated with the retrieval score"
            }
        }
    }

    /// The embedder's directory in the model cache: MiniLM-L6 for both, so one index serves
    /// either preset.
    pub fn embedder_dir(self) -> PathBuf {
        stillweb_model_core::models_dir().join(match self {
            Preset::Fast | Preset::Quality => "all-minilm-l6-v2",
        })
    }

    /// The reranker's directory in the model cache, if the preset reranks.
    pub fn reranker_dir(self) -> Option<PathBuf> {
        match self {
            Preset::Fast => None,
            Preset::Quality => Some(stillweb_model_core::models_dir().join("ms-marco-minilm-l12")),
        }
    }

    /// The retrievers, when the preset names them (fast: whatever the index has, hybrid over
    /// vectors and BM25 without).
    pub fn mode(self) -> Option<Mode> {
        match self {
            Preset::Fast => None,
            Preset::Quality => Some(Mode::Rerank),
        }
    }

    /// Chunks reranked per search (0 without a reranker).
    pub fn rerank_pool(self) -> usize {
        match self {
            Preset::Fast => 0,
            Preset::Quality => 50,
        }
    }

    /// The reranker's share of a reranked document's score ([`super::rank::apply_rerank`]):
    /// chosen on SciFact's train queries (flat from 0.3 to 0.6), never its test queries.
    pub fn rerank_weight(self) -> f32 {
        match self {
            Preset::Fast => 1.0,
            Preset::Quality => 0.5,
        }
    }
}

impl std::fmt::Display for Preset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Preset {
    type Err = String;

    fn from_str(s: &str) -> Result<Preset, String> {
        Preset::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Preset::ALL.iter().map(|p| p.name()).collect();
                format!("unknown preset `{s}` ({})", names.join(", "))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_parse_by_name_and_say_what_they_load() {
        assert_eq!("quality".parse(), Ok(Preset::Quality));
        assert_eq!(
            "best".parse::<Preset>(),
            Err("unknown preset `best` (fast, quality)".to_string())
        );
        assert!(Preset::Fast.reranker_dir().is_none() && Preset::Fast.rerank_pool() == 0);
        assert!(Preset::Fast.embedder_dir().ends_with("all-minilm-l6-v2"));
        let quality = Preset::Quality;
        assert!(quality.reranker_dir().is_some() && quality.mode() == Some(Mode::Rerank));
        assert!((0.0..=1.0).contains(&quality.rerank_weight()));
    }
}
