//! A zstd layer as one stream: every frame decoded in turn (a layer may hold several, and
//! skippable frames are skipped), each frame's content checksum compared with the decoded
//! bytes, and frames asking for a window over the cap refused before the decoder
//! allocates it. `ruzstd` decodes one frame per `StreamingDecoder` and leaves the
//! checksum to its caller; this is that caller. Synchronous `std::io` only.

use std::io::{self, BufRead, Read};

use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};
use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, msg)
}

/// Decodes the frames of `source` one after another.
pub(super) struct Frames<R> {
    source: R,
    decoder: FrameDecoder,
    in_frame: bool,
    frames: u64,
}

impl<R: BufRead> Frames<R> {
    /// A decoder refusing windows over `max_window` bytes.
    pub(super) fn new(source: R, max_window: u64) -> Self {
        let mut decoder = FrameDecoder::new();
        decoder.set_max_window_size(max_window);
        Self {
            source,
            decoder,
            in_frame: false,
            frames: 0,
        }
    }

    /// Starts the next frame; `false` at the end of the input.
    fn start_frame(&mut self) -> io::Result<bool> {
        loop {
            if self.source.fill_buf()?.is_empty() {
                return Ok(false);
            }
            match self.decoder.reset(&mut self.source) {
                Ok(()) => {
                    self.in_frame = true;
                    self.frames += 1;
                    return Ok(true);
                }
                Err(FrameDecoderError::ReadFrameHeaderError(ReadFrameHeaderError::SkipFrame {
                    length,
                    ..
                })) => {
                    let want = u64::from(length);
                    let skipped =
                        io::copy(&mut (&mut self.source).take(want), &mut io::sink())?;
                    if skipped < want {
                        return Err(invalid("the input ends inside a skippable frame".into()));
                    }
                }
                Err(FrameDecoderError::WindowSizeTooBig { requested, max }) => {
                    return Err(invalid(format!(
                        "frame {} asks for a {requested}-byte window, over the {max}-byte limit: recompress without --long or --ultra",
                        self.frames + 1
                    )))
                }
                Err(e) => {
                    return Err(invalid(format!(
                        "malformed zstd frame {}: {e}",
                        self.frames + 1
                    )))
                }
            }
        }
    }

    /// Ends a frame whose content was all read: compares its checksum.
    fn end_frame(&mut self) -> io::Result<()> {
        self.in_frame = false;
        let stored = self.decoder.get_checksum_from_data();
        let computed = self.decoder.get_calculated_checksum();
        match (stored, computed) {
            (Some(stored), Some(computed)) if stored != computed => Err(invalid(format!(
                "zstd frame {} checksum mismatch (stored {stored:08x}, content {computed:08x})",
                self.frames
            ))),
            _ => Ok(()),
        }
    }
}

impl<R: BufRead> Read for Frames<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if !self.in_frame && !self.start_frame()? {
                return Ok(0);
            }
            while self.decoder.can_collect() == 0 && !self.decoder.is_finished() {
                self.decoder
                    .decode_blocks(&mut self.source, BlockDecodingStrategy::UptoBlocks(1))
                    .map_err(|e| invalid(format!("malformed zstd frame {}: {e}", self.frames)))?;
            }
            let n = self.decoder.read(buf)?;
            if n > 0 {
                return Ok(n);
            }
            if self.decoder.is_finished() && self.decoder.can_collect() == 0 {
                self.end_frame()?;
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use std::io::BufReader;

    use super::*;
    use crate::archive::test_layers::zstd_cli;

    fn decode(blob: &[u8], max_window: u64) -> io::Result<Vec<u8>> {
        let mut out = Vec::new();
        Frames::new(BufReader::new(blob), max_window).read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    fn every_frame_is_decoded_and_skippable_frames_are_skipped() {
        let mut blob = zstd_cli(&[], b"first frame, ");
        blob.extend_from_slice(&[0x50, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 9, 9, 9]);
        blob.extend(zstd_cli(&[], b"second frame"));
        assert_eq!(
            decode(&blob, 8 << 20).unwrap(),
            b"first frame, second frame"
        );
    }

    #[test]
    fn a_corrupted_frame_fails_its_checksum() {
        let data = b"checked content ".repeat(64);
        let mut blob = zstd_cli(&["--check", "-1"], &data);
        // The last four bytes are the checksum: the content decodes, the check fails.
        let end = blob.len() - 1;
        blob[end] ^= 0xff;
        let err = decode(&blob, 8 << 20).unwrap_err();
        assert!(err.to_string().contains("checksum mismatch"), "{err}");
        let mut no_check = zstd_cli(&["--no-check", "-1"], &data);
        assert_eq!(decode(&no_check, 8 << 20).unwrap(), data);
        no_check.truncate(no_check.len() - 3);
        assert!(
            decode(&no_check, 8 << 20).is_err(),
            "a cut frame is an error"
        );
    }

    #[test]
    fn a_window_over_the_cap_is_refused_before_decoding() {
        let data = vec![7u8; 3 << 20];
        let blob = zstd_cli(&["--long=23", "--no-content-size"], &data);
        assert_eq!(decode(&blob, 8 << 20).unwrap().len(), data.len());
        let err = decode(&blob, 1 << 20).unwrap_err();
        assert!(err.to_string().contains("window"), "{err}");
    }
}
