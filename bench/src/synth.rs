//! The scale corpus: N documents whose sentence, length and vocabulary statistics come from a real
//! corpus, and agent-style queries that match them.
//!
//! A [`Profile`] is read from real documents: their sentences, the number of sentences per
//! document, word frequencies and hosts. Document `i` is then drawn from stream `i` of the seed:
//! a length from the real length distribution, that many real sentences, and about 15% of their
//! words replaced, by a word drawn by its real frequency or (one in ten) by a synthetic rare word
//! from a Zipf law over four million, so that the vocabulary keeps growing with the corpus as real
//! vocabularies do. Nothing else is random and no document depends on another, so any document can
//! be regenerated alone (the queries do this) and corpora of different sizes share their prefix.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;

use anyhow::Context;
use serde::Serialize;
use stillweb_corpus::chunk::sentence_spans;
use stillweb_corpus::ingest::{self, Item, SourceContext};
use stillweb_corpus::manifest::CorpusManifest;

use crate::rng::Rng;

/// Changes whenever the same seed would produce different documents.
pub const GENERATOR_VERSION: u32 = 2;
const SUBSTITUTE: f64 = 0.15;
const RARE: f64 = 0.10;
const RARE_WORDS: usize = 1 << 22;
const HOSTS: usize = 5_000;

/// What the generator learned from the real documents.
#[derive(Debug, Serialize)]
pub struct Profile {
    #[serde(skip)]
    sentences: Vec<String>,
    #[serde(skip)]
    sentence_counts: Vec<u32>,
    /// Words with cumulative counts, for drawing by frequency.
    #[serde(skip)]
    words: Vec<(String, u64)>,
    /// 0: every use of a sentence gets its own substitutions. V > 0: each source sentence has V
    /// fixed variants, so a corpus of any size holds at most V × sentences distinct sentences
    /// (which is what lets a scale build embed each distinct sentence once).
    pub variants: usize,
    pub source_documents: usize,
    pub distinct_sentences: usize,
    pub vocabulary: usize,
    pub mean_sentences_per_document: f64,
}

impl Profile {
    pub fn from_manifest(manifest: &CorpusManifest) -> anyhow::Result<Profile> {
        let mut sentences = Vec::new();
        let mut sentence_counts = Vec::new();
        let mut counts: HashMap<String, u64> = HashMap::new();
        for (i, source) in manifest.sources.iter().enumerate() {
            let context = SourceContext {
                name: manifest.source_name(i),
                default_date: "1970-01-01".into(),
            };
            for path in manifest.resolve(i)? {
                if ingest::companion_reason(&path, source.format).is_some() {
                    continue;
                }
                for item in ingest::open(&path, source.format, &context)? {
                    let Item::Document(doc) = item else { continue };
                    let mut n = 0;
                    for (a, b) in sentence_spans(&doc.text) {
                        let sentence = doc.text[a..b].trim();
                        if !(20..=400).contains(&sentence.len()) {
                            continue;
                        }
                        for word in sentence.split_whitespace().filter(|w| is_word(w)) {
                            *counts.entry(word.to_string()).or_default() += 1;
                        }
                        sentences.push(sentence.to_string());
                        n += 1;
                    }
                    if n > 0 {
                        sentence_counts.push(n);
                    }
                }
            }
        }
        anyhow::ensure!(
            !sentences.is_empty(),
            "the profile corpus has no sentences of 20 to 400 characters"
        );
        sentences.sort();
        sentences.dedup();
        let mut words: Vec<(String, u64)> = counts.into_iter().collect();
        words.sort();
        let mut total = 0;
        for (_, c) in &mut words {
            total += *c;
            *c = total;
        }
        Ok(Profile {
            variants: 0,
            source_documents: sentence_counts.len(),
            distinct_sentences: sentences.len(),
            vocabulary: words.len(),
            mean_sentences_per_document: sentence_counts.iter().map(|&c| f64::from(c)).sum::<f64>()
                / sentence_counts.len() as f64,
            sentences,
            sentence_counts,
            words,
        })
    }

    fn word(&self, rng: &mut Rng) -> &str {
        let total = self.words.last().map_or(1, |w| w.1);
        let target = rng.next_u64() % total;
        let i = self.words.partition_point(|w| w.1 <= target);
        &self.words[i.min(self.words.len() - 1)].0
    }

    /// `source` with about [`SUBSTITUTE`] of its words replaced.
    fn substitute(&self, source: &str, rng: &mut Rng) -> String {
        source
            .split_whitespace()
            .map(|w| {
                if is_word(w) && rng.unit() < SUBSTITUTE {
                    if rng.unit() < RARE {
                        rare_word(rng.zipf(RARE_WORDS))
                    } else {
                        self.word(rng).to_string()
                    }
                } else {
                    w.to_string()
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Document `i` of the corpus generated with `seed`.
    pub fn document(&self, seed: u64, i: u64) -> SynthDoc {
        let mut rng = Rng::stream(seed, i);
        let n = self.sentence_counts[rng.below(self.sentence_counts.len())];
        let mut sentences = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let index = rng.below(self.sentences.len());
            let sentence = if self.variants > 0 {
                let variant = rng.below(self.variants) as u64;
                let mut fixed = Rng::stream(seed ^ 0x7A11_A175, index as u64 * 1024 + variant);
                self.substitute(&self.sentences[index], &mut fixed)
            } else {
                self.substitute(&self.sentences[index], &mut rng)
            };
            sentences.push(sentence);
        }
        let title_words: Vec<&str> = sentences[0]
            .split_whitespace()
            .take(2 + rng.below(4))
            .collect();
        let host = rng.zipf(HOSTS);
        let days = rng.below(25 * 365);
        SynthDoc {
            id: format!("synth-{i}"),
            url: format!("https://site{host}.example.org/page/{i}"),
            title: title_words
                .join(" ")
                .trim_end_matches([',', '.', ';', ':'])
                .to_string(),
            date: date_after_2000(days),
            // One sentence a line: every reader splits them where they were drawn, which is what
            // lets a scale build embed each distinct sentence once (web text often lacks the
            // final period that would otherwise mark the boundary).
            text: sentences.join("\n"),
            host: format!("site{host}.example.org"),
            sentences,
        }
    }

    /// Query `q`: a window of 6 to 12 words from a sentence of a random document; half of them
    /// quote a 2–3-word span, one in ten adds `site:` with the document's host, and about one in
    /// seven drops a word of the one before (an agent refining its search).
    pub fn query(&self, seed: u64, documents: u64, q: u64) -> SynthQuery {
        let mut rng = Rng::stream(seed ^ 0x5155_4552_5953, q);
        let near_repeat = q > 0 && rng.unit() < 0.15;
        let source = if near_repeat { q - 1 } else { q };
        let mut rng = Rng::stream(seed ^ 0x5155_4552_5953, source);
        let _ = rng.unit();
        let doc_index = rng.next_u64() % documents;
        let doc = self.document(seed, doc_index);
        let sentence = &doc.sentences[rng.below(doc.sentences.len())];
        let words: Vec<String> = sentence
            .split_whitespace()
            .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).to_string())
            .filter(|w| !w.is_empty())
            .collect();
        let len = (6 + rng.below(7)).min(words.len());
        let start = rng.below(words.len() - len + 1);
        let mut window: Vec<String> = words[start..start + len].to_vec();
        if near_repeat && window.len() > 3 {
            let mut drop = Rng::stream(seed ^ 0xD809, q);
            window.remove(drop.below(window.len()));
        }
        if rng.unit() < 0.5 && window.len() >= 4 {
            let span = 2 + rng.below(2);
            let at = rng.below(window.len() - span + 1);
            window[at] = format!("\"{}", window[at]);
            window[at + span - 1] = format!("{}\"", window[at + span - 1]);
        }
        if rng.unit() < 0.1 {
            window.push(format!("site:{}", doc.host));
        }
        SynthQuery {
            id: format!("q{q}"),
            text: window.join(" "),
            source_id: doc.id,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct SynthDoc {
    pub id: String,
    pub url: String,
    pub title: String,
    pub date: String,
    pub text: String,
    #[serde(skip)]
    pub host: String,
    #[serde(skip)]
    pub sentences: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct SynthQuery {
    pub id: String,
    pub text: String,
    /// The document the query was drawn from.
    pub source_id: String,
}

fn is_word(w: &str) -> bool {
    w.len() >= 3 && w.chars().all(char::is_alphabetic)
}

/// A pronounceable synthetic word for rank `r` (consonant-vowel pairs).
fn rare_word(mut r: usize) -> String {
    const C: &[u8] = b"bdfgklmnprstvz";
    const V: &[u8] = b"aeiou";
    let mut w = String::new();
    loop {
        w.push(C[r % C.len()] as char);
        r /= C.len();
        w.push(V[r % V.len()] as char);
        r /= V.len();
        if r == 0 {
            break;
        }
    }
    w.push('x');
    w
}

fn date_after_2000(days: usize) -> String {
    let mut year = 2000;
    let mut days = days;
    loop {
        let len = if year % 4 == 0 { 366 } else { 365 };
        if days < len {
            break;
        }
        days -= len;
        year += 1;
    }
    let months = [
        31,
        if year % 4 == 0 { 29 } else { 28 },
        31,
        30,
        31,
        30,
        31,
        31,
        30,
        31,
        30,
        31,
    ];
    let mut month = 0;
    while days >= months[month] {
        days -= months[month];
        month += 1;
    }
    format!("{year}-{:02}-{:02}", month + 1, days + 1)
}

/// What `generate` wrote.
#[derive(Debug, Serialize)]
pub struct Generated {
    pub generator_version: u32,
    pub seed: u64,
    pub documents: u64,
    pub queries: u64,
    pub bytes: u64,
    pub profile: Profile,
}

/// Writes `docs.jsonl`, `corpus.toml` (a manifest for `stillweb-indexer build`), `queries.tsv`
/// (`id`, query, source document id) and `queries.txt` (one query a line, for the load tester)
/// under `out`.
pub fn generate(
    profile: Profile,
    seed: u64,
    documents: u64,
    queries: u64,
    out: &Path,
) -> anyhow::Result<Generated> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let docs_path = out.join("docs.jsonl");
    let mut docs = std::io::BufWriter::new(
        std::fs::File::create(&docs_path)
            .with_context(|| format!("creating {}", docs_path.display()))?,
    );
    let mut bytes = 0u64;
    for i in 0..documents {
        let line = serde_json::to_string(&profile.document(seed, i))?;
        bytes += line.len() as u64 + 1;
        docs.write_all(line.as_bytes())?;
        docs.write_all(b"\n")?;
    }
    docs.flush()?;
    let mut tsv = std::io::BufWriter::new(std::fs::File::create(out.join("queries.tsv"))?);
    let mut txt = std::io::BufWriter::new(std::fs::File::create(out.join("queries.txt"))?);
    for q in 0..queries {
        let query = profile.query(seed, documents, q);
        writeln!(tsv, "{}\t{}\t{}", query.id, query.text, query.source_id)?;
        writeln!(txt, "{}", query.text)?;
    }
    tsv.flush()?;
    txt.flush()?;
    std::fs::write(
        out.join("corpus.toml"),
        format!(
            "# Generated by stillweb-bench synth (generator {GENERATOR_VERSION}, seed {seed}).\n\
             name = \"synth-{documents}\"\n\
             description = \"scale corpus: {documents} documents drawn from real sentence, length and vocabulary statistics\"\n\n\
             [[source]]\nname = \"synth\"\nformat = \"jsonl\"\npath = \"docs.jsonl\"\nexpected_documents = {documents}\n"
        ),
    )?;
    Ok(Generated {
        generator_version: GENERATOR_VERSION,
        seed,
        documents,
        queries,
        bytes,
        profile,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile() -> Profile {
        let text = "The castle stands above the old town of Brno. Its walls were rebuilt in the \
                    eighteenth century after a long siege. Visitors climb the tower for the view.";
        let sentences: Vec<String> = sentence_spans(text)
            .into_iter()
            .map(|(a, b)| text[a..b].to_string())
            .collect();
        let mut words: Vec<(String, u64)> = vec![("castle".into(), 3), ("tower".into(), 5)];
        words.sort();
        Profile {
            variants: 0,
            source_documents: 1,
            distinct_sentences: sentences.len(),
            vocabulary: 2,
            mean_sentences_per_document: 3.0,
            sentence_counts: vec![1, 3, 2],
            words,
            sentences,
        }
    }

    #[test]
    fn documents_depend_only_on_seed_and_index() {
        let p = profile();
        let a = p.document(7, 42);
        let b = p.document(7, 42);
        assert_eq!((a.text.clone(), a.url.clone()), (b.text, b.url));
        assert_ne!(p.document(7, 43).url, a.url);
        assert_ne!(
            p.document(8, 42).text + &p.document(8, 42).url,
            a.text + &a.url
        );
        assert!(a.url.ends_with("/page/42"));
        assert!(!a.title.is_empty());
        assert_eq!(a.date.len(), 10);
    }

    #[test]
    fn queries_are_agent_style_and_come_from_their_document() {
        let p = profile();
        let mut quoted = 0;
        for q in 0..400 {
            let query = p.query(3, 1000, q);
            let plain = query.text.replace('"', "");
            let words = plain
                .split_whitespace()
                .filter(|w| !w.starts_with("site:"))
                .count();
            assert!((3..=12).contains(&words), "{}", query.text);
            assert_eq!(query.text.matches('"').count() % 2, 0);
            quoted += usize::from(query.text.contains('"'));
            let source: u64 = query.source_id["synth-".len()..].parse().expect("id");
            let doc = p.document(3, source);
            if let Some(site) = query
                .text
                .split_whitespace()
                .find_map(|w| w.strip_prefix("site:"))
            {
                assert!(doc.url.contains(site));
            }
        }
        assert!((120..=280).contains(&quoted), "{quoted} of 400 quoted");
    }

    #[test]
    fn fixed_variants_bound_the_distinct_sentences() {
        let mut p = profile();
        p.variants = 2;
        let mut distinct = std::collections::HashSet::new();
        for i in 0..300 {
            distinct.extend(p.document(5, i).sentences);
        }
        assert!(
            distinct.len() <= 2 * p.sentences.len(),
            "{}",
            distinct.len()
        );
        assert!(distinct.len() > p.sentences.len(), "{}", distinct.len());
    }

    #[test]
    fn dates_and_rare_words_are_well_formed() {
        assert_eq!(date_after_2000(0), "2000-01-01");
        assert_eq!(date_after_2000(59), "2000-02-29");
        assert_eq!(date_after_2000(366), "2001-01-01");
        assert_ne!(rare_word(1), rare_word(2));
        assert!(rare_word(123_456).chars().all(|c| c.is_ascii_lowercase()));
    }
}
