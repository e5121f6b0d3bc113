/// A title for a page that has none (FineWeb rows, JSONL without `title`): its first line if that
/// reads like a heading, else a readable form of the URL's last meaningful path segment, else the
/// host.
pub fn derive_title(text: &str, url: &str) -> String {
    if let Some(first) = text.lines().map(str::trim).find(|l| !l.is_empty())
        && is_heading_like(first)
    {
        return first.to_string();
    }
    title_from_url(url)
}

fn is_heading_like(line: &str) -> bool {
    let chars = line.chars().count();
    let words = line.split_whitespace().count();
    (3..=100).contains(&chars)
        && words <= 14
        && !line.ends_with(['.', ',', ';', ':'])
        && line.chars().next().is_some_and(|c| !c.is_lowercase())
        && line.chars().any(char::is_alphabetic)
}

fn title_from_url(url: &str) -> String {
    let without_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    let without_query = without_scheme
        .split(['?', '#'])
        .next()
        .unwrap_or(without_scheme);
    let mut parts = without_query.split('/');
    let host = parts
        .next()
        .unwrap_or("")
        .trim_start_matches("www.")
        .to_string();
    let segment = without_query
        .split('/')
        .skip(1)
        .filter(|s| !s.is_empty())
        .map(|s| {
            let decoded = percent_encoding::percent_decode_str(s)
                .decode_utf8_lossy()
                .to_string();
            let stem = match decoded.rsplit_once('.') {
                Some((stem, ext))
                    if ext.len() <= 5 && ext.chars().all(|c| c.is_ascii_alphanumeric()) =>
                {
                    stem.to_string()
                }
                _ => decoded,
            };
            stem.replace(['-', '_', '+'], " ").trim().to_string()
        })
        .filter(|s| {
            s.chars().any(char::is_alphabetic)
                && !looks_like_id(s)
                && !matches!(
                    s.to_ascii_lowercase().as_str(),
                    "index" | "default" | "home"
                )
        })
        .last();
    match segment {
        Some(s) => capitalize(&s),
        None => host,
    }
}

/// Hex-ish or mostly-digit segments ("a3f9c2e1", "12345abc") say nothing to a reader.
fn looks_like_id(s: &str) -> bool {
    let digits = s.chars().filter(char::is_ascii_digit).count();
    let len = s.chars().count();
    (!s.contains(' ') && len >= 8 && s.chars().all(|c| c.is_ascii_hexdigit())) || digits * 2 > len
}

fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::derive_title;

    #[test]
    fn heading_like_first_line_wins() {
        assert_eq!(
            derive_title("Best Bread Recipes\nBake it well.", "https://x.org/a"),
            "Best Bread Recipes"
        );
    }

    #[test]
    fn prose_first_line_falls_back_to_url() {
        let text = "This is a long first sentence of prose that ends with a period.";
        assert_eq!(
            derive_title(
                text,
                "https://www.example.com/blog/how-to-bake_bread.html?x=1"
            ),
            "How to bake bread"
        );
        assert_eq!(
            derive_title(text, "https://www.example.com/news/bread-story/12345678"),
            "Bread story"
        );
        assert_eq!(
            derive_title(text, "https://www.example.com/"),
            "example.com"
        );
        assert_eq!(
            derive_title(text, "https://example.com/caf%C3%A9-menu"),
            "Café menu"
        );
    }
}
