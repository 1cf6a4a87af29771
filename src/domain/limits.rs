//! Caps on everything read from a registry, so a hostile or broken artifact cannot
//! exhaust memory or disk. The archive caps (names, extension records, remembered paths,
//! zstd window) are what keeps one merge's memory a constant: see docs/performance.md,
//! "Memory: the worst case", for how they add up.

use std::time::Duration;

/// Limits applied while resolving and unpacking one artifact.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest manifest or index body accepted, in bytes.
    pub max_manifest_bytes: u64,
    /// Largest small blob (config, signature payload, bundle) read into memory.
    pub max_small_blob_bytes: u64,
    /// Total uncompressed tar bytes across all selected layers (decompression bombs).
    pub max_uncompressed_bytes: u64,
    /// Total tar entries across all selected layers.
    pub max_entries: u64,
    /// Most tags read while listing a repository for a semver ref.
    pub max_tags: usize,
    /// Largest body of one tag-list page, in bytes. A page of 1000 tags of the longest
    /// valid length (128 characters) is about 131 KiB; registries that ignore `n` and
    /// send every tag at once need more.
    pub max_tag_page_bytes: u64,
    /// Memory kept for the whole tag listing, in bytes: every kept tag counts its length
    /// plus the bookkeeping of one `String`, every visited page a fixed amount.
    pub max_tag_list_bytes: u64,
    /// Longest a whole tag listing may take, whatever `spec.timeout` says.
    pub max_tag_list_duration: Duration,
    /// Longest entry name, in bytes, wherever it comes from (ustar header, GNU long-name
    /// record, PAX `path`/`linkpath`): Linux's PATH_MAX.
    pub max_name_bytes: u64,
    /// Most components in an entry path (`a/b/c` has 3).
    pub max_path_depth: usize,
    /// Largest PAX extended header (all its records together) read into memory.
    pub max_pax_bytes: u64,
    /// Memory for the merge's bookkeeping (which paths won, which are whited out): every
    /// remembered path component costs its name plus a fixed per-record size.
    pub max_remembered_bytes: u64,
    /// All `.sourceignore` files of an artifact together, in bytes (each counts at least
    /// 64, which also caps how many there are).
    pub max_sourceignore_bytes: u64,
    /// Largest zstd window a layer may ask for (the decoder allocates it).
    pub max_zstd_window_bytes: u64,
}

/// [`Limits::max_name_bytes`] by default: PATH_MAX.
pub const MAX_NAME_BYTES: u64 = 4096;

/// [`Limits::max_sourceignore_bytes`] by default. Compiled gitignore patterns cost far
/// more than their text (up to 0.75 KiB of memory per byte of `**`/`*`/`{a,b}` globs,
/// measured), so this stays small: a few hundred short lines.
pub const MAX_SOURCEIGNORE_BYTES: u64 = 8 << 10;

/// Longest `spec.ignore` accepted, for the same reason (Flux has no cap; its CRD has no
/// `maxLength` and neither has ours, so the object is accepted and its condition says
/// why it is refused). 32 KiB holds a thousand realistic lines; at the worst measured
/// cost it compiles to ~24 MiB (docs/performance.md, "Memory: the worst case").
pub const MAX_SPEC_IGNORE_BYTES: usize = 32 << 10;

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_manifest_bytes: 4 << 20,
            max_small_blob_bytes: 4 << 20,
            max_uncompressed_bytes: 8 << 30,
            max_entries: 1_000_000,
            max_tags: 1_000_000,
            max_tag_page_bytes: 16 << 20,
            max_tag_list_bytes: 64 << 20,
            max_tag_list_duration: Duration::from_secs(600),
            max_name_bytes: MAX_NAME_BYTES,
            max_path_depth: 256,
            max_pax_bytes: 64 << 10,
            max_remembered_bytes: 16 << 20,
            max_sourceignore_bytes: MAX_SOURCEIGNORE_BYTES,
            // The window the zstd format asks every decoder to support (level 19 uses it).
            max_zstd_window_bytes: 8 << 20,
        }
    }
}
