//! Test support for the `verify_*` tests: an in-memory `ports::Registry` (tags and
//! digests → manifests, digests → blobs) with helpers that lay out cosign v2 `.sig`
//! manifests and cosign v3 referrers-fallback indexes, and the location of the shared
//! third-party cosign vectors. Imports only the crate's public API.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Mutex;

use async_trait::async_trait;
use bytes::Bytes;
use ocisource::domain::digest::Digest;
use ocisource::domain::manifest::{Descriptor, ImageIndex, ImageManifest, OCI_INDEX, OCI_MANIFEST};
use ocisource::ports::{
    BlobStream, FetchedManifest, Referrers, Registry, RegistryError, RegistryErrorKind,
};

/// The shared vectors, or `None` (with a printed reason) when absent. They live in
/// `../shared/vectors/cosign` next to the crate root; `OCISOURCE_COSIGN_VECTORS`
/// overrides that (a git worktree elsewhere).
pub fn vectors_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("OCISOURCE_COSIGN_VECTORS").map_or_else(
        || {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../shared/vectors/cosign"
            ))
        },
        PathBuf::from,
    );
    if dir.join("expected.json").is_file() {
        Some(dir)
    } else {
        println!(
            "SKIP: cosign test vectors not found at {} (they are not part of a clone)",
            dir.display()
        );
        None
    }
}

/// An in-memory registry.
#[derive(Default)]
pub struct FakeRegistry {
    manifests: Mutex<HashMap<String, (String, Bytes)>>,
    blobs: Mutex<HashMap<Digest, Bytes>>,
    /// References asked for, in order.
    pub asked: Mutex<Vec<String>>,
    /// What the referrers API lists (as if already filtered); `None`: no referrers API.
    pub referrers_api: Mutex<Option<Vec<Descriptor>>>,
}

fn descriptor(media_type: &str, bytes: &[u8], annotations: BTreeMap<String, String>) -> Descriptor {
    Descriptor {
        media_type: media_type.into(),
        digest: Digest::of(bytes),
        size: bytes.len() as u64,
        annotations,
        platform: None,
        artifact_type: None,
    }
}

impl FakeRegistry {
    /// Stores a blob and returns its descriptor.
    pub fn put_blob(
        &self,
        media_type: &str,
        bytes: &[u8],
        annotations: BTreeMap<String, String>,
    ) -> Descriptor {
        self.blobs
            .lock()
            .unwrap()
            .insert(Digest::of(bytes), Bytes::copy_from_slice(bytes));
        descriptor(media_type, bytes, annotations)
    }

    /// Stores a manifest under its digest and, if given, a tag.
    pub fn put_manifest(&self, tag: Option<&str>, media_type: &str, body: &[u8]) -> Digest {
        let digest = Digest::of(body);
        let entry = (media_type.to_string(), Bytes::copy_from_slice(body));
        let mut m = self.manifests.lock().unwrap();
        m.insert(digest.to_string(), entry.clone());
        if let Some(tag) = tag {
            m.insert(tag.to_string(), entry);
        }
        digest
    }

    /// Lays out a cosign v2 `.sig` manifest for `digest` with these layers.
    pub fn put_v2(&self, digest: &Digest, layers: &[(Vec<u8>, BTreeMap<String, String>)]) {
        let config = self.put_blob(
            "application/vnd.oci.image.config.v1+json",
            b"{}",
            BTreeMap::new(),
        );
        let layers = layers
            .iter()
            .map(|(payload, ann)| {
                self.put_blob(
                    "application/vnd.dev.cosign.simplesigning.v1+json",
                    payload,
                    ann.clone(),
                )
            })
            .collect();
        let manifest = ImageManifest {
            schema_version: 2,
            media_type: Some(OCI_MANIFEST.into()),
            artifact_type: None,
            config,
            layers,
            subject: None,
            annotations: BTreeMap::new(),
        };
        let body = serde_json::to_vec(&manifest).unwrap();
        self.put_manifest(
            Some(&format!("{}.sig", digest.tag_form())),
            OCI_MANIFEST,
            &body,
        );
    }

    /// Lays out cosign v3 referrers for `digest` under the `sha256-<hex>` fallback tag.
    pub fn put_v3(&self, digest: &Digest, subject: &Digest, bundles: &[&[u8]]) {
        let mut entries = Vec::new();
        for bundle in bundles {
            let config = self.put_blob("application/vnd.oci.empty.v1+json", b"{}", BTreeMap::new());
            let layer = self.put_blob(
                "application/vnd.dev.sigstore.bundle.v0.3+json",
                bundle,
                BTreeMap::new(),
            );
            let manifest = ImageManifest {
                schema_version: 2,
                media_type: Some(OCI_MANIFEST.into()),
                artifact_type: Some("application/vnd.dev.sigstore.bundle.v0.3+json".into()),
                config,
                layers: vec![layer],
                subject: Some(Descriptor {
                    digest: subject.clone(),
                    ..descriptor(OCI_MANIFEST, b"", BTreeMap::new())
                }),
                annotations: BTreeMap::new(),
            };
            let body = serde_json::to_vec(&manifest).unwrap();
            let d = self.put_manifest(None, OCI_MANIFEST, &body);
            let mut entry = descriptor(OCI_MANIFEST, &body, BTreeMap::new());
            entry.digest = d;
            entry.artifact_type = Some("application/vnd.dev.sigstore.bundle.v0.3+json".into());
            entries.push(entry);
        }
        let index = ImageIndex {
            schema_version: 2,
            media_type: Some(OCI_INDEX.into()),
            manifests: entries,
            annotations: BTreeMap::new(),
        };
        self.put_manifest(
            Some(&digest.tag_form()),
            OCI_INDEX,
            &serde_json::to_vec(&index).unwrap(),
        );
    }
}

fn not_found(what: &str) -> RegistryError {
    RegistryError::new(RegistryErrorKind::NotFound, format!("{what} not found"))
}

#[async_trait]
impl Registry for FakeRegistry {
    async fn manifest_digest(&self, reference: &str) -> Result<Digest, RegistryError> {
        self.manifest(reference).await.map(|m| m.digest)
    }

    async fn manifest(&self, reference: &str) -> Result<FetchedManifest, RegistryError> {
        self.asked.lock().unwrap().push(reference.to_string());
        let m = self.manifests.lock().unwrap();
        let (media_type, body) = m.get(reference).ok_or_else(|| not_found(reference))?;
        Ok(FetchedManifest {
            digest: Digest::of(body),
            media_type: media_type.clone(),
            body: body.clone(),
        })
    }

    async fn tags(&self) -> Result<Vec<String>, RegistryError> {
        Ok(self
            .manifests
            .lock()
            .unwrap()
            .keys()
            .filter(|k| !k.starts_with("sha256:"))
            .cloned()
            .collect())
    }

    async fn referrers(
        &self,
        _digest: &Digest,
        _artifact_type: Option<&str>,
    ) -> Result<Referrers, RegistryError> {
        Ok(self
            .referrers_api
            .lock()
            .unwrap()
            .clone()
            .map_or(Referrers::Unsupported, Referrers::Listed))
    }

    async fn blob(&self, descriptor: &Descriptor) -> Result<BlobStream, RegistryError> {
        let bytes = self.blob_bytes(descriptor, u64::MAX).await?;
        Ok(Box::pin(futures::stream::once(async move { Ok(bytes) })))
    }

    async fn blob_bytes(&self, descriptor: &Descriptor, max: u64) -> Result<Bytes, RegistryError> {
        let b = self.blobs.lock().unwrap();
        let bytes = b
            .get(&descriptor.digest)
            .ok_or_else(|| not_found(&descriptor.digest.to_string()))?;
        if bytes.len() as u64 > max {
            return Err(RegistryError::new(
                RegistryErrorKind::Integrity,
                "blob too large",
            ));
        }
        Ok(bytes.clone())
    }
}
