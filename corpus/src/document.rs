use serde::{Deserialize, Serialize};

/// One web page as the service sees it, whatever source it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Document {
    /// Source-scoped identifier (Wikipedia page id, FineWeb id, BEIR `_id`, ...).
    pub id: String,
    /// The URL shown to agents; also the key (after normalisation) that visits use.
    pub url: String,
    pub title: String,
    /// ISO 8601 date or timestamp as given by the source.
    pub date: String,
    /// Plain text, no markup.
    pub text: String,
}

/// The source formats a corpus manifest may name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourceFormat {
    /// MediaWiki pages-articles XML dump (`.xml` or `.xml.bz2`, single- or multistream).
    WikipediaXml,
    /// FineWeb parquet shard (`text, id, dump, url, date, ...`).
    FinewebParquet,
    /// JSON Lines, one `{id, url, title, date, text}` object a line.
    Jsonl,
    /// A BEIR `corpus.jsonl` (`_id, title, text`).
    Beir,
}

impl SourceFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            SourceFormat::WikipediaXml => "wikipedia-xml",
            SourceFormat::FinewebParquet => "fineweb-parquet",
            SourceFormat::Jsonl => "jsonl",
            SourceFormat::Beir => "beir",
        }
    }
}

impl std::fmt::Display for SourceFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
