//! What the `graphbug draw` tests share.

use std::path::Path;

use crate::common::{run_in_tmp, said};

/// `p` as a string.
pub fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// Draws `args` into `out` and returns what was written.
pub fn draw(args: &[&str], out: &Path, tmp: &Path) -> String {
    let mut all = vec!["draw"];
    all.extend_from_slice(args);
    all.extend_from_slice(&["-o", s(out)]);
    let o = run_in_tmp(&all, tmp);
    assert!(o.status.success(), "{}", said(&o));
    std::fs::read_to_string(out).unwrap()
}
