//! Artifact references as the CLI takes them (`oci://host[:port]/repo`, with `:tag` or
//! `@sha256:<hex>`, as flux, oras and cosign write them), and the CLI's wording of the
//! domain's reference and pattern errors: a shell user is told the flag to change
//! (`--semver`), not the OCIRepository field (`spec.ref.semver`) the domain names.

use crate::domain::ignore::{IgnoreError, IgnoreRules};
use crate::domain::reference::{parse_image_ref, RefError, RefSpec, RepositoryUrl, UrlError};
use crate::domain::verification::PolicyError;

use super::AppError;

const FORMS: &str = "expected oci://host[:port]/repo, oci://host[:port]/repo:tag or oci://host[:port]/repo@sha256:<64 hex digits>";

/// The repository of `arg` and the tag or digest written in it, if any.
pub fn parse(arg: &str) -> Result<(RepositoryUrl, Option<RefSpec>), AppError> {
    let last = arg.rsplit('/').next().unwrap_or_default();
    let names_ref = arg.contains('@') || last.contains(':');
    let (url, reference) = parse_image_ref(arg).map_err(|e| match e {
        UrlError::RefInUrl(_) => AppError::Input(format!(
            "invalid reference '{arg}': {FORMS}; a tag is 1 to 128 characters of [A-Za-z0-9_.-] not starting with '.' or '-'"
        )),
        other => AppError::Input(other.to_string()),
    })?;
    Ok((url, names_ref.then_some(reference)))
}

/// The reference `pull` uses: the one in the URL, or the one the flags describe
/// (`--digest` beats `--semver` beats `--tag`, else `latest`), never both.
pub fn for_pull(
    arg: &str,
    tag: Option<&str>,
    semver: Option<&str>,
    semver_filter: Option<&str>,
    digest: Option<&str>,
) -> Result<(RepositoryUrl, RefSpec), AppError> {
    let (url, in_url) = parse(arg)?;
    match in_url {
        Some(_) if tag.is_some() || semver.is_some() || digest.is_some() => {
            Err(AppError::Input(format!(
                "'{arg}' already names a tag or digest: drop it from the URL or drop --tag, --semver and --digest"
            )))
        }
        Some(reference) => Ok((url, reference)),
        None => RefSpec::from_fields(tag, semver, semver_filter, digest)
            .map(|r| (url, r))
            .map_err(flag_error),
    }
}

/// The tag `push` writes to; a digest or no tag at all is refused with the reason.
pub fn for_push(arg: &str) -> Result<(RepositoryUrl, String), AppError> {
    match parse(arg)? {
        (url, Some(RefSpec::Tag(tag))) => Ok((url, tag)),
        (_, Some(_)) => Err(AppError::Input(format!(
            "invalid destination '{arg}': push needs a tag (oci://host/repo:tag); a digest names content that exists already"
        ))),
        (_, None) => Err(AppError::Input(format!(
            "invalid destination '{arg}': push needs a tag, e.g. {arg}:v1.0.0"
        ))),
    }
}

/// The tag or digest `verify` checks; a bare repository is an error, not `latest`.
pub fn for_verify(arg: &str) -> Result<(RepositoryUrl, RefSpec), AppError> {
    match parse(arg)? {
        (url, Some(reference)) => Ok((url, reference)),
        (_, None) => Err(AppError::Input(format!(
            "'{arg}' names no tag or digest: verify oci://host/repo:tag or oci://host/repo@sha256:<hex> (verify does not assume latest)"
        ))),
    }
}

/// Compiles a semver range and filter before the registry is contacted (the controller
/// leaves that to its resolve step), naming the flag on error.
pub fn check(reference: &RefSpec) -> Result<(), AppError> {
    reference.check().map_err(flag_error)
}

/// A reference error in the words of `pull`'s flags.
fn flag_error(e: RefError) -> AppError {
    AppError::Input(match e {
        RefError::Digest(d) => format!("invalid --digest: {d}"),
        RefError::Semver { range, reason } => format!("invalid --semver '{range}': {reason}"),
        RefError::Filter { filter, source } => {
            format!("invalid --semver-filter '{filter}': {source}")
        }
        RefError::Tag(t) => format!(
            "invalid --tag '{t}': a tag is 1 to 128 characters of [A-Za-z0-9_.-] not starting with '.' or '-'"
        ),
    })
}

/// Compiles `text` as gitignore patterns given with `flag`, naming the flag on error.
pub fn ignore_rules(flag: &str, text: &str) -> Result<IgnoreRules, AppError> {
    IgnoreRules::from_spec(text).map_err(|e| match e {
        IgnoreError::Pattern { line, message, .. } => {
            AppError::Input(format!("invalid {flag} pattern '{line}': {message}"))
        }
        IgnoreError::TooLarge { bytes, limit, .. } => AppError::Input(format!(
            "invalid {flag}: {bytes} bytes of ignore rules, over the {limit}-byte cap (compiled patterns cost memory): fold many paths into broader patterns such as '*.ext' or 'dir/'"
        )),
    })
}

/// A verification policy error in the words of `verify`'s flags.
pub fn policy_error(e: PolicyError) -> AppError {
    match e {
        PolicyError::InvalidRegex {
            field,
            pattern,
            message,
        } => {
            let flag = if field == "issuer" {
                "--certificate-oidc-issuer-regexp"
            } else {
                "--certificate-identity-regexp"
            };
            AppError::Input(format!("invalid {flag} '{pattern}': {message}"))
        }
        other => AppError::Input(other.to_string()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)]
mod tests {
    use super::*;

    fn message(r: Result<impl std::fmt::Debug, AppError>) -> String {
        r.unwrap_err().to_string()
    }

    #[test]
    fn urls_with_and_without_a_reference() {
        let (u, r) = parse("oci://reg.io:5000/team/app").unwrap();
        assert_eq!(
            (u.host.as_str(), u.repository.as_str()),
            ("reg.io:5000", "team/app")
        );
        assert!(r.is_none());
        assert!(
            matches!(parse("oci://reg.io/a:v1").unwrap().1, Some(RefSpec::Tag(t)) if t == "v1")
        );
        let d = format!("oci://reg.io/a@sha256:{}", "ab".repeat(32));
        assert!(matches!(parse(&d).unwrap().1, Some(RefSpec::Digest(_))));
        let bad = message(parse("oci://reg.io/a:-v1"));
        assert!(
            bad.contains("invalid reference") && !bad.contains("spec."),
            "{bad}"
        );
    }

    #[test]
    fn each_command_takes_the_references_it_can_use() {
        assert!(matches!(
            for_pull("oci://r.io/a", Some("v2"), None, None, None).unwrap().1,
            RefSpec::Tag(t) if t == "v2"
        ));
        let both = message(for_pull("oci://r.io/a:v1", Some("v2"), None, None, None));
        assert!(both.contains("drop --tag"), "{both}");
        assert!(message(for_push("oci://r.io/a")).contains("needs a tag"));
        let d = format!("oci://r.io/a@sha256:{}", "ab".repeat(32));
        assert!(message(for_push(&d)).contains("digest names content"));
        assert!(message(for_verify("oci://r.io/a")).contains("does not assume latest"));
    }

    #[test]
    fn flag_errors_name_flags_not_spec_fields() {
        for (semver, filter, digest, tag, flag) in [
            (Some("not a range"), None, None, None, "--semver"),
            (Some("1.x"), Some("(["), None, None, "--semver-filter"),
            (None, None, Some("sha256:xyz"), None, "--digest"),
            (None, None, None, Some("-v1"), "--tag"),
        ] {
            let e = message(
                for_pull("oci://r.io/a", tag, semver, filter, digest)
                    .and_then(|(_, r)| check(&r).map(|()| r)),
            );
            assert!(e.contains(flag) && !e.contains("spec."), "{e}");
        }
        let e = message(ignore_rules("--ignore", "ok\n{a\n"));
        assert!(
            e.contains("--ignore pattern '{a'") && !e.contains("spec."),
            "{e}"
        );
    }
}
