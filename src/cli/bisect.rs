//! `graphbug bisect`'s arguments, turned into the request of aten's bisection (see
//! [`graphbug::repro::bisect`]).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use clap::Args;
use graphbug::repro::bisect::BisectRequest;
use graphbug::repro::checkers::CheckKind;
use graphbug::repro::limits::parse_timeout;

/// Arguments of `graphbug bisect`.
#[derive(Args)]
pub struct BisectArgs {
    /// Graph text file.
    pub file: PathBuf,
    /// The backend whose failure to bisect.
    #[arg(long)]
    pub backend: String,
    /// What counts as failing: compile, runtime (compiling or running) or accuracy.
    #[arg(long)]
    pub check: CheckKind,
    /// Inputs (.safetensors or .npz); without it, seeded random inputs.
    #[arg(long)]
    pub inputs: Option<PathBuf>,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Where the repro directories go: `case` (the failure as found) and `guilty` (the
    /// failure with the guilty application the last one made).
    #[arg(long, default_value = "bisect_out")]
    pub out: PathBuf,
    /// Seconds a backend run may take before it counts as a hang (default 300).
    #[arg(long, value_parser = parse_timeout)]
    pub timeout: Option<Duration>,
    /// Probes run side by side: the ones the binary search asks next are answered ahead
    /// of it, so the result and the probes that count are the same for any number.
    #[arg(short = 'j', long = "jobs", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub jobs: u16,
}

/// `graphbug bisect`.
pub fn bisect(args: &BisectArgs, plugins: &[PathBuf]) -> Result<ExitCode> {
    graphbug::repro::bisect::bisect(&BisectRequest {
        file: args.file.clone(),
        backend: args.backend.clone(),
        check: args.check,
        inputs: args.inputs.clone(),
        seed: args.seed,
        out: args.out.clone(),
        timeout: args.timeout,
        jobs: args.jobs,
        plugins: plugins.to_vec(),
    })
}
