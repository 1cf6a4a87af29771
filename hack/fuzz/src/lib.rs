//! Helpers shared by the fuzz targets in `fuzz_targets/`: splitting one fuzz input into
//! the several fields a parser takes, the same way `make_seeds.py` joins them, and the
//! one signature verifier the cosign targets share. Each target drives the crate's own
//! entry points.

use std::sync::OnceLock;

use ocisource::verify::CosignVerifier;

/// The verifier with the embedded public-good trusted root, loaded once per process.
pub fn verifier() -> &'static CosignVerifier {
    static V: OnceLock<CosignVerifier> = OnceLock::new();
    V.get_or_init(|| CosignVerifier::new().expect("the embedded trusted root loads"))
}

/// Separates the fields of a text target's input (ASCII record separator).
pub const FIELD: &[u8] = b"\x1e";

/// Separates the layers of the `archive_merge` input: long enough never to turn up by
/// chance inside compressed data.
pub const LAYER: &[u8] = b"\x1e\x1eLAYER\x1e\x1e";

/// Splits `data` at every `sep`, into at most `max` parts (the last keeps the rest).
pub fn split<'a>(data: &'a [u8], sep: &[u8], max: usize) -> Vec<&'a [u8]> {
    let mut parts = Vec::new();
    let mut rest = data;
    while parts.len() + 1 < max {
        match rest.windows(sep.len()).position(|w| w == sep) {
            Some(i) => {
                parts.push(&rest[..i]);
                rest = &rest[i + sep.len()..];
            }
            None => break,
        }
    }
    parts.push(rest);
    parts
}

/// The `i`th field of `data` as text (lossy UTF-8), empty when absent.
pub fn field(parts: &[&[u8]], i: usize) -> String {
    parts
        .get(i)
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .unwrap_or_default()
}

/// The `i`th field of `data` as bytes, empty when absent.
pub fn bytes<'a>(parts: &[&'a [u8]], i: usize) -> &'a [u8] {
    parts.get(i).copied().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_at_most_max() {
        assert_eq!(
            split(b"a\x1eb\x1ec", FIELD, 2),
            vec![&b"a"[..], &b"b\x1ec"[..]]
        );
        assert_eq!(split(b"abc", FIELD, 4), vec![&b"abc"[..]]);
        assert_eq!(split(b"", FIELD, 4), vec![&b""[..]]);
    }
}
