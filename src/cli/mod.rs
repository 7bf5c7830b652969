//! Implementations of the `graphbug` subcommands. Every build reads, prints, checks and
//! runs XLA programs, and reads, prints and checks aten graphs; running aten graphs, and
//! the commands built on it, need libtorch (the `torch` feature, on by default).

pub mod args;
#[cfg(feature = "torch")]
pub mod autodiff;
#[cfg(feature = "torch")]
pub mod backends;
#[cfg(feature = "torch")]
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
pub use backends::{backends, load_plugins};
#[cfg(feature = "torch")]
pub use graphbug::repro::inputs::{
    graph_inputs, lower_graph, requires_grad, specialize_graph, static_only,
};
#[cfg(feature = "torch")]
pub use shapes::*;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use graphbug::flow::repro::{self, ReproRequest};
use graphbug::run::process::is_supervised;

use args::Bound;
pub use args::WorkerArgs;
use dialect_options::refuse_for;
pub use dialects::{backends_command, minify_worker, read_any_graph, Source};
use graphbug::flow::{Dialect, DirManifest};

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
/// `error: <what> crashed inside libtorch: <why>`, for a supervised child that died.
pub fn lost_in_libtorch(
    what: &str,
    run: &graphbug::run::process::Supervised,
    limit: std::time::Duration,
) -> String {
    let why = run.lost(limit).unwrap_or_default();
    match run.ended {
        graphbug::run::process::Ended::TimedOut => format!("error: {what} did not finish: {why}"),
        _ => format!(
            "error: {what} crashed inside libtorch ({why}); a graph whose shapes contradict its ops can do this (libtorch does not check every kernel's arguments)"
        ),
    }
}

#[cfg(feature = "torch")]
/// Reads and parses a graph file (`-` reads standard input); errors name the file.
pub fn load_graph(file: &Path) -> Result<graphbug::ir::Graph> {
    Ok(graphbug::ir::read_graph_file(file, read_file(file)?)?)
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

/// `graphbug fmt`: prints the canonical text of an aten graph, or an XLA program as it
/// was written (told by content: see [`dialects`]).
pub fn fmt(file: &Path) -> Result<ExitCode> {
    let bytes = read_file(file)?;
    Source::of(file, &bytes).fmt(file, bytes)
}

/// `graphbug check`: verifies and counts a graph or a program (see [`Source::check`]).
pub fn check(
    file: &Path,
    meta: bool,
    inputs: Option<&Path>,
    binds: &[(String, i64)],
    bound: &Bound,
) -> Result<ExitCode> {
    let bytes = read_file(file)?;
    Source::of(file, &bytes).check(file, bytes, meta, (inputs, binds, bound))
}

/// `graphbug run` (see [`Source::run`]).
pub fn run_command(args: &args::RunArgs) -> Result<ExitCode> {
    let bytes = read_file(&args.file)?;
    Source::told(&args.file, &bytes)?.run(args, bytes)
}

/// `graphbug minify` (see [`Source::minify`]).
pub fn minify_command(args: &minify::MinifyArgs, plugins: &[PathBuf]) -> Result<ExitCode> {
    let bytes = read_file(&args.file)?;
    Source::told(&args.file, &bytes)?.minify(args, bytes, plugins)?;
    Ok(ExitCode::SUCCESS)
}

/// `graphbug repro`: the flow on a program or a repro directory of either dialect, told
/// once (see [`graphbug::flow::repro`]); without a target, the bundled demo (an aten graph).
pub fn repro_command(args: &args::ReproArgs, plugins: &[PathBuf]) -> Result<ExitCode> {
    let action = args.action.as_deref();
    let req = args.request()?;
    let Some(target) = &args.target else {
        refuse_for(Dialect::Aten, "the demo is an aten graph")?;
        let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cnn");
        let mut dialect = dialects::reproducer(Dialect::Aten, args, plugins)?;
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
        let forward = demo.join("forward.py");
        let bytes = read_file(&forward)?;
        return repro::repro_file((&forward, bytes), None, &req, dialect.as_mut());
    };
    if target.is_dir() {
        let dialect = DirManifest::dialect_of(target).unwrap_or(Dialect::Aten);
        refuse_for(
            dialect,
            &format!("{} holds {}", target.display(), dialect.noun()),
        )?;
        return repro::on_dir(
            target,
            action,
            &req,
            dialects::reproducer(dialect, args, plugins)?.as_mut(),
        );
    }
    let bytes = read_file(target)?;
    let dialect = Source::told(target, &bytes)?.dialect();
    repro::repro_file(
        (target, bytes),
        action,
        &req,
        dialects::reproducer(dialect, args, plugins)?.as_mut(),
    )
}
