//! Ignore rules for the files of an artifact: Flux's default exclusions, `spec.ignore`
//! (gitignore syntax, replacing the defaults) and `.sourceignore` files, which add rules
//! for their own directory the way git treats a nested `.gitignore`. Pure matching on
//! relative `/`-separated paths: no I/O, and nothing from kube, tokio, reqwest, axum or
//! sigstore may be imported here.

use std::collections::BTreeMap;

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;

/// Flux's default exclusions, applied when `spec.ignore` is not set.
pub const FLUX_DEFAULT_EXCLUSIONS: &str = "\
# VCS
.git/
.gitignore
.gitmodules
.gitattributes
# media and archives
*.jpg
*.jpeg
*.gif
*.png
*.wmv
*.flv
*.tar.gz
*.zip
# CI
.github/
.circleci/
.travis.yml
.gitlab-ci.yml
appveyor.yml
.drone.yml
cloudbuild.yaml
codeship-services.yml
codeship-steps.yml
# release and secrets tooling
.goreleaser.yml
.sops.yaml
# Flux v1
.flux.yaml
";

/// The file name whose content adds ignore rules for its directory.
pub const SOURCEIGNORE: &str = ".sourceignore";

/// A pattern that is not valid gitignore syntax.
#[derive(Debug, thiserror::Error)]
pub enum IgnoreError {
    /// A line of `spec.ignore` could not be parsed.
    #[error("failed to parse ignore pattern '{line}' of {origin}: {message}: fix the pattern")]
    Pattern {
        /// Where the line comes from: `spec.ignore`.
        origin: String,
        /// The offending line.
        line: String,
        /// What the glob parser said.
        message: String,
    },
}

/// One `.sourceignore`: its directory, its text and the compiled matcher.
#[derive(Clone, Debug)]
struct Nested {
    content: String,
    matcher: Gitignore,
}

/// The ignore rules of one artifact. Cheap to clone; matching is read-only.
#[derive(Clone, Debug)]
pub struct IgnoreRules {
    base: Gitignore,
    /// `.sourceignore` rules keyed by directory (`""` for the root).
    nested: BTreeMap<String, Nested>,
}

impl Default for IgnoreRules {
    fn default() -> Self {
        Self::flux_default()
    }
}

impl IgnoreRules {
    /// Flux's default exclusions (`.git/`, CI files, images, archives, ...).
    pub fn flux_default() -> Self {
        // The default list is a compile-time constant known to parse.
        Self::from_spec(FLUX_DEFAULT_EXCLUSIONS).unwrap_or_else(|_| Self::none())
    }

    /// No rules at all: nothing is ignored until a `.sourceignore` says so.
    pub fn none() -> Self {
        Self {
            base: Gitignore::empty(),
            nested: BTreeMap::new(),
        }
    }

    /// The rules of `spec.ignore`, which replace the default exclusions.
    pub fn from_spec(text: &str) -> Result<Self, IgnoreError> {
        Ok(Self {
            base: compile("spec.ignore", text)?,
            nested: BTreeMap::new(),
        })
    }

    /// Adds the rules of the `.sourceignore` found in `dir` (`""` or `"a/b"`, no slashes
    /// at either end). Lines that are not valid patterns are skipped, as git and Flux do.
    /// Adding the same content twice for a directory changes nothing; different content
    /// replaces the earlier rules of that directory.
    pub fn add_sourceignore(&mut self, dir: &str, content: &str) {
        let dir = dir.trim_matches('/');
        if self.has_sourceignore(dir, content) {
            return;
        }
        let mut builder = GitignoreBuilder::new("");
        for line in content.lines() {
            // An invalid line only loses its own rule.
            let _ = builder.add_line(None, line);
        }
        let matcher = builder.build().unwrap_or_else(|_| Gitignore::empty());
        self.nested.insert(
            dir.to_string(),
            Nested {
                content: content.to_string(),
                matcher,
            },
        );
    }

    /// True when exactly this `.sourceignore` content is already loaded for `dir`.
    pub fn has_sourceignore(&self, dir: &str, content: &str) -> bool {
        self.nested
            .get(dir.trim_matches('/'))
            .is_some_and(|n| n.content == content)
    }

    /// How many `.sourceignore` files are loaded.
    pub fn sourceignore_count(&self) -> usize {
        self.nested.len()
    }

    /// Whether `path` (relative, `/`-separated) is excluded. An excluded directory
    /// excludes everything under it, whatever later rules say, as in git.
    pub fn is_ignored(&self, path: &str, is_dir: bool) -> bool {
        let path = path.trim_matches('/');
        if path.is_empty() {
            return false;
        }
        for (i, b) in path.bytes().enumerate() {
            if b == b'/' && self.decide(&path[..i], true) == Some(true) {
                return true;
            }
        }
        self.decide(path, is_dir) == Some(true)
    }

    /// [`IgnoreRules::is_ignored`] for `path` when the verdict on its parent directory is
    /// already known (`parent_ignored`): one rule lookup instead of one per ancestor, so a
    /// walk down a tree costs each path once.
    pub fn is_ignored_below(&self, path: &str, is_dir: bool, parent_ignored: bool) -> bool {
        let path = path.trim_matches('/');
        parent_ignored || (!path.is_empty() && self.decide(path, is_dir) == Some(true))
    }

    /// The verdict of the most specific rule set that has one: the deepest
    /// `.sourceignore` first, then the base rules. `None` when no rule matches.
    fn decide(&self, path: &str, is_dir: bool) -> Option<bool> {
        let depth = path.bytes().filter(|b| *b == b'/').count() + 1;
        if !self.nested.is_empty() && self.nested.len() < depth {
            // Fewer rule sets than directories above `path`: try each set's directory. In
            // key order an ancestor comes before its descendants, so reversed is deepest
            // first.
            for (dir, n) in self.nested.iter().rev() {
                let rel = match path.strip_prefix(dir.as_str()) {
                    Some(rel) if dir.is_empty() => rel,
                    Some(rel) => match rel.strip_prefix('/') {
                        Some(rel) => rel,
                        None => continue,
                    },
                    None => continue,
                };
                if let Some(v) = verdict(n.matcher.matched(rel, is_dir)) {
                    return Some(v);
                }
            }
        } else if !self.nested.is_empty() {
            // Directories containing `path`, deepest first, then the root.
            let mut cut = path.rfind('/');
            loop {
                let (dir, rel) = match cut {
                    Some(i) => (&path[..i], &path[i + 1..]),
                    None => ("", path),
                };
                if let Some(n) = self.nested.get(dir) {
                    if let Some(v) = verdict(n.matcher.matched(rel, is_dir)) {
                        return Some(v);
                    }
                }
                match cut {
                    Some(i) => cut = path[..i].rfind('/'),
                    None => break,
                }
            }
        }
        verdict(self.base.matched(path, is_dir))
    }
}

fn verdict<T>(m: Match<T>) -> Option<bool> {
    match m {
        Match::None => None,
        Match::Ignore(_) => Some(true),
        Match::Whitelist(_) => Some(false),
    }
}

fn compile(origin: &str, text: &str) -> Result<Gitignore, IgnoreError> {
    let mut builder = GitignoreBuilder::new("");
    for line in text.lines() {
        builder
            .add_line(None, line)
            .map_err(|e| IgnoreError::Pattern {
                origin: origin.to_string(),
                line: line.to_string(),
                message: e.to_string(),
            })?;
    }
    builder.build().map_err(|e| IgnoreError::Pattern {
        origin: origin.to_string(),
        line: String::new(),
        message: e.to_string(),
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use rstest::rstest;

    use super::*;

    #[rstest]
    #[case(".git", true, true)]
    #[case(".git/config", false, true)]
    #[case("sub/.git/HEAD", false, true)]
    #[case(".github/workflows/ci.yaml", false, true)]
    #[case("docs/logo.png", false, true)]
    #[case("charts/app-1.0.0.tar.gz", false, true)]
    #[case(".gitignore", false, true)]
    #[case("deep/.sops.yaml", false, true)]
    #[case(".flux.yaml", false, true)]
    #[case("deploy/app.yaml", false, false)]
    #[case("README.md", false, false)]
    #[case(".sourceignore", false, false)]
    #[case("png", true, false)]
    fn default_exclusions(#[case] path: &str, #[case] is_dir: bool, #[case] ignored: bool) {
        assert_eq!(
            IgnoreRules::flux_default().is_ignored(path, is_dir),
            ignored,
            "{path}"
        );
    }

    #[test]
    fn spec_replaces_the_defaults() {
        let rules = IgnoreRules::from_spec("/secrets/\n*.md\n!keep.md\n").unwrap();
        assert!(rules.is_ignored("secrets", true));
        assert!(rules.is_ignored("secrets/a.yaml", false));
        assert!(
            !rules.is_ignored("x/secrets/a.yaml", false),
            "leading slash anchors"
        );
        assert!(rules.is_ignored("docs/a.md", false));
        assert!(!rules.is_ignored("docs/keep.md", false));
        assert!(
            !rules.is_ignored("logo.png", false),
            "defaults no longer apply"
        );
        assert!(!rules.is_ignored(".git/config", false));
    }

    #[test]
    fn sourceignore_applies_to_its_directory_only() {
        let mut rules = IgnoreRules::flux_default();
        rules.add_sourceignore("apps", "*.txt\n/local/\n!logo.png\n");
        assert!(rules.is_ignored("apps/a.txt", false));
        assert!(rules.is_ignored("apps/x/a.txt", false));
        assert!(!rules.is_ignored("a.txt", false));
        assert!(!rules.is_ignored("other/a.txt", false));
        assert!(rules.is_ignored("apps/local/f", false), "anchored at apps/");
        assert!(!rules.is_ignored("apps/x/local/f", false));
        assert!(
            !rules.is_ignored("apps/logo.png", false),
            "deeper rules win"
        );
        assert!(rules.is_ignored("logo.png", false));
        assert_eq!(rules.sourceignore_count(), 1);
        assert!(rules.has_sourceignore("apps", "*.txt\n/local/\n!logo.png\n"));
        assert!(!rules.has_sourceignore("apps", "other"));
    }

    #[test]
    fn an_ignored_directory_cannot_be_reopened() {
        let mut rules = IgnoreRules::from_spec("build/\n").unwrap();
        rules.add_sourceignore("build", "!keep\n");
        assert!(rules.is_ignored("build/keep", false));
    }

    #[test]
    fn root_sourceignore_and_bad_patterns() {
        let mut rules = IgnoreRules::none();
        assert!(!rules.is_ignored("a.png", false));
        rules.add_sourceignore("", "*.png\n");
        assert!(rules.is_ignored("x/a.png", false));
        rules.add_sourceignore("d", "{a\n*.txt\n");
        assert!(
            rules.is_ignored("d/x.txt", false),
            "a bad line does not void the file"
        );
        let err = IgnoreRules::from_spec("ok\n{a\n").unwrap_err().to_string();
        assert!(err.contains("spec.ignore") && err.contains("'{a'"), "{err}");
    }

    #[test]
    fn a_walk_down_with_parent_verdicts_agrees_with_full_checks() {
        let paths = [
            "a", "a/x.txt", "a/b", "a/b/keep.txt", "a/b/c", "a/b/c/d.txt", "a/b/c/logo.png",
            "a/local", "a/local/f", "z", "z/y.txt", ".git", ".git/config",
        ];
        let few = {
            let mut r = IgnoreRules::flux_default();
            r.add_sourceignore("a", "*.txt\n/local/\n");
            r.add_sourceignore("a/b", "!keep.txt\n");
            r
        };
        let mut many = few.clone();
        for i in 0..20 {
            many.add_sourceignore(&format!("q{i}"), "*\n");
        }
        many.add_sourceignore("a/b/c", "*.png\n!d.txt\n");
        for rules in [&few, &many] {
            let mut verdicts: BTreeMap<&str, bool> = BTreeMap::new();
            for p in paths {
                let is_dir = paths.iter().any(|q| q.starts_with(&format!("{p}/")));
                let parent = p.rsplit_once('/').map_or(false, |(d, _)| verdicts[d]);
                let below = rules.is_ignored_below(p, is_dir, parent);
                assert_eq!(below, rules.is_ignored(p, is_dir), "{p}");
                verdicts.insert(p, below);
            }
        }
        assert!(many.is_ignored("a/b/c/logo.png", false) && !many.is_ignored("a/b/c/d.txt", false));
        assert!(few.is_ignored("a/local/f", false) && !few.is_ignored("a/b/keep.txt", false));
    }
}
