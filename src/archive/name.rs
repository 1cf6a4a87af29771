//! Entry names: the rules a name must pass before anything is remembered or written, and
//! [`EntryPath`], the only form in which a name from a layer reaches a message.
//!
//! A name is refused when it is longer than PATH_MAX or deeper than the depth cap (both
//! from [`Limits`]), absolute, not UTF-8, holds a NUL, a control character or a `\`, has
//! a `..` component, or has a component ending in `..` followed by more (`x../y`). The
//! last two rules are Flux's: its consumers untar with fluxcd/pkg `tar.Untar`, whose
//! `validRelPath` refuses any name containing `\` or `../`, so such an artifact would
//! only fail later, in every consumer. Control characters (ANSI escapes, newlines) are
//! refused too: Git sources never need them and every consumer would echo them.
//!
//! Messages never carry a raw name: [`EntryPath`] keeps at most [`SHOWN_BYTES`] of it and
//! escapes control and bidirectional-override characters when displayed. Pure functions;
//! no I/O.

use std::fmt;

use crate::domain::limits::Limits;

/// Bytes of a name kept for messages; longer names are cut (their length is shown).
pub const SHOWN_BYTES: usize = 256;

/// An entry name as messages show it: control characters and bidirectional overrides
/// escaped (`\u{1b}`), cut after [`SHOWN_BYTES`] bytes. Not UTF-8 bytes show as U+FFFD.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct EntryPath {
    shown: String,
    len: usize,
}

impl EntryPath {
    /// The shown form of the raw name `raw`.
    pub fn new(raw: &[u8]) -> Self {
        Self::cut(raw, raw.len())
    }

    /// The shown form of a name of `len` bytes of which only `head` was read.
    pub fn cut(head: &[u8], len: usize) -> Self {
        let head = &head[..head.len().min(SHOWN_BYTES)];
        let mut shown = String::from_utf8_lossy(head).into_owned();
        if head.len() < len && shown.ends_with('\u{FFFD}') {
            // A character cut in two by the limit is not part of the name.
            shown.pop();
        }
        Self { shown, len }
    }

    /// The kept part of the name, unescaped.
    pub fn as_str(&self) -> &str {
        &self.shown
    }

    /// Whether the name was longer than what is kept.
    pub fn is_cut(&self) -> bool {
        self.shown.len() < self.len
    }
}

impl From<&str> for EntryPath {
    fn from(s: &str) -> Self {
        Self::new(s.as_bytes())
    }
}

/// Characters escaped when a name is displayed.
fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

impl fmt::Display for EntryPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for c in self.shown.chars() {
            if hidden(c) {
                write!(f, "{}", c.escape_unicode())?;
            } else {
                write!(f, "{c}")?;
            }
        }
        if self.is_cut() {
            write!(f, "… ({} bytes)", self.len)?;
        }
        Ok(())
    }
}

impl fmt::Debug for EntryPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{self}\"")
    }
}

/// Why a name is refused.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum NameError {
    /// Unsafe or unusable, with the reason in words.
    Unsafe(&'static str),
    /// Longer than the name cap.
    TooLong,
    /// More components than the depth cap.
    TooDeep,
}

/// Turns a raw tar name into `a/b/c`: no leading `./`, no empty or `.` components, no
/// trailing slash. `Ok("")` is the root itself. Refuses what the module doc lists.
pub(super) fn clean_path(raw: &[u8], limits: &Limits) -> Result<String, NameError> {
    use NameError::Unsafe;
    if raw.len() as u64 > limits.max_name_bytes {
        return Err(NameError::TooLong);
    }
    if raw.contains(&0) {
        return Err(Unsafe("the name holds a NUL byte"));
    }
    let s = std::str::from_utf8(raw).map_err(|_| Unsafe("the path is not valid UTF-8"))?;
    if s.starts_with('/') {
        return Err(Unsafe("absolute paths are not allowed"));
    }
    if s.contains('\\') {
        return Err(Unsafe(
            "'\\' in names is refused by Flux's consumers (validRelPath)",
        ));
    }
    if s.chars().any(char::is_control) {
        return Err(Unsafe(
            "control characters (escapes, newlines) in names are not allowed",
        ));
    }
    let mut out = String::with_capacity(s.len());
    let mut depth = 0usize;
    for comp in s.split('/') {
        match comp {
            "" | "." => {}
            ".." => return Err(Unsafe("'..' path components are not allowed")),
            c => {
                depth += 1;
                if depth > limits.max_path_depth {
                    return Err(NameError::TooDeep);
                }
                if !out.is_empty() {
                    out.push('/');
                }
                out.push_str(c);
            }
        }
    }
    if out.contains("../") {
        return Err(Unsafe(
            "a component ending in '..' with more below it ('x../y') is refused by Flux's consumers (validRelPath)",
        ));
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use rstest::rstest;

    use super::*;

    fn clean(raw: &str) -> Result<String, NameError> {
        clean_path(raw.as_bytes(), &Limits::default())
    }

    #[rstest]
    #[case("a/b", "a/b")]
    #[case("./a//b/./c/", "a/b/c")]
    #[case("./", "")]
    #[case("a..b/c..", "a..b/c..")]
    #[case("x../", "x..")]
    #[case("ünïcödé/ok", "ünïcödé/ok")]
    fn cleans_names(#[case] raw: &str, #[case] want: &str) {
        assert_eq!(clean(raw).as_deref(), Ok(want));
    }

    #[rstest]
    #[case("/etc/passwd", "absolute")]
    #[case("a/../../x", "'..'")]
    #[case("..", "'..'")]
    #[case("x../y", "validRelPath")]
    #[case("a/b..//c", "validRelPath")]
    #[case("dir\\file", "validRelPath")]
    #[case("a\u{1b}[31mred", "control characters")]
    #[case("line\nbreak", "control characters")]
    #[case("c1\u{9b}x", "control characters")]
    #[case("nul\0byte", "NUL")]
    fn refuses_unsafe_names(#[case] raw: &str, #[case] why: &str) {
        match clean(raw) {
            Err(NameError::Unsafe(reason)) => assert!(reason.contains(why), "{raw:?}: {reason}"),
            other => panic!("{raw:?} gave {other:?}"),
        }
    }

    #[test]
    fn refuses_non_utf8_and_caps_length_and_depth() {
        let limits = Limits::default();
        assert!(matches!(
            clean_path(b"a/\xff", &limits),
            Err(NameError::Unsafe(_))
        ));
        let at_cap = "n".repeat(4096);
        assert!(clean(&at_cap).is_ok());
        assert_eq!(clean(&format!("{at_cap}x")), Err(NameError::TooLong));
        let deep = vec!["d"; 256].join("/");
        assert!(clean(&deep).is_ok());
        assert_eq!(clean(&format!("{deep}/e")), Err(NameError::TooDeep));
        assert!(
            clean(&format!("{deep}//./")).is_ok(),
            "empty parts are not components"
        );
    }

    #[test]
    fn shown_names_escape_controls_and_are_cut() {
        let p = EntryPath::new(b"evil\x1b[2J\xe2\x80\xaetxt.exe\n");
        assert_eq!(p.to_string(), "evil\\u{1b}[2J\\u{202e}txt.exe\\u{a}");
        assert!(!p.to_string().chars().any(char::is_control));
        let long = "é".repeat(1000);
        let shown = EntryPath::new(long.as_bytes()).to_string();
        assert!(
            shown.starts_with("éé") && shown.ends_with("… (2000 bytes)"),
            "{shown}"
        );
        assert!(shown.len() < SHOWN_BYTES + 32, "{}", shown.len());
        assert_eq!(
            EntryPath::cut(b"abc", 1 << 28).to_string(),
            "abc… (268435456 bytes)"
        );
    }
}
