//! `graphbug minify`'s arguments, as both dialects take them ([`super::minify`] and
//! [`super::xla_minify`]), turned into the flow's search options
//! ([`graphbug::flow::search`] runs the search and reports it).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use clap::Args;

use super::dialect_options::{FOR_ATEN, FOR_XLA};
use graphbug::flow::search::{search_structurally, SearchRun};
use graphbug::minifier::progress::RunKey;
use graphbug::minifier::{Check, Contains, Minified, MinifyOptions};
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
    /// Device to run on.
    #[arg(long, default_value = "cpu", help_heading = FOR_ATEN)]
    pub device: String,
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
    /// Keep the reference values on disk and load them on demand.
    #[arg(long, help_heading = FOR_ATEN)]
    pub offload_to_disk: bool,
    /// Stop after this many queries.
    #[arg(long)]
    pub max_queries: Option<usize>,
    /// For a flaky bug: run the original K times, report how often it fails, and count a
    /// candidate as failing only when it fails at least as often in K runs. Without it, an
    /// original whose first two runs disagree is run 10 times and handled the same way.
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(2..=1000))]
    pub repeat: Option<u32>,
    /// XLA programs: the PJRT plugin whose run of the original records the values
    /// candidates run on and are compared with (default pjrt:cpu).
    #[arg(long, value_name = "BACKEND", help_heading = FOR_XLA)]
    pub reference_backend: Option<String>,
    /// End with a JSON line of counts.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub workers: super::WorkerArgs,
}

/// The search's options from the arguments, with `value_keys` (see
/// [`MinifyOptions::value_keys`]).
pub fn search_options(args: &MinifyArgs, value_keys: Option<ValueKeys>) -> MinifyOptions {
    search_options_with(
        args.check_str.clone(),
        args.repeat.map(|k| k as usize),
        args.max_queries,
        value_keys,
    )
}

/// Fingerprints of the values a search's candidates read (see
/// [`MinifyOptions::value_keys`]).
pub type ValueKeys = std::collections::HashMap<graphbug::minifier::Origin, u64>;

/// The search's options: `--check-str`, `--repeat`, `--max-queries`, and `value_keys`;
/// verbose, with progress.
pub fn search_options_with(
    check_str: Option<String>,
    repeat: Option<usize>,
    max_queries: Option<usize>,
    value_keys: Option<ValueKeys>,
) -> MinifyOptions {
    MinifyOptions {
        value_keys,
        check_str,
        verbose: true,
        progress: true,
        max_queries,
        repeat,
        ..MinifyOptions::default()
    }
}

/// What makes this search the one `--resume` continues: the check, the backend,
/// `--check-str`, and `inputs` (a fingerprint of the inputs' values).
pub fn run_key(args: &MinifyArgs, inputs: String) -> RunKey {
    RunKey {
        check: match (&args.check, &args.check_command) {
            (_, Some(cmd)) => format!("command:{cmd}"),
            (Some(check), None) => check.to_string(),
            (None, None) => String::new(),
        },
        backend: args.backend.clone(),
        check_str: args.check_str.clone(),
        inputs,
    }
}

/// How the search runs and ends, from the arguments.
pub fn search_run(args: &MinifyArgs) -> SearchRun {
    SearchRun {
        out: args.out.clone(),
        resume: args.resume,
        json: args.json,
    }
}

/// `graphbug minify` with a check that reads only the program (`contains:`): nothing runs
/// (no worker, no inputs, no reference run), only the search.
pub fn minify_structurally(
    args: &MinifyArgs,
    graph: &graphbug::ir::Graph,
    contains: Contains,
    started: Instant,
    text: &dyn Fn(&Minified) -> String,
) -> Result<Minified> {
    if args.workers.worker_launcher.is_some() {
        bail!("--worker-launcher starts workers that run a backend; a contains: check runs no backend");
    }
    let options = search_options_with(args.check_str.clone(), None, args.max_queries, None);
    Ok(search_structurally(
        &search_run(args),
        graph,
        contains,
        args.workers.workers()?.count(),
        &options,
        started,
        text,
    )?)
}
