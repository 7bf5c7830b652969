//! `graphbug minify`'s arguments, as every dialect takes them, turned into the flow's
//! request ([`graphbug::flow::minify`] runs the minification).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use clap::Args;

use graphbug::flow::minify::MinifyRequest;
use graphbug::minifier::Check;
use graphbug::run::limits::parse_timeout;

/// Arguments of `graphbug minify`.
#[derive(Args, Clone)]
pub struct MinifyArgs {
    /// Graph text file, or an XLA program (HLO text or proto, StableHLO text or bytecode).
    pub file: PathBuf,
    /// Inputs (.safetensors or .npz); without it, seeded random inputs.
    #[arg(long)]
    pub inputs: Option<PathBuf>,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Backend whose failure to reproduce (with --check compile|runtime|accuracy).
    #[arg(long)]
    pub backend: Option<String>,
    /// What counts as failing: compile, runtime, accuracy (with --backend), or
    /// contains:OP[,OP...] (the candidate calls every op listed).
    #[arg(long)]
    pub check: Option<Check>,
    /// A shell command run as `CMD DIR` on each candidate's repro directory; it exits
    /// non-zero when the candidate is interesting.
    #[arg(long, conflicts_with = "check")]
    pub check_command: Option<String>,
    /// Regex the failure message must match (default: similar to the original's).
    #[arg(long)]
    pub check_str: Option<String>,
    /// With --check accuracy: count every output (TorchDynamo's strict_accuracy). By
    /// default non-floating outputs are ignored, as TorchDynamo's accuracy mode does.
    #[arg(long)]
    pub strict_accuracy: bool,
    /// Run the backend in a worker process, so crashes and hangs become verdicts (the
    /// default; kept for compatibility).
    #[arg(long, conflicts_with = "no_isolate")]
    pub isolate: bool,
    /// Run the backend in this process: faster queries, but a crash ends the run and
    /// nothing bounds a hang.
    #[arg(long, conflicts_with = "timeout")]
    pub no_isolate: bool,
    /// Seconds a backend run (or check command) may take before it counts as a hang.
    /// Default: derived from the original graph's eager run (printed at the start).
    #[arg(long, value_parser = parse_timeout)]
    pub timeout: Option<Duration>,
    /// Directory for the original, the smallest failing graph so far, and the state.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Continue from the state a previous run left in --out.
    #[arg(long, requires = "out")]
    pub resume: bool,
    /// Stop after this many queries.
    #[arg(long)]
    pub max_queries: Option<usize>,
    /// For a flaky bug: run the original K times, report how often it fails, and count a
    /// candidate as failing only when it fails at least as often in K runs. Without it, an
    /// original whose first two runs disagree is run 10 times and handled the same way.
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(2..=1000))]
    pub repeat: Option<u32>,
    /// End with a JSON line of counts.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub workers: super::WorkerArgs,
}

impl MinifyArgs {
    /// The flow's request these arguments make (the dialect's own options aside).
    pub fn request(&self) -> Result<MinifyRequest> {
        Ok(MinifyRequest {
            file: self.file.clone(),
            inputs: self.inputs.clone(),
            seed: self.seed,
            backend: self.backend.clone(),
            check: self.check.clone(),
            check_command: self.check_command.clone(),
            check_str: self.check_str.clone(),
            strict_accuracy: self.strict_accuracy,
            in_process: self.no_isolate,
            timeout: self.timeout,
            out: self.out.clone(),
            resume: self.resume,
            max_queries: self.max_queries,
            repeat: self.repeat,
            json: self.json,
            workers: self.workers.workers()?,
        })
    }
}
