//! Caps on everything read from a registry, so a hostile or broken artifact cannot
//! exhaust memory or disk.

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
}

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
        }
    }
}
