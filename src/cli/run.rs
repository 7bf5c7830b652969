//! `graphbug explain` and `trace-diff` of aten graphs: the arguments, turned into the
//! requests of [`graphbug::repro::run`].

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{bail, Result};
use clap::Args;
use graphbug::aten::trace::{diff, Tolerance, Trace, TraceDiff};

use super::args::Bound;

/// Arguments of `graphbug trace-diff`.
#[derive(Args)]
pub struct TraceDiffArgs {
    /// The first trace (`graphbug run --trace`).
    a: PathBuf,
    /// The second trace.
    b: PathBuf,
    /// Absolute tolerance of each statistic and sampled value.
    #[arg(long, default_value_t = Tolerance::default().atol)]
    atol: f64,
    /// Relative tolerance of each statistic and sampled value.
    #[arg(long, default_value_t = Tolerance::default().rtol)]
    rtol: f64,
}

/// `graphbug trace-diff`: exit 0 when the traces agree within tolerance, 1 when they
/// diverge (the first divergence printed), 2 when they cannot be compared.
pub fn trace_diff(args: &TraceDiffArgs) -> ExitCode {
    let result = (|| -> Result<TraceDiff> {
        if !(args.atol >= 0.0 && args.rtol >= 0.0) {
            bail!("--atol and --rtol must be at least 0");
        }
        let a = Trace::read(&args.a)?;
        let b = Trace::read(&args.b)?;
        let tol = Tolerance {
            atol: args.atol,
            rtol: args.rtol,
        };
        Ok(diff(&a, &b, &tol)?)
    })();
    match result {
        Ok(d) => {
            print!("{d}");
            if d.diverges() {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Arguments of `graphbug explain`.
#[derive(Args)]
pub struct ExplainArgs {
    /// Graph text file.
    file: PathBuf,
    /// The backend `explain` wraps.
    #[arg(long, default_value = "eager")]
    backend: String,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[command(flatten)]
    bound: Bound,
}

/// `graphbug explain`.
pub fn explain(args: &ExplainArgs) -> Result<ExitCode> {
    let req = graphbug::flow::run::RunRequest {
        file: args.file.clone(),
        timeout: args.bound.timeout,
        in_process: args.bound.no_isolate,
        ..Default::default()
    };
    graphbug::repro::run::explain(&args.file, &args.backend, args.seed, &req)
}
