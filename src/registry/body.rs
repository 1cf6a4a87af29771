//! Capped body reads: a response body is streamed into memory only up to a byte cap,
//! refused early when its `Content-Length` already says more. Used for manifests, token
//! answers and tag pages; blobs stream through `blob.rs` instead.

use bytes::Bytes;

use super::failure::err;
use super::failure::Cause;
use crate::domain::error_chain::chain;
use crate::ports::{RegistryError, RegistryErrorKind};

/// Reads a whole body, failing with `Integrity` once it exceeds `max` bytes.
pub(crate) async fn read_capped(
    resp: reqwest::Response,
    max: u64,
    what: &str,
    url: &str,
) -> Result<Bytes, RegistryError> {
    let mut buf = Vec::new();
    read_capped_into(resp, max, what, url, &mut buf).await?;
    Ok(Bytes::from(buf))
}

/// Reads a whole body into `buf` (cleared first), failing with `Integrity` once it
/// exceeds `max` bytes. Reusing one buffer for a series of bodies (tag pages) keeps the
/// allocator from piling up freed buffers of every size.
pub(crate) async fn read_capped_into(
    mut resp: reqwest::Response,
    max: u64,
    what: &str,
    url: &str,
    buf: &mut Vec<u8>,
) -> Result<(), RegistryError> {
    let too_big = || {
        err(
            RegistryErrorKind::Integrity,
            format!("failed to {what} {url}: body exceeds the limit of {max} bytes"),
        )
    };
    if resp.content_length().is_some_and(|n| n > max) {
        return Err(too_big());
    }
    buf.clear();
    buf.reserve(usize::try_from(resp.content_length().unwrap_or(0)).unwrap_or(0));
    while let Some(chunk) = resp.chunk().await.map_err(|e| {
        err(
            Cause::of(&e).kind(),
            format!("failed to {what} {url}: {}", chain(&e)),
        )
    })? {
        if (buf.len() + chunk.len()) as u64 > max {
            return Err(too_big());
        }
        buf.extend_from_slice(&chunk);
    }
    Ok(())
}
