//! One error and its sources as one line, joined with ": " (Flux's `%w` chains): the one
//! formatter for condition messages, CLI errors, log fields and the adapters that turn a
//! library's error (reqwest, hyper, rustls, an AWS or Azure answer) into a message.
//! Pure: it only reads `std::error::Error`; no I/O crate is named here.

/// `e` and its sources joined with ": ". A source whose text the line already holds is
/// left out: an exact repeat (`#[error(transparent)]`, or a wrapper printing its cause
/// as its whole message), and an outer message that already quotes its cause (libraries
/// often end their message with the cause's text). Empty texts add nothing.
pub fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cur = e.source();
    while let Some(s) = cur {
        let msg = s.to_string();
        if !msg.is_empty() && !out.contains(&msg) {
            if !out.is_empty() {
                out.push_str(": ");
            }
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

    fn refused() -> std::io::Error {
        std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "connection refused")
    }

    #[derive(Debug, thiserror::Error)]
    #[error("failed to connect to reg.example")]
    struct Outer(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    #[error("request failed: connection refused")]
    struct Repeating(#[source] std::io::Error);

    #[derive(Debug, thiserror::Error)]
    enum Step {
        #[error("failed to pull layer sha256:1")]
        Pull(#[source] Outer),
        #[error(transparent)]
        Transparent(#[from] Outer),
    }

    #[derive(Debug, thiserror::Error)]
    #[error("")]
    struct Silent(#[source] std::io::Error);

    #[test]
    fn joins_sources_with_colons() {
        assert_eq!(
            chain(&Outer(refused())),
            "failed to connect to reg.example: connection refused"
        );
        assert_eq!(
            chain(&Step::Pull(Outer(refused()))),
            "failed to pull layer sha256:1: failed to connect to reg.example: connection refused"
        );
    }

    #[test]
    fn never_repeats_a_source_the_line_already_holds() {
        // The outer message quotes its cause.
        assert_eq!(
            chain(&Repeating(refused())),
            "request failed: connection refused"
        );
        // `#[error(transparent)]` prints its source exactly.
        assert_eq!(
            chain(&Step::from(Outer(refused()))),
            "failed to connect to reg.example: connection refused"
        );
    }

    #[test]
    fn empty_texts_add_no_separator() {
        assert_eq!(chain(&Silent(refused())), "connection refused");
    }
}
