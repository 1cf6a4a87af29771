//! Entry-level rules of the merge: classifying tar entry types, recognising OCI
//! whiteouts, and building the normalised output headers (uid/gid 0, no names, zero
//! times, 0750 dirs, 0600/0700 files). Names are checked in `name`. Pure functions over
//! `tar` types; no I/O and no tokio.

use tar::{EntryType, Header};

/// Prefix of an OCI whiteout file name.
const WHITEOUT: &str = ".wh.";
/// Name of the opaque-directory marker.
const OPAQUE: &str = ".wh..wh..opq";

/// What an input entry is, as far as the merge cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    /// Regular file: emitted.
    File,
    /// Directory: emitted.
    Dir,
    /// Symlink: never emitted, but it hides lower content and may make paths unsafe.
    Symlink,
    /// Hardlink: refused.
    Hardlink,
    /// Device, fifo or unknown type: refused.
    Special(&'static str),
    /// Metadata carried as an entry (PAX global header): skipped.
    Meta,
}

/// Classifies an entry type.
pub(super) fn kind_of(t: EntryType) -> Kind {
    match t {
        EntryType::Regular | EntryType::Continuous => Kind::File,
        EntryType::Directory => Kind::Dir,
        EntryType::Symlink => Kind::Symlink,
        EntryType::Link => Kind::Hardlink,
        EntryType::Char => Kind::Special("character device"),
        EntryType::Block => Kind::Special("block device"),
        EntryType::Fifo => Kind::Special("fifo"),
        EntryType::GNUSparse => Kind::Special("sparse file"),
        EntryType::XGlobalHeader => Kind::Meta,
        _ => Kind::Special("unknown entry type"),
    }
}

/// An OCI whiteout found in a layer.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Whiteout {
    /// `.wh.<name>`: hides `<name>` and everything under it in lower layers.
    Hide(String),
    /// `.wh..wh..opq` in a directory: hides all lower-layer content of that directory.
    Opaque(String),
    /// Another `.wh..wh.` name (AUFS metadata): carries nothing, skipped.
    Meta,
}

/// Recognises a whiteout by its base name.
pub(super) fn whiteout(path: &str) -> Option<Whiteout> {
    let (dir, name) = split(path);
    let hidden = name.strip_prefix(WHITEOUT)?;
    if name == OPAQUE {
        return Some(Whiteout::Opaque(dir.to_string()));
    }
    if hidden.starts_with(WHITEOUT) || hidden.is_empty() {
        return Some(Whiteout::Meta);
    }
    Some(Whiteout::Hide(if dir.is_empty() {
        hidden.to_string()
    } else {
        format!("{dir}/{hidden}")
    }))
}

/// `(parent, base name)`; the parent of a top-level name is `""`.
pub(super) fn split(path: &str) -> (&str, &str) {
    path.rsplit_once('/').unwrap_or(("", path))
}

/// The proper ancestors of `path`, shallowest first: `a`, `a/b` for `a/b/c`.
pub(super) fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    path.bytes()
        .enumerate()
        .filter(|(_, b)| *b == b'/')
        .map(move |(i, _)| &path[..i])
}

/// Normalised mode of a regular file: 0700 if any exec bit was set, else 0600.
pub(super) fn file_mode(mode: u32) -> u32 {
    if mode & 0o111 != 0 {
        0o700
    } else {
        0o600
    }
}

/// Normalised mode of every directory.
pub(super) const DIR_MODE: u32 = 0o750;

/// A normalised header; the path is set when the entry is appended.
pub(super) fn header(kind: EntryType, mode: u32, size: u64) -> Header {
    let mut h = Header::new_gnu();
    h.set_entry_type(kind);
    h.set_mode(mode);
    h.set_uid(0);
    h.set_gid(0);
    h.set_mtime(0);
    h.set_size(size);
    h
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case("a/.wh.b", Some(Whiteout::Hide("a/b".into())))]
    #[case(".wh.top", Some(Whiteout::Hide("top".into())))]
    #[case("d/.wh..wh..opq", Some(Whiteout::Opaque("d".into())))]
    #[case(".wh..wh..opq", Some(Whiteout::Opaque(String::new())))]
    #[case("d/.wh..wh.plnk", Some(Whiteout::Meta))]
    #[case("d/x.wh.y", None)]
    fn recognises_whiteouts(#[case] path: &str, #[case] want: Option<Whiteout>) {
        assert_eq!(whiteout(path), want);
    }

    #[test]
    fn modes_and_ancestors() {
        assert_eq!(file_mode(0o644), 0o600);
        assert_eq!(file_mode(0o4755), 0o700);
        assert_eq!(file_mode(0o610), 0o700);
        assert_eq!(ancestors("a/b/c").collect::<Vec<_>>(), vec!["a", "a/b"]);
        assert_eq!(ancestors("a").count(), 0);
        assert_eq!(kind_of(EntryType::Link), Kind::Hardlink);
        assert_eq!(kind_of(EntryType::Fifo), Kind::Special("fifo"));
    }
}
