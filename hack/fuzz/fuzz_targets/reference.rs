//! Image references and OCI URLs: `spec.url` (`RepositoryUrl::parse`), the CLI's
//! `oci://host/repo:tag|@digest` form (`parse_image_ref`), `spec.ref`'s precedence
//! (`RefSpec::from_fields`) and the revision string.
//!
//! Input fields (separated by `FIELD`): url or image reference, tag, semver, semver
//! filter, digest.
//!
//! Checked: a parsed URL or image reference re-renders to a string that parses to the
//! same value; accepted hosts and paths carry no `/`, `..` or `@`; a tag ref is a valid
//! tag; a digest ref re-renders to itself; the revision names the digest.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ocisource::domain::digest::Digest;
use ocisource::domain::reference::{parse_image_ref, revision, valid_tag, RefSpec, RepositoryUrl};
use ocisource_fuzz::{field, split, FIELD};

fuzz_target!(|data: &[u8]| {
    let parts = split(data, FIELD, 5);
    let url = field(&parts, 0);
    let tag = field(&parts, 1);
    let semver = field(&parts, 2);
    let filter = field(&parts, 3);
    let digest = field(&parts, 4);

    match RepositoryUrl::parse(&url) {
        Ok(u) => {
            check_url(&u);
            let shown = u.to_string();
            assert_eq!(
                RepositoryUrl::parse(&shown).as_ref(),
                Ok(&u),
                "url round trip"
            );
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }

    match parse_image_ref(&url) {
        Ok((u, r)) => {
            check_url(&u);
            let shown = match &r {
                RefSpec::Tag(t) => {
                    assert!(valid_tag(t), "invalid tag {t:?} accepted");
                    format!("{u}:{t}")
                }
                RefSpec::Digest(d) => format!("{u}@{d}"),
                RefSpec::Semver { .. } => panic!("an image reference gave a semver ref"),
            };
            let (u2, r2) = parse_image_ref(&shown).expect("a rendered image ref parses");
            assert_eq!(u2, u, "image ref repository round trip");
            match (&r, &r2) {
                (RefSpec::Tag(a), RefSpec::Tag(b)) => assert_eq!(a, b),
                (RefSpec::Digest(a), RefSpec::Digest(b)) => assert_eq!(a, b),
                _ => panic!("image ref kind changed in the round trip: {shown}"),
            }
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }

    let opt = |s: &str| (!s.is_empty()).then(|| s.to_string());
    let (tag, semver, filter, digest) = (opt(&tag), opt(&semver), opt(&filter), opt(&digest));
    // A regex filter larger than this only slows the run down; the regex crate caps it.
    if filter.as_ref().is_some_and(|f| f.len() > 512) {
        return;
    }
    match RefSpec::from_fields(
        tag.as_deref(),
        semver.as_deref(),
        filter.as_deref(),
        digest.as_deref(),
    ) {
        Ok(RefSpec::Digest(d)) => {
            let text = digest
                .as_deref()
                .expect("a digest ref comes from the digest field");
            assert_eq!(
                d.to_string(),
                text.trim(),
                "digest ref re-renders to itself"
            );
            assert_eq!(revision(None, &d), d.to_string());
        }
        Ok(RefSpec::Tag(t)) => {
            assert!(valid_tag(&t));
            let d = Digest::of(t.as_bytes());
            assert_eq!(revision(Some(&t), &d), format!("{t}@{d}"));
        }
        Ok(RefSpec::Semver(semver)) => {
            assert!(!semver.range.trim().is_empty());
            // Compiling may refuse the range or filter, with a message; never a panic.
            if let Err(e) = semver.compile() {
                assert!(!e.to_string().is_empty());
            }
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }
});

fn check_url(u: &RepositoryUrl) {
    assert!(!u.host.is_empty(), "empty host");
    assert!(
        !u.host.contains('/') && !u.host.contains('@'),
        "host {:?}",
        u.host
    );
    assert!(!u.repository.is_empty(), "empty repository");
    assert!(!u.repository.contains('@'), "repository {:?}", u.repository);
    for c in u.repository.split('/') {
        assert!(
            !c.is_empty() && c != "." && c != "..",
            "repository {:?}",
            u.repository
        );
    }
}
