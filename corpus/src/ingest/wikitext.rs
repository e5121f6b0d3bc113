//! Wikitext → plain text.
//!
//! Drops what an agent reading the page should not see as prose: comments, `<ref>`s, templates and
//! infoboxes (`{{...}}`), tables (`{|...|}`), file/image/category and interlanguage links, HTML
//! tags (the content of `<math>`, `<gallery>` and similar is dropped with them), magic words, and
//! the reference sections at the end ("References", "External links", ...). Keeps link text,
//! external-link labels, section headings and list items as lines. Decodes HTML entities.

/// Tags whose whole element (content included) is dropped.
const DROP_ELEMENTS: &[&str] = &[
    "ref",
    "math",
    "gallery",
    "timeline",
    "imagemap",
    "score",
    "graph",
    "mapframe",
    "templatedata",
    "syntaxhighlight",
    "source",
    "chem",
    "ce",
    "references",
    "noinclude",
    "hiero",
    "inputbox",
];

/// Link namespaces whose links are dropped with their content.
const DROP_LINK_PREFIXES: &[&str] = &["file", "image", "category", "media"];

/// Sections (by heading, lower-cased) dropped with their content: citations and link lists.
const DROP_SECTIONS: &[&str] = &[
    "references",
    "external links",
    "see also",
    "further reading",
    "notes",
    "bibliography",
    "sources",
    "citations",
    "footnotes",
    "notes and references",
    "references and notes",
    "works cited",
    "external link",
];

/// Converts one page's wikitext to plain text.
pub fn wikitext_to_text(wikitext: &str) -> String {
    let text = strip_comments(wikitext);
    // Templates before tags: a template inside a <ref> may hold a stray closing tag.
    let text = strip_balanced(&text, "{{", "}}");
    let text = strip_tags(&text);
    let text = strip_tables(&text);
    let text = replace_links(&text);
    let text = replace_external_links(&text);
    let text = strip_formatting(&text);
    let text = decode_entities(&text);
    // Unbalanced leftovers of broken markup carry no prose.
    let text = text
        .replace("{{", "")
        .replace("}}", "")
        .replace("[[", "")
        .replace("]]", "");
    finish_lines(&text)
}

fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("<!--") {
        out.push_str(&rest[..start]);
        match rest[start + 4..].find("-->") {
            Some(end) => rest = &rest[start + 4 + end + 3..],
            None => return out,
        }
    }
    out.push_str(rest);
    out
}

/// Removes HTML-like tags. Elements in [`DROP_ELEMENTS`] lose their content as well; `<br>`
/// becomes a line break; other tags are removed and their content kept.
fn strip_tags(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(lt) = rest.find('<') {
        out.push_str(&rest[..lt]);
        let after = &rest[lt + 1..];
        let Some(tag) = parse_tag(after) else {
            out.push('<');
            rest = after;
            continue;
        };
        rest = &after[tag.len..];
        if tag.name == "br" {
            out.push('\n');
            continue;
        }
        if !tag.closing && !tag.self_closing && DROP_ELEMENTS.contains(&tag.name.as_str()) {
            rest = skip_to_close(rest, &tag.name);
        }
    }
    out.push_str(rest);
    out
}

struct Tag {
    name: String,
    closing: bool,
    self_closing: bool,
    /// Bytes after the `<` up to and including `>`.
    len: usize,
}

/// Parses `name attrs>` or `/name>` after a `<`; `None` if this is not a tag (e.g. "a < b").
fn parse_tag(after: &str) -> Option<Tag> {
    let closing = after.starts_with('/');
    let body = if closing { &after[1..] } else { after };
    let name_len = body
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == ':'))
        .unwrap_or(body.len());
    if name_len == 0 || !body.as_bytes()[0].is_ascii_alphabetic() {
        return None;
    }
    let end = body.find('>')?;
    if end < name_len || body[..end].contains('<') || body[..end].contains('\n') && end > 500 {
        return None;
    }
    Some(Tag {
        name: body[..name_len].to_ascii_lowercase(),
        closing,
        self_closing: body[..end].ends_with('/'),
        len: usize::from(closing) + end + 1,
    })
}

/// Skips past `</name>`, case-insensitively; an unclosed element runs to the end of the text.
fn skip_to_close<'a>(text: &'a str, name: &str) -> &'a str {
    let needle = format!("</{name}");
    let found = text.match_indices("</").map(|(pos, _)| pos).find(|&pos| {
        text.get(pos..pos + needle.len())
            .is_some_and(|t| t.eq_ignore_ascii_case(&needle))
    });
    match found {
        Some(pos) => {
            let after = &text[pos..];
            after.find('>').map_or("", |gt| &after[gt + 1..])
        }
        None => "",
    }
}

/// Removes balanced `open ... close` spans with nesting. An unmatched `open` is dropped alone so a
/// stray brace never swallows the rest of the article.
fn strip_balanced(text: &str, open: &str, close: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(open) {
        out.push_str(&rest[..start]);
        match matching_close(&rest[start..], open, close) {
            Some(end) => rest = &rest[start + end..],
            None => rest = &rest[start + open.len()..],
        }
    }
    out.push_str(rest);
    out
}

/// Byte length of the balanced span that starts with `open` at the beginning of `text`.
fn matching_close(text: &str, open: &str, close: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut i = 0;
    let bytes = text.as_bytes();
    while i < bytes.len() {
        if bytes[i..].starts_with(open.as_bytes()) {
            depth += 1;
            i += open.len();
        } else if bytes[i..].starts_with(close.as_bytes()) {
            depth -= 1;
            i += close.len();
            if depth == 0 {
                return Some(i);
            }
        } else {
            i += 1;
        }
    }
    None
}

/// Drops tables: lines from `{|` to the matching `|}` (tables nest).
fn strip_tables(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut depth = 0usize;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if trimmed.starts_with("{|") {
            depth += 1;
            continue;
        }
        if depth > 0 {
            if trimmed.starts_with("|}") {
                depth -= 1;
            }
            continue;
        }
        out.push_str(line);
    }
    out
}

/// `[[target|label]]` → label, `[[target]]` → target; file, category and interlanguage links
/// are dropped (their captions may contain links, hence the balanced match).
fn replace_links(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("[[") {
        out.push_str(&rest[..start]);
        let Some(len) = matching_close(&rest[start..], "[[", "]]") else {
            rest = &rest[start + 2..];
            continue;
        };
        let inner = &rest[start + 2..start + len - 2];
        rest = &rest[start + len..];
        if let Some(label) = link_label(inner) {
            out.push_str(&replace_links(&label));
        }
    }
    out.push_str(rest);
    out
}

fn link_label(inner: &str) -> Option<String> {
    let visible_colon = inner.starts_with(':');
    let inner = inner.trim_start_matches(':');
    let (target, label) = match split_top_level_pipe(inner) {
        Some((t, l)) => (t, Some(l)),
        None => (inner, None),
    };
    if !visible_colon && let Some((prefix, _)) = target.split_once(':') {
        let prefix = prefix.trim().to_ascii_lowercase();
        let interlanguage = (2..=3).contains(&prefix.len())
            && prefix.chars().all(|c| c.is_ascii_lowercase())
            || prefix == "simple";
        if DROP_LINK_PREFIXES.contains(&prefix.as_str()) || interlanguage {
            return None;
        }
    }
    match label {
        Some(l) if !l.trim().is_empty() => Some(l.to_string()),
        // The "pipe trick" ([[A (b)|]]) shows the target without its parenthesised part.
        Some(_) => Some(target.split(" (").next().unwrap_or(target).to_string()),
        None => Some(
            target
                .split('#')
                .next()
                .filter(|t| !t.is_empty())
                .unwrap_or(target)
                .to_string(),
        ),
    }
}

/// Splits `target|label` at the first `|` that is not inside a nested link.
fn split_top_level_pipe(inner: &str) -> Option<(&str, &str)> {
    let mut depth = 0i32;
    let bytes = inner.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i..].starts_with(b"[[") {
            depth += 1;
            i += 2;
        } else if bytes[i..].starts_with(b"]]") {
            depth -= 1;
            i += 2;
        } else {
            if bytes[i] == b'|' && depth == 0 {
                return Some((&inner[..i], &inner[i + 1..]));
            }
            i += 1;
        }
    }
    None
}

/// `[http://x label]` → label, `[http://x]` → nothing.
fn replace_external_links(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('[') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        let is_url = ["http://", "https://", "ftp://", "//", "mailto:"]
            .iter()
            .any(|s| {
                after
                    .get(..s.len())
                    .is_some_and(|p| p.eq_ignore_ascii_case(s))
            });
        match after.find([']', '\n']).filter(|_| is_url) {
            Some(end) if after.as_bytes()[end] == b']' => {
                if let Some((_, label)) = after[..end].split_once(' ') {
                    out.push_str(label.trim());
                }
                rest = &after[end + 1..];
            }
            _ => {
                out.push('[');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Bold/italic quote runs and magic words (`__TOC__`).
fn strip_formatting(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(pos) = rest.find(['\'', '_']) {
        out.push_str(&rest[..pos]);
        let tail = &rest[pos..];
        if tail.starts_with("''") {
            let run = tail.bytes().take_while(|b| *b == b'\'').count();
            rest = &tail[run..];
        } else if let Some(len) = magic_word_len(tail) {
            rest = &tail[len..];
        } else {
            out.push_str(&tail[..1]);
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

fn magic_word_len(tail: &str) -> Option<usize> {
    let body = tail.strip_prefix("__")?;
    let end = body.find("__")?;
    let word = &body[..end];
    (!word.is_empty() && word.len() <= 24 && word.bytes().all(|b| b.is_ascii_uppercase()))
        .then_some(end + 4)
}

/// Decodes the HTML entities wikitext uses (named ones common in articles, and numeric ones).
pub(crate) fn decode_entities(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        let after = &rest[amp + 1..];
        let decoded = after.find(';').filter(|&end| end <= 10).and_then(|end| {
            let name = &after[..end];
            let c = if let Some(num) = name.strip_prefix("#x").or_else(|| name.strip_prefix("#X")) {
                u32::from_str_radix(num, 16).ok().and_then(char::from_u32)
            } else if let Some(num) = name.strip_prefix('#') {
                num.parse().ok().and_then(char::from_u32)
            } else {
                named_entity(name)
            };
            c.map(|c| (c, end + 1))
        });
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = &after[len..];
            }
            None => {
                out.push('&');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

fn named_entity(name: &str) -> Option<char> {
    Some(match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" | "ensp" | "emsp" | "thinsp" => ' ',
        "ndash" => '–',
        "mdash" => '—',
        "minus" => '−',
        "times" => '×',
        "divide" => '÷',
        "deg" => '°',
        "middot" => '·',
        "hellip" => '…',
        "lsquo" => '‘',
        "rsquo" => '’',
        "ldquo" => '“',
        "rdquo" => '”',
        "laquo" => '«',
        "raquo" => '»',
        "copy" => '©',
        "reg" => '®',
        "trade" => '™',
        "euro" => '€',
        "pound" => '£',
        "yen" => '¥',
        "cent" => '¢',
        "sect" => '§',
        "para" => '¶',
        "plusmn" => '±',
        "frac12" => '½',
        "frac14" => '¼',
        "frac34" => '¾',
        "prime" => '′',
        "Prime" => '″',
        "bull" => '•',
        "zwj" | "zwnj" | "shy" | "lrm" | "rlm" => '\u{200B}',
        _ => return None,
    })
}

/// Line-level pass: headings become plain lines, list markers go, reference sections are
/// dropped, whitespace is tidied, and runs of blank lines collapse to one.
fn finish_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut dropping_level: Option<usize> = None;
    let mut blank_pending = false;
    for raw in text.lines() {
        let line = raw.trim();
        if let Some((level, heading)) = heading(line) {
            if dropping_level.is_some_and(|l| level > l) {
                continue;
            }
            dropping_level = None;
            if DROP_SECTIONS.contains(&heading.to_lowercase().as_str()) {
                dropping_level = Some(level);
                continue;
            }
            push_line(&mut out, heading, &mut blank_pending);
            continue;
        }
        if dropping_level.is_some() {
            continue;
        }
        let line = line.trim_start_matches(['*', '#', ':', ';']).trim();
        if line.is_empty() || line.chars().all(|c| c == '-') {
            blank_pending = !out.is_empty();
            continue;
        }
        let line = tidy_inline(line);
        if !line.is_empty() {
            push_line(&mut out, &line, &mut blank_pending);
        }
    }
    out
}

fn push_line(out: &mut String, line: &str, blank_pending: &mut bool) {
    if !out.is_empty() {
        out.push('\n');
        if *blank_pending {
            out.push('\n');
        }
    }
    out.push_str(line);
    *blank_pending = false;
}

/// `== Heading ==` → (2, "Heading").
fn heading(line: &str) -> Option<(usize, &str)> {
    let level = line.bytes().take_while(|b| *b == b'=').count();
    if level < 2 || !line.ends_with(&"=".repeat(level)) || line.len() < 2 * level + 1 {
        return None;
    }
    let inner = line[level..line.len() - level].trim();
    (!inner.is_empty()).then_some((level, inner))
}

/// Collapses spaces, removes zero-width characters, and removes the empty brackets and stray
/// punctuation that removed templates leave behind ("( ; born 1900)" → "(born 1900)").
fn tidy_inline(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut last_space = false;
    for c in line.chars() {
        if c == '\u{200B}' {
            continue;
        }
        if c.is_whitespace() {
            if !last_space {
                out.push(' ');
            }
            last_space = true;
        } else {
            out.push(c);
            last_space = false;
        }
    }
    let mut s = out;
    for (from, to) in [
        ("( ", "("),
        (" )", ")"),
        ("(; ", "("),
        ("(, ", "("),
        ("()", ""),
        (" ,", ","),
        (" .", "."),
    ] {
        while s.contains(from) {
            s = s.replace(from, to);
        }
    }
    s.trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_templates_refs_comments_and_tables() {
        let wiki = "{{Infobox person\n| name = X\n| born = {{birth date|1900|1|1}}\n}}\n'''X''' (born 1900)<ref name=\"a\">Cite {{cite web|url=x}}</ref> was a [[writer]].<!-- hidden --> He wrote [[Book (novel)|a book]].<ref name=\"b\" />\n{| class=\"wikitable\"\n|-\n| cell || cell\n|}\nAfter the table.";
        let text = wikitext_to_text(wiki);
        assert_eq!(
            text,
            "X (born 1900) was a writer. He wrote a book.\nAfter the table."
        );
    }

    #[test]
    fn keeps_headings_and_list_items_as_lines() {
        let wiki = "Intro text.\n\n== History ==\nSome history.\n=== Early ===\n* first item\n* second [[item]]\n# numbered\n\n== References ==\n{{reflist}}\n* a citation\n== External links ==\n* [http://example.com Example]";
        assert_eq!(
            wikitext_to_text(wiki),
            "Intro text.\n\nHistory\nSome history.\nEarly\nfirst item\nsecond item\nnumbered"
        );
    }

    #[test]
    fn drops_file_category_and_interlanguage_links() {
        let wiki = "[[File:Pic.jpg|thumb|A [[caption]] here]]Text [[Category:Things]] more [[fr:Chose]] and [[:Category:Shown]].";
        assert_eq!(wikitext_to_text(wiki), "Text more and Category:Shown.");
    }

    #[test]
    fn external_links_keep_their_label() {
        assert_eq!(
            wikitext_to_text(
                "See [https://example.org the site] and [http://bare.org]. [not a link]"
            ),
            "See the site and. [not a link]"
        );
    }

    #[test]
    fn formatting_entities_and_magic_words() {
        assert_eq!(
            wikitext_to_text(
                "__NOTOC__''Italic'' and '''bold''' &amp; 5&nbsp;km &ndash; x&#39;s &#x41;"
            ),
            "Italic and bold & 5 km – x's A"
        );
        assert_eq!(wikitext_to_text("snake_case stays"), "snake_case stays");
    }

    #[test]
    fn html_tags_go_but_their_text_stays() {
        assert_eq!(
            wikitext_to_text(
                "H<sub>2</sub>O is <span style=\"x\">water</span>.<br/>Next <math>x^2</math>line. 3 < 4 > 2"
            ),
            "H2O is water.\nNext line. 3 < 4 > 2"
        );
    }

    #[test]
    fn unbalanced_markup_does_not_swallow_the_article() {
        let text = wikitext_to_text("Start {{broken template. Middle [[broken link. End.");
        assert!(text.contains("Middle") && text.contains("End."), "{text}");
        let text = wikitext_to_text("Start <ref>never closed");
        assert_eq!(text, "Start");
    }

    #[test]
    fn pipe_trick_and_section_links() {
        assert_eq!(
            wikitext_to_text("[[Mercury (planet)|]] and [[#History]] and [[A#B]]"),
            "Mercury and #History and A"
        );
    }
}
