//! One error and its sources as one line, joined with ": " (Flux's `%w` chains), for the
//! adapters that turn a library's error (reqwest, hyper, rustls, an AWS or Azure answer)
//! into a message. Pure: it only reads `std::error::Error`; no I/O crate is named here.

/// An error and its sources joined with ": ", skipping a source whose text the line
/// already holds (libraries often repeat their cause in their own message).
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let msg = s.to_string();
        if !out.contains(&msg) {
            out.push_str(": ");
            out.push_str(&msg);
        }
        cur = s.source();
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::chain;

    #[derive(Debug, thiserror::Error)]
    #[error("failed to connect to reg.example")]
    struct Outer(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("request failed: connection refused")]
    struct Repeating(#[source] std::io::Error);

    #[test]
    fn joins_sources_and_skips_text_already_present() {
        let refused = || std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused");
        assert_eq!(
            chain(&Outer(refused())),
            "failed to connect to reg.example: connection refused"
        );
        assert_eq!(
            chain(&Repeating(refused())),
            "request failed: connection refused"
        );
    }
}
