//! Shared harness for every integration test: a real OCI registry (Debian's
//! `docker-registry`, distribution 2.8) started per test with our own config, push
//! fixtures written with clients independent of ocisource (raw reqwest and `skopeo`), and
//! small builders (gzip'd tar layers, OCI layout dirs). Use it with `mod support;` at the
//! top of a test file. It must not import ocisource's registry adapter: fixtures pushed
//! with the code under test would prove nothing.
#![allow(
    dead_code,
    unused_imports,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

pub mod cluster;
pub mod drop_in;
pub mod oneshot;
pub mod oneshot_parity;
pub mod pki;
pub mod proxy;
pub mod rawtar;
pub mod registry;
pub mod shard;
pub mod watch;

use std::io::Write;
use std::path::Path;

use sha2::{Digest as _, Sha256};

pub use registry::{LoggedRequest, Pushed, RegistryOpts, TestRegistry};

/// `sha256:<hex>` of `bytes`, computed without ocisource code.
pub fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

/// A gzip'd tar layer holding regular files `(path, content)` in the given order
/// (mode 0644, mtime 0). Paths ending in `/` become directories.
pub fn tar_gz(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let mut tar = tar::Builder::new(gz);
    for (path, content) in entries {
        let mut header = tar::Header::new_ustar();
        if path.ends_with('/') {
            header.set_entry_type(tar::EntryType::Directory);
            header.set_mode(0o755);
            header.set_size(0);
        } else {
            header.set_entry_type(tar::EntryType::Regular);
            header.set_mode(0o644);
            header.set_size(content.len() as u64);
        }
        header.set_mtime(0);
        tar.append_data(&mut header, path, *content).unwrap();
    }
    let gz = tar.into_inner().unwrap();
    gz.finish().unwrap()
}

/// Writes an OCI image layout in `dir` holding one image manifest tagged `tag`, made of
/// `config` (media type, bytes) and `layers` (media type, bytes). Returns the manifest
/// digest. Meant as the source for `skopeo copy oci:<dir>:<tag> ...`.
pub fn write_oci_layout(
    dir: &Path,
    tag: &str,
    config: (&str, &[u8]),
    layers: &[(&str, &[u8])],
    annotations: &[(&str, &str)],
) -> String {
    let blobs = dir.join("blobs").join("sha256");
    std::fs::create_dir_all(&blobs).unwrap();
    let put = |bytes: &[u8]| -> String {
        let d = sha256(bytes);
        std::fs::write(blobs.join(&d["sha256:".len()..]), bytes).unwrap();
        d
    };
    let desc = |media: &str, bytes: &[u8]| serde_json::json!({"mediaType": media, "digest": put(bytes), "size": bytes.len()});
    let mut manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": desc(config.0, config.1),
        "layers": layers.iter().map(|(m, b)| desc(m, b)).collect::<Vec<_>>(),
    });
    if !annotations.is_empty() {
        let map: serde_json::Map<String, serde_json::Value> = annotations
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).into()))
            .collect();
        manifest["annotations"] = map.into();
    }
    let body = serde_json::to_vec(&manifest).unwrap();
    let digest = put(&body);
    let index = serde_json::json!({
        "schemaVersion": 2,
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": digest, "size": body.len(),
            "annotations": {"org.opencontainers.image.ref.name": tag}
        }]
    });
    std::fs::write(dir.join("index.json"), serde_json::to_vec(&index).unwrap()).unwrap();
    let mut f = std::fs::File::create(dir.join("oci-layout")).unwrap();
    f.write_all(br#"{"imageLayoutVersion":"1.0.0"}"#).unwrap();
    digest
}
