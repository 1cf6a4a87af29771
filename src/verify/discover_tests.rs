//! Discovery of cosign v3 bundles with an in-memory `ports::Registry`: the referrers API
//! first, the `sha256-<hex>` tag schema only when the registry has no such API; what the
//! API lists is narrowed to bundle referrers and capped; its errors abort. The HTTP side
//! of the API (pages, the client-side filter, caps) is tested in
//! `tests/registry_referrers.rs`, against a real registry in `tests/e2e_referrers.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use async_trait::async_trait;
use bytes::Bytes;

use super::*;
use crate::domain::manifest::{ImageIndex, OCI_EMPTY_CONFIG, OCI_INDEX, OCI_MANIFEST};
use crate::ports::{BlobStream, FetchedManifest};

const BUNDLE: &str = COSIGN_BUNDLE_ARTIFACT_TYPE;

/// Manifests by reference, blobs by digest, and what the referrers API answers.
#[derive(Default)]
struct Fake {
    manifests: HashMap<String, (String, Bytes)>,
    blobs: HashMap<Digest, Bytes>,
    api: Option<Result<Vec<Descriptor>, RegistryErrorKind>>,
    asked: Mutex<Vec<String>>,
}

fn descriptor(media_type: &str, bytes: &[u8], artifact_type: Option<&str>) -> Descriptor {
    Descriptor {
        media_type: media_type.into(),
        digest: Digest::of(bytes),
        size: bytes.len() as u64,
        annotations: BTreeMap::new(),
        platform: None,
        artifact_type: artifact_type.map(Into::into),
    }
}

impl Fake {
    fn blob(&mut self, media_type: &str, bytes: &[u8]) -> Descriptor {
        self.blobs
            .insert(Digest::of(bytes), Bytes::copy_from_slice(bytes));
        descriptor(media_type, bytes, None)
    }

    /// A referrer of `subject` holding `bundle` in a layer of `layer_type`; its index
    /// descriptor (artifact type `artifact_type`).
    fn referrer(
        &mut self,
        subject: &Digest,
        artifact_type: &str,
        layer_type: &str,
        bundle: &[u8],
    ) -> Descriptor {
        let manifest = ImageManifest {
            schema_version: 2,
            media_type: Some(OCI_MANIFEST.into()),
            artifact_type: Some(artifact_type.into()),
            config: self.blob(OCI_EMPTY_CONFIG, b"{}"),
            layers: vec![self.blob(layer_type, bundle)],
            subject: Some(Descriptor {
                digest: subject.clone(),
                ..descriptor(OCI_MANIFEST, b"", None)
            }),
            annotations: BTreeMap::new(),
        };
        let body = serde_json::to_vec(&manifest).unwrap();
        let d = descriptor(OCI_MANIFEST, &body, Some(artifact_type));
        self.manifests
            .insert(d.digest.to_string(), (OCI_MANIFEST.into(), body.into()));
        d
    }

    /// The `sha256-<hex>` tag schema index listing `entries`.
    fn fallback_tag(&mut self, subject: &Digest, entries: Vec<Descriptor>) {
        let index = ImageIndex {
            schema_version: 2,
            media_type: Some(OCI_INDEX.into()),
            manifests: entries,
            annotations: BTreeMap::new(),
        };
        let body = serde_json::to_vec(&index).unwrap();
        self.manifests
            .insert(subject.tag_form(), (OCI_INDEX.into(), body.into()));
    }

    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

#[async_trait]
impl Registry for Fake {
    async fn manifest_digest(&self, reference: &str) -> Result<Digest, RegistryError> {
        self.manifest(reference).await.map(|m| m.digest)
    }
    async fn manifest(&self, reference: &str) -> Result<FetchedManifest, RegistryError> {
        self.asked.lock().unwrap().push(reference.to_string());
        let (media_type, body) = self.manifests.get(reference).ok_or_else(|| {
            RegistryError::new(RegistryErrorKind::NotFound, format!("{reference} unknown"))
        })?;
        Ok(FetchedManifest {
            digest: Digest::of(body),
            media_type: media_type.clone(),
            body: body.clone(),
        })
    }
    async fn tags(&self) -> Result<Vec<String>, RegistryError> {
        Ok(Vec::new())
    }
    async fn blob(&self, descriptor: &Descriptor) -> Result<BlobStream, RegistryError> {
        let bytes = self.blob_bytes(descriptor, u64::MAX).await?;
        Ok(Box::pin(futures::stream::once(async move { Ok(bytes) })))
    }
    async fn blob_bytes(&self, descriptor: &Descriptor, _max: u64) -> Result<Bytes, RegistryError> {
        self.blobs
            .get(&descriptor.digest)
            .cloned()
            .ok_or_else(|| RegistryError::new(RegistryErrorKind::NotFound, "blob unknown"))
    }
    async fn referrers(
        &self,
        digest: &Digest,
        artifact_type: Option<&str>,
    ) -> Result<Referrers, RegistryError> {
        assert_eq!(artifact_type, Some(BUNDLE), "asks for cosign v3 bundles");
        self.asked
            .lock()
            .unwrap()
            .push(format!("referrers {digest}"));
        match &self.api {
            None => Ok(Referrers::Unsupported),
            Some(Ok(list)) => Ok(Referrers::Listed(list.clone())),
            Some(Err(kind)) => Err(RegistryError::new(*kind, "referrers index too large")),
        }
    }
}

fn image() -> Digest {
    Digest::of(b"the image manifest")
}

fn bundles(found: &[Candidate]) -> Vec<(&[u8], &str)> {
    found
        .iter()
        .map(|c| match c {
            Candidate::V3 { bundle, source } => (bundle.as_slice(), source.as_str()),
            other => panic!("expected a bundle, got {other:?}"),
        })
        .collect()
}

#[tokio::test]
async fn the_api_finds_a_bundle_without_any_fallback_tag() {
    let mut reg = Fake::default();
    let entry = reg.referrer(&image(), BUNDLE, BUNDLE, b"bundle-1");
    reg.api = Some(Ok(vec![entry.clone()]));
    let found = v3_candidates(&reg, &image()).await.unwrap();
    assert_eq!(
        bundles(&found),
        [(
            &b"bundle-1"[..],
            format!("referrers API referrer {}", entry.digest).as_str()
        )]
    );
    let asked = reg.asked();
    assert_eq!(asked[0], format!("referrers {}", image()));
    assert!(!asked.contains(&image().tag_form()), "{asked:?}");
}

#[tokio::test]
async fn without_the_api_the_fallback_tag_is_read() {
    let mut reg = Fake::default();
    let entry = reg.referrer(&image(), BUNDLE, BUNDLE, b"bundle-1");
    reg.fallback_tag(&image(), vec![entry]);
    let found = v3_candidates(&reg, &image()).await.unwrap();
    assert_eq!(bundles(&found).len(), 1);
    assert!(bundles(&found)[0].1.starts_with("tag sha256-"));
    assert_eq!(reg.asked()[1], image().tag_form());
}

#[tokio::test]
async fn an_empty_api_answer_is_no_bundle_and_no_fallback() {
    let mut reg = Fake::default();
    // A stale fallback tag is not read while the registry serves the API.
    let entry = reg.referrer(&image(), BUNDLE, BUNDLE, b"stale");
    reg.fallback_tag(&image(), vec![entry]);
    reg.api = Some(Ok(Vec::new()));
    assert!(v3_candidates(&reg, &image()).await.unwrap().is_empty());
    assert_eq!(reg.asked(), [format!("referrers {}", image())]);
}

#[tokio::test]
async fn referrers_of_other_types_are_not_read() {
    let mut reg = Fake::default();
    let sbom = reg.referrer(&image(), "application/spdx+json", BUNDLE, b"not-a-bundle");
    let bundle = reg.referrer(&image(), BUNDLE, BUNDLE, b"bundle-1");
    // A bundle type other than cosign's (an older bundle version) still counts.
    let older = "application/vnd.dev.sigstore.bundle+json;version=0.2";
    let v02 = reg.referrer(&image(), older, older, b"bundle-2");
    reg.api = Some(Ok(vec![sbom.clone(), bundle, v02]));
    let found = v3_candidates(&reg, &image()).await.unwrap();
    let got: Vec<&[u8]> = bundles(&found).iter().map(|(b, _)| *b).collect();
    assert_eq!(got, [&b"bundle-1"[..], &b"bundle-2"[..]]);
    assert!(!reg.asked().contains(&sbom.digest.to_string()));
}

#[tokio::test]
async fn at_most_max_candidates_referrers_are_read() {
    let mut reg = Fake::default();
    let entries: Vec<Descriptor> = (0..MAX_CANDIDATES + 8)
        .map(|i| reg.referrer(&image(), BUNDLE, BUNDLE, format!("b{i}").as_bytes()))
        .collect();
    reg.api = Some(Ok(entries));
    let found = v3_candidates(&reg, &image()).await.unwrap();
    assert_eq!(found.len(), MAX_CANDIDATES);
    assert_eq!(reg.asked().len(), 1 + MAX_CANDIDATES);
}

#[tokio::test]
async fn a_referrer_attached_elsewhere_is_unusable() {
    let mut reg = Fake::default();
    let entry = reg.referrer(&Digest::of(b"another"), BUNDLE, BUNDLE, b"bundle-1");
    reg.api = Some(Ok(vec![entry]));
    let found = v3_candidates(&reg, &image()).await.unwrap();
    assert!(
        matches!(&found[..], [Candidate::Unusable(r)] if r.check == "referrer subject"),
        "{found:?}"
    );
}

#[tokio::test]
async fn an_api_failure_aborts_with_its_kind_and_skips_the_fallback() {
    let mut reg = Fake::default();
    let entry = reg.referrer(&image(), BUNDLE, BUNDLE, b"bundle-1");
    reg.fallback_tag(&image(), vec![entry]);
    reg.api = Some(Err(RegistryErrorKind::Integrity));
    let e = v3_candidates(&reg, &image()).await.unwrap_err();
    assert_eq!(e.kind, RegistryErrorKind::Integrity);
    assert_eq!(reg.asked().len(), 1);
}
