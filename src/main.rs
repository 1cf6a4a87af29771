//! The `ocisource` binary.
fn main() {}
