//! Manifest and index JSON as the registry adapter hands them over: `Manifest::parse`
//! with the `Content-Type` the registry sent, the platform choice of an index, the layer
//! selection of an image manifest, and the `Docker-Content-Digest` / reference checks of
//! `registry::manifest` (`Digest` parsing, `valid_reference`).
//!
//! Input fields (separated by `FIELD`): content type, body, platform, layer media type,
//! header digest / reference.
//!
//! Checked: a parsed manifest serialises and parses back to the same value; a chosen
//! index entry has the wanted platform; selected layers come from the manifest, in order;
//! a parsed platform or digest re-renders to a string that parses to the same value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ocisource::domain::digest::Digest;
use ocisource::domain::layers::{LayerOperation, LayerSelector, Selection};
use ocisource::domain::manifest::{ImageManifest, Manifest, Platform};
use ocisource::fuzzing::valid_reference;
use ocisource_fuzz::{bytes, field, split, FIELD};

fuzz_target!(|data: &[u8]| {
    let parts = split(data, FIELD, 5);
    let content_type = field(&parts, 0);
    let body = bytes(&parts, 1);
    let platform = field(&parts, 2);
    let media_type = field(&parts, 3);
    let reference = field(&parts, 4);

    match Manifest::parse(&content_type, body) {
        Ok(parsed) => {
            let again = match &parsed {
                Manifest::Image(m) => serde_json::to_vec(m),
                Manifest::Index(i) => serde_json::to_vec(i),
            }
            .expect("a parsed manifest serialises");
            let reparsed = Manifest::parse(&content_type, &again).expect("re-parses");
            assert_eq!(reparsed, parsed, "manifest round trip");
            match &parsed {
                Manifest::Image(m) => check_layers(m, &media_type),
                Manifest::Index(index) => {
                    if let Ok(wanted) = Platform::parse(&platform) {
                        match index.select(&wanted) {
                            Ok(d) => {
                                let p = d.platform.as_ref().expect("chosen entry has a platform");
                                assert_eq!(p.os, wanted.os);
                                assert_eq!(p.architecture, wanted.architecture);
                                if wanted.variant.is_some() {
                                    assert_eq!(p.variant, wanted.variant);
                                }
                            }
                            Err(e) => assert!(!e.to_string().is_empty()),
                        }
                    }
                }
            }
        }
        Err(e) => assert!(!e.to_string().is_empty()),
    }

    if let Ok(p) = Platform::parse(&platform) {
        assert_eq!(
            Platform::parse(&p.to_string()).as_ref(),
            Ok(&p),
            "platform round trip"
        );
    }
    // `registry::manifest`: the header digest is trimmed and parsed; the reference is a
    // tag or a digest.
    if let Ok(d) = reference.trim().parse::<Digest>() {
        assert_eq!(
            d.to_string().parse::<Digest>().as_ref(),
            Ok(&d),
            "digest round trip"
        );
        assert!(valid_reference(&d.to_string()));
    }
    if valid_reference(&reference) {
        assert!(
            !reference.contains('/'),
            "a reference with '/' was accepted"
        );
    }
});

fn check_layers(m: &ImageManifest, media_type: &str) {
    let selectors = [
        LayerSelector::default(),
        LayerSelector {
            media_type: None,
            operation: LayerOperation::Copy,
            first_only: false,
        },
        LayerSelector {
            media_type: Some(media_type.to_string()),
            operation: LayerOperation::Extract,
            first_only: false,
        },
        LayerSelector {
            media_type: Some(media_type.to_string()),
            operation: LayerOperation::Extract,
            first_only: true,
        },
    ];
    for selector in selectors {
        match selector.select(m) {
            Ok(Selection::Copy(layer)) => assert!(m.layers.contains(&layer)),
            Ok(Selection::Extract(layers)) => {
                assert!(!layers.is_empty());
                // A subsequence of the manifest's layers, in manifest order.
                let mut rest = m.layers.iter();
                for l in &layers {
                    assert!(rest.any(|x| x == l), "selected layers out of order");
                    if let Some(mt) = &selector.media_type {
                        assert_eq!(&l.media_type, mt);
                    }
                }
            }
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }
}
