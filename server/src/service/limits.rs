//! The limits every endpoint shares: how long kept text (session ids, URLs, queries) may be and
//! what a session id may contain.

use crate::error::ApiError;

/// Longest URL a visit accepts, in characters: corpus URLs are far shorter, and a failed visit's
/// URL is kept in the session's transcript.
pub const MAX_URL_CHARS: usize = 4096;

/// The one rule for text a client can make the server keep (session ids, visited URLs, queries in
/// transcripts): at most `max_chars` characters, or a refusal that says which field and the
/// limit. Checked before the text is stored anywhere.
pub fn check_kept(what: &str, value: &str, max_chars: usize) -> Result<(), ApiError> {
    // Counting stops past the limit, so a huge value costs no more than a legal one.
    let chars = value.chars().take(max_chars + 1).count();
    if chars > max_chars {
        return Err(ApiError::invalid(format!(
            "{what} is longer than {max_chars} characters"
        )));
    }
    Ok(())
}

/// Checks an optional session id from a request (body field, header, path or MCP header).
pub fn check_session(session: Option<&str>) -> Result<Option<&str>, ApiError> {
    let Some(id) = session else { return Ok(None) };
    check_kept("the session id", id, crate::session::MAX_SESSION_ID_LEN)?;
    if crate::session::valid_session_id(id) {
        Ok(Some(id))
    } else {
        Err(ApiError::invalid(format!(
            "`session` must be 1 to {} characters of letters, digits, '.', '_', ':' or '-'",
            crate::session::MAX_SESSION_ID_LEN
        )))
    }
}
