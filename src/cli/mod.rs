//! Implementations of the `graphbug` subcommands. Every build reads, prints, checks and
//! runs XLA programs, and reads, prints and checks aten graphs; running aten graphs, and
//! the commands built on it, need libtorch (the `torch` feature, on by default).

pub mod args;
#[cfg(feature = "torch")]
pub mod autodiff;
#[cfg(feature = "torch")]
pub mod backends;
pub mod bisect;
pub mod dialect_options;
pub mod dialects;
pub mod draw;
pub mod examples;
pub mod help;
pub mod minify;
#[cfg(feature = "torch")]
pub mod run;
#[cfg(feature = "torch")]
pub mod shapes;

#[cfg(feature = "torch")]
pub use backends::load_plugins;
#[cfg(feature = "torch")]
pub use graphbug::repro::inputs::{lower_graph, requires_grad, specialize_graph, static_only};
#[cfg(feature = "torch")]
pub use shapes::*;

use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::ArgMatches;
use graphbug::flow::repro::{self, ReproRequest};
use graphbug::run::process::is_supervised;

use args::Bound;
pub use args::WorkerArgs;
pub use dialects::{backends_command, minify_worker, read_any_graph};

#[cfg(feature = "torch")]
/// Re-runs this command in a child process bounded by `bound` (see
/// [`graphbug::flow::supervise`]): `Some(exit code)` in the parent.
pub fn supervise(
    bound: &Bound,
    lost: impl FnOnce(&graphbug::run::process::Supervised, std::time::Duration) -> String,
) -> Result<Option<ExitCode>> {
    graphbug::flow::supervise(bound.timeout, bound.no_isolate, lost)
}

#[cfg(feature = "torch")]
pub use graphbug::repro::meta::lost_in_libtorch;

#[cfg(feature = "torch")]
/// Reads and parses a graph file (`-` reads standard input); errors name the file.
pub fn load_graph(file: &Path) -> Result<graphbug::ir::Graph> {
    Ok(graphbug::ir::read_graph_file(file, read_file(file)?)?)
}

/// graphbug's command line: `cli` with every dialect's own options, and examples in each
/// command's `--help`.
pub fn command(cli: clap::Command) -> clap::Command {
    help::with_examples(dialects::with_dialect_options(cli))
}

/// A file's bytes (`-` reads standard input); errors name the file.
pub fn read_file(file: &Path) -> Result<Vec<u8>> {
    if file == Path::new("-") {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes)
            .context("reading standard input")?;
        Ok(bytes)
    } else {
        std::fs::read(file).with_context(|| format!("cannot read {}", file.display()))
    }
}

/// `graphbug fmt`: prints a program's canonical text (an aten graph's), or as it was
/// written (an XLA program's), as its dialect, told by content, prints it.
pub fn fmt(file: &Path) -> Result<ExitCode> {
    let bytes = read_file(file)?;
    dialects::told(file, &bytes)?.fmt(file, bytes)
}

/// `graphbug check`: verifies and counts a graph or a program, as its dialect does (with
/// its options, `given`).
pub fn check(file: &Path, bound: &Bound, given: &ArgMatches) -> Result<ExitCode> {
    let bytes = read_file(file)?;
    dialects::told(file, &bytes)?.check(file, bytes, (bound.timeout, bound.no_isolate), given)
}

/// `graphbug run`: the program through its dialect (see [`DialectCommands::run`]).
pub fn run_command(args: &args::RunArgs, given: &ArgMatches) -> Result<ExitCode> {
    let bytes = read_file(&args.file)?;
    dialects::told(&args.file, &bytes)?.run(&args.request(), bytes, given)
}

/// `graphbug minify`: the program through its dialect (see [`DialectCommands::minify`]).
pub fn minify_command(args: &minify::MinifyArgs, given: &ArgMatches) -> Result<ExitCode> {
    let bytes = read_file(&args.file)?;
    dialects::told(&args.file, &bytes)?.minify(&args.request()?, bytes, given)?;
    Ok(ExitCode::SUCCESS)
}

/// `graphbug repro`: the flow on a program, a repro directory or a compiler's dump
/// directory of any dialect, told once (see [`graphbug::flow::repro`] and
/// [`graphbug::flow::dump`]); without a target, the bundled demo (an aten graph).
pub fn repro_command(args: &args::ReproArgs, given: &ArgMatches) -> Result<ExitCode> {
    let action = args.action.as_deref();
    let req = args.request()?;
    let Some(target) = &args.target else {
        let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cnn");
        let forward = demo.join("forward.py");
        let bytes = read_file(&forward)?;
        let dialect = dialects::told(Path::new("the demo"), &bytes)?;
        let mut steps = dialect.reproducer(given)?;
        // (Once: the supervised re-run of this command line says nothing of it.)
        if !is_supervised() {
            println!("graphbug demo: the CNN reference graph (examples/cnn) through relu_accuracy_error_TESTING_ONLY at level 4");
        }
        let req = ReproRequest {
            backend: Some("relu_accuracy_error_TESTING_ONLY".into()),
            level: Some(4),
            inputs: Some(demo.join("inputs.npz")),
            ..req
        };
        return repro::repro_file((&forward, bytes), None, &req, (dialect, steps.as_mut()));
    };
    if target.is_dir() {
        if let Some((dialect, dump)) = dialects::dumped(target)? {
            let mut steps = dialect.reproducer(given)?;
            return graphbug::flow::dump::repro_dump(
                (target, dump),
                action,
                &req,
                (dialect, steps.as_mut()),
            );
        }
        let dialect = dialects::wrote(target)?;
        let mut steps = dialect.reproducer(given)?;
        return repro::on_dir(target, action, &req, (dialect, steps.as_mut()));
    }
    let bytes = read_file(target)?;
    let dialect = dialects::told(target, &bytes)?;
    let mut steps = dialect.reproducer(given)?;
    repro::repro_file((target, bytes), action, &req, (dialect, steps.as_mut()))
}
