//! Unit tests of `ignore.rs`, kept beside it so that file reads as the code alone.

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
fn spec_replaces_the_defaults_but_not_the_vcs_patterns() {
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
    assert!(
        rules.is_ignored(".git/config", false),
        "VCS patterns always apply"
    );
    assert!(rules.is_ignored(".gitmodules", false));
}

/// NOTES.md "Exclusions": an empty list (no pattern anywhere) means VCS + defaults,
/// whatever `spec.ignore` looks like when it holds no pattern.
#[rstest]
#[case::unset(None)]
#[case::empty(Some(""))]
#[case::blank_lines(Some("\n  \n"))]
#[case::comments_only(Some("# nothing here\n#*.yaml\n"))]
fn an_empty_list_keeps_vcs_and_default_patterns(#[case] spec: Option<&str>) {
    let rules = match spec {
        Some(text) => IgnoreRules::from_spec(text).unwrap(),
        None => IgnoreRules::flux_default(),
    };
    assert!(rules.defaults_apply());
    assert!(rules.is_ignored("logo.png", false));
    assert!(rules.is_ignored(".github/workflows/ci.yaml", false));
    assert!(rules.is_ignored(".git/HEAD", false));
    assert!(!rules.is_ignored("deploy/app.yaml", false));
}

#[rstest]
#[case::spec(Some("*.txt"), None)]
#[case::root_sourceignore(None, Some(""))]
#[case::nested_sourceignore(None, Some("sub"))]
#[case::both(Some("*.txt"), Some("sub"))]
fn any_pattern_ends_the_defaults_but_not_vcs(
    #[case] spec: Option<&str>,
    #[case] sourceignore_dir: Option<&str>,
) {
    let mut rules = match spec {
        Some(text) => IgnoreRules::from_spec(text).unwrap(),
        None => IgnoreRules::flux_default(),
    };
    if let Some(dir) = sourceignore_dir {
        rules.add_sourceignore(dir, "# comment\n*.txt\n");
    }
    assert!(!rules.defaults_apply());
    assert!(!rules.is_ignored("logo.png", false), "defaults are gone");
    assert!(!rules.is_ignored(".github/ci.yml", false));
    assert!(rules.is_ignored(".git/config", false), "VCS stays");
    assert!(rules.is_ignored(".gitattributes", false));
}

#[test]
fn a_comment_only_sourceignore_changes_nothing() {
    let mut rules = IgnoreRules::flux_default();
    assert_eq!(
        rules.add_sourceignore("sub", "# just a note\n\n"),
        Scope::Dir
    );
    assert!(rules.defaults_apply());
    assert!(rules.is_ignored("logo.png", false));
}

#[test]
fn the_first_pattern_widens_the_scope_to_the_tree() {
    let mut rules = IgnoreRules::flux_default();
    assert_eq!(rules.add_sourceignore("sub", "*.txt\n"), Scope::Tree);
    assert_eq!(rules.add_sourceignore("other", "*.md\n"), Scope::Dir);
    let mut none = IgnoreRules::none();
    assert_eq!(none.add_sourceignore("", "*.md\n"), Scope::Dir);
    assert!(
        !none.is_ignored(".git/config", false),
        "push: no built-in rules"
    );
}

#[test]
fn later_patterns_win_spec_over_sourceignore_over_defaults() {
    // Flux appends spec.ignore after every .sourceignore: it has the last word.
    let mut rules = IgnoreRules::from_spec("!a.txt\n").unwrap();
    rules.add_sourceignore("", "*.txt\n");
    assert!(!rules.is_ignored("a.txt", false));
    assert!(rules.is_ignored("b.txt", false));
    // A list pattern can re-include what a VCS pattern excludes.
    let rules = IgnoreRules::from_spec("!.gitignore\n").unwrap();
    assert!(!rules.is_ignored(".gitignore", false));
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
        "a",
        "a/x.txt",
        "a/b",
        "a/b/keep.txt",
        "a/b/c",
        "a/b/c/d.txt",
        "a/b/c/logo.png",
        "a/local",
        "a/local/f",
        "z",
        "z/y.txt",
        ".git",
        ".git/config",
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
            let parent = p.rsplit_once('/').is_some_and(|(d, _)| verdicts[d]);
            let below = rules.is_ignored_below(p, is_dir, parent);
            assert_eq!(below, rules.is_ignored(p, is_dir), "{p}");
            verdicts.insert(p, below);
        }
    }
    assert!(many.is_ignored("a/b/c/logo.png", false) && !many.is_ignored("a/b/c/d.txt", false));
    assert!(few.is_ignored("a/local/f", false) && !few.is_ignored("a/b/keep.txt", false));
}

#[test]
fn spec_ignore_is_capped() {
    let at_cap = "#".repeat(MAX_SPEC_IGNORE_BYTES);
    assert!(IgnoreRules::from_spec(&at_cap).is_ok());
    let err = IgnoreRules::from_spec(&format!("{at_cap}\n"))
        .unwrap_err()
        .to_string();
    let size = format!("is {} bytes", MAX_SPEC_IGNORE_BYTES + 1);
    for part in ["spec.ignore", &size, "32768-byte cap", "shorten it"] {
        assert!(err.contains(part), "{part} in {err}");
    }
}

/// A Flux user's realistic list (a thousand lines) passes unchanged.
#[test]
fn a_thousand_realistic_lines_fit_under_the_spec_cap() {
    let text: String = (0..1000)
        .map(|i| format!("/deploy/overlays/env-{i:04}/\n"))
        .collect();
    let rules = IgnoreRules::from_spec(&text).unwrap();
    assert!(rules.is_ignored("deploy/overlays/env-0999/a.yaml", false));
    assert!(!rules.is_ignored("deploy/base/a.yaml", false));
}
