//! Ignore rules for the files of an artifact, exactly as Flux applies them
//! (`sourceignore.LoadIgnorePatterns` + `storage.SourceIgnoreFilter`): the patterns are
//! every `.sourceignore` in the tree (scoped to its directory) followed by `spec.ignore`;
//! comment and blank lines do not count. If that list is EMPTY (no `.sourceignore`
//! pattern, `spec.ignore` unset, `""` or comments only), the VCS patterns and Flux's
//! default patterns apply; if it is not, the VCS patterns and the list apply and the
//! defaults do not. Later patterns win, as in Flux's matcher: `spec.ignore` over every
//! `.sourceignore`, a deeper `.sourceignore` over a shallower one, the list over the
//! defaults, the defaults over the VCS patterns.
//!
//! Pure matching on relative `/`-separated paths: no I/O, and nothing from kube, tokio,
//! reqwest, axum or sigstore may be imported here.

use std::collections::BTreeMap;

use ignore::gitignore::{Gitignore, GitignoreBuilder};
use ignore::Match;

use super::limits::MAX_SPEC_IGNORE_BYTES;

/// Flux's VCS patterns (`sourceignore.ExcludeVCS`): applied whatever the list holds.
pub const FLUX_VCS_EXCLUSIONS: &str = "\
.git/
.gitignore
.gitmodules
.gitattributes
";

/// Flux's default patterns (`ExcludeExt`, `ExcludeCI`, `ExcludeExtra`): applied only
/// when no `.sourceignore` and no `spec.ignore` pattern exists.
pub const FLUX_DEFAULT_EXCLUSIONS: &str = "\
*.jpg
*.jpeg
*.gif
*.png
*.wmv
*.flv
*.tar.gz
*.zip
.github/
.circleci/
.travis.yml
.gitlab-ci.yml
appveyor.yml
.drone.yml
cloudbuild.yaml
codeship-services.yml
codeship-steps.yml
**/.goreleaser.yml
**/.sops.yaml
**/.flux.yaml
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
    /// The rules are longer than their cap.
    #[error("{origin} is {bytes} bytes, over the {limit}-byte cap on ignore rules (compiled patterns cost memory): shorten it, e.g. fold many paths into broader patterns such as '*.ext' or 'dir/'")]
    TooLarge {
        /// Where the rules come from: `spec.ignore`.
        origin: String,
        /// Their length.
        bytes: usize,
        /// The cap.
        limit: usize,
    },
}

/// A compiled pattern list and whether it holds any pattern at all.
#[derive(Clone, Debug)]
struct Patterns {
    matcher: Gitignore,
    /// False when every line is blank or a comment: the list adds nothing.
    any: bool,
}

impl Patterns {
    fn empty() -> Self {
        Self {
            matcher: Gitignore::empty(),
            any: false,
        }
    }
}

/// One `.sourceignore`: its text and its compiled patterns.
#[derive(Clone, Debug)]
struct Nested {
    content: String,
    patterns: Patterns,
}

/// Which decisions a newly added `.sourceignore` may have changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Only paths under the file's own directory.
    Dir,
    /// Every path: it was the first pattern of the list, so the defaults stopped applying.
    Tree,
}

/// The ignore rules of one artifact. Cheap to clone; matching is read-only.
#[derive(Clone, Debug)]
pub struct IgnoreRules {
    /// VCS and default patterns exist (Flux's rules); false for [`IgnoreRules::none`].
    flux: bool,
    vcs: Patterns,
    defaults: Patterns,
    /// `spec.ignore`, when set.
    spec: Patterns,
    /// The text `spec` was compiled from (empty when unset).
    spec_text: String,
    /// `.sourceignore` rules keyed by directory (`""` for the root).
    nested: BTreeMap<String, Nested>,
}

impl Default for IgnoreRules {
    fn default() -> Self {
        Self::flux_default()
    }
}

impl IgnoreRules {
    /// Flux's rules with `spec.ignore` unset: VCS + default patterns until a
    /// `.sourceignore` brings a pattern.
    pub fn flux_default() -> Self {
        // Both lists are compile-time constants known to parse.
        let constant =
            |text| compile("the built-in patterns", text).unwrap_or_else(|_| Patterns::empty());
        Self {
            flux: true,
            vcs: constant(FLUX_VCS_EXCLUSIONS),
            defaults: constant(FLUX_DEFAULT_EXCLUSIONS),
            spec: Patterns::empty(),
            spec_text: String::new(),
            nested: BTreeMap::new(),
        }
    }

    /// No rules at all, not even VCS ones: nothing is ignored until a `.sourceignore`
    /// says so (`ocisource push` of a directory).
    pub fn none() -> Self {
        Self {
            flux: false,
            vcs: Patterns::empty(),
            defaults: Patterns::empty(),
            spec: Patterns::empty(),
            spec_text: String::new(),
            nested: BTreeMap::new(),
        }
    }

    /// Flux's rules with `spec.ignore` set to `text`. An empty text (or comments only)
    /// leaves the defaults in force, as in Flux. Refused past [`MAX_SPEC_IGNORE_BYTES`]
    /// (Flux has no cap): compiled patterns cost up to ~0.75 KiB per byte of text.
    pub fn from_spec(text: &str) -> Result<Self, IgnoreError> {
        if text.len() > MAX_SPEC_IGNORE_BYTES {
            return Err(IgnoreError::TooLarge {
                origin: "spec.ignore".into(),
                bytes: text.len(),
                limit: MAX_SPEC_IGNORE_BYTES,
            });
        }
        Ok(Self {
            spec: compile("spec.ignore", text)?,
            spec_text: text.to_string(),
            ..Self::flux_default()
        })
    }

    /// What the rules were made from, before any `.sourceignore`: whether Flux's lists
    /// apply, and the `spec.ignore` text. Rules of equal origin decide alike over the
    /// same artifact (its `.sourceignore` files are part of it).
    pub fn origin(&self) -> (bool, &str) {
        (self.flux, &self.spec_text)
    }

    /// True while no `.sourceignore` and no `spec.ignore` pattern exists, so Flux's
    /// default patterns apply.
    pub fn defaults_apply(&self) -> bool {
        self.flux && !self.spec.any && self.nested.values().all(|n| !n.patterns.any)
    }

    /// Adds the rules of the `.sourceignore` found in `dir` (`""` or `"a/b"`, no slashes
    /// at either end). Lines that are not valid patterns are skipped, as git and Flux do.
    /// Adding the same content twice for a directory changes nothing; different content
    /// replaces the earlier rules of that directory. Returns which decisions may differ
    /// now: [`Scope::Tree`] when this file ended the defaults.
    pub fn add_sourceignore(&mut self, dir: &str, content: &str) -> Scope {
        let dir = dir.trim_matches('/');
        if self.has_sourceignore(dir, content) {
            return Scope::Dir;
        }
        let had_defaults = self.defaults_apply();
        let mut builder = GitignoreBuilder::new("");
        let mut any = false;
        for line in content.lines().filter(|l| is_pattern(l)) {
            // An invalid line only loses its own rule; it still counts as a pattern of
            // the list, as every line does for Flux.
            let _ = builder.add_line(None, line);
            any = true;
        }
        let matcher = builder.build().unwrap_or_else(|_| Gitignore::empty());
        self.nested.insert(
            dir.to_string(),
            Nested {
                content: content.to_string(),
                patterns: Patterns { matcher, any },
            },
        );
        if had_defaults != self.defaults_apply() {
            Scope::Tree
        } else {
            Scope::Dir
        }
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

    /// The verdict of the highest-priority list that has one: `spec.ignore`, then the
    /// `.sourceignore` files deepest first, then the defaults (while they apply), then
    /// the VCS patterns. `None` when no rule matches.
    fn decide(&self, path: &str, is_dir: bool) -> Option<bool> {
        if let Some(v) = verdict(self.spec.matcher.matched(path, is_dir)) {
            return Some(v);
        }
        let depth = path.bytes().filter(|b| *b == b'/').count() + 1;
        if !self.nested.is_empty() && self.nested.len() < depth {
            // Fewer rule sets than directories above `path` (a deep path): try each set's
            // directory instead of each ancestor. In key order an ancestor comes before its
            // descendants, so reversed is deepest first.
            for (dir, n) in self.nested.iter().rev() {
                let rel = match path.strip_prefix(dir.as_str()) {
                    Some(rel) if dir.is_empty() => rel,
                    Some(rel) => match rel.strip_prefix('/') {
                        Some(rel) => rel,
                        None => continue,
                    },
                    None => continue,
                };
                if let Some(v) = verdict(n.patterns.matcher.matched(rel, is_dir)) {
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
                    if let Some(v) = verdict(n.patterns.matcher.matched(rel, is_dir)) {
                        return Some(v);
                    }
                }
                match cut {
                    Some(i) => cut = path[..i].rfind('/'),
                    None => break,
                }
            }
        }
        if self.defaults_apply() {
            if let Some(v) = verdict(self.defaults.matcher.matched(path, is_dir)) {
                return Some(v);
            }
        }
        verdict(self.vcs.matcher.matched(path, is_dir))
    }
}

/// Flux's `ReadPatterns` skips lines starting with `#` and blank lines.
fn is_pattern(line: &str) -> bool {
    !line.starts_with('#') && !line.trim().is_empty()
}

fn verdict<T>(m: Match<T>) -> Option<bool> {
    match m {
        Match::None => None,
        Match::Ignore(_) => Some(true),
        Match::Whitelist(_) => Some(false),
    }
}

fn compile(origin: &str, text: &str) -> Result<Patterns, IgnoreError> {
    let mut builder = GitignoreBuilder::new("");
    let mut any = false;
    for line in text.lines().filter(|l| is_pattern(l)) {
        builder
            .add_line(None, line)
            .map_err(|e| IgnoreError::Pattern {
                origin: origin.to_string(),
                line: line.to_string(),
                message: e.to_string(),
            })?;
        any = true;
    }
    let matcher = builder.build().map_err(|e| IgnoreError::Pattern {
        origin: origin.to_string(),
        line: String::new(),
        message: e.to_string(),
    })?;
    Ok(Patterns { matcher, any })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#[path = "ignore_tests.rs"]
mod tests;
