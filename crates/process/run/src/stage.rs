//! Where a supervised graphbug process is, for the supervisor to name if it dies: a
//! crash inside libtorch (an abort, a segfault) cannot report itself.

use std::path::Path;

/// Environment variable naming the file a supervised child writes its current stage to.
pub const STAGE_FILE_ENV: &str = "GRAPHBUG_STAGE_FILE";

/// Records the stage a supervised child is in (`compile`, `runtime`, a node being
/// inferred); does nothing when not supervised.
pub fn report_stage(stage: &str) {
    if let Some(path) = std::env::var_os(STAGE_FILE_ENV) {
        let _ = std::fs::write(Path::new(&path), stage);
    }
}

/// The stage a supervised child last reported in `file`, if any.
pub fn last_stage(file: &Path) -> Option<String> {
    std::fs::read_to_string(file)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}
