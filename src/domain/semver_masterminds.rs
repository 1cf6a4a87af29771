//! The text of Masterminds/semver v3.4.0's `NewConstraint` error for a range it refuses,
//! which Flux's source-controller quotes (`semver 'R' parse error: improper constraint:
//! SEGMENT`). The range itself is parsed by [`super::semver_range`]; this only words a
//! refusal as Flux does, so it follows Masterminds' own steps, on its own regular
//! expressions (copied from its `constraints.go`; Go's RE2 and the `regex` crate agree on
//! them, with `\s` spelt as Go's ASCII class): hyphen ranges are rewritten first, then
//! each `||` segment must match the segment pattern, then each comparator found in it the
//! comparator pattern. Our own code because no crate reproduces another library's error
//! text; it is small.

use std::sync::LazyLock;

use regex::Regex;

/// Go's `\s`: ASCII white space only.
const S: &str = r"[\t\n\f\r ]";
/// Masterminds' operators, the empty one included.
const OPS: &str = r"=||!=|>|<|>=|=>|<=|=<|~|~>|\^";
/// Masterminds' `cvRegex`: a version with wildcards.
const CV: &str = r"v?([0-9|x|X|\*]+)(\.[0-9|x|X|\*]+)?(\.[0-9|x|X|\*]+)?(-([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?(\+([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?";

/// Compiles one of the patterns below; they are constants, so a failure is a bug caught by
/// this module's tests, and `None` then only disables the wording (the caller keeps its
/// own message).
fn compile(pattern: String) -> Option<Regex> {
    Regex::new(&pattern).ok()
}

static RANGE: LazyLock<Option<Regex>> =
    LazyLock::new(|| compile(format!(r"{S}*({CV}){S}+-{S}+({CV}){S}*")));
static VALID: LazyLock<Option<Regex>> = LazyLock::new(|| {
    compile(format!(
        r"^({S}*({OPS}){S}*({CV}){S}*)((?:{S}+|,{S}*)({OPS}){S}*({CV}){S}*)*$"
    ))
});
static FIND: LazyLock<Option<Regex>> = LazyLock::new(|| compile(format!(r"({OPS}){S}*({CV})")));
static ONE: LazyLock<Option<Regex>> =
    LazyLock::new(|| compile(format!(r"^{S}*({OPS}){S}*({CV}){S}*$")));

/// Masterminds' `rewriteRange`: `A - B` becomes `>= A, <= B `.
fn rewrite_range(range: &Regex, input: &str) -> String {
    let mut out = input.to_string();
    for m in range.captures_iter(input) {
        let (Some(whole), Some(a), Some(b)) = (m.get(0), m.get(1), m.get(11)) else {
            continue;
        };
        out = out.replacen(
            whole.as_str(),
            &format!(">= {}, <= {} ", a.as_str(), b.as_str()),
            1,
        );
    }
    out
}

/// The error Masterminds/semver v3.4.0's `NewConstraint` returns for `range`, or `None`
/// when it would accept it (or a pattern failed to compile).
pub fn constraint_error(range: &str) -> Option<String> {
    let (Some(range_re), Some(valid), Some(find), Some(one)) = (&*RANGE, &*VALID, &*FIND, &*ONE)
    else {
        return None;
    };
    let rewritten = rewrite_range(range_re, range);
    for segment in rewritten.split("||") {
        if !valid.is_match(segment) {
            return Some(format!("improper constraint: {segment}"));
        }
        let found: Vec<&str> = find.find_iter(segment).map(|m| m.as_str()).collect();
        let comparators = if found.is_empty() {
            vec![segment]
        } else {
            found
        };
        for c in comparators {
            if !c.is_empty() && !one.is_match(c) {
                return Some(format!("improper constraint: {c}"));
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_patterns_compile() {
        assert!(RANGE.is_some() && VALID.is_some() && FIND.is_some() && ONE.is_some());
    }

    #[test]
    fn refused_ranges_are_worded_as_masterminds_words_them() {
        // `not-a-range` is compared whole with source-controller's condition by
        // tests/cluster_drop_in_failures.rs (semver-invalid).
        for (range, segment) in [
            ("not-a-range", "not-a-range"),
            (">=1.0.0 || nope", " nope"),
            (">= 1.0 <=", ">= 1.0 <="),
            ("1.2.3 - ", "1.2.3 - "),
            (">=1.0.0 && <2.0.0", ">=1.0.0 && <2.0.0"),
        ] {
            assert_eq!(
                constraint_error(range).as_deref(),
                Some(format!("improper constraint: {segment}").as_str()),
                "{range}"
            );
        }
    }

    #[test]
    fn accepted_ranges_have_no_error() {
        for range in [
            ">=1.0.0",
            "~> 1.2",
            "=<1.2",
            "1.2 - 1.4.5",
            "^1.x || >=2.0.0-0, <3",
            "*",
            "v1.2.3",
            ">= 1.0.0, < 2.0.0",
        ] {
            assert_eq!(constraint_error(range), None, "{range}");
        }
    }
}
