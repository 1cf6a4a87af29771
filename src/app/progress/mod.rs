//! Transfer progress of `pull` and `push` on stderr, one entry per layer, never on stdout
//! (where the result goes). On a terminal, indicatif draws a bar per layer with bytes, rate
//! and ETA, and a finished layer's bar becomes its summary line (`terminal.rs`, which also
//! keeps log events off the bars); when stderr is not a terminal (CI logs), plain lines say
//! when a layer starts, every [`PLAIN_EVERY`] while it moves (bytes, percent, rate, ETA)
//! and when it is done, with no escape sequences. `-q` turns both off. indicatif's own
//! fallback for a non-terminal is to draw nothing, hence the plain lines here; they read a
//! [`Clock`] so their rate and ETA are tested with a fake one.
//!
//! [`Counting`] is the pull hook: a [`Registry`] decorator that reports blob bytes as they
//! stream. Push reports through `RegistryClient::push_blob_file_observed`.

mod lines;
mod terminal;

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use indicatif::HumanBytes;

use crate::domain::digest::Digest;
use crate::domain::manifest::Descriptor;
use crate::ports::{BlobStream, FetchedManifest, Referrers, Registry, RegistryError};

pub use lines::Clock;
use lines::{already_line, done_line, Plain, PlainLayer, SystemClock};
pub use terminal::LogWriter;
use terminal::{BarLayer, Bars};

/// How often a plain line is printed for a layer that is still moving.
pub const PLAIN_EVERY: Duration = Duration::from_secs(5);

enum Sink {
    Off,
    Terminal(Bars),
    Plain(Arc<Plain>),
}

/// The transfer progress of one command (`pull` or `push`) on stderr; hands out a [`Layer`] per transfer and
/// stops its plain-line ticker when dropped.
pub struct TransferProgress {
    sink: Sink,
    ticker: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for TransferProgress {
    fn drop(&mut self) {
        if let Some(t) = self.ticker.take() {
            t.abort();
        }
    }
}

fn stderr_line(line: &str) {
    // A closed stderr must not fail the transfer.
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

impl TransferProgress {
    /// Bars when stderr is a terminal, plain lines otherwise, nothing when `quiet`. Plain
    /// lines need a tokio runtime (their ticker is a task).
    pub fn stderr(verb: &'static str, quiet: bool) -> Self {
        if quiet {
            return Self {
                sink: Sink::Off,
                ticker: None,
            };
        }
        if std::io::stderr().is_terminal() {
            return Self {
                sink: Sink::Terminal(Bars::stderr(verb)),
                ticker: None,
            };
        }
        let plain = Self::plain(
            verb,
            Arc::new(SystemClock(Instant::now())),
            Box::new(stderr_line),
        );
        let p = plain.clone();
        let ticker = tokio::spawn(async move {
            let mut every = tokio::time::interval(PLAIN_EVERY);
            every.tick().await;
            loop {
                every.tick().await;
                p.tick();
            }
        });
        Self {
            sink: Sink::Plain(plain),
            ticker: Some(ticker),
        }
    }

    fn plain(
        verb: &'static str,
        clock: Arc<dyn Clock>,
        emit: Box<dyn Fn(&str) + Send + Sync>,
    ) -> Arc<Plain> {
        Arc::new(Plain {
            verb,
            clock,
            emit,
            layers: Mutex::new(Vec::new()),
        })
    }

    /// Starts reporting one layer of `total` bytes named by its digest.
    pub fn layer(&self, digest: &Digest, total: u64) -> Layer {
        let full = digest.to_string();
        let name = full.get(..19).unwrap_or(&full).to_string();
        let kind = match &self.sink {
            Sink::Off => LayerKind::Off,
            Sink::Terminal(bars) => LayerKind::Bar(bars.layer(name, total)),
            Sink::Plain(plain) => {
                (plain.emit)(&format!(
                    "{} {name}: started, {}",
                    plain.verb,
                    HumanBytes(total)
                ));
                let layer = Arc::new(PlainLayer {
                    name,
                    total,
                    start: plain.clock.now(),
                    pos: AtomicU64::new(0),
                    printed: AtomicU64::new(0),
                    finished: AtomicBool::new(false),
                });
                if let Ok(mut layers) = plain.layers.lock() {
                    layers.push(layer.clone());
                }
                LayerKind::Plain(plain.clone(), layer)
            }
        };
        Layer {
            kind,
            skipped: false,
        }
    }
}

enum LayerKind {
    Off,
    Bar(BarLayer),
    Plain(Arc<Plain>, Arc<PlainLayer>),
}

/// One layer's transfer. Dropped with all its bytes counted it reports done; dropped
/// short (an error), the bar is left where it stopped and no plain line is added (the
/// error says what happened).
pub struct Layer {
    kind: LayerKind,
    skipped: bool,
}

impl Layer {
    /// Sets the bytes transferred so far.
    pub fn set(&self, pos: u64) {
        match &self.kind {
            LayerKind::Off => {}
            LayerKind::Bar(bar) => bar.set(pos),
            LayerKind::Plain(_, l) => l.pos.store(pos, Ordering::Relaxed),
        }
        self.done_when_complete();
    }

    /// Adds `n` transferred bytes.
    pub fn add(&self, n: u64) {
        match &self.kind {
            LayerKind::Off => {}
            LayerKind::Bar(bar) => bar.add(n),
            LayerKind::Plain(_, l) => {
                l.pos.fetch_add(n, Ordering::Relaxed);
            }
        }
        self.done_when_complete();
    }

    /// True once any byte was reported.
    pub fn moved(&self) -> bool {
        self.position().0 > 0
    }

    /// The layer needed no transfer: the registry had it already.
    pub fn already_there(mut self) {
        self.skipped = true;
    }

    fn position(&self) -> (u64, u64) {
        match &self.kind {
            LayerKind::Off => (0, 0),
            LayerKind::Bar(bar) => bar.position(),
            LayerKind::Plain(_, l) => (l.pos.load(Ordering::Relaxed), l.total),
        }
    }

    /// Reports done, once, as soon as every byte is counted: before the command prints
    /// its result, whenever the stream holding this layer is dropped.
    fn done_when_complete(&self) {
        let (pos, total) = self.position();
        if pos < total {
            return;
        }
        match &self.kind {
            LayerKind::Off => {}
            LayerKind::Bar(bar) => bar.done(),
            LayerKind::Plain(plain, l) => {
                if !l.finished.swap(true, Ordering::Relaxed) {
                    let elapsed = plain.clock.now().saturating_sub(l.start);
                    (plain.emit)(&done_line(plain.verb, &l.name, pos, elapsed));
                }
            }
        }
    }
}

impl Drop for Layer {
    fn drop(&mut self) {
        if !self.skipped {
            self.done_when_complete();
        }
        match &self.kind {
            LayerKind::Off => {}
            LayerKind::Bar(bar) if self.skipped => bar.already_there(),
            LayerKind::Bar(bar) => bar.stopped(),
            LayerKind::Plain(plain, l) => {
                if !l.finished.swap(true, Ordering::Relaxed) && self.skipped {
                    (plain.emit)(&already_line(plain.verb, &l.name, l.total));
                }
            }
        }
    }
}

/// Reports the bytes of every blob streamed through it to a [`TransferProgress`].
pub struct Counting {
    inner: Arc<dyn Registry>,
    progress: Arc<TransferProgress>,
}

impl Counting {
    /// Wraps `inner`.
    pub fn wrap(inner: Arc<dyn Registry>, progress: Arc<TransferProgress>) -> Arc<dyn Registry> {
        Arc::new(Self { inner, progress })
    }
}

#[async_trait]
impl Registry for Counting {
    async fn manifest_digest(&self, reference: &str) -> Result<Digest, RegistryError> {
        self.inner.manifest_digest(reference).await
    }
    async fn manifest(&self, reference: &str) -> Result<FetchedManifest, RegistryError> {
        self.inner.manifest(reference).await
    }
    async fn tags(&self) -> Result<Vec<String>, RegistryError> {
        self.inner.tags().await
    }
    async fn referrers(
        &self,
        digest: &Digest,
        artifact_type: Option<&str>,
    ) -> Result<Referrers, RegistryError> {
        self.inner.referrers(digest, artifact_type).await
    }
    async fn blob(&self, descriptor: &Descriptor) -> Result<BlobStream, RegistryError> {
        let stream = self.inner.blob(descriptor).await?;
        let layer = self.progress.layer(&descriptor.digest, descriptor.size);
        Ok(stream
            .inspect(move |item| {
                if let Ok(chunk) = item {
                    layer.add(chunk.len() as u64);
                }
            })
            .boxed())
    }
    async fn blob_bytes(&self, descriptor: &Descriptor, max: u64) -> Result<Bytes, RegistryError> {
        self.inner.blob_bytes(descriptor, max).await
    }
    async fn prove_pull(&self, layers: &[Descriptor], anonymous_download: bool) -> bool {
        self.inner.prove_pull(layers, anonymous_download).await
    }
    fn anonymous(&self) -> bool {
        self.inner.anonymous()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct FakeClock(Mutex<Duration>);

    impl Clock for FakeClock {
        fn now(&self) -> Duration {
            *self.0.lock().unwrap()
        }
    }

    fn advance(clock: &FakeClock, d: Duration) {
        *clock.0.lock().unwrap() += d;
    }

    #[test]
    fn plain_lines_give_bytes_rate_and_eta_from_the_clock() {
        let clock = Arc::new(FakeClock(Mutex::new(Duration::from_secs(100))));
        let lines = Arc::new(Mutex::new(Vec::<String>::new()));
        let sink = lines.clone();
        let plain = TransferProgress::plain(
            "push",
            clock.clone(),
            Box::new(move |l| sink.lock().unwrap().push(l.to_string())),
        );
        let progress = TransferProgress {
            sink: Sink::Plain(plain.clone()),
            ticker: None,
        };
        let digest = Digest::of(b"layer");
        let layer = progress.layer(&digest, 30 << 20);
        let name = &digest.to_string()[..19];

        advance(&clock, Duration::from_secs(5));
        layer.set(12 << 20);
        plain.tick();
        // Nothing moved: no line.
        advance(&clock, Duration::from_secs(5));
        plain.tick();
        advance(&clock, Duration::from_secs(2));
        layer.add(18 << 20);
        drop(layer);
        plain.tick();
        assert_eq!(
            *lines.lock().unwrap(),
            vec![
                format!("push {name}: started, 30.00 MiB"),
                format!("push {name}: 12.00 MiB / 30.00 MiB (40%), 2.40 MiB/s, ETA 7s"),
                format!("push {name}: done, 30.00 MiB in 12s (2.50 MiB/s)"),
            ]
        );
    }

    #[test]
    fn a_layer_already_there_and_one_dropped_short() {
        let lines = Arc::new(Mutex::new(Vec::<String>::new()));
        let sink = lines.clone();
        let clock = Arc::new(FakeClock(Mutex::new(Duration::ZERO)));
        let plain = TransferProgress::plain(
            "push",
            clock,
            Box::new(move |l| sink.lock().unwrap().push(l.to_string())),
        );
        let progress = TransferProgress {
            sink: Sink::Plain(plain),
            ticker: None,
        };
        let digest = Digest::of(b"x");
        progress.layer(&digest, 2048).already_there();
        // A layer dropped short (an error) adds no line of its own.
        let short = progress.layer(&digest, 2048);
        short.set(10);
        drop(short);
        let got = lines.lock().unwrap();
        assert_eq!(got.len(), 3, "{got:?}");
        assert!(
            got[1].ends_with(": already in the registry, 2.00 KiB"),
            "{got:?}"
        );
    }
}
