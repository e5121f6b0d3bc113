//! Prints the documents a source file yields, for eyeballing ingestion: `cargo run -p
//! stillweb-corpus --example dump -- FORMAT PATH [TITLE]`.
use stillweb_corpus::ingest::{self, Item, SourceContext};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let format: stillweb_corpus::SourceFormat =
        serde_json::from_value(serde_json::Value::String(args[1].clone())).expect("format");
    let context = SourceContext {
        name: "dump".into(),
        default_date: "1970-01-01".into(),
    };
    for item in ingest::open(std::path::Path::new(&args[2]), format, &context).expect("open") {
        match item {
            Item::Document(d) if args.get(3).is_none_or(|t| *t == d.title) => {
                println!(
                    "=== {} | {} | {} | {} chars\n{}\n",
                    d.title,
                    d.url,
                    d.date,
                    d.text.len(),
                    d.text
                )
            }
            Item::Bad(b) => println!("!!! bad {b:?}"),
            _ => {}
        }
    }
}
