//! Kubernetes object names, checked as the API server checks them: a namespace is an
//! RFC 1123 label, an object name an RFC 1123 subdomain. Every place where a name becomes
//! a path (the artifact store, the one-shot state files) calls these first, so no name can
//! hold `/`, `..` or any character that would leave its folder. Pure: no I/O.

/// Longest RFC 1123 label (a namespace), as `k8s.io/apimachinery` validates it.
pub const MAX_LABEL: usize = 63;
/// Longest RFC 1123 subdomain (an object name).
pub const MAX_SUBDOMAIN: usize = 253;
/// Characters of a refused value shown in the error; the rest is cut.
const SHOWN: usize = 80;

/// Which Kubernetes rule a name must follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// RFC 1123 label: namespaces.
    Label,
    /// RFC 1123 subdomain: object names.
    Subdomain,
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The wording of k8s.io/apimachinery/pkg/util/validation.
        match self {
            Self::Label => write!(
                f,
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', \
                 and must start and end with an alphanumeric character (e.g. 'my-name', or '123-abc'), \
                 at most {MAX_LABEL} characters"
            ),
            Self::Subdomain => write!(
                f,
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', \
                 and must start and end with an alphanumeric character (e.g. 'example.com'), \
                 at most {MAX_SUBDOMAIN} characters"
            ),
        }
    }
}

/// A name that breaks its rule, naming the field it came from.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("invalid {field} '{shown}': {rule}")]
pub struct NameError {
    /// The field, e.g. `metadata.namespace`.
    pub field: &'static str,
    /// The value, escaped (control characters never reach a log raw) and cut short.
    pub shown: String,
    /// The rule it breaks.
    pub rule: Rule,
}

/// Checks `value` of `field` against `rule`.
pub fn check(field: &'static str, value: &str, rule: Rule) -> Result<(), NameError> {
    let (max, dots) = match rule {
        Rule::Label => (MAX_LABEL, false),
        Rule::Subdomain => (MAX_SUBDOMAIN, true),
    };
    let ok = value.len() <= max
        && if dots {
            value.split('.').all(is_label_body)
        } else {
            is_label_body(value)
        };
    if ok {
        return Ok(());
    }
    let mut shown: String = value.chars().take(SHOWN).collect::<String>();
    shown = shown.escape_debug().to_string();
    if value.chars().count() > SHOWN {
        shown.push_str("...");
    }
    Err(NameError { field, shown, rule })
}

/// Checks an object's namespace (a label) and name (a subdomain), as
/// `metadata.namespace` and `metadata.name`.
pub fn check_object(namespace: &str, name: &str) -> Result<(), NameError> {
    check("metadata.namespace", namespace, Rule::Label)?;
    check("metadata.name", name, Rule::Subdomain)
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`: one non-empty label.
fn is_label_body(s: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(&first), Some(&last)) => {
            alnum(first) && alnum(last) && bytes.iter().all(|&b| alnum(b) || b == b'-')
        }
        _ => false,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("default", true, true)]
    #[case("a", true, true)]
    #[case("team-1", true, true)]
    #[case("1abc", true, true)]
    #[case("app.example.com", false, true)]
    #[case("", false, false)]
    #[case("..", false, false)]
    #[case(".", false, false)]
    #[case("a/b", false, false)]
    #[case("../../etc", false, false)]
    #[case("a..b", false, false)]
    #[case(".hidden", false, false)]
    #[case("-a", false, false)]
    #[case("a-", false, false)]
    #[case("Upper", false, false)]
    #[case("a_b", false, false)]
    #[case("a b", false, false)]
    #[case("a\u{1b}[31m", false, false)]
    #[case("a\\b", false, false)]
    #[case("ä", false, false)]
    fn names_follow_kubernetes(#[case] value: &str, #[case] label: bool, #[case] sub: bool) {
        assert_eq!(
            check("f", value, Rule::Label).is_ok(),
            label,
            "label {value:?}"
        );
        assert_eq!(
            check("f", value, Rule::Subdomain).is_ok(),
            sub,
            "subdomain {value:?}"
        );
    }

    #[test]
    fn lengths_are_capped_as_kubernetes_caps_them() {
        let label = "a".repeat(MAX_LABEL);
        assert!(check("f", &label, Rule::Label).is_ok());
        assert!(check("f", &format!("{label}a"), Rule::Label).is_err());
        let sub = format!("{label}.{label}.{label}.{}", "b".repeat(61));
        assert_eq!(sub.len(), MAX_SUBDOMAIN);
        assert!(check("f", &sub, Rule::Subdomain).is_ok());
        assert!(check("f", &format!("{sub}c"), Rule::Subdomain).is_err());
    }

    #[test]
    fn errors_name_the_field_and_rule_and_escape_the_value() {
        let e = check_object("../x", "app").unwrap_err();
        assert_eq!(e.field, "metadata.namespace");
        assert_eq!(e.rule, Rule::Label);
        let e = check_object("team", "a/\u{1b}[2J").unwrap_err();
        let text = e.to_string();
        assert!(
            text.starts_with(
                "invalid metadata.name 'a/\\u{1b}[2J': a lowercase RFC 1123 subdomain"
            ),
            "{text}"
        );
        assert!(!text.contains('\u{1b}'));
        let long = check("metadata.name", &"x/".repeat(200), Rule::Subdomain).unwrap_err();
        assert!(
            long.shown.ends_with("...") && long.shown.len() < 100,
            "{}",
            long.shown
        );
    }
}
