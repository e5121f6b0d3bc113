//! Web search query syntax: what agents type into live engines.
//!
//! ```text
//! query       := item*
//! item        := "OR" | ["-"] operand
//! operand     := '"' phrase '"' | "site:" host | "after:" period | "before:" period | word
//! ```
//!
//! - `"exact phrase"` must occur in the page (its words, in order, stop words allowed between);
//! - `site:host` keeps pages whose host is `host` or ends with `.host`;
//! - `-word`, `-"phrase"`, `-site:host` exclude pages that match;
//! - `after:2024-03-05` keeps pages dated that day or later, `before:2024-03-05` pages dated
//!   before it; the period may be a month (`2024-03`) or a year (`after:2023` is from
//!   2023-01-01, `before:2023` before it). Undated pages match neither; several bounds narrow the
//!   range (an `OR` between them changes nothing);
//! - `A OR B` between phrases or sites makes them alternatives (at least one must match); between
//!   plain words it changes nothing, since plain words are already alternatives that score.
//!
//! Plain words (and the words of phrases) are what BM25 and the embedder score. Parsing never
//! fails: an unbalanced quote, an empty `site:`, a lone `-` or a dangling `OR` are read as words.

use serde::{Deserialize, Serialize};
use stillweb_corpus::date::{DateRange, parse_period};

/// A page filter that must (or must not) match.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Constraint {
    /// Text that must occur as a phrase.
    Phrase(String),
    /// A host suffix, lower-cased, without scheme, port or path.
    Site(String),
}

/// A parsed query.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParsedQuery {
    /// The words that score: plain words and the words of required phrases, operators removed.
    /// This is also what the embedder and the reranker read.
    pub text: String,
    /// Each group must match at least one of its alternatives.
    pub required: Vec<Vec<Constraint>>,
    /// Pages matching any of these are dropped.
    pub excluded: Vec<Constraint>,
    /// Words whose pages are dropped (`-word`).
    pub excluded_words: Vec<String>,
    /// The dates pages must have (`after:`, `before:`, and the range an API's date filter or a
    /// session's cutoff adds): unbounded keeps undated pages too.
    #[serde(default, skip_serializing_if = "DateRange::is_unbounded")]
    pub published: DateRange,
}

impl ParsedQuery {
    /// Whether any operator restricts the result set.
    pub fn has_filters(&self) -> bool {
        !self.required.is_empty()
            || !self.excluded.is_empty()
            || !self.excluded_words.is_empty()
            || self.published.is_bounded()
    }

    /// How many operators the query holds (each phrase, `site:` and `-term`, counting every
    /// alternative of an `OR`; the date range's bounds): each one is a filter clause, so servers
    /// cap it.
    pub fn operator_count(&self) -> usize {
        self.required.iter().map(Vec::len).sum::<usize>()
            + self.excluded.len()
            + self.excluded_words.len()
            + usize::from(self.published.from.is_some())
            + usize::from(self.published.until.is_some())
    }

    /// Whether some required group asks for a phrase (these can be relaxed when nothing matches).
    pub fn requires_phrases(&self) -> bool {
        self.required
            .iter()
            .any(|g| g.iter().any(|c| matches!(c, Constraint::Phrase(_))))
    }

    /// The same query with phrase requirements turned into plain words: what live engines do
    /// when no page contains the phrase.
    pub fn relaxed(&self) -> ParsedQuery {
        ParsedQuery {
            required: self
                .required
                .iter()
                .filter(|g| !g.iter().any(|c| matches!(c, Constraint::Phrase(_))))
                .cloned()
                .collect(),
            ..self.clone()
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Operand {
    Word(String),
    Phrase(String),
    Site(String),
    /// `after:` or `before:`, as the range it keeps.
    Dates(DateRange),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Or,
    Item { negated: bool, operand: Operand },
}

/// Parses `query`; never fails.
pub fn parse(query: &str) -> ParsedQuery {
    let tokens = tokenize(query);
    // Group consecutive items joined by OR.
    let mut groups: Vec<Vec<(bool, Operand)>> = Vec::new();
    let mut join_next = false;
    for (i, token) in tokens.iter().enumerate() {
        match token {
            Token::Or => {
                let between_items = i > 0
                    && matches!(tokens.get(i + 1), Some(Token::Item { .. }))
                    && matches!(tokens[i - 1], Token::Item { .. });
                if between_items {
                    join_next = true;
                } else {
                    groups.push(vec![(false, Operand::Word("OR".into()))]);
                }
            }
            Token::Item { negated, operand } => {
                let item = (*negated, operand.clone());
                match groups.last_mut() {
                    Some(group) if join_next => group.push(item),
                    _ => groups.push(vec![item]),
                }
                join_next = false;
            }
        }
    }

    let mut parsed = ParsedQuery::default();
    let mut words: Vec<String> = Vec::new();
    for group in groups {
        // A negated alternative inside an OR, or a plain word among the alternatives, makes the
        // group soft: its positive parts count as words.
        let hard = group.len() > 1
            && group
                .iter()
                .all(|(negated, o)| !negated && !matches!(o, Operand::Word(_)));
        let group_is_single = group.len() == 1;
        if group_is_single || !hard {
            for (negated, operand) in group {
                match (negated, operand) {
                    (false, Operand::Word(w)) => words.push(w),
                    (false, Operand::Phrase(p)) if group_is_single => {
                        words.push(p.clone());
                        parsed.required.push(vec![Constraint::Phrase(p)]);
                    }
                    (false, Operand::Phrase(p)) => words.push(p),
                    (false, Operand::Site(s)) => parsed.required.push(vec![Constraint::Site(s)]),
                    (_, Operand::Dates(range)) => {
                        parsed.published = parsed.published.intersect(range);
                    }
                    (true, Operand::Word(w)) => parsed.excluded_words.push(w),
                    (true, Operand::Phrase(p)) => parsed.excluded.push(Constraint::Phrase(p)),
                    (true, Operand::Site(s)) => parsed.excluded.push(Constraint::Site(s)),
                }
            }
            continue;
        }
        let mut alternatives = Vec::new();
        for (_, operand) in group {
            match operand {
                Operand::Phrase(p) => {
                    words.push(p.clone());
                    alternatives.push(Constraint::Phrase(p));
                }
                Operand::Site(s) => alternatives.push(Constraint::Site(s)),
                Operand::Dates(range) => parsed.published = parsed.published.intersect(range),
                Operand::Word(w) => words.push(w),
            }
        }
        if !alternatives.is_empty() {
            parsed.required.push(alternatives);
        }
    }
    parsed.text = words.join(" ");
    parsed
}

fn tokenize(query: &str) -> Vec<Token> {
    let chars: Vec<char> = query.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_whitespace() {
            i += 1;
            continue;
        }
        let negated = chars[i] == '-' && chars.get(i + 1).is_some_and(|c| !c.is_whitespace());
        let start = if negated { i + 1 } else { i };
        if chars.get(start) == Some(&'"') {
            if let Some(len) = chars[start + 1..].iter().position(|&c| c == '"') {
                let phrase: String = chars[start + 1..start + 1 + len].iter().collect();
                i = start + len + 2;
                let phrase = phrase.split_whitespace().collect::<Vec<_>>().join(" ");
                if !phrase.is_empty() {
                    tokens.push(Token::Item {
                        negated,
                        operand: Operand::Phrase(phrase),
                    });
                }
                continue;
            }
            // No closing quote: the quote is dropped and the rest read as words.
            i = start + 1;
            continue;
        }
        let end = (start..chars.len())
            .find(|&j| chars[j].is_whitespace() || (j > start && chars[j] == '"'))
            .unwrap_or(chars.len());
        let word: String = chars[start..end].iter().collect();
        i = end;
        if word == "OR" && !negated {
            tokens.push(Token::Or);
            continue;
        }
        let operand = match (site(&word), dates(&word)) {
            (Some(host), _) => Operand::Site(host),
            // A negated date bound means nothing: it stays a word.
            (None, Some(range)) if !negated => Operand::Dates(range),
            _ => Operand::Word(word),
        };
        tokens.push(Token::Item { negated, operand });
    }
    tokens
}

/// `after:PERIOD` → the range from the period's start, `before:PERIOD` → the range before it;
/// `None` if the word is neither with a period `parse_period` reads.
fn dates(word: &str) -> Option<DateRange> {
    let (name, period) = word.split_once(':')?;
    let (start, _) = parse_period(period)?;
    match name.to_ascii_lowercase().as_str() {
        "after" => Some(DateRange::since(start)),
        "before" => Some(DateRange::before(start)),
        _ => None,
    }
}

/// `site:host` → the host, normalised; `None` if the word is not a usable site operator.
fn site(word: &str) -> Option<String> {
    let rest = word.get(..5).filter(|p| p.eq_ignore_ascii_case("site:"))?;
    let mut host = word[rest.len()..].to_ascii_lowercase();
    for scheme in ["https://", "http://"] {
        if let Some(stripped) = host.strip_prefix(scheme) {
            host = stripped.to_string();
        }
    }
    let host = host
        .split(['/', '?', '#'])
        .next()
        .unwrap_or_default()
        .split(':')
        .next()
        .unwrap_or_default()
        .trim_matches('.')
        .trim_start_matches("*.")
        .to_string();
    let valid = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-');
    valid.then_some(host)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn phrase(p: &str) -> Constraint {
        Constraint::Phrase(p.into())
    }

    fn site_c(s: &str) -> Constraint {
        Constraint::Site(s.into())
    }

    #[test]
    fn plain_words_are_just_text() {
        let q = parse("  who wrote   Hamlet ");
        assert_eq!(q.text, "who wrote Hamlet");
        assert!(!q.has_filters());
    }

    #[test]
    fn phrases_sites_and_exclusions() {
        let q = parse(
            r#""Treaty of Versailles" signed site:en.wikipedia.org -draft -"peace talks" -site:example.com"#,
        );
        assert_eq!(q.text, "Treaty of Versailles signed");
        assert_eq!(
            q.required,
            vec![
                vec![phrase("Treaty of Versailles")],
                vec![site_c("en.wikipedia.org")]
            ]
        );
        assert_eq!(
            q.excluded,
            vec![phrase("peace talks"), site_c("example.com")]
        );
        assert_eq!(q.excluded_words, vec!["draft".to_string()]);
        assert_eq!(q.operator_count(), 5);
        assert_eq!(parse("who wrote Hamlet").operator_count(), 0);
        assert!(q.requires_phrases());
        let relaxed = q.relaxed();
        assert_eq!(relaxed.required, vec![vec![site_c("en.wikipedia.org")]]);
        assert_eq!(relaxed.text, q.text);
    }

    #[test]
    fn or_joins_alternatives_between_operators() {
        let q = parse(r#""red wine" OR "white wine" site:a.org OR site:b.org"#);
        assert_eq!(
            q.required,
            vec![
                vec![phrase("red wine"), phrase("white wine")],
                vec![site_c("a.org"), site_c("b.org")]
            ]
        );
        assert_eq!(q.text, "red wine white wine");
        // Between words OR changes nothing; a word among phrase alternatives makes them soft.
        assert_eq!(parse("cats OR dogs").text, "cats dogs");
        let soft = parse(r#"cats OR "big dogs""#);
        assert!(soft.required.is_empty());
        assert_eq!(soft.text, "cats big dogs");
        // Dangling or doubled ORs are words.
        assert_eq!(parse("OR cats OR").text, "OR cats OR");
    }

    #[test]
    fn odd_input_is_read_as_words() {
        assert_eq!(
            parse(r#"unbalanced "quote here"#).text,
            "unbalanced quote here"
        );
        assert_eq!(parse("site: nothing").text, "site: nothing");
        assert_eq!(parse("- lone dash").text, "- lone dash");
        assert_eq!(parse("covid-19 e-mail").text, "covid-19 e-mail");
        assert_eq!(parse(r#""" empty"#).text, "empty");
        assert_eq!(parse("site:bad_host!").text, "site:bad_host!");
        assert_eq!(
            parse("SITE:HTTPS://Example.COM:8080/path").required,
            vec![vec![site_c("example.com")]]
        );
    }

    #[test]
    fn after_and_before_bound_the_date_with_the_other_operators() {
        let day = |d: &str| stillweb_corpus::date::parse_day(d).expect("day");
        let q = parse(r#"drekev labs after:2021 before:2022-06-01 site:techbrief.example -"wiki""#);
        assert_eq!(q.text, "drekev labs");
        assert_eq!(
            q.published,
            DateRange::between(day("2021-01-01"), day("2022-06-01"))
        );
        assert_eq!(q.required, vec![vec![site_c("techbrief.example")]]);
        assert_eq!(q.excluded, vec![phrase("wiki")]);
        assert_eq!(q.operator_count(), 4);
        assert!(q.has_filters());
        assert!(parse("news after:2024-03").has_filters());
        // Several bounds narrow; OR between them changes nothing; the relaxed query keeps them.
        let q = parse(r#""no such phrase" after:2020 OR after:2023"#);
        assert_eq!(q.published, DateRange::since(day("2023-01-01")));
        assert_eq!(q.relaxed().published, q.published);
        // Not a date bound: words.
        assert_eq!(parse("after:tomorrow").text, "after:tomorrow");
        assert!(!parse("after:tomorrow").has_filters());
        assert_eq!(
            parse("-before:2020").excluded_words,
            vec!["before:2020".to_string()]
        );
    }

    proptest! {
        #[test]
        fn never_panics_and_keeps_plain_text(s in "\\PC{0,80}") {
            let q = parse(&s);
            prop_assert!(q.text.len() <= s.len());
        }

        #[test]
        fn plain_words_round_trip(words in proptest::collection::vec("[a-z]{1,8}", 0..10)) {
            let text = words.join(" ");
            let q = parse(&text);
            prop_assert_eq!(&q.text, &text);
            prop_assert!(!q.has_filters());
        }
    }
}
