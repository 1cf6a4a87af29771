//! Progress bars on a terminal (indicatif), drawn so that nothing else on the terminal
//! lands on a bar's line: a layer's bar is replaced by its one-line summary (the plain
//! mode's `done` or `already in the registry` line) the moment it ends, written as a whole
//! line above the bars still moving; when the command ends every bar is gone and the cursor is at the
//! start of a line, so the result (stdout) and an error (stderr) begin on lines of their
//! own. Log events written while bars are shown go through [`LogWriter`], which lifts the
//! bars, writes the event and draws them again, instead of writing into a bar.

use std::io::Write;
use std::sync::Mutex;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::lines::{already_line, done_line};

/// The bars of the command under way, if any, for [`LogWriter`].
static SHOWN: Mutex<Option<MultiProgress>> = Mutex::new(None);

/// The bars of one command.
pub(super) struct Bars {
    multi: MultiProgress,
    verb: &'static str,
}

impl Bars {
    /// Bars on stderr; log events go around them until the value is dropped.
    pub(super) fn stderr(verb: &'static str) -> Self {
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        if let Ok(mut shown) = SHOWN.lock() {
            *shown = Some(multi.clone());
        }
        Self { multi, verb }
    }

    /// A bar for one layer of `total` bytes.
    pub(super) fn layer(&self, name: String, total: u64) -> BarLayer {
        let bar = self.multi.add(ProgressBar::new(total));
        let style = ProgressStyle::with_template(
            "{prefix} {bar:25} {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar());
        bar.set_style(style);
        bar.set_prefix(format!("{} {name}", self.verb));
        BarLayer {
            bar,
            multi: self.multi.clone(),
            verb: self.verb,
            name,
        }
    }
}

impl Drop for Bars {
    fn drop(&mut self) {
        // A bar left by a layer that never ended (an error) goes too: the error says why.
        let _ = self.multi.clear();
        if let Ok(mut shown) = SHOWN.lock() {
            *shown = None;
        }
    }
}

/// One layer's bar.
pub(super) struct BarLayer {
    bar: ProgressBar,
    multi: MultiProgress,
    verb: &'static str,
    name: String,
}

impl BarLayer {
    /// Sets the bytes transferred so far.
    pub(super) fn set(&self, pos: u64) {
        self.bar.set_position(pos);
    }

    /// Adds `n` transferred bytes.
    pub(super) fn add(&self, n: u64) {
        self.bar.inc(n);
    }

    /// (bytes so far, total).
    pub(super) fn position(&self) -> (u64, u64) {
        (self.bar.position(), self.bar.length().unwrap_or(0))
    }

    /// Replaces the bar with its `done` line, once.
    pub(super) fn done(&self) {
        let line = done_line(
            self.verb,
            &self.name,
            self.bar.position(),
            self.bar.elapsed(),
        );
        self.end_with(Some(line));
    }

    /// Replaces the bar with `already in the registry`, once.
    pub(super) fn already_there(&self) {
        let line = already_line(self.verb, &self.name, self.bar.length().unwrap_or(0));
        self.end_with(Some(line));
    }

    /// Removes a bar that stopped short (the error says why), once.
    pub(super) fn stopped(&self) {
        self.end_with(None);
    }

    fn end_with(&self, line: Option<String>) {
        if self.bar.is_finished() {
            return;
        }
        self.bar.finish_and_clear();
        self.multi.remove(&self.bar);
        if let Some(line) = line {
            // Not `MultiProgress::println`: it leaves its last line open (no newline) once
            // no bar is below it, and the next output would continue that line.
            self.multi
                .suspend(|| {
                    std::io::stderr()
                        .lock()
                        .write_all(format!("{line}\n").as_bytes())
                })
                .unwrap_or(());
        }
    }
}

/// Where log events go: stderr, around the bars when bars are shown.
#[derive(Clone, Copy, Debug, Default)]
pub struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.write_all(buf).map(|()| buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        let shown = SHOWN.lock().ok().and_then(|s| s.clone());
        match shown {
            Some(multi) => multi.suspend(|| std::io::stderr().lock().write_all(buf)),
            None => std::io::stderr().lock().write_all(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogWriter;

    fn make_writer(&'a self) -> Self::Writer {
        *self
    }
}
