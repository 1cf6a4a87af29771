//! Raw tar pieces written by hand so that test layers can carry anything, hostile names
//! and records included: one header block with any name, type and size, and PAX extended
//! header records (`"<len> <key>=<value>\n"`, which the `tar` crate does not write). Also
//! used by the unit tests in `src/archive` (included there with `#[path]`).

use tar::{EntryType, Header};

/// One 512-byte header block: `name` (at most 100 bytes) in the name field, `kind`,
/// `size`, mode 0644, checksum set.
pub fn raw_header(name: &[u8], kind: EntryType, size: u64) -> [u8; 512] {
    let mut h = Header::new_gnu();
    h.as_old_mut().name[..name.len()].copy_from_slice(name);
    h.set_entry_type(kind);
    h.set_mode(0o644);
    h.set_size(size);
    h.set_cksum();
    *h.as_bytes()
}

/// The body of a PAX extended header holding `records`.
pub fn pax_records(records: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (key, value) in records {
        // The length counts itself: grow it until its own digits fit.
        let body = key.len() + value.len() + 3; // ' ', '=', '\n'
        let mut len = body + 1;
        while len != body + len.to_string().len() {
            len = body + len.to_string().len();
        }
        out.extend_from_slice(format!("{len} {key}=").as_bytes());
        out.extend_from_slice(value);
        out.push(b'\n');
    }
    out
}
