//! URL normalisation: the key under which a page is stored and under which a session remembers
//! what it has seen. Two spellings of one page must map to the same key; different pages never.
//!
//! Rules: `http` and `https` are the same page (the key uses `https`); the host is lower-cased and
//! IDNA-encoded; a default port is dropped; the fragment is dropped; a trailing `/` on the path is
//! dropped (the root path is empty); percent-encoding is made canonical (unreserved characters are
//! decoded, everything else outside the URL grammar is encoded with upper-case hex); the query is
//! kept as written.

use percent_encoding::{AsciiSet, CONTROLS, percent_decode_str, utf8_percent_encode};

/// Characters encoded in a canonical query: controls, space and characters outside the URL
/// grammar, plus `%` itself so decoded text round-trips.
const QUERY: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'<')
    .add(b'>')
    .add(b'[')
    .add(b'\\')
    .add(b']')
    .add(b'^')
    .add(b'`')
    .add(b'{')
    .add(b'|')
    .add(b'}');

/// A path segment also encodes `?`, which would otherwise start the query.
pub(crate) const PATH: &AsciiSet = &QUERY.add(b'?');

/// Why a string is not a usable URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an absolute http(s) URL: {0}")]
pub struct InvalidUrl(pub String);

/// Canonical key for `raw`. Accepts a scheme-less `host/path` too (agents often drop it).
pub fn normalize_url(raw: &str) -> Result<String, InvalidUrl> {
    let trimmed = raw.trim();
    let parsed = match url::Url::parse(trimmed) {
        Ok(u) => u,
        Err(url::ParseError::RelativeUrlWithoutBase) => {
            url::Url::parse(&format!("https://{trimmed}"))
                .map_err(|_| InvalidUrl(raw.to_string()))?
        }
        Err(_) => return Err(InvalidUrl(raw.to_string())),
    };
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(InvalidUrl(raw.to_string()));
    }
    let host = parsed
        .host_str()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| InvalidUrl(raw.to_string()))?;
    let mut out = String::with_capacity(trimmed.len() + 8);
    out.push_str("https://");
    out.push_str(host.trim_end_matches('.'));
    if let Some(port) = parsed.port().filter(|p| *p != 80 && *p != 443) {
        out.push(':');
        out.push_str(&port.to_string());
    }
    let path = parsed.path();
    let segments: Vec<String> = path
        .split('/')
        .map(|seg| canonical_component(seg, PATH, PATH_STRUCTURAL))
        .collect();
    let mut path = segments.join("/");
    while path.ends_with('/') {
        path.pop();
    }
    out.push_str(&path);
    if let Some(query) = parsed.query().filter(|q| !q.is_empty()) {
        out.push('?');
        out.push_str(&canonical_component(query, QUERY, QUERY_STRUCTURAL));
    }
    Ok(out)
}

/// Decodes percent-escapes and re-encodes with one canonical choice of escapes. Escapes that
/// decode to reserved characters (`/` in a segment, `&` in a query) stay escaped so the
/// structure of the URL cannot change.
fn canonical_component(component: &str, set: &'static AsciiSet, structural: &[u8]) -> String {
    let is_structural = |byte: u8| structural.contains(&byte);
    let mut out = String::with_capacity(component.len());
    let mut rest = component;
    while let Some(pos) = rest.find('%') {
        out.push_str(&encode_run(&rest[..pos], set));
        let escape = rest.get(pos..pos + 3);
        match escape.and_then(|e| u8::from_str_radix(&e[1..], 16).ok()) {
            Some(byte) if is_structural(byte) => {
                out.push_str(&format!("%{byte:02X}"));
                rest = &rest[pos + 3..];
            }
            Some(_) => {
                // Gather the whole run of escapes so multi-byte UTF-8 decodes together.
                let mut end = pos;
                while rest[end..].starts_with('%')
                    && rest
                        .get(end + 1..end + 3)
                        .and_then(|h| u8::from_str_radix(h, 16).ok())
                        .is_some_and(|b| !is_structural(b))
                {
                    end += 3;
                }
                let decoded = percent_decode_str(&rest[pos..end]).collect::<Vec<u8>>();
                match String::from_utf8(decoded) {
                    Ok(text) => out.push_str(&encode_run(&text, set)),
                    Err(err) => {
                        for byte in err.into_bytes() {
                            out.push_str(&format!("%{byte:02X}"));
                        }
                    }
                }
                rest = &rest[end..];
            }
            None => {
                out.push_str("%25");
                rest = &rest[pos + 1..];
            }
        }
    }
    out.push_str(&encode_run(rest, set));
    out
}

fn encode_run(text: &str, set: &'static AsciiSet) -> String {
    utf8_percent_encode(text, set).to_string()
}

/// Bytes whose escaped and unescaped forms mean different things in a path segment or a query.
const PATH_STRUCTURAL: &[u8] = b"/?#%";
const QUERY_STRUCTURAL: &[u8] = b"&=+#%";

/// The host of a normalised URL (`https://host[:port]/...` → `host`).
pub fn host_of(normalized: &str) -> &str {
    let rest = normalized
        .strip_prefix("https://")
        .or_else(|| normalized.strip_prefix("http://"))
        .unwrap_or(normalized);
    let end = rest.find(['/', '?', ':']).unwrap_or(rest.len());
    &rest[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> String {
        normalize_url(s).expect(s)
    }

    #[test]
    fn scheme_host_port_fragment_and_trailing_slash_do_not_matter() {
        let key = n("https://en.wikipedia.org/wiki/Anarchism");
        for variant in [
            "http://en.wikipedia.org/wiki/Anarchism",
            "HTTPS://EN.Wikipedia.ORG/wiki/Anarchism/",
            "https://en.wikipedia.org:443/wiki/Anarchism#History",
            "http://en.wikipedia.org:80/wiki/Anarchism",
            "en.wikipedia.org/wiki/Anarchism",
            "  https://en.wikipedia.org/wiki/Anarchism  ",
        ] {
            assert_eq!(n(variant), key, "{variant}");
        }
        assert_eq!(n("https://example.com/"), "https://example.com");
        assert_eq!(n("https://example.com"), "https://example.com");
        assert_eq!(
            n("https://example.com:8080/a"),
            "https://example.com:8080/a"
        );
    }

    #[test]
    fn percent_encoding_is_canonical() {
        let key = n("https://en.wikipedia.org/wiki/Caf%C3%A9");
        assert_eq!(n("https://en.wikipedia.org/wiki/Café"), key);
        assert_eq!(n("https://en.wikipedia.org/wiki/Caf%c3%a9"), key);
        assert_eq!(key, "https://en.wikipedia.org/wiki/Caf%C3%A9");
        // Unreserved characters are decoded.
        assert_eq!(n("https://x.org/%41%62c"), "https://x.org/Abc");
        assert_eq!(n("https://x.org/a%20b"), n("https://x.org/a b"));
        // An escaped slash is not a path separator and stays distinct.
        assert_ne!(n("https://x.org/a%2Fb"), n("https://x.org/a/b"));
        assert_eq!(n("https://x.org/a%2fb"), "https://x.org/a%2Fb");
        // An escaped ampersand in a query stays distinct from a separator.
        assert_ne!(n("https://x.org/?a=1%262"), n("https://x.org/?a=1&2"));
        // Parentheses and apostrophes, common in Wikipedia titles, are left as they are.
        assert_eq!(
            n("https://en.wikipedia.org/wiki/Mercury_(planet)"),
            n("https://en.wikipedia.org/wiki/Mercury_%28planet%29")
        );
    }

    #[test]
    fn query_is_kept() {
        assert_eq!(n("https://x.org/p?b=2&a=1"), "https://x.org/p?b=2&a=1");
        assert_ne!(n("https://x.org/p?a=1"), n("https://x.org/p?a=2"));
    }

    #[test]
    fn rejects_what_is_not_a_web_url() {
        for bad in [
            "",
            "ftp://x.org/a",
            "mailto:a@b.c",
            "https://",
            "javascript:alert(1)",
        ] {
            assert!(normalize_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn host_of_strips_scheme_port_and_path() {
        assert_eq!(
            host_of("https://en.wikipedia.org/wiki/A"),
            "en.wikipedia.org"
        );
        assert_eq!(host_of("https://x.org:8080/a"), "x.org");
        assert_eq!(host_of("https://x.org"), "x.org");
    }

    proptest::proptest! {
        #[test]
        fn normalising_is_idempotent(path in "[a-zA-Z0-9 %/._~()é-]{0,40}", query in "[a-z0-9=&%]{0,12}") {
            let raw = format!("https://Example.org/{path}?{query}");
            if let Ok(once) = normalize_url(&raw) {
                proptest::prop_assert_eq!(normalize_url(&once).expect("normalised URL parses"), once);
            }
        }
    }
}
