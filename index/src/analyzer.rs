//! The English analysis chain shared by indexing and querying.

use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer,
    StopWordFilter, TextAnalyzer, TokenStream,
};

/// Name under which the analyzer is registered with tantivy.
pub const ANALYZER: &str = "stillweb_en";

/// Recorded in the index manifest: changing the chain changes what the index means.
pub const ANALYZER_DESCRIPTION: &str = "simple tokenizer, remove >40 bytes, lowercase, ASCII folding, Lucene English stopwords, Porter stemmer";

/// Lucene's English stop set (`EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`): short, so that question
/// words like "who" or "when" still count.
const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with",
];

pub fn english() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .filter(StopWordFilter::remove(
            STOPWORDS.iter().map(|s| s.to_string()),
        ))
        .filter(Stemmer::new(Language::English))
        .build()
}

/// The terms the analyzer produces for `text`, in order.
pub fn terms(analyzer: &mut TextAnalyzer, text: &str) -> Vec<String> {
    let mut stream = analyzer.token_stream(text);
    let mut out = Vec::new();
    while stream.advance() {
        out.push(stream.token().text.clone());
    }
    out
}

/// The terms of `text` with their token positions (stop words leave gaps, which phrase queries
/// must keep).
pub fn terms_with_positions(analyzer: &mut TextAnalyzer, text: &str) -> Vec<(usize, String)> {
    let mut stream = analyzer.token_stream(text);
    let mut out = Vec::new();
    while stream.advance() {
        let token = stream.token();
        out.push((token.position, token.text.clone()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems_folds_and_drops_stopwords() {
        let mut a = english();
        assert_eq!(
            terms(&mut a, "The Running of the Bulls in Pamplona"),
            ["run", "bull", "pamplona"]
        );
        assert_eq!(terms(&mut a, "Café déjà vu"), ["cafe", "deja", "vu"]);
        assert_eq!(
            terms(&mut a, "who wrote Hamlet"),
            ["who", "wrote", "hamlet"]
        );
        assert_eq!(
            terms_with_positions(&mut a, "Treaty of Versailles"),
            [(0, "treati".to_string()), (2, "versaill".to_string())]
        );
    }
}
