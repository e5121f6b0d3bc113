//! Sentence-pack chunking: split text into sentences, then greedily pack whole sentences into
//! chunks of at most `max_chars` characters (Unicode scalar values), without overlap.
//!
//! A sentence longer than `max_chars` is cut at word boundaries, and a word longer than
//! `max_chars` is cut hard. Chunks are byte spans into the text; everything between chunks is
//! whitespace, so the text is exactly recoverable from the chunk offsets.
//!
//! Sentence ends are `.`, `!`, `?` (with closing quotes or brackets) followed by whitespace and
//! not by a lower-case word, CJK full stops, and line breaks. A period after a known abbreviation
//! (`e.g.`, `Dr.`), an initial (`J.`) or an initialism (`U.S.`) does not end a sentence.

use serde::{Deserialize, Serialize};

/// Chunker parameters; recorded in the index manifest because they shape the index.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChunkerConfig {
    /// Maximum characters (Unicode scalar values) in one chunk.
    pub max_chars: usize,
}

impl Default for ChunkerConfig {
    fn default() -> Self {
        ChunkerConfig { max_chars: 500 }
    }
}

/// A chunk as a byte span `[start, end)` of its document's text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunk {
    pub start: usize,
    pub end: usize,
}

impl Chunk {
    pub fn slice(self, text: &str) -> &str {
        &text[self.start..self.end]
    }
}

/// Abbreviations whose period never ends a sentence (lower-cased, without the final period).
const ABBREVIATIONS: &[&str] = &[
    "mr", "mrs", "ms", "dr", "prof", "sr", "jr", "st", "mt", "vs", "cf", "al", "fig", "figs", "no",
    "nos", "vol", "vols", "pp", "p", "ed", "eds", "approx", "ca", "gen", "gov", "sen", "rep",
    "rev", "lt", "col", "capt", "sgt", "maj", "jan", "feb", "mar", "apr", "jun", "jul", "aug",
    "sep", "sept", "oct", "nov", "dec", "inc", "ltd", "co", "corp", "dept", "univ", "est", "e.g",
    "i.e", "viz", "ch", "sec", "op", "cit", "ibid",
];

/// Byte spans of the sentences of `text`, each without surrounding whitespace.
pub fn sentence_spans(text: &str) -> Vec<(usize, usize)> {
    let mut spans = Vec::new();
    let mut start: Option<usize> = None;
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    let mut i = 0;
    while i < chars.len() {
        let (pos, c) = chars[i];
        if start.is_none() {
            if !c.is_whitespace() {
                start = Some(pos);
            }
            i += 1;
            continue;
        }
        if c == '\n' || c == '\r' {
            push_trimmed(text, &mut spans, start.take(), pos);
            i += 1;
            continue;
        }
        if is_cjk_terminator(c) {
            let end = skip_closers(&chars, i + 1);
            push_trimmed(text, &mut spans, start.take(), byte_at(text, &chars, end));
            i = end;
            continue;
        }
        if matches!(c, '.' | '!' | '?') {
            let mut j = i + 1;
            while j < chars.len() && matches!(chars[j].1, '.' | '!' | '?') {
                j += 1;
            }
            let end = skip_closers(&chars, j);
            let followed_by_space = end >= chars.len() || chars[end].1.is_whitespace();
            if followed_by_space {
                let sentence_start = start.unwrap_or(pos);
                if ends_sentence(text, &chars, sentence_start, i, j, end) {
                    push_trimmed(text, &mut spans, start.take(), byte_at(text, &chars, end));
                }
            }
            i = end.max(i + 1);
            continue;
        }
        i += 1;
    }
    push_trimmed(text, &mut spans, start, text.len());
    spans
}

fn byte_at(text: &str, chars: &[(usize, char)], index: usize) -> usize {
    chars.get(index).map_or(text.len(), |(p, _)| *p)
}

fn push_trimmed(text: &str, spans: &mut Vec<(usize, usize)>, start: Option<usize>, end: usize) {
    if let Some(start) = start {
        let trimmed = text[start..end].trim_end();
        if !trimmed.is_empty() {
            spans.push((start, start + trimmed.len()));
        }
    }
}

fn is_cjk_terminator(c: char) -> bool {
    matches!(c, '。' | '！' | '？' | '｡')
}

fn is_closer(c: char) -> bool {
    matches!(
        c,
        '"' | '\'' | '”' | '’' | ')' | ']' | '}' | '»' | '」' | '』' | '）'
    )
}

fn skip_closers(chars: &[(usize, char)], mut j: usize) -> usize {
    while j < chars.len() && is_closer(chars[j].1) {
        j += 1;
    }
    j
}

/// Decides whether the terminator run `chars[term..run_end]` (closers up to `end`) ends the
/// sentence that started at byte `sentence_start`.
fn ends_sentence(
    text: &str,
    chars: &[(usize, char)],
    sentence_start: usize,
    term: usize,
    run_end: usize,
    end: usize,
) -> bool {
    let next = chars[end..]
        .iter()
        .map(|(_, c)| *c)
        .find(|c| !c.is_whitespace());
    let Some(next) = next else { return true };
    // A lower-case continuation means the period was not a full stop ("e.g. this", "etc. and").
    if next.is_lowercase() || next.is_ascii_digit() {
        return false;
    }
    let run_is_single_period = chars[term].1 == '.' && run_end == term + 1;
    if !run_is_single_period {
        // "!", "?", "?!" and an ellipsis followed by a capital end a sentence.
        return true;
    }
    // The word before the period.
    let period_byte = chars[term].0;
    let word_start = text[sentence_start..period_byte]
        .rfind(|c: char| c.is_whitespace() || c == '(' || c == '"' || c == '“')
        .map_or(sentence_start, |p| {
            let ws = &text[sentence_start + p..];
            sentence_start + p + ws.chars().next().map_or(1, char::len_utf8)
        });
    let word = &text[word_start..period_byte];
    if word.is_empty() {
        return true;
    }
    // An enumeration marker opening the sentence ("1. Mix", "a. First").
    let is_marker =
        word.len() <= 3 && word.bytes().all(|b| b.is_ascii_digit()) || word.chars().count() == 1;
    if word_start == sentence_start && is_marker {
        return false;
    }
    let lower = word.to_lowercase();
    if ABBREVIATIONS.contains(&lower.as_str()) {
        return false;
    }
    // An initial ("J.") or an initialism with inner periods ("U.S.", "Ph.D.").
    let mut letters = word.chars();
    let single_capital = letters.next().is_some_and(char::is_uppercase) && letters.next().is_none();
    let initialism = word.contains('.') && word.split('.').all(|part| part.chars().count() <= 2);
    !(single_capital || initialism)
}

/// Splits `text` into chunks of whole sentences, each at most `config.max_chars` characters.
pub fn chunk_text(text: &str, config: &ChunkerConfig) -> Vec<Chunk> {
    let max = config.max_chars.max(1);
    let mut units = Vec::new();
    for (start, end) in sentence_spans(text) {
        if text[start..end].chars().count() <= max {
            units.push((start, end));
        } else {
            split_long(text, start, end, max, &mut units);
        }
    }
    let mut chunks: Vec<Chunk> = Vec::new();
    let mut current: Option<Chunk> = None;
    for (start, end) in units {
        current = match current {
            Some(chunk) if text[chunk.start..end].chars().count() <= max => Some(Chunk {
                start: chunk.start,
                end,
            }),
            Some(chunk) => {
                chunks.push(chunk);
                Some(Chunk { start, end })
            }
            None => Some(Chunk { start, end }),
        };
    }
    chunks.extend(current);
    chunks
}

/// Cuts an over-long sentence into pieces of at most `max` characters at word boundaries (a word
/// longer than `max` is cut hard).
fn split_long(text: &str, start: usize, end: usize, max: usize, out: &mut Vec<(usize, usize)>) {
    let mut piece_start: Option<usize> = None;
    let mut piece_end = start;
    let mut piece_chars = 0usize;
    for (word_start, word) in words(&text[start..end]) {
        let word_start = start + word_start;
        let word_end = word_start + word.len();
        let word_chars = word.chars().count();
        if let Some(ps) = piece_start {
            let gap_chars = text[piece_end..word_start].chars().count();
            if piece_chars + gap_chars + word_chars <= max {
                piece_end = word_end;
                piece_chars += gap_chars + word_chars;
                continue;
            }
            out.push((ps, piece_end));
        }
        if word_chars <= max {
            piece_start = Some(word_start);
            piece_end = word_end;
            piece_chars = word_chars;
        } else {
            // Hard cuts: full pieces of `max` characters, the remainder starts a new piece.
            let mut cut = word_start;
            let mut remaining = word_chars;
            while remaining > max {
                let next = cut
                    + text[cut..]
                        .char_indices()
                        .nth(max)
                        .map_or(word_end - cut, |(p, _)| p);
                out.push((cut, next));
                cut = next;
                remaining -= max;
            }
            piece_start = Some(cut);
            piece_end = word_end;
            piece_chars = remaining;
        }
    }
    if let Some(ps) = piece_start {
        out.push((ps, piece_end));
    }
}

fn words(s: &str) -> impl Iterator<Item = (usize, &str)> {
    s.split_whitespace()
        .map(move |w| (w.as_ptr() as usize - s.as_ptr() as usize, w))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sentences(text: &str) -> Vec<&str> {
        sentence_spans(text)
            .into_iter()
            .map(|(s, e)| &text[s..e])
            .collect()
    }

    #[test]
    fn splits_plain_sentences() {
        assert_eq!(
            sentences("It rains. It pours! Does it? Yes."),
            ["It rains.", "It pours!", "Does it?", "Yes."]
        );
    }

    #[test]
    fn abbreviations_do_not_end_sentences() {
        assert_eq!(
            sentences("Use tools, e.g. hammers. Then rest."),
            ["Use tools, e.g. hammers.", "Then rest."]
        );
        assert_eq!(
            sentences("He moved to the U.S. in 1990. He stayed."),
            ["He moved to the U.S. in 1990.", "He stayed."]
        );
        assert_eq!(
            sentences("Dr. Smith met Mr. Jones. They talked."),
            ["Dr. Smith met Mr. Jones.", "They talked."]
        );
        assert_eq!(
            sentences("J. R. R. Tolkien wrote it. Fans agree."),
            ["J. R. R. Tolkien wrote it.", "Fans agree."]
        );
        assert_eq!(
            sentences("See Fig. 3 for details."),
            ["See Fig. 3 for details."]
        );
        assert_eq!(sentences("Yes. It works."), ["Yes.", "It works."]);
    }

    #[test]
    fn decimals_and_domains_are_not_sentence_ends() {
        assert_eq!(
            sentences("The value is 3.5 today. Visit example.com now."),
            ["The value is 3.5 today.", "Visit example.com now."]
        );
    }

    #[test]
    fn ellipsis_ends_only_before_a_capital() {
        assert_eq!(
            sentences("Wait... and then nothing. Well... Fine."),
            ["Wait... and then nothing.", "Well...", "Fine."]
        );
    }

    #[test]
    fn quotes_and_brackets_stay_with_their_sentence() {
        assert_eq!(
            sentences("He said \"Stop.\" She left. (It was late.) Done."),
            ["He said \"Stop.\"", "She left.", "(It was late.)", "Done."]
        );
        assert_eq!(sentences("“Really?” he asked."), ["“Really?” he asked."]);
    }

    #[test]
    fn list_items_and_lines_are_sentences() {
        assert_eq!(
            sentences("Ingredients:\n- flour\n- water\n\n1. Mix\n2. Bake"),
            ["Ingredients:", "- flour", "- water", "1. Mix", "2. Bake"]
        );
    }

    #[test]
    fn cjk_full_stops_end_sentences_without_spaces() {
        assert_eq!(
            sentences("今日は晴れ。明日は雨！本当？"),
            ["今日は晴れ。", "明日は雨！", "本当？"]
        );
    }

    #[test]
    fn text_without_punctuation_is_one_sentence() {
        assert_eq!(
            sentences("no punctuation at all here"),
            ["no punctuation at all here"]
        );
        assert!(sentences("   \n\t ").is_empty());
    }

    #[test]
    fn packs_sentences_greedily() {
        let text = "Aaaa bbb. Cccc ddd. Eeee fff.";
        let chunks = chunk_text(text, &ChunkerConfig { max_chars: 19 });
        let parts: Vec<&str> = chunks.iter().map(|c| c.slice(text)).collect();
        assert_eq!(parts, ["Aaaa bbb. Cccc ddd.", "Eeee fff."]);
    }

    #[test]
    fn long_sentence_is_cut_at_words_and_long_word_hard() {
        let text = format!(
            "{} end. {}",
            "word ".repeat(150).trim_end(),
            "x".repeat(1200)
        );
        let chunks = chunk_text(&text, &ChunkerConfig::default());
        for c in &chunks {
            let s = c.slice(&text);
            assert!(s.chars().count() <= 500);
            assert!(!s.starts_with(' ') && !s.ends_with(' '));
        }
        // Word cuts never split "word".
        assert!(chunks[0].slice(&text).ends_with("word"));
        assert_eq!(chunks.last().map(|c| c.slice(&text).len()), Some(200));
    }

    #[test]
    fn multibyte_text_counts_characters_not_bytes() {
        let sentence = "é".repeat(300) + ".";
        let text = format!("{sentence} {sentence}");
        let chunks = chunk_text(&text, &ChunkerConfig::default());
        assert_eq!(chunks.len(), 2);
    }

    /// Checks every invariant the chunker promises, against `sentence_spans` as the oracle.
    fn check_invariants(text: &str, max: usize) -> Result<(), TestCaseError> {
        let chunks = chunk_text(text, &ChunkerConfig { max_chars: max });
        let spans = sentence_spans(text);
        let mut rebuilt = String::new();
        let mut cursor = 0;
        for c in &chunks {
            prop_assert!(c.start >= cursor && c.end > c.start);
            let gap = &text[cursor..c.start];
            prop_assert!(gap.chars().all(char::is_whitespace), "gap {:?}", gap);
            rebuilt.push_str(gap);
            rebuilt.push_str(c.slice(text));
            prop_assert!(c.slice(text).chars().count() <= max);
            // A chunk ends at a sentence end unless it ends inside an over-long sentence.
            let at_sentence_end = spans.iter().any(|&(_, e)| e == c.end);
            let inside_long = spans
                .iter()
                .any(|&(s, e)| s < c.end && c.end <= e && text[s..e].chars().count() > max);
            prop_assert!(
                at_sentence_end || inside_long,
                "chunk {:?} ends mid-sentence",
                c.slice(text)
            );
            cursor = c.end;
        }
        let tail = &text[cursor..];
        prop_assert!(tail.chars().all(char::is_whitespace));
        rebuilt.push_str(tail);
        prop_assert_eq!(rebuilt, text);
        // Greedy: a whole sentence that starts the next chunk would not have fitted in this one.
        for pair in chunks.windows(2) {
            let first = spans.iter().find(|&&(s, _)| s == pair[1].start);
            if let Some(&(_, sentence_end)) = first
                && text[pair[1].start..sentence_end].chars().count() <= max
            {
                let merged = text[pair[0].start..sentence_end].chars().count();
                prop_assert!(
                    merged > max,
                    "could have packed {:?}",
                    &text[pair[0].start..sentence_end]
                );
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]
        #[test]
        fn chunks_reassemble_fit_and_end_on_sentences(
            text in r"([A-Za-zé日本 ]{0,60}[.!?。\n]? ?){0,40}",
            max in 5usize..200,
        ) {
            check_invariants(&text, max)?;
        }

        #[test]
        fn arbitrary_unicode_never_breaks_invariants(text in "\\PC{0,600}", max in 1usize..120) {
            check_invariants(&text, max)?;
        }
    }

    #[test]
    fn real_length_text_respects_default_limit() {
        let text = "Anarchism is a political philosophy. ".repeat(100);
        check_invariants(&text, 500).expect("invariants");
    }
}
