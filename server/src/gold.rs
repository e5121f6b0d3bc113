//! Gold labels (`--gold FILE`): which page answers which question, and which pages are its
//! typed negatives, kept in the server only (never in the index, never in ranking) so that a
//! session's transcript can say whether the episode was ever shown, or visited, the page that
//! answers its question — the measurement the seed study needed custom log mining for.
//!
//! The file is JSON Lines in the shape of `../shared/data/fabricated/items.jsonl`:
//! `{"id", "question", "gold_url", "negatives": [{"kind", "url"}]}` (other fields are ignored).

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use stillweb_corpus::url_norm::normalize_url;

use crate::session::{Event, Transcript};

#[derive(Debug, Deserialize)]
struct ItemLine {
    id: String,
    question: String,
    gold_url: String,
    #[serde(default)]
    negatives: Vec<NegativeLine>,
}

#[derive(Debug, Deserialize)]
struct NegativeLine {
    kind: String,
    url: String,
}

/// One labelled question.
#[derive(Debug, Clone)]
struct Item {
    id: String,
    question: String,
    gold_url: String,
}

/// What a labelled URL is to an item.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Label {
    pub item: String,
    /// `gold`, or the negative's kind (`wrong_date`, `namesake_or_misspelling`...).
    pub role: String,
}

/// How far an episode got with one item: when its gold page was first shown, and whether it
/// was visited.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ItemSummary {
    pub item: String,
    pub question: String,
    pub gold_url: String,
    /// The search step (1-based, among the session's searches) whose results first held the
    /// gold page, or `"never"`.
    pub gold_shown_at_step: StepOrNever,
    /// Its rank in those results.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gold_rank: Option<usize>,
    /// Whether the episode read the gold page (a visit that succeeded).
    pub gold_visited: bool,
    /// How many of the item's negatives the episode was shown.
    pub negatives_shown: usize,
}

/// A step number, or `"never"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepOrNever {
    Step(usize),
    Never,
}

impl Serialize for StepOrNever {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            StepOrNever::Step(n) => s.serialize_u64(*n as u64),
            StepOrNever::Never => s.serialize_str("never"),
        }
    }
}

/// A transcript's labels: every labelled URL it was shown or visited, and a summary per item it
/// touched (its question searched, or one of its pages shown or visited).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TranscriptLabels {
    pub urls: std::collections::BTreeMap<String, Vec<Label>>,
    pub items: Vec<ItemSummary>,
}

/// The loaded labels.
#[derive(Debug)]
pub struct Gold {
    items: Vec<Item>,
    /// Normalised URL → its labels.
    by_url: HashMap<String, Vec<(usize, String)>>,
    /// Normalised question text → item.
    by_question: HashMap<String, usize>,
    /// Sessions (namespaced) already counted as having surfaced / visited a gold page, for the
    /// Prometheus counters: each session counts once per server process.
    counted: Mutex<Counted>,
}

#[derive(Debug, Default)]
struct Counted {
    surfaced: HashSet<String>,
    visited: HashSet<String>,
}

/// Most sessions remembered as counted; past it the sets start over (a session may then count
/// twice, in a counter meant for rates).
const MAX_COUNTED: usize = 100_000;

fn question_key(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}

impl Gold {
    /// Reads a labels file; the error names the file and the line.
    pub fn load(path: &Path) -> Result<Gold, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("--gold {}: cannot read it: {e}", path.display()))?;
        Gold::parse(&text).map_err(|e| format!("--gold {}: {e}", path.display()))
    }

    fn parse(text: &str) -> Result<Gold, String> {
        let mut gold = Gold {
            items: Vec::new(),
            by_url: HashMap::new(),
            by_question: HashMap::new(),
            counted: Mutex::new(Counted::default()),
        };
        for (n, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let item: ItemLine = serde_json::from_str(line).map_err(|e| {
                format!(
                    "line {}: {e} (each line is {{\"id\", \"question\", \"gold_url\", \"negatives\": [{{\"kind\", \"url\"}}]}})",
                    n + 1
                )
            })?;
            let index = gold.items.len();
            let key =
                |url: &str| normalize_url(url).map_err(|e| format!("line {}: `{url}`: {e}", n + 1));
            gold.by_url
                .entry(key(&item.gold_url)?)
                .or_default()
                .push((index, "gold".into()));
            for negative in &item.negatives {
                gold.by_url
                    .entry(key(&negative.url)?)
                    .or_default()
                    .push((index, negative.kind.clone()));
            }
            gold.by_question.insert(question_key(&item.question), index);
            gold.items.push(Item {
                id: item.id,
                question: item.question,
                gold_url: item.gold_url,
            });
        }
        if gold.items.is_empty() {
            return Err("no items".into());
        }
        Ok(gold)
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    fn labels(&self, url: &str) -> &[(usize, String)] {
        normalize_url(url)
            .ok()
            .and_then(|key| self.by_url.get(&key))
            .map_or(&[], Vec::as_slice)
    }

    fn is_gold(&self, url: &str) -> bool {
        self.labels(url).iter().any(|(_, role)| role == "gold")
    }

    /// The labels of `transcript`.
    pub fn label(&self, transcript: &Transcript) -> TranscriptLabels {
        let mut urls = std::collections::BTreeMap::new();
        // Items in the order the session first touched them.
        let mut touched: Vec<usize> = Vec::new();
        for event in &transcript.events {
            let (question, seen) = match event {
                Event::Search { query, urls, .. } => (Some(query), urls.as_slice()),
                Event::Visit { url, .. } => (None, std::slice::from_ref(url)),
            };
            if let Some(&item) = question.and_then(|q| self.by_question.get(&question_key(q))) {
                touched.push(item);
            }
            for url in seen {
                let labels = self.labels(url);
                touched.extend(labels.iter().map(|(item, _)| *item));
                if !labels.is_empty() {
                    urls.entry(url.clone()).or_insert_with(|| {
                        labels
                            .iter()
                            .map(|(item, role)| Label {
                                item: self.items[*item].id.clone(),
                                role: role.clone(),
                            })
                            .collect::<Vec<_>>()
                    });
                }
            }
        }
        let mut first = HashSet::new();
        touched.retain(|item| first.insert(*item));
        let items = touched
            .into_iter()
            .map(|i| self.summary(i, transcript))
            .collect();
        TranscriptLabels { urls, items }
    }

    fn summary(&self, index: usize, transcript: &Transcript) -> ItemSummary {
        let item = &self.items[index];
        let gold_key = normalize_url(&item.gold_url).ok();
        let is_this = |url: &str, want_gold: bool| {
            self.labels(url)
                .iter()
                .any(|(i, role)| *i == index && (role == "gold") == want_gold)
        };
        let mut shown = StepOrNever::Never;
        let mut rank = None;
        let mut visited = false;
        let mut negatives: HashSet<String> = HashSet::new();
        let mut step = 0;
        for event in &transcript.events {
            match event {
                Event::Search { urls, .. } => {
                    step += 1;
                    for (r, url) in urls.iter().enumerate() {
                        if shown == StepOrNever::Never && is_this(url, true) {
                            shown = StepOrNever::Step(step);
                            rank = Some(r + 1);
                        }
                        if is_this(url, false)
                            && let Ok(key) = normalize_url(url)
                        {
                            negatives.insert(key);
                        }
                    }
                }
                Event::Visit { url, outcome, .. } => {
                    if outcome == "ok" && normalize_url(url).ok() == gold_key {
                        visited = true;
                    }
                }
            }
        }
        ItemSummary {
            item: item.id.clone(),
            question: item.question.clone(),
            gold_url: item.gold_url.clone(),
            gold_shown_at_step: shown,
            gold_rank: rank,
            gold_visited: visited,
            negatives_shown: negatives.len(),
        }
    }

    /// Notes a search's shown `urls` for `session`: true the first time this session is shown
    /// a gold page (for the `surfaced` counter).
    pub fn note_shown(&self, session: &str, urls: &[String]) -> bool {
        urls.iter().any(|u| self.is_gold(u)) && self.first(session, |c| &mut c.surfaced)
    }

    /// Notes a successful visit: true the first time this session reads a gold page.
    pub fn note_visited(&self, session: &str, url: &str) -> bool {
        self.is_gold(url) && self.first(session, |c| &mut c.visited)
    }

    fn first(&self, session: &str, set: impl Fn(&mut Counted) -> &mut HashSet<String>) -> bool {
        let mut counted = self
            .counted
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let set = set(&mut counted);
        if set.len() >= MAX_COUNTED {
            set.clear();
        }
        set.insert(session.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ITEMS: &str = r#"{"id": "q1", "question": "Who founded  Drekev Labs?", "answer": "x", "gold_url": "https://a.example/gold", "negatives": [{"kind": "wrong_date", "url": "https://a.example/neg"}]}
{"id": "q2", "question": "Another question?", "gold_url": "https://b.example/gold", "negatives": []}
"#;

    fn search(query: &str, urls: &[&str]) -> Event {
        Event::Search {
            at: "t".into(),
            collection: None,
            query: query.into(),
            urls: urls.iter().map(|u| u.to_string()).collect(),
        }
    }

    fn visit(url: &str, outcome: &str) -> Event {
        Event::Visit {
            at: "t".into(),
            collection: None,
            url: url.into(),
            outcome: outcome.into(),
        }
    }

    fn transcript(events: Vec<Event>) -> Transcript {
        Transcript {
            session: "e1".into(),
            started: "t".into(),
            events,
            dropped_events: 0,
            as_of: None,
        }
    }

    #[test]
    fn a_transcript_says_when_each_items_gold_surfaced_and_whether_it_was_read() {
        let gold = Gold::parse(ITEMS).expect("parse");
        let t = transcript(vec![
            search(
                "who founded drekev labs?",
                &["https://a.example/neg", "https://x.example/"],
            ),
            search(
                "Drekev Labs founder",
                &["https://z.example/", "https://A.example/gold"],
            ),
            visit("https://a.example/gold#top", "ok"),
            search("Another question?", &["https://x.example/"]),
        ]);
        let labels = gold.label(&t);
        assert_eq!(labels.items.len(), 2);
        let q1 = &labels.items[0];
        assert_eq!(q1.item, "q1");
        assert_eq!(q1.gold_shown_at_step, StepOrNever::Step(2));
        assert_eq!(q1.gold_rank, Some(2));
        assert!(q1.gold_visited);
        assert_eq!(q1.negatives_shown, 1);
        let q2 = &labels.items[1];
        assert_eq!(q2.gold_shown_at_step, StepOrNever::Never);
        assert_eq!(serde_json::json!(q2)["gold_shown_at_step"], "never");
        assert!(!q2.gold_visited);
        assert_eq!(labels.urls["https://a.example/neg"][0].role, "wrong_date");
        assert_eq!(labels.urls["https://A.example/gold"][0].role, "gold");
        assert!(!labels.urls.contains_key("https://x.example/"));
    }

    #[test]
    fn a_refused_visit_is_not_a_read() {
        let gold = Gold::parse(ITEMS).expect("parse");
        let t = transcript(vec![visit("https://a.example/gold", "url_not_seen")]);
        let labels = gold.label(&t);
        assert!(!labels.items[0].gold_visited);
    }

    #[test]
    fn each_session_counts_once() {
        let gold = Gold::parse(ITEMS).expect("parse");
        let shown = vec!["https://a.example/gold".to_string()];
        assert!(gold.note_shown("-/e1", &shown));
        assert!(!gold.note_shown("-/e1", &shown));
        assert!(!gold.note_shown("-/e2", &["https://x.example/".to_string()]));
        assert!(gold.note_visited("-/e1", "https://a.example/gold"));
        assert!(!gold.note_visited("-/e1", "https://a.example/gold"));
    }

    #[test]
    fn bad_files_name_the_line() {
        let e = Gold::parse("{\"id\": \"q\"}\n").expect_err("missing fields");
        assert!(e.starts_with("line 1:"), "{e}");
        let e = Gold::parse(
            "{\"id\": \"q\", \"question\": \"?\", \"gold_url\": \"not a url\", \"negatives\": []}",
        )
        .expect_err("bad url");
        assert!(e.contains("not a url"), "{e}");
        assert!(Gold::parse("\n").is_err());
    }
}
