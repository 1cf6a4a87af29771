//! What the artifact listener answers to the bytes a client sends
//! (`server::files`, through `fuzzing::artifact_reply`), against a store holding one
//! artifact, a `latest.tar.gz` link to it, a temp file, and a secret outside the root
//! reached by an absolute and by a relative symlink.
//!
//! Checked: every reply is one well-formed HTTP/1.1 head (a status line, then fields up
//! to an empty line, `Content-Length` present unless 304); the request used at most what
//! was sent, and the reply closes the connection when it used nothing the parser could
//! frame; a 2xx reply only ever carries the artifact's bytes (never the secret or the temp
//! file); a request that announces a body closes the connection.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use ocisource::fuzzing::artifact_reply;

const ARTIFACT: &[u8] = b"ARTIFACT-BYTES";
const SECRET: &[u8] = b"SECRET-BYTES";
const TEMP: &[u8] = b"TEMP-BYTES";

/// The store, made once per process.
fn store() -> &'static PathBuf {
    static STORE: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    &STORE
        .get_or_init(|| {
            let dir = tempfile::tempdir().expect("temp dir");
            let root = dir.path().join("store");
            let app = root.join("ocirepository/ns/app");
            std::fs::create_dir_all(&app).expect("store");
            std::fs::write(app.join("abc.tar.gz"), ARTIFACT).expect("artifact");
            std::fs::write(app.join(".tmp-1.tar.gz"), TEMP).expect("temp");
            std::os::unix::fs::symlink("abc.tar.gz", app.join("latest.tar.gz")).expect("link");
            std::fs::write(dir.path().join("secret"), SECRET).expect("secret");
            std::os::unix::fs::symlink(dir.path().join("secret"), app.join("abs.tar.gz"))
                .expect("link");
            std::os::unix::fs::symlink("../../../secret", app.join("rel.tar.gz")).expect("link");
            (dir, root)
        })
        .1
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

fuzz_target!(|data: &[u8]| {
    let Some((head, file_bytes, close, used)) = artifact_reply(store(), data) else {
        return;
    };
    assert!(used <= data.len(), "used {used} of {} bytes", data.len());
    assert!(head.starts_with(b"HTTP/1.1 "), "{:?}", String::from_utf8_lossy(&head));
    let end = head
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("the head ends with an empty line");
    let fields = String::from_utf8(head[..end].to_vec()).expect("the head is text");
    let status = &fields[9..12];
    let body = &head[end + 4..];
    for line in fields.lines().skip(1) {
        assert!(line.contains(": "), "field {line:?}");
    }
    if status != "304" {
        assert!(fields.contains("\r\nContent-Length: "), "{fields}");
    }
    assert!(!contains(&head, SECRET), "the secret was served");
    assert!(!contains(&head, TEMP), "a temp file was served");
    if status.starts_with('2') {
        assert_eq!(file_bytes, 0, "the store's files are small");
        assert!(
            body.is_empty() || contains(ARTIFACT, body),
            "a 2xx body that is not the artifact's: {body:?}"
        );
    }
    let request = String::from_utf8_lossy(&data[..used]).to_ascii_lowercase();
    if request.contains("\ntransfer-encoding:") {
        assert!(close, "a request with a body kept its connection");
    }
});
