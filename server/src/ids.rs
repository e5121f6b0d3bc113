//! Ids the server hands out (request ids, MCP session ids), drawn from the operating system's
//! CSPRNG: a session id is a capability (it unlocks the pages that session was shown), so no
//! client may guess another's from a clock or a counter.

/// `bytes` random bytes as lowercase hex.
pub fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    // The OS random source does not fail on supported systems; if it ever did, handing out
    // predictable ids would be worse than failing the request's task.
    getrandom::fill(&mut buf).expect("the operating system's random source is unavailable");
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

/// An id for `X-Request-Id` and the APIs whose responses carry one (64 random bits).
pub fn request_id() -> String {
    random_hex(8)
}

/// A new session id (128 random bits), as MCP's `initialize` hands out.
pub fn session_id() -> String {
    random_hex(16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_hex_of_the_asked_length_and_differ() {
        let a = session_id();
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|b| b.is_ascii_hexdigit()));
        assert_ne!(a, session_id());
        assert_eq!(request_id().len(), 16);
    }
}
