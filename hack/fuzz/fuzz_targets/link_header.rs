//! The `Link` header of tag-list pages, as `RegistryClient::list_tags` follows it:
//! `registry::tags::next_link`, then the target resolved against the page's URL.
//!
//! Input fields (separated by `FIELD`): header value, page URL (a fixed registry URL
//! when empty).
//!
//! Checked: the next target is taken from inside the header; a plain `<target>;
//! rel="next"` entry gives back its target, also after a `prev` entry; a resolved next
//! URL re-parses.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ocisource::registry::tags::next_link;
use ocisource_fuzz::{field, split, FIELD};

const PAGE: &str = "http://127.0.0.1:5000/v2/team/app/tags/list?n=1000";

fuzz_target!(|data: &[u8]| {
    let parts = split(data, FIELD, 2);
    let header = field(&parts, 0);
    let page = field(&parts, 1);
    let page = if page.is_empty() {
        PAGE.to_string()
    } else {
        page
    };

    if let Some(target) = next_link(&header) {
        assert!(
            header.contains(&target),
            "next target {target:?} not in the header"
        );
        if let Ok(base) = url::Url::parse(&page) {
            if let Ok(next) = base.join(&target) {
                assert!(
                    url::Url::parse(next.as_str()).is_ok(),
                    "{next} does not re-parse"
                );
            }
        }
    }

    // Any target free of the header's own separators comes back as written.
    let target = header.trim();
    if !target.is_empty() && !target.contains([',', ';', '<', '>']) {
        let plain = format!("<{target}>; rel=\"next\"");
        assert_eq!(next_link(&plain).as_deref(), Some(target), "{plain}");
        let after_prev = format!("<{page}>; rel=\"prev\", <{target}>; rel=next");
        if !page.contains([',', ';', '<', '>']) {
            assert_eq!(
                next_link(&after_prev).as_deref(),
                Some(target),
                "{after_prev}"
            );
        }
    }
});
