//! Transfer progress as a person sees it on a terminal: the binary runs under `script(1)`
//! (a real pseudo-terminal, util-linux), against the real registry, and what it writes is
//! played on a small terminal model (cursor moves, line clears, the pending wrap at the
//! last column). When the command ends, no bar is left on the screen, each layer has its
//! one summary line, and the result begins on a line of its own: before the fix, the
//! result continued the last bar's line. Also checked with a terminal of zero columns
//! (`script` from a pipe), where only an explicit newline separates them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod cli_common;
mod support;

use std::path::Path;
use std::process::Command;

use cli_common::noise;
use support::{RegistryOpts, TestRegistry};

/// A terminal screen, enough of one for indicatif's drawing: printable characters with
/// the wrap that a real terminal does after the last column, CR, LF, cursor up/down/left/
/// right, and erase in line; other escapes (colours, cursor visibility) change nothing.
struct Screen {
    cols: usize,
    lines: Vec<Vec<char>>,
    /// Rows that continue the row above (the terminal wrapped into them).
    wrapped: Vec<bool>,
    row: usize,
    col: usize,
    pending_wrap: bool,
}

impl Screen {
    fn new(cols: usize) -> Self {
        Self {
            cols,
            lines: vec![Vec::new()],
            wrapped: vec![false],
            row: 0,
            col: 0,
            pending_wrap: false,
        }
    }

    fn line(&mut self) -> &mut Vec<char> {
        while self.lines.len() <= self.row {
            self.lines.push(Vec::new());
            self.wrapped.push(false);
        }
        &mut self.lines[self.row]
    }

    fn feed(&mut self, text: &str) {
        let mut chars = text.chars().peekable();
        while let Some(ch) = chars.next() {
            match ch {
                '\x1b' => {
                    if chars.peek() != Some(&'[') {
                        chars.next();
                        continue;
                    }
                    chars.next();
                    let mut param = String::new();
                    let mut fin = ' ';
                    for c in chars.by_ref() {
                        if ('\x40'..='\x7e').contains(&c) {
                            fin = c;
                            break;
                        }
                        param.push(c);
                    }
                    self.csi(&param, fin);
                }
                '\r' => {
                    self.col = 0;
                    self.pending_wrap = false;
                }
                '\n' => {
                    self.row += 1;
                    self.pending_wrap = false;
                }
                '\x08' => self.col = self.col.saturating_sub(1),
                c if c < ' ' => {}
                c => {
                    if self.pending_wrap {
                        self.row += 1;
                        self.col = 0;
                        self.pending_wrap = false;
                        self.line();
                        self.wrapped[self.row] = true;
                    }
                    let col = self.col;
                    let line = self.line();
                    if line.len() <= col {
                        line.resize(col + 1, ' ');
                    }
                    line[col] = c;
                    if col + 1 == self.cols {
                        self.pending_wrap = true;
                    } else {
                        self.col += 1;
                    }
                }
            }
        }
    }

    fn csi(&mut self, param: &str, fin: char) {
        let n = param.parse::<usize>().unwrap_or(1).max(1);
        match fin {
            'A' => self.row = self.row.saturating_sub(n),
            'B' => self.row += n,
            'C' => self.col = (self.col + n).min(self.cols - 1),
            'D' => self.col = self.col.saturating_sub(n),
            'K' => {
                let col = self.col;
                if param == "2" {
                    self.line().clear();
                    self.wrapped[self.row] = false;
                } else if param == "1" {
                    self.line().iter_mut().take(col + 1).for_each(|c| *c = ' ');
                } else {
                    self.line().truncate(col);
                }
            }
            _ => return,
        }
        self.pending_wrap = false;
    }

    /// The screen's lines, wrapped rows joined to the row they continue, trailing
    /// blanks trimmed, empty lines dropped.
    fn text(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (l, wrapped) in self.lines.iter().zip(&self.wrapped) {
            let row: String = l.iter().collect();
            match out.last_mut() {
                Some(last) if *wrapped => last.push_str(&row),
                _ => out.push(row),
            }
        }
        out.iter()
            .map(|l| l.trim_end().to_string())
            .filter(|l| !l.is_empty())
            .collect()
    }
}

/// Runs the binary with `args` on a pseudo-terminal of `cols` columns (none: the size
/// `script` gets from a pipe, zero) and returns everything it wrote there.
fn on_terminal(cols: Option<usize>, args: &[&str]) -> String {
    let bin = env!("CARGO_BIN_EXE_ocisource");
    let quoted: Vec<String> = std::iter::once(bin)
        .chain(args.iter().copied())
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect();
    let size = cols.map_or(String::new(), |c| format!("stty cols {c} rows 50; "));
    let out = Command::new("script")
        .args([
            "-qec",
            &format!("{size}exec {}", quoted.join(" ")),
            "/dev/null",
        ])
        .env_remove("OCISOURCE_CREDS")
        .env_remove("OCISOURCE_LOG")
        .env_remove("NO_COLOR")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("script(1) from util-linux");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{args:?} on a terminal failed: {text:?}"
    );
    text
}

/// The final screen: no bar glyph anywhere, exactly one summary line for the layer
/// (`<verb> sha256:<12 hex>: <what>...` and nothing after it on that line), and the line
/// right after it is the first line of the result.
fn check_screen(raw: &str, cols: usize, verb: &str, what: &str, first_result: &str) {
    let mut screen = Screen::new(cols);
    screen.feed(raw);
    let lines = screen.text();
    let shown = lines.join("\n");
    assert!(
        !shown.contains('█') && !shown.contains('░'),
        "a bar is left on the screen:\n{shown}"
    );
    let summaries: Vec<usize> = (0..lines.len())
        .filter(|&i| lines[i].starts_with(&format!("{verb} sha256:")))
        .collect();
    assert_eq!(summaries.len(), 1, "one summary line expected:\n{shown}");
    let at = summaries[0];
    let (name, tail) = lines[at].split_once(": ").unwrap();
    assert_eq!(name.len(), verb.len() + 20, "layer name in {:?}", lines[at]);
    assert!(tail.starts_with(what), "summary {:?}\n{shown}", lines[at]);
    assert!(
        tail.ends_with("/s)") || tail.ends_with("B"),
        "the summary line goes on with other output: {:?}\n{shown}",
        lines[at]
    );
    assert!(
        lines
            .get(at + 1)
            .is_some_and(|l| l.starts_with(first_result)),
        "the result does not start on the line after the summary:\n{shown}"
    );
}

fn push(reg: &TestRegistry, dir: &Path, tag: &str, cols: Option<usize>) -> String {
    let url = format!("oci://{}/team/tty:{tag}", reg.host());
    on_terminal(
        cols,
        &["push", &url, "--path", dir.to_str().unwrap(), "--insecure"],
    )
}

#[test]
fn bars_end_as_summary_lines_and_the_result_starts_on_its_own_line() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("big.bin"), noise(6 << 20)).unwrap();

    let raw = push(&reg, &src, "v1", Some(100));
    check_screen(&raw, 100, "push", "done, 6.", "url: ");

    // The same content again: the bar ends as `already in the registry`.
    let raw = push(&reg, &src, "v2", Some(100));
    check_screen(&raw, 100, "push", "already in the registry, 6.", "url: ");

    let url = format!("oci://{}/team/tty:v1", reg.host());
    let tgz = work.path().join("out.tar.gz");
    let pull = [
        "pull",
        &url,
        "--insecure",
        "--output-file",
        tgz.to_str().unwrap(),
    ];
    let raw = on_terminal(Some(100), &pull);
    check_screen(&raw, 100, "pull", "done, 6.", "url: ");

    // A narrow terminal: the bar line is longer than the screen is wide and wraps.
    let raw = on_terminal(Some(60), &pull);
    check_screen(&raw, 60, "pull", "done, 6.", "url: ");
}

#[test]
fn on_a_terminal_of_zero_columns_a_newline_ends_the_summary() {
    let reg = TestRegistry::start(RegistryOpts::plain());
    let work = tempfile::tempdir().unwrap();
    let src = work.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("big.bin"), noise(2 << 20)).unwrap();
    let raw = push(&reg, &src, "v1", None);
    let at = raw.find("url: ").expect("push result");
    let before = &raw[..at];
    assert!(
        before.ends_with('\n'),
        "the result continues the line before it: {:?}",
        &before[before.len().saturating_sub(200)..]
    );
    let last_line = before
        .trim_end_matches(['\r', '\n'])
        .rsplit('\n')
        .next()
        .unwrap();
    assert!(
        last_line.contains("push sha256:") && last_line.contains(": done, 2."),
        "the line before the result is not the summary: {last_line:?}"
    );
}
