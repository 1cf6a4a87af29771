//! Unit tests of `reference.rs`, kept beside it so that file reads as the code alone.

use super::*;
use rstest::rstest;

#[rstest]
#[case("oci://ghcr.io/org/app", "ghcr.io", "org/app")]
#[case("oci://127.0.0.1:5000/a/b/c", "127.0.0.1:5000", "a/b/c")]
#[case("oci://localhost:5000/app-config/", "localhost:5000", "app-config")]
#[case(
    "oci://registry.example.com/team/my_app.v2",
    "registry.example.com",
    "team/my_app.v2"
)]
#[case("oci://docker.io/nginx", "index.docker.io", "library/nginx")]
#[case("oci://docker.io/org/app", "index.docker.io", "org/app")]
#[case("oci://index.docker.io/nginx", "index.docker.io", "library/nginx")]
#[case("oci://nginx", "index.docker.io", "library/nginx")]
#[case("oci://org/app", "index.docker.io", "org/app")]
#[case("oci://localhost/app", "localhost", "app")]
#[case("oci://registry-1.docker.io/app", "registry-1.docker.io", "app")]
fn parses_valid_urls(#[case] url: &str, #[case] host: &str, #[case] repo: &str) {
    let u = RepositoryUrl::parse(url).unwrap();
    assert_eq!((u.host.as_str(), u.repository.as_str()), (host, repo));
}

#[rstest]
#[case("https://ghcr.io/org/app", "must start with oci://")]
#[case("oci://ghcr.io/org/app:v1", "a tag or digest belongs in spec.ref")]
#[case(
    "oci://ghcr.io/org/app@sha256:abc",
    "a tag or digest belongs in spec.ref"
)]
#[case("oci://", "missing or malformed registry host")]
#[case("oci://ghcr.io/Org/App", "must be lower-case")]
#[case("oci://gh cr.io/org/app", "missing or malformed registry host")]
fn rejects_invalid_urls(#[case] url: &str, #[case] msg: &str) {
    let err = RepositoryUrl::parse(url).unwrap_err().to_string();
    assert!(err.contains(msg), "{err}");
    assert!(err.contains(url), "error should name the url: {err}");
}

#[test]
fn precedence_is_digest_then_semver_then_tag_then_latest() {
    let d = Digest::of(b"x").to_string();
    assert!(matches!(
        RefSpec::from_fields(Some("v1"), Some("1.x"), None, Some(&d)).unwrap(),
        RefSpec::Digest(_)
    ));
    assert!(matches!(
        RefSpec::from_fields(Some("v1"), Some("1.x"), None, None).unwrap(),
        RefSpec::Semver(_)
    ));
    assert!(
        matches!(RefSpec::from_fields(Some("v1"), None, None, None).unwrap(), RefSpec::Tag(t) if t == "v1")
    );
    assert!(
        matches!(RefSpec::from_fields(None, None, None, None).unwrap(), RefSpec::Tag(t) if t == "latest")
    );
    assert!(
        matches!(RefSpec::from_fields(Some(""), Some(" "), None, Some("")).unwrap(), RefSpec::Tag(t) if t == "latest")
    );
}

#[test]
fn field_errors_name_the_field() {
    // A bad range or filter is found when compiled (after listing tags), not before.
    let bad_filter = RefSpec::from_fields(None, Some("1.x"), Some("(["), None).unwrap();
    let e = bad_filter.check().unwrap_err().to_string();
    assert!(e.starts_with("invalid spec.ref.semverFilter '(['"), "{e}");
    let bad_range = RefSpec::from_fields(None, Some("not a range"), None, None).unwrap();
    let e = bad_range.check().unwrap_err().to_string();
    assert!(
        e.starts_with("invalid spec.ref.semver 'not a range'"),
        "{e}"
    );
    let e = RefSpec::from_fields(None, None, None, Some("sha256:zz"))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("invalid spec.ref.digest"), "{e}");
    let e = RefSpec::from_fields(Some("-bad"), None, None, None)
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("invalid spec.ref.tag '-bad'"), "{e}");
}

#[test]
fn image_refs_split_into_repository_and_ref() {
    let (u, r) = parse_image_ref("oci://127.0.0.1:5000/a/b:v1.0").unwrap();
    assert_eq!(
        (u.host.as_str(), u.repository.as_str()),
        ("127.0.0.1:5000", "a/b")
    );
    assert!(matches!(r, RefSpec::Tag(t) if t == "v1.0"));
    let d = Digest::of(b"z");
    let (u, r) = parse_image_ref(&format!("oci://reg.io/a@{d}")).unwrap();
    assert_eq!(u.repository, "a");
    assert!(matches!(r, RefSpec::Digest(x) if x == d));
    let (_, r) = parse_image_ref("oci://reg.io:443/a").unwrap();
    assert!(matches!(r, RefSpec::Tag(t) if t == "latest"));
    assert!(parse_image_ref("oci://reg.io/a@sha256:nope").is_err());
}

#[rstest]
#[case(None, TagMapping::Plain)]
#[case(
    Some("application/vnd.cncf.helm.chart.content.v1.tar+gzip"),
    TagMapping::HelmChart
)]
fn semver_refs_read_helm_tags_only_for_the_chart_layer(
    #[case] media_type: Option<&str>,
    #[case] want: TagMapping,
) {
    let r = RefSpec::from_fields(None, Some(">=1.0.0"), None, None)
        .unwrap()
        .with_layer_media_type(media_type);
    assert!(matches!(r, RefSpec::Semver(s) if s.mapping == want));
}

#[test]
fn revision_formats() {
    let d = Digest::of(b"m");
    assert_eq!(revision(Some("v1.2.0"), &d), format!("v1.2.0@{d}"));
    assert_eq!(revision(None, &d), d.to_string());
}
