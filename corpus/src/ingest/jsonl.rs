//! JSON Lines documents, one `{id, url, title, date, text}` object a line (the fabricated gold and
//! negative pages use this). Missing fields get deterministic values: `id` the source name and
//! line number, `url` [`super::generated_url`], `title` [`super::derive_title`] (when there is text to
//! derive it from), `date` the source's `default_date`. A page with only a title is a document.

use std::path::Path;

use serde::Deserialize;

use super::{Items, SourceContext, derive_title, finish, generated_url, id_text, json_lines};
use crate::{CorpusError, Document};

#[derive(Deserialize)]
struct Line {
    id: Option<serde_json::Value>,
    url: Option<String>,
    title: Option<String>,
    date: Option<String>,
    text: Option<String>,
}

pub(super) fn open(path: &Path, context: &SourceContext) -> Result<Items, CorpusError> {
    let context = context.clone();
    json_lines(path, move |line_no, parsed: Line| {
        let position = || format!("line {line_no}");
        let id = id_text(parsed.id).unwrap_or_else(|| format!("{}-{line_no}", context.name));
        let text = parsed.text.unwrap_or_default();
        let url = parsed
            .url
            .filter(|u| !u.trim().is_empty())
            .unwrap_or_else(|| generated_url(&context.name, &id));
        let title = match parsed.title.filter(|t| !t.trim().is_empty()) {
            Some(title) => title,
            None if text.trim().is_empty() => String::new(),
            None => derive_title(&text, &url),
        };
        let date = parsed
            .date
            .filter(|d| !d.trim().is_empty())
            .unwrap_or_else(|| context.default_date.clone());
        finish(
            Document {
                id,
                url,
                title,
                date,
                text,
            },
            position,
        )
    })
}
