//! Tests of the door: every field rule, and the typed value a valid spec becomes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use rstest::rstest;

#[test]
fn reasons_follow_the_worst_field() {
    assert_eq!(InvalidSpec::url("bad").reason(), "URLInvalid");
    assert_eq!(InvalidSpec::url("bad").to_string(), "spec.url: bad");
    assert_eq!(InvalidSpec::reference("bad").reason(), "InvalidSpec");
    let mut both = InvalidSpec::platform("bad");
    both.errors.push(FieldError {
        field: "spec.provider",
        message: "x".into(),
        unsupported: true,
    });
    assert_eq!(both.reason(), "ProviderNotSupported");
    assert_eq!(both.to_string(), "spec.platform: bad; spec.provider: x");
}

fn spec(yaml: &str) -> OciRepositorySpec {
    let interval = if yaml.contains("interval:") {
        ""
    } else {
        "interval: 5m, "
    };
    serde_yaml::from_str(&format!("{{{interval}{yaml}}}")).unwrap()
}

fn bad_fields(yaml: &str) -> Vec<&'static str> {
    super::desired(&spec(yaml), &Flavour::Ocisource)
        .err()
        .map(|e| e.fields())
        .unwrap_or_default()
}

#[rstest]
#[case("url: oci://ghcr.io/org/app", &[])]
#[case("url: oci://127.0.0.1:5000/a/b-c_d.e", &[])]
#[case("url: 'oci://[::1]:5000/app'", &[])]
#[case("url: oci://docker.io/nginx", &[])]
#[case("url: https://ghcr.io/org/app", &["spec.url"])]
#[case("url: oci://ghcr.io/org/app:v1", &["spec.url"])]
#[case("url: oci://ghcr.io/org/app@sha256:abc", &["spec.url"])]
#[case("url: oci://ghcr.io/Org/app", &["spec.url"])]
#[case("url: oci://ghcr.io/org//app", &["spec.url"])]
#[case("url: oci://host:port/app", &["spec.url"])]
fn urls_are_checked_by_the_domain_parser(#[case] yaml: &str, #[case] want: &[&str]) {
    assert_eq!(bad_fields(yaml), want, "{yaml}");
}

/// Flux compiles the range after listing tags and retries a bad one
/// (`ReadOperationFailed`): validation must not stall it, whatever it is.
#[rstest]
#[case("1.x")]
#[case("=<1.2.0")]
#[case("=>1.2.1")]
#[case("~>1.2")]
#[case(">= 1.2, < 2")]
#[case("not-a-range")]
#[case(">=1.0 ||")]
fn semver_ranges_never_stall(#[case] range: &str) {
    let yaml = format!("url: oci://r.io/a, ref: {{semver: '{range}', semverFilter: '(['}}");
    assert_eq!(bad_fields(&yaml), Vec::<&str>::new(), "{range}");
}

#[rstest]
#[case("ref: {tag: v1.0}", &[])]
#[case("ref: {tag: -bad}", &["spec.ref.tag"])]
#[case("ref: {digest: 'sha256:zz'}", &["spec.ref.digest"])]
#[case("verify: {matchOIDCIdentity: [{issuer: '(', subject: '.*'}]}", &["spec.verify.matchOIDCIdentity.issuer"])]
#[case("verify: {matchOIDCIdentity: [{issuer: 'x', subject: '['}]}", &["spec.verify.matchOIDCIdentity.subject"])]
#[case("ignore: \"{a\"", &["spec.ignore"])]
#[case("platform: linux", &["spec.platform"])]
#[case("layerSelector: {mediaType: ''}", &[])]
#[case("layerSelector: {mediaType: 'tar'}", &["spec.layerSelector.mediaType"])]
#[case("interval: 0s", &["spec.interval"])]
#[case("timeout: 1h", &["spec.timeout"])]
#[case("secretRef: {name: ''}, timeout: 0s", &["spec.timeout", "spec.secretRef.name"])]
#[case("verify: {provider: notation}", &["spec.verify.provider"])]
fn every_problem_is_named_by_its_field(#[case] yaml: &str, #[case] want: &[&str]) {
    assert_eq!(
        bad_fields(&format!("url: oci://r.io/a, {yaml}")),
        want,
        "{yaml}"
    );
}

#[rstest]
#[case("sa", true)]
#[case("flux-applier.team-a", true)]
#[case("0sa9", true)]
#[case("SA", false)]
#[case("-sa", false)]
#[case("sa-", false)]
#[case("sa..x", false)]
#[case(".sa", false)]
#[case("sa/../../kube-system", false)]
#[case("sa_x", false)]
#[case("'s a'", false)]
#[case("\"sa\\nx\"", false)]
fn the_service_account_name_is_a_dns_1123_subdomain(#[case] name: &str, #[case] valid: bool) {
    let yaml = format!("url: oci://r.io/a, serviceAccountName: {name}");
    let want: &[&str] = if valid {
        &[]
    } else {
        &["spec.serviceAccountName"]
    };
    assert_eq!(bad_fields(&yaml), want, "{name}");
}

#[test]
fn a_bad_service_account_name_is_told_with_its_field_and_rule() {
    let longest = "a".repeat(253);
    assert_eq!(
        bad_fields(&format!("url: oci://r.io/a, serviceAccountName: {longest}")),
        Vec::<&str>::new()
    );
    let too_long = format!("url: oci://r.io/a, serviceAccountName: {longest}b");
    assert_eq!(bad_fields(&too_long), ["spec.serviceAccountName"]);
    let e = super::desired(
        &spec("url: oci://r.io/a, serviceAccountName: Team_SA"),
        &Flavour::Ocisource,
    )
    .unwrap_err();
    let text = e.to_string();
    assert!(
        text.starts_with("spec.serviceAccountName: invalid ServiceAccount name 'Team_SA'")
            && text.contains("RFC 1123 subdomain")
            && text.contains("at most 253 characters"),
        "{text}"
    );
    assert_eq!(e.reason(), "InvalidSpec");
}

fn flux(annotations: &[(&str, &str)]) -> Flavour {
    let map = annotations
        .iter()
        .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
        .collect();
    Flavour::Flux(super::super::flux_ocirepository::FluxOptions::from_annotations(&map))
}

/// A valid spec becomes typed values once; the steps read nothing else.
#[test]
fn a_valid_spec_becomes_the_typed_value_the_steps_take() {
    let yaml = "url: 'oci://r.io:5000/org/app', ref: {tag: v1}, timeout: 90s, \
                layerSelector: {mediaType: 'application/x', operation: copy}, \
                ignore: '*.md', platform: linux/arm64/v8, secretRef: {name: pull}, \
                serviceAccountName: sa, certSecretRef: {name: tls}, \
                proxySecretRef: {name: proxy}, insecure: true, \
                verify: {provider: cosign, matchOIDCIdentity: [{issuer: '^i$', subject: 's'}]}, \
                suspend: true";
    // aws cannot log in to r.io: the only problem, named by field.
    let aws = desired(
        &spec(&format!("{yaml}, provider: aws")),
        &Flavour::Ocisource,
    );
    assert_eq!(aws.unwrap_err().fields(), ["spec.provider"]);
    let d = desired(&spec(yaml), &Flavour::Ocisource).unwrap();
    assert_eq!(
        (d.url.host.as_str(), d.url.repository.as_str()),
        ("r.io:5000", "org/app")
    );
    assert!(matches!(&d.reference, RefSpec::Tag(t) if t == "v1"));
    assert_eq!(d.interval, Duration::from_secs(300));
    assert_eq!(d.timeout, Duration::from_secs(90));
    assert_eq!(
        d.layers,
        LayerSelector {
            media_type: Some("application/x".into()),
            operation: domain::layers::LayerOperation::Copy,
            first_only: false,
        }
    );
    assert!(d.ignore.is_ignored("README.md", false));
    assert!(!d.ignore.is_ignored("app.yaml", false));
    assert_eq!(d.platform, Some(Platform::parse("linux/arm64/v8").unwrap()));
    assert_eq!(
        d.access,
        Access {
            secret: Some("pull".into()),
            service_account: Some("sa".into()),
            cert_secret: Some("tls".into()),
            proxy_secret: Some("proxy".into()),
            insecure: true,
            cloud: None,
        }
    );
    let verify = d.verify.unwrap();
    assert_eq!(verify.identities.len(), 1);
    assert!(verify.identities[0].matches("i", "xsx"));
    assert!(d.suspend);
}

#[test]
fn defaults_apply_when_fields_are_unset() {
    let d = desired(&spec("url: oci://r.io/a"), &Flavour::Ocisource).unwrap();
    assert!(matches!(&d.reference, RefSpec::Tag(t) if t == "latest"));
    assert_eq!(d.timeout, Duration::from_secs(60));
    assert_eq!(d.layers, LayerSelector::default());
    assert!(d.ignore.defaults_apply());
    assert_eq!((d.platform, d.verify.is_none()), (None, true));
}

/// Flux's kind takes the first matching layer unless it opts in; a bad opt-in is one
/// more problem of the same report.
#[test]
fn the_flavour_decides_the_layer_choice_and_its_annotations_are_checked() {
    let s = spec("url: oci://r.io/a");
    assert!(desired(&s, &flux(&[])).unwrap().layers.first_only);
    // An empty media type is no media type, as in Flux: the same layer choice.
    let empty = spec("url: oci://r.io/a, layerSelector: {mediaType: ''}");
    for kind in [flux(&[]), Flavour::Ocisource] {
        assert_eq!(
            desired(&empty, &kind).unwrap().layers,
            desired(&s, &kind).unwrap().layers
        );
    }
    let all = flux(&[("ocisource.dev/layers", "all")]);
    assert!(!desired(&s, &all).unwrap().layers.first_only);
    let bad = flux(&[("ocisource.dev/layers", "some")]);
    let e = desired(&spec("url: oci://r.io/A"), &bad).unwrap_err();
    assert_eq!(
        e.fields(),
        ["metadata.annotations[ocisource.dev/layers]", "spec.url"]
    );
}

/// A Helm chart's layer type makes semver read `_` as `+` in tags.
#[test]
fn semver_tags_are_read_as_the_layer_type_implies() {
    let d = desired(
        &spec(
            "url: oci://r.io/a, ref: {semver: '>=1.0.0'}, \
             layerSelector: {mediaType: 'application/vnd.cncf.helm.chart.content.v1.tar+gzip'}",
        ),
        &Flavour::Ocisource,
    )
    .unwrap();
    let RefSpec::Semver(s) = d.reference else {
        panic!("expected a semver ref")
    };
    assert_eq!(
        s.mapping,
        crate::domain::semver_range::TagMapping::HelmChart
    );
}
