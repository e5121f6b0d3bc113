//! The queries a run sends: a file of agent-style queries (one per line), picked at random, and
//! the near-repeats an agent sends when it refines a search.

use std::path::Path;

use anyhow::{Context, bail};

use crate::rng::Rng;

#[derive(Debug)]
pub struct QuerySet {
    queries: Vec<String>,
}

impl QuerySet {
    /// One query per line; blank lines and lines starting with `#` are skipped.
    pub fn load(path: &Path) -> anyhow::Result<QuerySet> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the query file {}", path.display()))?;
        let queries: Vec<String> = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(str::to_string)
            .collect();
        if queries.is_empty() {
            bail!(
                "the query file {} holds no queries (one per line expected)",
                path.display()
            );
        }
        Ok(QuerySet { queries })
    }

    pub fn len(&self) -> usize {
        self.queries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.queries.is_empty()
    }

    pub fn pick(&self, rng: &mut Rng) -> &str {
        &self.queries[rng.below(self.queries.len())]
    }

    /// The `i`-th query, wrapping around the file.
    pub fn nth(&self, i: usize) -> &str {
        &self.queries[i % self.queries.len()]
    }
}

/// How an agent rephrases after a first search: a quoted query loses its quotes (the phrase was
/// too strict), a plain one loses one word (never `site:` or an operator), or keeps it when short.
pub fn near_repeat(query: &str, rng: &mut Rng) -> String {
    if query.contains('"') {
        return query.replace('"', "");
    }
    let words: Vec<&str> = query.split_whitespace().collect();
    let droppable: Vec<usize> = (0..words.len())
        .filter(|&i| !words[i].contains(':') && !words[i].starts_with('-') && words[i] != "OR")
        .collect();
    if droppable.len() < 3 {
        return query.to_string();
    }
    let drop = droppable[rng.below(droppable.len())];
    words
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != drop)
        .map(|(_, w)| *w)
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn near_repeat_unquotes_or_drops_one_plain_word() {
        let mut rng = Rng::new(7);
        assert_eq!(
            near_repeat("\"Mona Lisa\" painter Florence", &mut rng),
            "Mona Lisa painter Florence"
        );
        for seed in 0..20 {
            let mut rng = Rng::new(seed);
            let q = near_repeat("history of site:example.org the Brno castle", &mut rng);
            assert_eq!(q.split_whitespace().count(), 5, "{q}");
            assert!(q.contains("site:example.org"), "{q}");
        }
        assert_eq!(near_repeat("two words", &mut rng), "two words");
    }

    #[test]
    fn load_skips_blank_and_comment_lines_and_refuses_an_empty_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("q.txt");
        std::fs::write(&path, "# agent queries\n\nfirst query\n  second  \n").expect("write");
        let set = QuerySet::load(&path).expect("load");
        assert_eq!(set.len(), 2);
        std::fs::write(&path, "# nothing\n\n").expect("write");
        let err = QuerySet::load(&path).expect_err("empty").to_string();
        assert!(err.contains("holds no queries"), "{err}");
    }
}
