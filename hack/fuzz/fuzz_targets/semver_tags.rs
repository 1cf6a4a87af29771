//! Semver constraints and the tag choice: `VersionRange::parse` (`spec.ref.semver`),
//! `parse_tag` on registry tags, and `choose_tag` with an optional `semverFilter` regex.
//!
//! Input fields (separated by `FIELD`): range, filter regex, then tags one per line; the
//! low bit of the first byte picks the tag mapping (plain, or Helm's `_` for `+`).
//!
//! Checked: a parsed tag re-renders to a tag that parses to the same version; `=v` and
//! `>=v` ranges admit `v` and `<v` does not; the chosen tag passes the filter and the
//! range, and no other admitted tag has a higher precedence.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ocisource::domain::semver_range::{choose_tag, parse_tag, TagMapping, VersionRange};
use ocisource_fuzz::{field, split, FIELD};
use semver::Version;

/// Tags looked at per input: enough for the choice, small enough to stay fast.
const MAX_TAGS: usize = 64;

fuzz_target!(|data: &[u8]| {
    let parts = split(data, FIELD, 3);
    let range_text = field(&parts, 0);
    let filter_text = field(&parts, 1);
    let tags_text = field(&parts, 2);
    let tags: Vec<&str> = tags_text.lines().take(MAX_TAGS).collect();
    let mapping = if data.first().is_some_and(|b| b & 1 == 1) {
        TagMapping::HelmChart
    } else {
        TagMapping::Plain
    };

    for tag in &tags {
        let Some(v) = parse_tag(tag, mapping) else {
            continue;
        };
        let shown = v.to_string();
        assert_eq!(
            parse_tag(&shown, mapping).as_ref(),
            Some(&v),
            "tag {tag:?} → {shown}"
        );
        // Ranges refuse a part of u64::MAX (their next bound would overflow).
        if [v.major, v.minor, v.patch].contains(&u64::MAX) {
            continue;
        }
        let mut core = v.clone();
        core.build = semver::BuildMetadata::EMPTY;
        for (range, admits) in [
            (format!("={core}"), true),
            (format!(">={core}"), true),
            (format!("<{core}"), false),
        ] {
            let r = VersionRange::parse(&range)
                .unwrap_or_else(|e| panic!("range {range:?} from tag {tag:?} refused: {e}"));
            assert_eq!(r.matches(&v), admits, "range {range:?} on version {v}");
        }
    }

    let range = match VersionRange::parse(&range_text) {
        Ok(r) => r,
        Err(e) => {
            assert!(!e.is_empty());
            return;
        }
    };
    let filter = if filter_text.is_empty() || filter_text.len() > 256 {
        None
    } else {
        match regex::Regex::new(&filter_text) {
            Ok(f) => Some(f),
            Err(_) => return,
        }
    };
    let admitted = |t: &str| -> Option<Version> {
        if filter.as_ref().is_some_and(|f| !f.is_match(t)) {
            return None;
        }
        parse_tag(t, mapping).filter(|v| range.matches(v))
    };
    match choose_tag(tags.iter().copied(), &range, filter.as_ref(), mapping) {
        Some((tag, v)) => {
            assert_eq!(
                admitted(tag).as_ref(),
                Some(&v),
                "chosen tag {tag:?} not admitted"
            );
            for other in &tags {
                if let Some(w) = admitted(other) {
                    assert!(
                        precedence(&w) <= precedence(&v),
                        "{other:?} beats chosen {tag:?}"
                    );
                }
            }
        }
        None => {
            for other in &tags {
                assert!(
                    admitted(other).is_none(),
                    "{other:?} admitted but none chosen"
                );
            }
        }
    }
});

/// Semver precedence (build metadata does not count).
fn precedence(v: &Version) -> (u64, u64, u64, &semver::Prerelease) {
    (v.major, v.minor, v.patch, &v.pre)
}
