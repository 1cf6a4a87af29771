//! Ignore patterns: `spec.ignore` (`IgnoreRules::from_spec`), `.sourceignore` files of
//! an artifact (`add_sourceignore`) and the matching the merge asks for (`is_ignored`).
//!
//! Input fields (separated by `FIELD`): `spec.ignore` text (an empty field means Flux's
//! defaults), a `.sourceignore` directory, its content, a second directory and content,
//! then paths one per line (a trailing `/` marks a directory).
//!
//! Checked: an excluded directory excludes everything under it; a loaded `.sourceignore`
//! is known by `has_sourceignore`; loading the same content twice changes no answer;
//! leading and trailing slashes do not change an answer.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ocisource::domain::ignore::IgnoreRules;
use ocisource_fuzz::{field, split, FIELD};

/// Paths matched per input.
const MAX_PATHS: usize = 32;

fuzz_target!(|data: &[u8]| {
    let parts = split(data, FIELD, 6);
    let spec = field(&parts, 0);
    let mut rules = if spec.is_empty() {
        IgnoreRules::flux_default()
    } else {
        match IgnoreRules::from_spec(&spec) {
            Ok(r) => r,
            Err(e) => {
                assert!(!e.to_string().is_empty());
                return;
            }
        }
    };
    for (d, c) in [(1, 2), (3, 4)] {
        let (dir, content) = (field(&parts, d), field(&parts, c));
        if dir.is_empty() && content.is_empty() {
            continue;
        }
        rules.add_sourceignore(&dir, &content);
        assert!(
            rules.has_sourceignore(&dir, &content),
            "loaded .sourceignore not known"
        );
    }
    assert!(rules.sourceignore_count() <= 2);
    let again = {
        let mut r = rules.clone();
        for (d, c) in [(1, 2), (3, 4)] {
            let (dir, content) = (field(&parts, d), field(&parts, c));
            if !(dir.is_empty() && content.is_empty()) && rules.has_sourceignore(&dir, &content) {
                r.add_sourceignore(&dir, &content);
            }
        }
        r
    };

    let paths = field(&parts, 5);
    for line in paths.lines().take(MAX_PATHS) {
        let is_dir = line.ends_with('/');
        let path = line.trim_matches('/');
        let ignored = rules.is_ignored(path, is_dir);
        assert_eq!(
            again.is_ignored(path, is_dir),
            ignored,
            "reloading changed {path:?}"
        );
        assert_eq!(
            rules.is_ignored(&format!("/{path}/"), is_dir),
            ignored,
            "slashes changed {path:?}"
        );
        if ignored {
            continue;
        }
        // Not ignored: then no ancestor directory is.
        for (i, b) in path.bytes().enumerate() {
            if b == b'/' {
                let ancestor = &path[..i];
                assert!(
                    !rules.is_ignored(ancestor, true),
                    "{path:?} kept although its directory {ancestor:?} is excluded"
                );
            }
        }
    }
});
