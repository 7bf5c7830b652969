//! Helpers shared by the IR's round-trip tests.

#![allow(dead_code)]

use std::path::PathBuf;

/// The text of `tests/fixtures/<rel>` at the workspace root.
pub fn fixture_text(rel: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../tests/fixtures")
        .join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Fails, naming `what` and the first line that differs, unless `printed` is `expected`.
pub fn assert_same_text(what: &str, printed: &str, expected: &str) {
    if printed != expected {
        let diff = printed
            .lines()
            .zip(expected.lines())
            .enumerate()
            .find(|(_, (a, b))| a != b);
        panic!("{what} differs; first differing line: {diff:?}\n{printed}");
    }
}
