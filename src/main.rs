//! The `ocisource` binary: parse the command line and hand over to the composition root.

use clap::Parser;

fn main() -> std::process::ExitCode {
    ocisource::app::main(ocisource::cli::Cli::parse())
}
