//! FineWeb parquet shards (`text, id, dump, url, date, file_path, language, language_score,
//! token_count`), read one row group at a time and batch-wise, projecting only the columns we use.
//! A row group that cannot be decoded is reported as bad records (one per row it held) and the
//! reader goes on with the next row group.

use std::collections::VecDeque;
use std::fs::File;
use std::path::{Path, PathBuf};

use arrow_array::cast::AsArray;
use arrow_array::{Array, ArrayRef, RecordBatch};
use arrow_schema::DataType;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
};

use super::{BadRecord, Item, Items, SourceContext, derive_title, finish};
use crate::{CorpusError, Document};

const BATCH_ROWS: usize = 1024;
const REQUIRED: [&str; 2] = ["text", "url"];
const OPTIONAL: [&str; 2] = ["id", "date"];

pub(super) fn open(path: &Path, context: &SourceContext) -> Result<Items, CorpusError> {
    let format_error = |message: String| CorpusError::Format {
        path: path.to_path_buf(),
        format: "fineweb-parquet",
        message,
    };
    let file = File::open(path).map_err(|e| CorpusError::io(path, e))?;
    let metadata = ArrowReaderMetadata::load(&file, ArrowReaderOptions::default())
        .map_err(|e| format_error(format!("cannot read the parquet footer: {e}")))?;
    let schema = metadata.schema().clone();
    for name in REQUIRED.iter().chain(OPTIONAL.iter()) {
        match schema.field_with_name(name) {
            Ok(field) if !is_string(field.data_type()) => {
                return Err(format_error(format!(
                    "column `{name}` has type {}, expected a string type (Utf8, LargeUtf8 or Utf8View)",
                    field.data_type()
                )));
            }
            Ok(_) => {}
            Err(_) if REQUIRED.contains(name) => {
                return Err(format_error(format!(
                    "missing column `{name}`; FineWeb shards have text, id, dump, url, date, ..."
                )));
            }
            Err(_) => {}
        }
    }
    let wanted: Vec<&str> = REQUIRED
        .iter()
        .chain(OPTIONAL.iter())
        .copied()
        .filter(|n| schema.field_with_name(n).is_ok())
        .collect();
    let mask = ProjectionMask::columns(metadata.parquet_schema(), wanted.iter().copied());
    let row_groups: Vec<(usize, usize)> = metadata
        .metadata()
        .row_groups()
        .iter()
        .map(|rg| usize::try_from(rg.num_rows()).unwrap_or(0))
        .enumerate()
        .collect();
    Ok(Box::new(Rows {
        path: path.to_path_buf(),
        metadata,
        mask,
        row_groups: row_groups.into(),
        pending: VecDeque::new(),
        next_row: 0,
        default_date: context.default_date.clone(),
    }))
}

fn is_string(t: &DataType) -> bool {
    matches!(t, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View)
}

struct Rows {
    path: PathBuf,
    metadata: ArrowReaderMetadata,
    mask: ProjectionMask,
    /// Row groups still to read: (index, rows).
    row_groups: VecDeque<(usize, usize)>,
    pending: VecDeque<Item>,
    /// Index in the file of the next row handed out.
    next_row: usize,
    default_date: String,
}

impl std::fmt::Debug for Rows {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rows")
            .field("path", &self.path)
            .field("next_row", &self.next_row)
            .finish()
    }
}

impl Iterator for Rows {
    type Item = Item;

    fn next(&mut self) -> Option<Item> {
        loop {
            if let Some(item) = self.pending.pop_front() {
                return Some(item);
            }
            let (group, rows) = self.row_groups.pop_front()?;
            let first_row = self.next_row;
            self.next_row += rows;
            match self.read_group(group, first_row) {
                Ok(items) => self.pending.extend(items),
                Err(reason) => self.pending.push_back(Item::Bad(BadRecord {
                    position: format!("rows {first_row}..{} (row group {group})", first_row + rows),
                    reason: format!("unreadable row group, its {rows} rows skipped: {reason}"),
                })),
            }
        }
    }
}

impl Rows {
    /// Decodes one row group. Decoding errors lose the whole group, so nothing half-read is
    /// handed out.
    fn read_group(&self, group: usize, first_row: usize) -> Result<Vec<Item>, String> {
        let file = File::open(&self.path).map_err(|e| e.to_string())?;
        let reader =
            ParquetRecordBatchReaderBuilder::new_with_metadata(file, self.metadata.clone())
                .with_projection(self.mask.clone())
                .with_row_groups(vec![group])
                .with_batch_size(BATCH_ROWS)
                .build()
                .map_err(|e| e.to_string())?;
        let mut items = Vec::new();
        let mut row = first_row;
        for batch in reader {
            let batch = batch.map_err(|e| e.to_string())?;
            self.convert(&batch, &mut row, &mut items);
        }
        Ok(items)
    }

    fn convert(&self, batch: &RecordBatch, row: &mut usize, items: &mut Vec<Item>) {
        let column = |name: &str| batch.column_by_name(name);
        let (Some(text), Some(url)) = (column("text"), column("url")) else {
            return;
        };
        let id = column("id");
        let date = column("date");
        for i in 0..batch.num_rows() {
            let position = format!("row {}", *row);
            *row += 1;
            let (Some(text), Some(url)) = (string_at(text, i), string_at(url, i)) else {
                items.push(Item::Bad(BadRecord {
                    position,
                    reason: "null text or url".into(),
                }));
                continue;
            };
            let doc = Document {
                id: id
                    .and_then(|c| string_at(c, i))
                    .map_or_else(|| url.to_string(), str::to_string),
                url: url.to_string(),
                // No title column: a row without text has nothing to be found by (a bad row).
                title: if text.trim().is_empty() {
                    String::new()
                } else {
                    derive_title(text, url)
                },
                date: date
                    .and_then(|c| string_at(c, i))
                    .map_or_else(|| self.default_date.clone(), str::to_string),
                text: text.trim().to_string(),
            };
            items.push(finish(doc, || position));
        }
    }
}

fn string_at(column: &ArrayRef, row: usize) -> Option<&str> {
    if column.is_null(row) {
        return None;
    }
    match column.data_type() {
        DataType::Utf8 => Some(column.as_string::<i32>().value(row)),
        DataType::LargeUtf8 => Some(column.as_string::<i64>().value(row)),
        DataType::Utf8View => Some(column.as_string_view().value(row)),
        _ => None,
    }
}
