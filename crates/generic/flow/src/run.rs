//! What `graphbug run` does alike for every dialect: the request, and the comparison of
//! a run's outputs with a file.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// What a `graphbug run` is asked to do, whatever the dialect. A dialect's own options (an
/// aten graph's device or training step, an XLA program's reference plugin) are the
/// dialect's.
#[derive(Clone, Debug, Default)]
pub struct RunRequest {
    /// The program or graph file.
    pub file: PathBuf,
    /// The backend (default: the dialect's).
    pub backend: Option<String>,
    /// Its inputs; without it, seeded random inputs.
    pub inputs: Option<PathBuf>,
    /// Seed of the random inputs.
    pub seed: u64,
    /// Write the outputs (`out0..`) to this file.
    pub save_outputs: Option<PathBuf>,
    /// Compare the outputs with this file.
    pub compare: Option<PathBuf>,
    /// How long the run may take (`--timeout`).
    pub timeout: Option<Duration>,
    /// Run in this process (`--no-isolate`).
    pub in_process: bool,
}

/// Prints the comparison of a run's outputs with the file at `path` (the reference: NaN/Inf
/// must sit where the file has them, and the float64 rule excuses a difference only when
/// the file is close to graphbug's own float64 run) and its verdict; exit 1 on a mismatch.
pub fn report_comparison(report: &graphbug_accuracy::AccuracyReport, path: &Path) -> ExitCode {
    print!("{report}");
    if !report.passed() {
        eprintln!("outputs do not match {}", path.display());
        return ExitCode::FAILURE;
    }
    println!("outputs match {}", path.display());
    ExitCode::SUCCESS
}

/// Re-runs this run in a child bounded by `req`'s limit (see [`crate::supervise`]), unless
/// it runs in process: a crash or a hang of the child is said as a failure of `backend`.
pub fn supervise_run(req: &RunRequest, backend: &str) -> anyhow::Result<Option<ExitCode>> {
    crate::supervise(req.timeout, req.in_process, |run, limit| {
        run.failure(backend, limit)
            .map(|f| f.to_string())
            .unwrap_or_default()
    })
}
