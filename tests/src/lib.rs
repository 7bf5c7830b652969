//! Hosts graphbug's cross-crate integration tests (in `tests/`) and their shared helpers.

use std::path::PathBuf;

/// The directory holding test data: `<workspace>/tests/fixtures`.
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}
