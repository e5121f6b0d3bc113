//! A BEIR `corpus.jsonl` (`_id, title, text`), so labelled retrieval sets can be indexed and
//! evaluated. `_id` is kept as the document id (qrels refer to it); the URL is generated from it.

use std::path::Path;

use serde::Deserialize;

use super::{BadRecord, Item, Items, SourceContext, finish, generated_url, id_text, json_lines};
use crate::{CorpusError, Document};

#[derive(Deserialize)]
struct Line {
    #[serde(rename = "_id")]
    id: Option<serde_json::Value>,
    #[serde(default)]
    title: String,
    #[serde(default)]
    text: String,
}

pub(super) fn open(path: &Path, context: &SourceContext) -> Result<Items, CorpusError> {
    let context = context.clone();
    json_lines(path, move |line_no, parsed: Line| {
        let position = || format!("line {line_no}");
        let Some(id) = id_text(parsed.id) else {
            return Item::Bad(BadRecord {
                position: position(),
                reason: "missing `_id`".into(),
            });
        };
        let doc = Document {
            url: generated_url(&context.name, &id),
            id,
            title: parsed.title.trim().to_string(),
            date: context.default_date.clone(),
            text: parsed.text,
        };
        finish(doc, position)
    })
}
