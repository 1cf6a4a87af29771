//! Hostile and broken input, merged through the production bridge
//! (`test_layers::merge`): each case must fail with the right `ArchiveError` variant, and
//! its message must name the layer digest and the entry path. Hostile names, extension
//! records and caps are in `tests_names`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tar::EntryType;

use super::bridge::{BridgeError, MergeTask};
use super::test_layers::{
    blob_stream, desc, done, gz, listing, merge, no_ignores, tar_of, zstd_cli, E,
};
use super::*;

/// Merges and returns the error with its message; checks the message names the digest of
/// `culprit` and contains `path`.
pub(super) fn refused(top_first: &[Vec<u8>], culprit: usize, path: &str) -> (ArchiveError, String) {
    refused_with(top_first, no_ignores(), culprit, path)
}

pub(super) fn refused_with(
    top_first: &[Vec<u8>],
    opts: MergeOptions,
    culprit: usize,
    path: &str,
) -> (ArchiveError, String) {
    let err = match merge(top_first, opts) {
        Err(e) => e,
        Ok(_) => panic!("merge accepted hostile input (entry '{path}')"),
    };
    let msg = err.to_string();
    let digest = desc(&top_first[culprit]).digest.to_string();
    assert!(
        msg.contains(&digest),
        "message lacks the layer digest: {msg}"
    );
    assert!(msg.contains(path), "message lacks '{path}': {msg}");
    (err, msg)
}

#[test]
fn absolute_paths_are_refused() {
    let layer = tar_of(&[
        E::File("ok", "1"),
        E::Raw(b"/etc/passwd", EntryType::Regular, "x"),
    ]);
    let (err, msg) = refused(&[layer], 0, "/etc/passwd");
    assert!(matches!(err, ArchiveError::UnsafePath { .. }), "{err:?}");
    assert!(msg.contains("absolute"), "{msg}");
}

#[test]
fn dot_dot_components_are_refused() {
    let layer = tar_of(&[E::Raw(b"a/../../escape", EntryType::Regular, "x")]);
    let (err, msg) = refused(&[layer], 0, "a/../../escape");
    assert!(
        matches!(err, ArchiveError::UnsafePath { .. }) && msg.contains("'..'"),
        "{msg}"
    );
}

#[test]
fn entries_through_a_symlink_of_the_same_layer_are_refused() {
    let layer = tar_of(&[E::Link("etc", "/etc"), E::File("etc/cron.d/job", "x")]);
    let (err, msg) = refused(&[layer], 0, "etc/cron.d/job");
    assert!(
        matches!(err, ArchiveError::ThroughSymlink { ref link, .. } if link.as_str() == "etc"),
        "{msg}"
    );
}

#[test]
fn higher_entries_through_a_lower_symlink_are_refused() {
    let top = tar_of(&[E::File("etc/passwd", "x")]);
    let bottom = tar_of(&[E::Link("etc", "/etc")]);
    let (err, msg) = refused(&[top, bottom], 1, "'etc'");
    assert!(
        matches!(err, ArchiveError::SymlinkUnderEntries { .. }),
        "{msg}"
    );
}

#[test]
fn a_real_directory_in_a_higher_layer_makes_a_lower_symlink_harmless() {
    let top = tar_of(&[E::File("etc/app.yaml", "x")]);
    let middle = tar_of(&[E::Dir("etc")]);
    let bottom = tar_of(&[E::Link("etc", "/etc"), E::Link("l", "x")]);
    let (out, _) = done(merge(&[top, middle, bottom], no_ignores()).unwrap());
    assert_eq!(listing(&out).len(), 2);
}

#[test]
fn hardlinks_are_refused() {
    let layer = tar_of(&[E::File("a", "1"), E::Raw(b"b", EntryType::Link, "")]);
    let (err, msg) = refused(&[layer], 0, "'b'");
    assert!(
        matches!(err, ArchiveError::Hardlink { .. }) && msg.contains("hardlink"),
        "{msg}"
    );
}

#[test]
fn devices_and_fifos_are_refused() {
    for (kind, word) in [
        (EntryType::Char, "character device"),
        (EntryType::Block, "block device"),
        (EntryType::Fifo, "fifo"),
    ] {
        let layer = tar_of(&[E::Raw(b"dev/thing", kind, "")]);
        let (err, msg) = refused(&[layer], 0, "dev/thing");
        assert!(
            matches!(err, ArchiveError::SpecialFile { .. }) && msg.contains(word),
            "{msg}"
        );
    }
}

#[test]
fn a_path_twice_in_one_layer_is_refused() {
    let layer = tar_of(&[E::File("a", "1"), E::File("a", "2")]);
    let (err, _) = refused(&[layer], 0, "'a'");
    assert!(matches!(err, ArchiveError::Duplicate { .. }), "{err:?}");
    let dirs_twice = tar_of(&[E::Dir("d"), E::Dir("d"), E::File("d/f", "")]);
    assert!(
        merge(&[dirs_twice], no_ignores()).is_ok(),
        "a directory listed twice is harmless"
    );
}

#[test]
fn malformed_gzip_is_reported_as_such() {
    let mut blob = gz(&tar_of(&[E::File("a", &"x".repeat(10_000))]));
    let mid = blob.len() / 2;
    for b in &mut blob[12..mid] {
        *b ^= 0x5a;
    }
    let digest = desc(&blob).digest.to_string();
    let err = merge(&[blob], no_ignores()).unwrap_err();
    assert!(matches!(err, ArchiveError::MalformedGzip { .. }), "{err:?}");
    assert!(err.to_string().contains(&digest), "{err}");
    let truncated = gz(&tar_of(&[E::File("a", &"y".repeat(10_000))]));
    let err = merge(&[truncated[..truncated.len() - 12].to_vec()], no_ignores()).unwrap_err();
    assert!(matches!(err, ArchiveError::MalformedGzip { .. }), "{err:?}");
}

#[test]
fn malformed_tar_is_reported_as_such() {
    let mut blob = tar_of(&[E::File("good", "1"), E::File("bad", "2")]);
    blob[1024 + 148] ^= 0x11; // checksum of the second header
    let (err, msg) = refused(&[blob], 0, "good");
    assert!(matches!(err, ArchiveError::MalformedTar { .. }), "{msg}");
    let short = tar_of(&[E::File("cut", &"z".repeat(5000))]);
    let err = merge(&[short[..3000].to_vec()], no_ignores()).unwrap_err();
    assert!(matches!(err, ArchiveError::MalformedTar { .. }), "{err:?}");
}

#[test]
fn zstd_layers_are_decoded_and_a_broken_frame_names_the_layer() {
    let tar = tar_of(&[E::File("z/config.yaml", "from zstd")]);
    let blob = zstd_cli(&["--check"], &tar);
    assert_eq!(&blob[..4], &[0x28, 0xb5, 0x2f, 0xfd]);
    let (out, _) = done(merge(&[blob], no_ignores()).unwrap());
    let entries = listing(&out);
    assert!(
        entries
            .iter()
            .any(|(p, t, _, c)| p == "z/config.yaml" && *t == 'f' && c == "from zstd"),
        "{entries:?}"
    );

    let broken = vec![0x28, 0xb5, 0x2f, 0xfd, 0, 0, 0, 0];
    let digest = desc(&broken).digest.to_string();
    let err = merge(&[broken], no_ignores()).unwrap_err();
    assert!(matches!(err, ArchiveError::MalformedZstd { .. }), "{err:?}");
    assert!(err.to_string().contains(&digest), "{err}");

    // A flipped bit in the content fails the frame checksum, whatever the tar reader saw.
    let mut corrupt = zstd_cli(&["--check", "-1"], &tar);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 0x01;
    let err = merge(&[corrupt], no_ignores()).unwrap_err();
    assert!(
        matches!(err, ArchiveError::MalformedZstd { ref cause, .. } if cause.to_string().contains("checksum")),
        "{err:?}"
    );
}

#[test]
fn uncompressed_bytes_are_capped_across_layers() {
    let top = gz(&tar_of(&[E::File("a", &"a".repeat(20_000))]));
    let bottom = gz(&tar_of(&[E::File("b", &"b".repeat(20_000))]));
    let limits = Limits {
        max_uncompressed_bytes: 30_000,
        ..Limits::default()
    };
    let opts = MergeOptions {
        ignore: IgnoreRules::none(),
        limits: limits.clone(),
    };
    let err = merge(&[top.clone(), bottom.clone()], opts).unwrap_err();
    assert!(
        matches!(err, ArchiveError::TooLarge { limit: 30_000, .. }),
        "{err:?}"
    );
    assert!(
        err.to_string().contains(&desc(&bottom).digest.to_string()),
        "{err}"
    );
    let roomy = MergeOptions {
        ignore: IgnoreRules::none(),
        limits: Limits {
            max_uncompressed_bytes: 50_000,
            ..limits
        },
    };
    assert!(merge(&[top, bottom], roomy).is_ok());
}

#[test]
fn entries_are_capped_across_layers() {
    let top = tar_of(&[E::File("a", ""), E::File("b", "")]);
    let bottom = tar_of(&[E::File("c", ""), E::File("d", "")]);
    let limits = Limits {
        max_entries: 3,
        ..Limits::default()
    };
    let opts = MergeOptions {
        ignore: IgnoreRules::none(),
        limits,
    };
    let (err, _) = refused_with(&[top, bottom], opts, 1, "'d'");
    assert!(
        matches!(err, ArchiveError::TooManyEntries { limit: 3, .. }),
        "{err:?}"
    );
}

#[test]
fn a_failing_stream_is_a_read_error_not_a_format_error() {
    struct Failing<'a>(&'a [u8]);
    impl Read for Failing<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.0.is_empty() {
                return Err(io::Error::other("digest mismatch for blob"));
            }
            let n = buf.len().min(self.0.len()).min(700);
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }
    for blob in [
        tar_of(&[E::File("a", &"x".repeat(3000))]),
        gz(&tar_of(&[E::File("a", "1")])),
    ] {
        let mut m = Merger::new(Vec::new(), no_ignores());
        let err = m.add_layer(&desc(&blob), Failing(&blob)).unwrap_err();
        assert!(matches!(err, ArchiveError::Read { .. }), "{err:?}");
        let chain = format!(
            "{err}: {}",
            std::error::Error::source(&err)
                .map(ToString::to_string)
                .unwrap_or_default()
        );
        assert!(chain.contains("digest mismatch"), "{chain}");
    }
}

#[test]
fn oversized_sourceignores_are_refused_alone_or_together() {
    let cap = usize::try_from(Limits::default().max_sourceignore_bytes).unwrap();
    let big = "#".repeat(cap + 1);
    let layer = tar_of(&[E::File("d/.sourceignore", &big)]);
    let (err, _) = refused(&[layer], 0, "d/.sourceignore");
    assert!(
        matches!(err, ArchiveError::SourceIgnoreTooLarge { .. }),
        "{err:?}"
    );
    let half = "#".repeat(cap / 2 + 1);
    let two = tar_of(&[
        E::File("a/.sourceignore", &half),
        E::File("b/.sourceignore", &half),
    ]);
    let (err, _) = refused(&[two], 0, "b/.sourceignore");
    assert!(
        matches!(err, ArchiveError::SourceIgnoreTooLarge { .. }),
        "{err:?}"
    );
}

#[test]
fn a_second_pass_never_asks_for_a_third() {
    // Preloaded rules mark a second pass; a .sourceignore it does not know that changes
    // written entries must fail instead of looping.
    let layer = tar_of(&[
        E::File("x.txt", "x"),
        E::File("sub/y.txt", "y"),
        E::File("sub/.sourceignore", "*.txt\n"),
    ]);
    let mut ignore = IgnoreRules::none();
    ignore.add_sourceignore("other", "*.md\n");
    let opts = MergeOptions {
        ignore,
        limits: Limits::default(),
    };
    let (err, _) = refused_with(&[layer], opts, 0, "sub/.sourceignore");
    assert!(
        matches!(err, ArchiveError::SourceIgnoreUnstable { .. }),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registry_error_mid_stream_fails_the_merge_with_the_layer_named() {
    use crate::ports::{RegistryError, RegistryErrorKind};
    let blob = gz(&tar_of(&[E::File("a", &"x".repeat(50_000))]));
    let digest = desc(&blob).digest.to_string();
    let chunks: Vec<Result<bytes::Bytes, RegistryError>> = vec![
        Ok(bytes::Bytes::copy_from_slice(&blob[..blob.len() / 2])),
        Err(RegistryError::new(
            RegistryErrorKind::Integrity,
            "blob digest mismatch",
        )),
    ];
    let task = MergeTask::spawn(Vec::new(), no_ignores(), bridge::DEFAULT_CAPACITY);
    let stream: crate::ports::BlobStream = Box::pin(futures::stream::iter(chunks));
    let _ = task.feed(desc(&blob), stream).await;
    let err = task.finish().await.unwrap_err();
    let chain = format!(
        "{err}: {}",
        std::error::Error::source(&err)
            .map(ToString::to_string)
            .unwrap_or_default()
    );
    assert!(
        matches!(err, BridgeError::Merge(ArchiveError::Read { .. })),
        "{err:?}"
    );
    assert!(
        chain.contains(&digest) && chain.contains("blob digest mismatch"),
        "{chain}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_merge_that_stopped_takes_no_more_layers() {
    let bad = tar_of(&[E::Raw(b"/etc/passwd", EntryType::Regular, "x")]);
    // More than the bridge holds, so the whole of it cannot sit in the channel.
    let good = tar_of(&[E::File("a", &"y".repeat(2 << 20))]);
    let task = MergeTask::spawn(Vec::new(), no_ignores(), bridge::DEFAULT_CAPACITY);
    let _ = task.feed(desc(&bad), blob_stream(&bad)).await;
    // The merger refused the first layer: feeding another must fail, not hang.
    assert!(task.feed(desc(&good), blob_stream(&good)).await.is_err());
    let err = task.finish().await.unwrap_err();
    assert!(err.to_string().contains("/etc/passwd"), "{err}");
}

#[test]
fn a_download_dropped_before_its_end_is_not_a_clean_eof() {
    let (tx, mut rx) = bridge::channel(2);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(tx.send(Ok(bytes::Bytes::from_static(b"partial"))))
        .unwrap();
    drop(tx);
    let mut got = Vec::new();
    let err = rx.read_to_end(&mut got).unwrap_err();
    assert_eq!(
        (err.kind(), got.as_slice()),
        (io::ErrorKind::UnexpectedEof, &b"partial"[..])
    );
    let (tx, mut rx) = bridge::channel(2);
    rt.block_on(tx.send(Ok(bytes::Bytes::from_static(b"whole"))))
        .unwrap();
    tx.finish();
    let mut got = Vec::new();
    rx.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"whole");
}
