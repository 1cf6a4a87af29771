//! Unit tests of `semver_range.rs`, kept beside it so that file reads as the code alone.

use super::*;
use rstest::rstest;

fn pick<'a>(tags: &[&'a str], range: &str, filter: Option<&str>) -> Option<&'a str> {
    let r = VersionRange::parse(range).unwrap();
    let f = filter.map(|f| regex::Regex::new(f).unwrap());
    choose_tag(tags.iter().copied(), &r, f.as_ref(), TagMapping::Plain).map(|(t, _)| t)
}

const TAGS: &[&str] = &[
    "latest",
    "0.9.0",
    "1.0.0",
    "v1.1.0",
    "1.2.0-rc.1",
    "1.2.3",
    "1.10.0",
    "2.0.0",
    "2.1.0-beta",
];

#[rstest]
#[case("1.x", Some("1.10.0"))]
#[case("1.2.x", Some("1.2.3"))]
#[case("~1.2", Some("1.2.3"))]
#[case("^1.0", Some("1.10.0"))]
#[case(">=1.0.0 <1.2.0", Some("v1.1.0"))]
#[case(">=1.0.0, <1.2.0", Some("v1.1.0"))]
#[case(">= 1.0.0 < 1.2.0", Some("v1.1.0"))]
#[case("1.0.0 - 1.2", Some("1.2.3"))]
#[case("<1.0.0 || >=2.0.0", Some("2.0.0"))]
#[case("*", Some("2.0.0"))]
#[case(">=2.0.0-0", Some("2.1.0-beta"))]
#[case(">=1.2.0-0 <1.2.3", Some("1.2.0-rc.1"))]
#[case("3.x", None)]
#[case("=1.2.3", Some("1.2.3"))]
#[case("!=2.0.0 >=1.10.0", Some("1.10.0"))]
#[case("^0.9", Some("0.9.0"))]
fn flux_range_semantics(#[case] range: &str, #[case] want: Option<&str>) {
    assert_eq!(pick(TAGS, range, None), want, "range {range}");
}

#[test]
fn prereleases_are_skipped_without_a_prerelease_comparator() {
    assert_eq!(
        pick(&["1.0.0", "1.1.0-rc.1"], ">=1.0.0", None),
        Some("1.0.0")
    );
    assert_eq!(
        pick(&["1.0.0", "1.1.0-rc.1"], ">=1.0.0-0", None),
        Some("1.1.0-rc.1")
    );
}

#[test]
fn filter_applies_before_the_range() {
    let tags = ["1.0.0-dev.1", "1.0.0-dev.2", "1.0.1", "1.0.0-prod.1"];
    assert_eq!(pick(&tags, ">=1.0.0-0", Some("-dev")), Some("1.0.0-dev.2"));
    assert_eq!(pick(&tags, ">=1.0.0-0", Some("^1\\.0\\.1$")), Some("1.0.1"));
    assert_eq!(pick(&tags, ">=1.0.0-0", Some("nomatch")), None);
}

#[test]
fn underscore_is_plus_only_for_helm_chart_tags() {
    let v = parse_tag("1.2.3_build.5", TagMapping::HelmChart).unwrap();
    assert_eq!(v.build.as_str(), "build.5");
    assert_eq!(parse_tag("1.2.3_build.5", TagMapping::Plain), None);
    let tags = ["1.5.0_build1", "1.4.0"];
    let r = VersionRange::parse(">=1.0.0").unwrap();
    let helm = choose_tag(tags, &r, None, TagMapping::HelmChart).map(|(t, _)| t);
    assert_eq!(helm, Some("1.5.0_build1"), "the tag is returned as listed");
    let plain = choose_tag(tags, &r, None, TagMapping::Plain).map(|(t, _)| t);
    assert_eq!(plain, Some("1.4.0"), "1.5.0_build1 is no candidate");
}

#[rstest]
#[case(None, TagMapping::Plain)]
#[case(
    Some("application/vnd.cncf.flux.content.v1.tar+gzip"),
    TagMapping::Plain
)]
#[case(Some(HELM_CHART_LAYER), TagMapping::HelmChart)]
fn helm_mapping_follows_the_layer_media_type(
    #[case] media_type: Option<&str>,
    #[case] want: TagMapping,
) {
    assert_eq!(TagMapping::for_layer_media_type(media_type), want);
}

#[rstest]
#[case("1.2.3", Some((1, 2, 3, "", "")))]
#[case("v1.2.3", Some((1, 2, 3, "", "")))]
#[case("1.2.3-rc.1", Some((1, 2, 3, "rc.1", "")))]
#[case("1.2.3+build.7", Some((1, 2, 3, "", "build.7")))]
#[case("2025.01.02", Some((2025, 1, 2, "", "")))]
#[case("1.2-rc.1", Some((1, 2, 0, "rc.1", "")))]
#[case("1", None)]
#[case("1.2", None)]
#[case("v1.2", None)]
#[case("V1.2.3", None)]
#[case("latest", None)]
#[case("1.2.3.4", None)]
#[case("1.2.3-", None)]
#[case("1.2.3-01", None)]
#[case("1.2.3+", None)]
#[case("1.2.3_x", None)]
#[case("sha256-abc.sig.x", None)]
fn a_tag_is_a_version_only_with_three_parts(
    #[case] tag: &str,
    #[case] want: Option<(u64, u64, u64, &str, &str)>,
) {
    let got = parse_tag(tag, TagMapping::Plain).map(|v| {
        (
            v.major,
            v.minor,
            v.patch,
            v.pre.to_string(),
            v.build.to_string(),
        )
    });
    let want = want.map(|(a, b, c, p, m)| (a, b, c, p.to_string(), m.to_string()));
    assert_eq!(got, want, "{tag}");
}

#[rstest]
#[case("=<1.2.0", Some("1.2.0"))]
#[case("=>1.2.1", Some("1.3.0"))]
#[case("~>1.2", Some("1.2.5"))]
#[case("=> 1.2.1 =< 1.2.5", Some("1.2.5"))]
fn masterminds_operator_spellings(#[case] range: &str, #[case] want: Option<&str>) {
    let tags = ["1.1.0", "1.2.0", "1.2.5", "1.3.0"];
    assert_eq!(pick(&tags, range, None), want, "{range}");
}

#[rstest]
#[case("")]
#[case("abc")]
#[case(">=")]
#[case("1.0.0 -")]
fn invalid_ranges_are_rejected(#[case] range: &str) {
    assert!(
        VersionRange::parse(range).is_err(),
        "{range:?} should not parse"
    );
}

/// Found by `hack/fuzz` (target semver_tags, seed
/// `hack/fuzz/seeds/semver_tags/u64-max-major`): the range's upper bound `m + 1`
/// overflowed for a part of `u64::MAX`.
#[rstest]
#[case("18446744073709551615")]
#[case("^18446744073709551615")]
#[case("~1.18446744073709551615")]
#[case("<=1.18446744073709551615")]
#[case("1.2 - 3.18446744073709551615")]
fn a_part_of_u64_max_is_refused_not_an_overflow(#[case] range: &str) {
    let err = VersionRange::parse(range).unwrap_err();
    assert!(err.contains("too large"), "{err}");
    assert!(VersionRange::parse("^18446744073709551614").is_ok());
}

#[test]
fn ten_thousand_tags_pick_the_highest() {
    let tags: Vec<String> = (0..10_000)
        .map(|i| format!("1.{}.{}", i / 100, i % 100))
        .collect();
    let got = pick(
        &tags.iter().map(String::as_str).collect::<Vec<_>>(),
        "1.x",
        None,
    );
    assert_eq!(got, Some("1.99.99"));
}
