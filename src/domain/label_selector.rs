//! Label selectors as `kubectl -l` and the controllers' `--*-selector` flags write them
//! (`key=value,tier in (a,b),!legacy`), checked before the controller starts: the grammar
//! of apimachinery's `labels.Parse`, and whether a selector can only match objects that
//! carry a label ([`requires_label`]).
//!
//! Own code rather than a crate: kube-core's `Selector` builds selectors but parses no
//! string, and the API server itself is the real parser (the watch sends the string
//! unchanged); this only has to refuse what would make the drop-in mode take objects
//! that are not meant for it. Pure: no I/O, no kube.

use std::fmt;

/// One requirement of a selector, as written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requirement {
    /// `key` (exists).
    Exists(String),
    /// `!key`.
    DoesNotExist(String),
    /// `key=value` or `key==value`.
    Equals(String, String),
    /// `key!=value` (also matches objects without the label).
    NotEquals(String, String),
    /// `key in (a,b)`.
    In(String, Vec<String>),
    /// `key notin (a,b)` (also matches objects without the label).
    NotIn(String, Vec<String>),
}

impl Requirement {
    /// True when only an object carrying the label can match.
    fn needs_label(&self) -> bool {
        matches!(self, Self::Exists(_) | Self::Equals(..) | Self::In(..))
    }
}

/// Why a selector was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SelectorError {
    /// The selector as given.
    pub selector: String,
    /// What is wrong with it.
    pub problem: String,
}

impl fmt::Display for SelectorError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "label selector '{}': {}", self.selector, self.problem)
    }
}

impl std::error::Error for SelectorError {}

/// Splits `s` at the commas outside parentheses.
fn split_top(s: &str) -> Result<Vec<&str>, String> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0i32, 0);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if !(0..=1).contains(&depth) {
            return Err("unbalanced or nested parentheses".into());
        }
    }
    if depth != 0 {
        return Err("unbalanced parentheses".into());
    }
    parts.push(&s[start..]);
    Ok(parts)
}

/// A label key: an optional DNS subdomain prefix and `/`, then a name of at most 63
/// characters (alphanumerics, `-`, `_`, `.`, starting and ending alphanumeric).
fn check_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let alnum_ends = |s: &str| {
        s.starts_with(|c: char| c.is_ascii_alphanumeric())
            && s.ends_with(|c: char| c.is_ascii_alphanumeric())
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && alnum_ends(name)
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if !name_ok {
        return Err(format!("'{key}' is not a valid label key"));
    }
    if let Some(p) = prefix {
        let ok = !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|l| {
                !l.is_empty()
                    && l.len() <= 63
                    && alnum_ends(l)
                    && l.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            });
        if !ok {
            return Err(format!("'{key}' has an invalid prefix '{p}'"));
        }
    }
    Ok(())
}

/// A label value: empty, or at most 63 characters as a name.
fn check_value(value: &str) -> Result<(), String> {
    let ok = value.is_empty()
        || (value.len() <= 63
            && value.starts_with(|c: char| c.is_ascii_alphanumeric())
            && value.ends_with(|c: char| c.is_ascii_alphanumeric())
            && value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)));
    if ok {
        Ok(())
    } else {
        Err(format!("'{value}' is not a valid label value"))
    }
}

/// `key in (a,b)` / `key notin (a,b)`: the key and the values, if `part` has that shape.
fn set_requirement(part: &str) -> Option<Result<Requirement, String>> {
    let open = part.find('(')?;
    let (head, rest) = part.split_at(open);
    let mut words = head.split_whitespace();
    let (key, op) = (words.next()?, words.next()?);
    if words.next().is_some() || !matches!(op, "in" | "notin") {
        return None;
    }
    let Some(inner) = rest
        .trim_end()
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
    else {
        return Some(Err(format!(
            "'{part}': the values must be one (a,b,...) list"
        )));
    };
    let values: Vec<String> = inner.split(',').map(|v| v.trim().to_string()).collect();
    let checked = check_key(key)
        .and_then(|()| values.iter().try_for_each(|v| check_value(v)))
        .and_then(|()| {
            if inner.trim().is_empty() {
                Err(format!("'{part}': the value list is empty"))
            } else {
                Ok(())
            }
        });
    Some(checked.map(|()| match op {
        "in" => Requirement::In(key.to_string(), values),
        _ => Requirement::NotIn(key.to_string(), values),
    }))
}

/// One comma-separated requirement.
fn requirement(part: &str) -> Result<Requirement, String> {
    let part = part.trim();
    if part.is_empty() {
        return Err("an empty requirement (two commas, or a comma at an end)".into());
    }
    if let Some(set) = set_requirement(part) {
        return set;
    }
    let pair = |op: &str| {
        part.split_once(op)
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
    };
    let r = if let Some(key) = part.strip_prefix('!') {
        Requirement::DoesNotExist(key.trim().to_string())
    } else if let Some((k, v)) = pair("!=") {
        Requirement::NotEquals(k, v)
    } else if let Some((k, v)) = pair("==").or_else(|| pair("=")) {
        Requirement::Equals(k, v)
    } else {
        Requirement::Exists(part.to_string())
    };
    match &r {
        Requirement::Exists(k) | Requirement::DoesNotExist(k) => check_key(k)?,
        Requirement::Equals(k, v) | Requirement::NotEquals(k, v) => {
            check_key(k)?;
            check_value(v)?;
        }
        Requirement::In(..) | Requirement::NotIn(..) => {}
    }
    Ok(r)
}

/// The requirements of `selector`, or what is malformed in it.
pub fn parse(selector: &str) -> Result<Vec<Requirement>, SelectorError> {
    let err = |problem: String| SelectorError {
        selector: selector.to_string(),
        problem,
    };
    if selector.trim().is_empty() {
        return Ok(Vec::new());
    }
    split_top(selector)
        .map_err(err)?
        .into_iter()
        .map(|p| requirement(p).map_err(err))
        .collect()
}

/// Checks that `selector` is well formed and matches only objects that carry a label:
/// at least one requirement is `key`, `key=value` or `key in (...)`. An empty selector
/// matches everything, and one made only of `!key`, `key!=value` or `key notin (...)`
/// matches every object without the label too, so in drop-in mode either would take
/// objects that Flux's source-controller also reconciles.
pub fn requires_label(selector: &str) -> Result<Vec<Requirement>, SelectorError> {
    let requirements = parse(selector)?;
    if requirements.iter().any(Requirement::needs_label) {
        return Ok(requirements);
    }
    Err(SelectorError {
        selector: selector.to_string(),
        problem: if requirements.is_empty() {
            "it is empty, so it matches every object".into()
        } else {
            "it matches objects without the label too; require a label, e.g. \
             'sharding.fluxcd.io/key=ocisource'"
                .into()
        },
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("sharding.fluxcd.io/key=ocisource")]
    #[case("sharding.fluxcd.io/key==ocisource")]
    #[case("sharding.fluxcd.io/key")]
    #[case("sharding.fluxcd.io/key in (a, b)")]
    #[case("!legacy,sharding.fluxcd.io/key=ocisource")]
    #[case("team notin (x),tier=web")]
    #[case(" tier = web ")]
    fn selectors_that_need_a_label_are_taken(#[case] s: &str) {
        assert!(requires_label(s).is_ok(), "{s}: {:?}", requires_label(s));
    }

    #[rstest]
    #[case("", "empty")]
    #[case("   ", "empty")]
    #[case("!sharding.fluxcd.io/key", "without the label")]
    #[case("sharding.fluxcd.io/key!=flux", "without the label")]
    #[case("team notin (a,b)", "without the label")]
    #[case("!a,b!=c", "without the label")]
    fn selectors_that_take_unlabelled_objects_are_refused(#[case] s: &str, #[case] says: &str) {
        let e = requires_label(s).unwrap_err();
        assert!(e.to_string().contains(says), "{s}: {e}");
    }

    #[rstest]
    #[case("a=b,,c=d")]
    #[case("a=b,")]
    #[case("key in (a,b")]
    #[case("key in ()")]
    #[case("-bad=x")]
    #[case("a=b c")]
    #[case("Example.COM/x=y")]
    #[case("x=y)")]
    fn malformed_selectors_are_refused(#[case] s: &str) {
        assert!(parse(s).is_err(), "{s}: {:?}", parse(s));
    }

    #[test]
    fn requirements_are_read_as_written() {
        assert_eq!(
            parse("a in (x,y),!b,c!=d,e==f").unwrap(),
            vec![
                Requirement::In("a".into(), vec!["x".into(), "y".into()]),
                Requirement::DoesNotExist("b".into()),
                Requirement::NotEquals("c".into(), "d".into()),
                Requirement::Equals("e".into(), "f".into()),
            ]
        );
    }
}
