//! Builders shared by the archive tests: layers written with raw headers (so hostile
//! names, types and extension records survive), gzip and zstd (by the zstd CLI, an
//! encoder independent of the decoder under test), and [`merge`], which runs a merge
//! through [`MergeTask`], the production bridge.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::process::{Command, Stdio};

use bytes::Bytes;
use tar::{EntryType, Header};

use super::bridge::{self, BridgeError, MergeTask};
#[path = "../../tests/support/rawtar.rs"]
mod rawtar;
use super::*;
use crate::ports::{BlobStream, RegistryError};
pub(super) use rawtar::{pax_records, raw_header};

/// One entry of a test layer.
pub(super) enum E<'a> {
    File(&'a str, &'a str),
    Exec(&'a str, &'a str),
    Dir(&'a str),
    Link(&'a str, &'a str),
    Raw(&'a [u8], EntryType, &'a str),
}

/// A plain tar of `entries`, written with raw headers so hostile names survive.
pub(super) fn tar_of(entries: &[E<'_>]) -> Vec<u8> {
    let mut b = tar::Builder::new(Vec::new());
    for e in entries {
        let (name, kind, data, mode, link): (&[u8], EntryType, &str, u32, &str) = match e {
            E::File(p, d) => (p.as_bytes(), EntryType::Regular, d, 0o644, ""),
            E::Exec(p, d) => (p.as_bytes(), EntryType::Regular, d, 0o755, ""),
            E::Dir(p) => (p.as_bytes(), EntryType::Directory, "", 0o755, ""),
            E::Link(p, t) => (p.as_bytes(), EntryType::Symlink, "", 0o777, t),
            E::Raw(p, k, d) => (p, *k, d, 0o644, "target"),
        };
        let mut h = Header::new_gnu();
        h.as_old_mut().name[..name.len()].copy_from_slice(name);
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_uid(1000);
        h.set_gid(1000);
        h.set_mtime(1_700_000_000);
        h.set_username("alice").unwrap();
        if !link.is_empty() && matches!(kind, EntryType::Symlink | EntryType::Link) {
            h.set_link_name(link).unwrap();
        }
        h.set_size(data.len() as u64);
        h.set_cksum();
        b.append(&h, data.as_bytes()).unwrap();
    }
    b.into_inner().unwrap()
}

pub(super) fn gz(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

pub(super) fn desc(blob: &[u8]) -> Descriptor {
    Descriptor {
        media_type: crate::domain::manifest::FLUX_CONTENT.into(),
        digest: Digest::of(blob),
        size: blob.len() as u64,
        annotations: BTreeMap::new(),
        platform: None,
        artifact_type: None,
    }
}

/// A blob as the registry port streams it, in small chunks.
pub(super) fn blob_stream(blob: &[u8]) -> BlobStream {
    let chunks: Vec<Result<Bytes, RegistryError>> = blob
        .chunks(16 << 10)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .collect();
    Box::pin(futures::stream::iter(chunks))
}

/// Merges blobs given TOP first, through [`MergeTask`] as the pipeline does.
pub(super) fn merge(
    top_first: &[Vec<u8>],
    opts: MergeOptions,
) -> Result<MergeOutcome<Vec<u8>>, ArchiveError> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        let task = MergeTask::spawn(Vec::new(), opts, bridge::DEFAULT_CAPACITY);
        for blob in top_first {
            if task.feed(desc(blob), blob_stream(blob)).await.is_err() {
                break;
            }
        }
        match task.finish().await {
            Ok(outcome) => Ok(outcome),
            Err(BridgeError::Merge(e)) => Err(e),
            Err(BridgeError::Task(e)) => panic!("the merge task failed: {e}"),
        }
    })
}

pub(super) fn no_ignores() -> MergeOptions {
    MergeOptions {
        ignore: IgnoreRules::none(),
        limits: Limits::default(),
    }
}

/// The output entries: (path, type, mode, content).
pub(super) fn done(outcome: MergeOutcome<Vec<u8>>) -> (Vec<u8>, MergeStats) {
    match outcome {
        MergeOutcome::Done { out, stats } => (out, stats),
        MergeOutcome::NeedsSecondPass { sourceignore } => {
            panic!("unexpected second pass: {sourceignore:?}")
        }
    }
}

pub(super) fn listing(targz: &[u8]) -> Vec<(String, char, u32, String)> {
    let mut a = tar::Archive::new(flate2::read::GzDecoder::new(targz));
    let mut out = Vec::new();
    for e in a.entries().unwrap() {
        let mut e = e.unwrap();
        let h = e.header().clone();
        assert_eq!(
            (h.uid().unwrap(), h.gid().unwrap(), h.mtime().unwrap()),
            (0, 0, 0)
        );
        assert_eq!(h.username_bytes().unwrap_or_default(), b"");
        assert_eq!(h.groupname_bytes().unwrap_or_default(), b"");
        let t = if h.entry_type().is_dir() { 'd' } else { 'f' };
        let mut s = String::new();
        e.read_to_string(&mut s).unwrap();
        out.push((
            e.path().unwrap().to_string_lossy().into_owned(),
            t,
            h.mode().unwrap(),
            s,
        ));
    }
    out
}

/// Compressed by the zstd CLI with `args`.
pub(super) fn zstd_cli(args: &[&str], data: &[u8]) -> Vec<u8> {
    let mut child = Command::new("zstd")
        .args(["-q", "-c"])
        .args(args)
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("the zstd CLI (apt-get install zstd)");
    let mut stdin = child.stdin.take().unwrap();
    let data = data.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&data));
    let out = child.wait_with_output().unwrap().stdout;
    writer.join().unwrap().unwrap();
    out
}

/// An extension record (`kind` `L`, `K`, `x`) with `data`, then a regular file entry
/// `name` holding `content`, then the end of the archive.
pub(super) fn extended(kind: EntryType, data: &[u8], name: &str, content: &[u8]) -> Vec<u8> {
    let mut out = raw_header(b"././@LongLink", kind, data.len() as u64).to_vec();
    out.extend_from_slice(data);
    pad(&mut out);
    out.extend(raw_header(
        name.as_bytes(),
        EntryType::Regular,
        content.len() as u64,
    ));
    out.extend_from_slice(content);
    pad(&mut out);
    out.resize(out.len() + 1024, 0);
    out
}

fn pad(out: &mut Vec<u8>) {
    out.resize(out.len().div_ceil(512) * 512, 0);
}
