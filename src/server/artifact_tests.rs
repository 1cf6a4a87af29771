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
    let with = |pairs: &[(header::HeaderName, &str)]| {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(k.clone(), HeaderValue::from_str(v).unwrap());
        }
        answer(&h, &tag, modified, 100)
    };
    let date = httpdate::fmt_http_date(modified);
    let earlier = httpdate::fmt_http_date(modified - std::time::Duration::from_secs(1));
    assert_eq!(with(&[]), Answer::Send(Wanted::Whole));
    assert_eq!(with(&[(header::IF_NONE_MATCH, &tag)]), Answer::NotModified);
    assert_eq!(
        with(&[(header::IF_NONE_MATCH, &format!("\"x\", W/{tag}"))]),
        Answer::NotModified
    );
    assert_eq!(
        with(&[(header::IF_MODIFIED_SINCE, &date)]),
        Answer::NotModified
    );
    assert_eq!(
        with(&[(header::IF_MODIFIED_SINCE, &earlier)]),
        Answer::Send(Wanted::Whole)
    );
    // If-None-Match wins over If-Modified-Since.
    assert_eq!(
        with(&[
            (header::IF_NONE_MATCH, "\"other\""),
            (header::IF_MODIFIED_SINCE, &date)
        ]),
        Answer::Send(Wanted::Whole)
    );
    let part = Answer::Send(Wanted::Part { start: 0, end: 9 });
    assert_eq!(with(&[(header::RANGE, "bytes=0-9")]), part);
    assert_eq!(
        with(&[(header::RANGE, "bytes=0-9"), (header::IF_RANGE, &tag)]),
        part
    );
    assert_eq!(
        with(&[(header::RANGE, "bytes=0-9"), (header::IF_RANGE, &date)]),
        part
    );
    assert_eq!(
        with(&[(header::RANGE, "bytes=0-9"), (header::IF_RANGE, "\"old\"")]),
        Answer::Send(Wanted::Whole)
    );
    assert_eq!(
        with(&[(header::RANGE, "bytes=0-9"), (header::IF_RANGE, &earlier)]),
        Answer::Send(Wanted::Whole)
    );
}
