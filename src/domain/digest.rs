//! Content digests (`sha256:<64 hex>`), the identity of every manifest, blob and artifact.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest as _, Sha256};

/// A validated `sha256:<hex>` content digest.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest {
    hex: String,
}

/// Why a string is not a digest.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DigestError {
    /// Only sha256 digests are supported.
    #[error("unsupported digest algorithm in '{0}': only sha256 is supported")]
    Algorithm(String),
    /// The hex part is not 64 lower-case hex characters.
    #[error(
        "invalid sha256 digest '{0}': expected 'sha256:' followed by 64 lower-case hex characters"
    )]
    Hex(String),
}

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self::from_sha256(Sha256::digest(bytes).into())
    }

    /// Wraps a finished sha256 hash.
    pub fn from_sha256(hash: [u8; 32]) -> Self {
        Self {
            hex: hex::encode(hash),
        }
    }

    /// The 64 hex characters, without the algorithm prefix.
    pub fn hex(&self) -> &str {
        &self.hex
    }

    /// The `sha256-<hex>` tag cosign uses for signatures and the referrers fallback.
    pub fn tag_form(&self) -> String {
        format!("sha256-{}", self.hex)
    }
}

impl FromStr for Digest {
    type Err = DigestError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let Some((algo, hex)) = s.split_once(':') else {
            return Err(DigestError::Hex(s.to_string()));
        };
        if algo != "sha256" {
            return Err(DigestError::Algorithm(s.to_string()));
        }
        let valid = hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if !valid {
            return Err(DigestError::Hex(s.to_string()));
        }
        Ok(Self {
            hex: hex.to_string(),
        })
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex)
    }
}

impl serde::Serialize for Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Digest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Incremental sha256 with a byte count, for checking blobs while they stream.
#[derive(Default, Clone)]
pub struct Hasher {
    inner: Sha256,
    len: u64,
}

impl Hasher {
    /// Feeds bytes.
    pub fn update(&mut self, bytes: &[u8]) {
        self.inner.update(bytes);
        self.len += bytes.len() as u64;
    }

    /// Bytes fed so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when nothing was fed.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The digest of everything fed.
    pub fn finish(self) -> Digest {
        Digest::from_sha256(self.inner.finalize().into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_round_trip() {
        let d = Digest::of(b"hello");
        let again: Digest = d.to_string().parse().unwrap();
        assert_eq!(d, again);
        assert_eq!(d.tag_form(), format!("sha256-{}", d.hex()));
    }

    #[test]
    fn rejects_other_algorithms_and_bad_hex() {
        assert!(matches!(
            "sha512:ab".parse::<Digest>(),
            Err(DigestError::Algorithm(_))
        ));
        assert!(matches!(
            "sha256:XYZ".parse::<Digest>(),
            Err(DigestError::Hex(_))
        ));
        assert!(matches!(
            "nodigest".parse::<Digest>(),
            Err(DigestError::Hex(_))
        ));
        let upper = format!("sha256:{}", "A".repeat(64));
        assert!(upper.parse::<Digest>().is_err());
    }

    #[test]
    fn hasher_matches_one_shot() {
        let mut h = Hasher::default();
        h.update(b"hel");
        h.update(b"lo");
        assert_eq!(h.len(), 5);
        assert_eq!(h.finish(), Digest::of(b"hello"));
    }
}
