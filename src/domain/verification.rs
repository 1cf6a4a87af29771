//! Verification policy as pure types: what Flux's `spec.verify` (or the command line's
//! `--key`/`--certificate-*` flags) asks for, checked once by [`VerifyPolicy::new`].
//! `provider: cosign` with a `secretRef` of `*.pub` keys becomes [`VerifyPolicy::Keys`];
//! without keys it becomes [`VerifyPolicy::Keyless`], which needs at least one
//! `matchOIDCIdentity` entry. Its regexes are searched for, not anchored, exactly as
//! cosign and Flux apply them (Go's `MatchString`): `github.com/org` matches any subject
//! containing it; write `^...$` to require the whole value.
//! No I/O and no sigstore, kube or tokio import here: the `verify` adapter turns the PEM
//! bytes and the trusted root JSON into crypto objects.

use std::collections::BTreeMap;

use regex::Regex;

/// A trusted public key from the verification Secret (a `*.pub` entry).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrustedKey {
    /// The Secret key (file name) it came from, e.g. `cosign.pub`.
    pub name: String,
    /// PEM text of the public key (`-----BEGIN PUBLIC KEY-----`).
    pub pem: Vec<u8>,
}

/// One `matchOIDCIdentity` entry, compiled: both regexes must match somewhere in the
/// certificate's issuer and subject (unanchored, as in cosign and Flux).
#[derive(Clone, Debug)]
pub struct IdentityMatch {
    issuer: Regex,
    subject: Regex,
    issuer_source: String,
    subject_source: String,
}

impl IdentityMatch {
    /// Compiles an `{issuer, subject}` pair, as written (no anchors added).
    pub fn new(issuer: &str, subject: &str) -> Result<Self, PolicyError> {
        Ok(Self {
            issuer: Self::issuer(issuer)?,
            subject: Self::subject(subject)?,
            issuer_source: issuer.to_string(),
            subject_source: subject.to_string(),
        })
    }

    /// Compiles an issuer regex (the rule `api::validate` applies too).
    pub fn issuer(pattern: &str) -> Result<Regex, PolicyError> {
        compile("issuer", pattern)
    }

    /// Compiles a subject regex (the rule `api::validate` applies too).
    pub fn subject(pattern: &str) -> Result<Regex, PolicyError> {
        compile("subject", pattern)
    }

    /// True when the issuer regex is found in the certificate's OIDC issuer and the
    /// subject regex in its SAN (a search, like Go's `MatchString`).
    pub fn matches(&self, issuer: &str, subject: &str) -> bool {
        self.issuer.is_match(issuer) && self.subject.is_match(subject)
    }

    /// The issuer regex as written in the spec.
    pub fn issuer_pattern(&self) -> &str {
        &self.issuer_source
    }

    /// The subject regex as written in the spec.
    pub fn subject_pattern(&self) -> &str {
        &self.subject_source
    }
}

impl PartialEq for IdentityMatch {
    fn eq(&self, other: &Self) -> bool {
        self.issuer_source == other.issuer_source && self.subject_source == other.subject_source
    }
}

fn compile(field: &'static str, pattern: &str) -> Result<Regex, PolicyError> {
    Regex::new(pattern).map_err(|e| PolicyError::InvalidRegex {
        field,
        pattern: pattern.to_string(),
        message: e.to_string(),
    })
}

/// What a signature must satisfy for the artifact to be accepted.
#[derive(Clone, Debug, PartialEq)]
pub enum VerifyPolicy {
    /// Key mode: a signature by any one of these keys.
    Keys(Vec<TrustedKey>),
    /// Keyless mode: a Fulcio certificate whose identity matches any one entry.
    Keyless {
        /// Accepted `{issuer, subject}` pairs; never empty.
        identities: Vec<IdentityMatch>,
        /// A custom `trusted_root.json` (self-hosted Sigstore); `None` means the
        /// public-good root bundled with the binary.
        trusted_root_json: Option<Vec<u8>>,
    },
}

/// Spec-like inputs of `spec.verify` (cosign; the door refuses other providers), with
/// the Secrets already read from the cluster.
#[derive(Clone, Debug, Default)]
pub struct VerifySpec<'a> {
    /// Name of `secretRef`, if set, and its data.
    pub secret: Option<(&'a str, &'a BTreeMap<String, Vec<u8>>)>,
    /// `matchOIDCIdentity[]`, compiled.
    pub identities: Vec<IdentityMatch>,
    /// Custom trusted root JSON, if configured.
    pub trusted_root_json: Option<Vec<u8>>,
}

/// Trusted keys and where they came from, as errors name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeySet {
    /// Where the keys came from: `verification secret 'cosign-keys'`, `the --key files`.
    pub origin: String,
    /// The keys, in the order given.
    pub keys: Vec<TrustedKey>,
}

impl VerifyPolicy {
    /// The one constructor of a policy, for the controller (through
    /// [`VerifyPolicy::from_spec`]) and the command line (`verify`, `pull --key ...`)
    /// alike. Keys, when given, make key mode: identities and the trusted root then play
    /// no part (as in Flux, where a `secretRef` wins, and in cosign, where `--key` does);
    /// key mode needs at least one key and no empty one. Without keys, keyless mode needs
    /// at least one identity.
    pub fn new(
        keys: Option<KeySet>,
        identities: Vec<IdentityMatch>,
        trusted_root_json: Option<Vec<u8>>,
    ) -> Result<Self, PolicyError> {
        if let Some(KeySet { origin, keys }) = keys {
            if keys.is_empty() {
                return Err(PolicyError::NoPublicKeys { origin });
            }
            if let Some(empty) = keys
                .iter()
                .find(|k| k.pem.iter().all(u8::is_ascii_whitespace))
            {
                return Err(PolicyError::EmptyKey {
                    origin,
                    key: empty.name.clone(),
                });
            }
            return Ok(Self::Keys(keys));
        }
        if identities.is_empty() {
            return Err(PolicyError::NoIdentities);
        }
        Ok(Self::Keyless {
            identities,
            trusted_root_json,
        })
    }

    /// The policy `spec.verify` asks for, its keys being the `*.pub` entries of the
    /// `secretRef` Secret ([`VerifyPolicy::new`] with them), or says what in the spec is
    /// wrong (stalled).
    pub fn from_spec(spec: VerifySpec<'_>) -> Result<Self, PolicyError> {
        let keys = spec.secret.map(|(name, data)| KeySet {
            origin: format!("verification secret '{name}'"),
            keys: data
                .iter()
                .filter(|(k, _)| k.ends_with(".pub"))
                .map(|(k, v)| TrustedKey {
                    name: k.clone(),
                    pem: v.clone(),
                })
                .collect(),
        });
        Self::new(keys, spec.identities, spec.trusted_root_json)
    }
}

/// Why `spec.verify` cannot be used; the object stalls until the spec changes.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyError {
    /// No key: the Secret holds no `*.pub` entry.
    #[error("{origin} has no '*.pub' public key entry")]
    NoPublicKeys {
        /// Where the keys were looked for ([`KeySet::origin`]).
        origin: String,
    },
    /// A key is empty.
    #[error("public key '{key}' in {origin} is empty")]
    EmptyKey {
        /// Where the key came from ([`KeySet::origin`]).
        origin: String,
        /// Its name: the Secret entry or the file.
        key: String,
    },
    /// Keyless verification without `matchOIDCIdentity`.
    #[error("keyless verification requires at least one matchOIDCIdentity entry")]
    NoIdentities,
    /// A regex does not compile.
    #[error("invalid matchOIDCIdentity {field} regex '{pattern}': {message}")]
    InvalidRegex {
        /// `issuer` or `subject`.
        field: &'static str,
        /// The pattern.
        pattern: String,
        /// The regex error.
        message: String,
    },
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use rstest::rstest;

    fn ids(pairs: &[(&str, &str)]) -> Vec<IdentityMatch> {
        pairs
            .iter()
            .map(|(a, b)| IdentityMatch::new(a, b).unwrap())
            .collect()
    }

    #[rstest]
    #[case(
        "^https://token\\.actions\\.githubusercontent\\.com$",
        "https://token.actions.githubusercontent.com",
        true
    )]
    #[case(
        "https://token\\.actions\\.githubusercontent\\.com",
        "https://token.actions.githubusercontent.com.evil",
        true
    )]
    #[case(
        "^https://token\\.actions\\.githubusercontent\\.com$",
        "https://token.actions.githubusercontent.com.evil",
        false
    )]
    #[case(
        "https://accounts\\.google\\.com",
        "xhttps://accounts.google.com",
        true
    )]
    #[case(
        "^https://accounts\\.google\\.com",
        "xhttps://accounts.google.com",
        false
    )]
    #[case(".*", "anything", true)]
    #[case("a|b", "ab", true)]
    #[case("^(a|b)$", "ab", false)]
    #[case("github", "https://gitlab.com", false)]
    fn issuer_regex_is_searched_like_go_match_string(
        #[case] pattern: &str,
        #[case] issuer: &str,
        #[case] ok: bool,
    ) {
        let m = IdentityMatch::new(pattern, ".*").unwrap();
        assert_eq!(m.matches(issuer, "subject"), ok, "{pattern} vs {issuer}");
    }

    #[rstest]
    #[case(
        "stefanprodan/podinfo",
        "https://github.com/stefanprodan/podinfo/.github/workflows/release.yml@refs/tags/6.5.0",
        true
    )]
    #[case(
        "^stefanprodan/podinfo",
        "https://github.com/stefanprodan/podinfo/x",
        false
    )]
    #[case(
        "^https://github.com/stefanprodan/podinfo.*$",
        "https://github.com/stefanprodan/podinfo/x",
        true
    )]
    fn subject_regex_is_searched_too(
        #[case] pattern: &str,
        #[case] subject: &str,
        #[case] ok: bool,
    ) {
        let m = IdentityMatch::new(".*", pattern).unwrap();
        assert_eq!(m.matches("issuer", subject), ok, "{pattern} vs {subject}");
    }

    #[test]
    fn keys_come_from_pub_entries_only() {
        let mut data = BTreeMap::new();
        data.insert("cosign.pub".to_string(), b"PEM-A".to_vec());
        data.insert("cosign.key".to_string(), b"PRIVATE".to_vec());
        data.insert("other.pub".to_string(), b"PEM-B".to_vec());
        let policy = VerifyPolicy::from_spec(VerifySpec {
            secret: Some(("keys", &data)),
            ..Default::default()
        })
        .unwrap();
        let VerifyPolicy::Keys(keys) = policy else {
            panic!("expected key mode")
        };
        let names: Vec<&str> = keys.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names, ["cosign.pub", "other.pub"]);
    }

    #[test]
    fn spec_errors_are_reported() {
        let empty = BTreeMap::new();
        let no_pub = VerifyPolicy::from_spec(VerifySpec {
            secret: Some(("s", &empty)),
            ..Default::default()
        });
        assert_eq!(
            no_pub.unwrap_err().to_string(),
            "verification secret 's' has no '*.pub' public key entry"
        );
        let keyless = VerifyPolicy::from_spec(VerifySpec::default());
        assert_eq!(keyless, Err(PolicyError::NoIdentities));
        let err = IdentityMatch::new("(", ".*");
        assert!(matches!(
            err,
            Err(PolicyError::InvalidRegex {
                field: "issuer",
                ..
            })
        ));
    }

    #[test]
    fn keys_make_key_mode_whatever_else_is_given_and_errors_name_their_origin() {
        let key = |name: &str, pem: &[u8]| TrustedKey {
            name: name.into(),
            pem: pem.to_vec(),
        };
        let set = |keys| {
            Some(KeySet {
                origin: "the --key files".into(),
                keys,
            })
        };
        let policy = VerifyPolicy::new(
            set(vec![key("k.pem", b"PEM")]),
            ids(&[("a", "b")]),
            Some(b"{}".to_vec()),
        );
        assert_eq!(policy, Ok(VerifyPolicy::Keys(vec![key("k.pem", b"PEM")])));
        let empty = VerifyPolicy::new(
            set(vec![key("k.pem", b"PEM"), key("e.pem", b"\n")]),
            vec![],
            None,
        );
        assert_eq!(
            empty.unwrap_err().to_string(),
            "public key 'e.pem' in the --key files is empty"
        );
    }

    #[test]
    fn keyless_keeps_identities_and_root() {
        let pairs = ids(&[("^https://a$", "^x$"), ("b", "y")]);
        let policy = VerifyPolicy::from_spec(VerifySpec {
            identities: pairs,
            trusted_root_json: Some(b"{}".to_vec()),
            ..Default::default()
        })
        .unwrap();
        let VerifyPolicy::Keyless {
            identities,
            trusted_root_json,
        } = policy
        else {
            panic!("expected keyless")
        };
        assert_eq!(identities.len(), 2);
        assert!(identities[1].matches("b", "y"));
        assert!(
            identities[1].matches("b", "yy"),
            "unanchored: 'y' is found in 'yy'"
        );
        assert!(!identities[0].matches("https://a", "xx"));
        assert_eq!(trusted_root_json.as_deref(), Some(&b"{}"[..]));
    }
}
