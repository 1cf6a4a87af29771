//! Unit tests of `artifact.rs`, kept beside it so that file reads as the code alone.

use super::*;
use rstest::rstest;

#[rstest]
#[case("bytes=0-9", Wanted::Part { start: 0, end: 9 })]
#[case("bytes=90-", Wanted::Part { start: 90, end: 99 })]
#[case("bytes=90-500", Wanted::Part { start: 90, end: 99 })]
#[case("bytes=-10", Wanted::Part { start: 90, end: 99 })]
#[case("bytes=-500", Wanted::Part { start: 0, end: 99 })]
#[case("bytes=100-", Wanted::Unsatisfiable)]
#[case("bytes=-0", Wanted::Unsatisfiable)]
#[case("bytes=5-2", Wanted::Whole)]
#[case("bytes=0-1,5-6", Wanted::Whole)]
#[case("items=0-9", Wanted::Whole)]
#[case("bytes=a-b", Wanted::Whole)]
#[case("bytes=+1-2", Wanted::Whole)]
fn ranges_against_100_bytes(#[case] header: &str, #[case] expected: Wanted) {
    assert_eq!(byte_range(header, 100), expected);
}

#[test]
fn preconditions_follow_rfc_9110_order() {
    let modified = UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
    let tag = etag(modified, 100);
    let with = |pairs: &[(&str, &str)]| {
        let mut asked = Conditions::default();
        for (k, v) in pairs {
            asked.note(k, v);
        }
        answer(&asked, &tag, modified, 100)
    };
    let date = httpdate::fmt_http_date(modified);
    let earlier = httpdate::fmt_http_date(modified - std::time::Duration::from_secs(1));
    assert_eq!(with(&[]), Answer::Send(Wanted::Whole));
    assert_eq!(with(&[("If-None-Match", &tag)]), Answer::NotModified);
    assert_eq!(
        with(&[("If-None-Match", &format!("\"x\", W/{tag}"))]),
        Answer::NotModified
    );
    assert_eq!(with(&[("if-modified-since", &date)]), Answer::NotModified);
    assert_eq!(
        with(&[("if-modified-since", &earlier)]),
        Answer::Send(Wanted::Whole)
    );
    // If-None-Match wins over If-Modified-Since.
    assert_eq!(
        with(&[("If-None-Match", "\"other\""), ("if-modified-since", &date)]),
        Answer::Send(Wanted::Whole)
    );
    let part = Answer::Send(Wanted::Part { start: 0, end: 9 });
    assert_eq!(with(&[("range", "bytes=0-9")]), part);
    assert_eq!(with(&[("range", "bytes=0-9"), ("If-Range", &tag)]), part);
    assert_eq!(with(&[("range", "bytes=0-9"), ("If-Range", &date)]), part);
    assert_eq!(
        with(&[("range", "bytes=0-9"), ("If-Range", "\"old\"")]),
        Answer::Send(Wanted::Whole)
    );
    assert_eq!(
        with(&[("range", "bytes=0-9"), ("If-Range", &earlier)]),
        Answer::Send(Wanted::Whole)
    );
}
