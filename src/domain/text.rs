//! Text from outside (a registry's error body, media types, annotations, a certificate's
//! identity) made fit to show: control characters escaped, so a registry cannot paint a
//! terminal, forge a log line or reorder a message with bidi overrides, and the length
//! bounded, so a message fits the API server's limits (a condition message is at most
//! 32,768 characters in the CRD, an Event note 1,024 bytes). Every exit (conditions,
//! Events, notifications, log lines, the CLI's error) passes its message through
//! [`bounded`] or [`printable`]. Pure; imports nothing.

use std::borrow::Cow;

/// Longest condition message, in bytes (at least as many as the characters the API
/// server counts): well under the CRD's `maxLength: 32768`, and small enough that an
/// object's few copies of its failure stay cheap in every watch cache.
pub const CONDITION_MESSAGE_MAX: usize = 4 * 1024;

/// Longest Event note, in bytes: Kubernetes refuses an Event whose note is longer.
pub const EVENT_NOTE_MAX: usize = 1024;

/// True for characters shown escaped: C0 and C1 controls and DEL (line breaks and tabs
/// too: a message is one line, as Flux's are), Unicode line and paragraph separators,
/// and the bidi marks, embeddings, overrides and isolates.
fn escaped(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{2028}' | '\u{2029}'
        )
        || ('\u{202a}'..='\u{202e}').contains(&c)
        || ('\u{2066}'..='\u{2069}').contains(&c)
}

/// Appends `c`, escaped when [`escaped`]: `\n`, `\r`, `\t`, `\x1b` for other ASCII
/// controls, `\u{202e}` above ASCII.
fn push_printable(out: &mut String, c: char) {
    use std::fmt::Write;
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        c if c.is_ascii() && escaped(c) => {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        }
        c if escaped(c) => {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
        c => out.push(c),
    }
}

/// The marker that ends a cut text.
fn marker(left: usize) -> String {
    format!("… ({left} more bytes)")
}

/// `text` with every control character, line separator and bidi control escaped (`\n`,
/// `\x1b`, `\u{202e}`); the text itself when there is none. Backslashes stay as they
/// are: a message names regular expressions and paths.
pub fn printable(text: &str) -> Cow<'_, str> {
    bounded(text, usize::MAX)
}

/// [`printable`] `text`, cut to at most `max` bytes on a character boundary, ending with
/// `… (N more bytes)` (N counts the bytes of `text` left out) when it was cut. The work
/// and the memory are bounded by `max`, whatever the length of `text`; `max` should
/// leave room for the marker (40 bytes are always enough), or the marker alone is
/// returned.
pub fn bounded(text: &str, max: usize) -> Cow<'_, str> {
    if text.len() <= max && !text.chars().any(escaped) {
        return Cow::Borrowed(text);
    }
    let budget = max.saturating_sub(marker(text.len()).len());
    let mut out = String::with_capacity(text.len().min(max));
    // The longest output within `budget`, and how much of `text` it shows.
    let mut cut = (0, 0);
    for (at, c) in text.char_indices() {
        if out.len() <= budget {
            cut = (out.len(), at);
        }
        push_printable(&mut out, c);
        if out.len() > max {
            let (len, shown) = cut;
            out.truncate(len);
            out.push_str(&marker(text.len() - shown));
            return Cow::Owned(out);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case::plain("failed to pull: MANIFEST_UNKNOWN", "failed to pull: MANIFEST_UNKNOWN")]
    #[case::ansi_colour("\u{1b}[31mred\u{1b}[0m", "\\x1b[31mred\\x1b[0m")]
    #[case::forged_log_line("oops\nlevel=INFO msg=ok", "oops\\nlevel=INFO msg=ok")]
    #[case::carriage_return_and_tab("a\rb\tc", "a\\rb\\tc")]
    #[case::nul_and_del("a\0b\u{7f}", "a\\x00b\\x7f")]
    #[case::c1_csi("x\u{9b}31m", "x\\u{9b}31m")]
    #[case::bidi_override("file\u{202e}gpj.exe", "file\\u{202e}gpj.exe")]
    #[case::bidi_isolate("\u{2066}a\u{2069}", "\\u{2066}a\\u{2069}")]
    #[case::line_separator("a\u{2028}b", "a\\u{2028}b")]
    #[case::backslash_and_unicode_kept(r"^v\d+ – ü", r"^v\d+ – ü")]
    fn printable_escapes_controls(#[case] text: &str, #[case] want: &str) {
        assert_eq!(printable(text), want);
    }

    #[test]
    fn clean_short_text_is_not_copied() {
        assert!(matches!(bounded("ok", 10), Cow::Borrowed("ok")));
        assert!(matches!(printable("ok"), Cow::Borrowed("ok")));
    }

    #[rstest]
    #[case::fits("abcdef".into(), 6, "abcdef")]
    #[case::cut("abcdefghij".repeat(10), 30, "abcdefghij… (90 more bytes)")]
    #[case::cut_on_a_char_boundary("é".repeat(40), 30, "ééééé… (70 more bytes)")]
    #[case::escapes_count_against_the_limit("\u{1b}".repeat(40), 30, "\\x1b\\x1b… (38 more bytes)")]
    #[case::marker_only_when_no_room("abcdefghij".repeat(10), 5, "… (100 more bytes)")]
    fn bounded_cuts_with_a_marker(#[case] text: String, #[case] max: usize, #[case] want: &str) {
        assert_eq!(bounded(&text, max), want);
    }

    #[rstest]
    #[case::ascii("x".repeat(2_000_000))]
    #[case::multibyte("ü€😀".repeat(200_000))]
    #[case::controls("\u{1b}\u{202e}\n".repeat(300_000))]
    fn bounded_never_exceeds_the_limit(#[case] text: String) {
        for max in [CONDITION_MESSAGE_MAX, EVENT_NOTE_MAX, 64] {
            let out = bounded(&text, max);
            assert!(out.len() <= max, "{} > {max}", out.len());
            assert!(out.ends_with(" more bytes)"), "{out}");
            assert!(!out.chars().any(escaped), "{out}");
        }
    }
}
