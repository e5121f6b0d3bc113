//! A BEIR `corpus.jsonl` (`_id, title, text`), so labelled retrieval sets can be indexed and
//! evaluated. `_id` is kept as the document id (qrels refer to it); the URL is generated from it.

use std::path::Path;

use serde::Deserialize;

use super::{BadRecord, Item, Items, SourceContext, finish, generated_url, json_lines};
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
    json_lines(path, move |line_no, line| {
        let position = || format!("line {line_no}");
        let parsed: Line = match serde_json::from_str(line) {
            Ok(p) => p,
            Err(e) => {
                return Item::Bad(BadRecord {
                    position: position(),
                    reason: format!("invalid JSON: {e}"),
                });
            }
        };
        let id = match parsed.id {
            Some(serde_json::Value::String(s)) if !s.is_empty() => s,
            Some(serde_json::Value::Number(n)) => n.to_string(),
            _ => {
                return Item::Bad(BadRecord {
                    position: position(),
                    reason: "missing `_id`".into(),
                });
            }
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
