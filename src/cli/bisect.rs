//! `graphbug bisect`'s arguments, as every dialect takes them, turned into the flow's
//! request (see [`graphbug::flow::bisect`]); the dialect told by the file's content (or by
//! the repro directory's manifest) searches its compiler's passes.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::{ArgMatches, Args};
use graphbug::flow::bisect::{recorded_check, BisectRequest};
use graphbug::flow::DirManifest;
use graphbug::minifier::{Check, CheckKind};
use graphbug::run::limits::parse_timeout;

use super::{dialects, read_file};

/// Arguments of `graphbug bisect`.
#[derive(Args)]
pub struct BisectArgs {
    /// Graph text file, an XLA program, or a repro directory of either.
    pub file: PathBuf,
    /// The backend whose failure to bisect (a repro directory's by default).
    #[arg(long)]
    pub backend: Option<String>,
    /// What counts as failing: compile, runtime (compiling or running), accuracy, or (XLA)
    /// contains:OP[,OP...], the program the compiler optimized calls every op listed. A
    /// repro directory's recorded check by default.
    #[arg(long)]
    pub check: Option<Check>,
    /// Inputs (.safetensors or .npz); without it, seeded random inputs.
    #[arg(long)]
    pub inputs: Option<PathBuf>,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Where the bisection's repro directories and report go.
    #[arg(long, default_value = "bisect_out")]
    pub out: PathBuf,
    /// Seconds a backend run may take before it counts as a hang (default: 300 for aten
    /// graphs; for XLA programs, 10x the first trial's time, at least 10 s).
    #[arg(long, value_parser = parse_timeout)]
    pub timeout: Option<Duration>,
    /// Trials run side by side: the ones the search asks next are answered ahead of it,
    /// so the result and the trials that count are the same for any number.
    #[arg(short = 'j', long = "jobs", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub jobs: u16,
    /// XLA: search only these passes (comma-separated, as the plugin names them); a name
    /// the plugin does not run on the program is an error that lists those it does.
    #[arg(long, value_delimiter = ',')]
    pub passes: Vec<String>,
    /// XLA: list the passes the plugin runs on the program, each invocation in order, and
    /// stop.
    #[arg(long)]
    pub list_passes: bool,
}

/// `graphbug bisect`: the request handed to the dialect of the file or directory.
pub fn bisect_command(args: &BisectArgs, given: &ArgMatches) -> Result<ExitCode> {
    let (dialect, recorded) = if args.file.is_dir() {
        let manifest = DirManifest::read(&args.file)?;
        (dialects::wrote(&args.file)?, Some(manifest))
    } else {
        let bytes = read_file(&args.file)?;
        (dialects::told(&args.file, &bytes)?, None)
    };
    let backend = match (&args.backend, &recorded) {
        (Some(b), _) => b.clone(),
        (None, Some(m)) => m.backend.clone(),
        (None, None) => bail!("--backend: name the backend whose failure to bisect (e.g. --backend pjrt:cpu, or aot_eager)"),
    };
    let check = match (&args.check, &recorded) {
        (Some(c), _) => c.clone(),
        (None, Some(m)) => Check::Backend(recorded_check(m)),
        (None, None) if args.list_passes => Check::Backend(CheckKind::Runtime),
        (None, None) => {
            bail!("--check: say what counts as failing (compile, runtime, accuracy, contains:OP)")
        }
    };
    let req = BisectRequest {
        file: args.file.clone(),
        backend,
        check,
        inputs: args.inputs.clone(),
        seed: args.seed,
        out: args.out.clone(),
        timeout: args.timeout,
        jobs: args.jobs,
        passes: args.passes.clone(),
        list_passes: args.list_passes,
        child_args: Vec::new(),
        case_args: Vec::new(),
    };
    dialect.bisect(&req, given)
}
